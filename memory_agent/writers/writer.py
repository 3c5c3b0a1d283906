"""The seam between a conversation and everything a memory job does after it.

A `MemoryWriter` says what the conversation's memory is (or that nothing is worth keeping),
which older memories it updates, and how a space over its cap comes back to it (its
`Compaction`). Two writers stand behind it, chosen by the operator and never switched at run
time:

- `model.ModelWriter`: the configured model writes the memory in its own words, says what it
  updates, and makes the DELETE/EDIT; only what holds in any language is checked (each
  sentence grounded by a quote of the transcript, ids, pins, privacy, length).
- `extractive.ExtractiveWriter`: the floor for the bundled 135M model, which cannot write
  memories: the conversation's key statements in the speaker's words, kept current by the
  retention policy's rules.

The job (`memory_agent.job`) reads the space, calls the writer, and applies its steps in one
transaction; it knows nothing of how either writer decides.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.kinds import BUNDLED_KINDS, Kinds
from memory_agent.models import Memory
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.compaction import Compaction
from memory_agent.writers.pairs import PairVerdict
from memory_agent.writers.written import GroundingRecord, NothingToKeep, WrittenMemory

WriterKind = Literal["model", "extractive"]


class MemoryWriter(ABC):
    kind: WriterKind
    # Whether `write` reads what the space already holds (to say what the new memory
    # updates); a writer that does not is given nothing, and the job reads nothing for it.
    reads_space: bool
    # The record of the writer's sentences, for a writer that keeps one.
    record: GroundingRecord | None = None

    def __init__(
        self, model: MemoryModel, limits: MemoryLimits, kinds: Kinds = BUNDLED_KINDS
    ) -> None:
        self._model = model
        self._limits = limits
        # The kinds a memory may be given (`core.kinds`).
        self._kinds = kinds

    @property
    def kinds(self) -> Kinds:
        """The kinds this writer gives memories."""
        return self._kinds

    @property
    def model_name(self) -> str:
        """The memory model's name, as the history records who wrote."""
        return self._model.name

    @abstractmethod
    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory], now: datetime
    ) -> WrittenMemory | NothingToKeep:
        """The conversation's memory, given what its space already holds (oldest first;
        nothing unless `reads_space`).

        Raises `ChatModelError` when the model fails, `InvalidMemoryText` when the
        conversation has no messages."""

    @abstractmethod
    def compaction(self, limits: MemoryLimits) -> Compaction:
        """The writer's compaction of a space kept within `limits`."""

    @abstractmethod
    async def judge_pair(
        self, older: Memory, newer: Memory, *, same_space: bool
    ) -> PairVerdict:
        """The consolidation's question (`writers.pairs`): keep both, merge them (only when
        `same_space`) or update the older. Never raises for a model's failure: a pair the
        writer cannot judge is kept."""

