"""The seam between a conversation and everything a memory job does after it.

A `MemoryWriter` says what the conversation's memory is (or that nothing is worth keeping),
which older memories it updates, and how a space over its cap comes back to it. Two writers
stand behind it, chosen by the operator and never switched at run time:

- `model_writer.ModelWriter`: the configured model writes the memory in its own words, says
  what it updates, and makes the DELETE/EDIT; only what holds in any language is checked
  (each sentence grounded by a quote of the transcript, ids, pins, privacy, length).
- `extractive.ExtractiveWriter`: the floor for the bundled 135M model, which cannot write
  memories: the conversation's key statements in the speaker's words, kept current by the
  retention policy's rules.

The agent (`agent.MemorySubAgent`) reads the space, calls the writer, and applies its steps in
one transaction; it knows nothing of how either writer decides.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_agent.chat_model import ChatMessage
from memory_agent.models import Memory
from memory_agent.steps import DecidedStep

WriterKind = Literal["model", "extractive"]
WRITER_KINDS: tuple[WriterKind, ...] = ("model", "extractive")
# How a memory's text came about: the model's own sentences, or the speakers' statements.
MemorySource = Literal["model", "statements"]


@dataclass(frozen=True)
class UpdateClaim:
    """The model's word that the new memory gives a newer value of something in `memory_id`;
    `still_true` is that memory without the replaced value ("" when nothing else in it
    holds)."""

    memory_id: int
    still_true: str = ""
    # The memory's `updated_at` when the model was shown it: a memory changed since (an admin
    # edit) is not rewritten from a stale reading.
    seen_at: str = ""


@dataclass(frozen=True)
class WrittenMemory:
    content: str
    source: MemorySource
    # False when no model was asked for the text (the extractive writer).
    asked_model: bool = True
    updates: tuple[UpdateClaim, ...] = ()
    # What the job's note adds (sentences dropped, say); "" when nothing.
    note: str = ""
    # The memory's facts about the person rather than the app's business (their name,
    # timezone, diet, household), as a memory of their own for the person's profile; "" when
    # it has none.
    about_person: str = ""


@dataclass(frozen=True)
class NothingToKeep:
    """The conversation holds nothing worth a memory, and why."""

    why: str = "nothing worth keeping"


class MemoryWriter(ABC):
    kind: WriterKind

    @abstractmethod
    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory]
    ) -> WrittenMemory | NothingToKeep:
        """The conversation's memory, given what its space already holds (oldest first).

        Raises `ChatModelError` when the model fails, `InvalidMemoryText` when the
        conversation has no messages."""

    @abstractmethod
    def steps_if_they_fit(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> list[DecidedStep] | None:
        """The steps when the space fits its cap with the new memory (no model call); None
        when a decision must be asked for (`decide`)."""

    @abstractmethod
    async def decide(
        self, current: Sequence[Memory], written: WrittenMemory, today: str
    ) -> list[DecidedStep]:
        """The steps that bring the space plus the new memory back to its cap."""

    @abstractmethod
    def fallback(
        self, current: Sequence[Memory], written: WrittenMemory, reason: str
    ) -> list[DecidedStep]:
        """The steps without a model call, inside the transaction: for a space that kept
        changing while the model decided."""
