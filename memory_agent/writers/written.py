"""What a writer gives back for a conversation: its memory (with what it updates, the facts
about the person, the end the user asked for), or that nothing is worth keeping; and the model
writer's record of its sentences."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

# How a memory's text came about: the model's own sentences, or the speakers' statements.
MemorySource = Literal["model", "statements"]
# The record warns (never switches anything) when at least this share of at least this many
# sentences was dropped.
_WARN_SHARE = 0.2
_WARN_AFTER = 20


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
    # The end of the day the user asked the memory be kept until ("remember this until
    # Friday"), in UTC; None when they asked for no end.
    keep_until: datetime | None = None
    # Its kind (`core.kinds`); None: the list's default.
    kind: str | None = None


@dataclass(frozen=True)
class NothingToKeep:
    """The conversation holds nothing worth a memory, and why."""

    why: str = "nothing worth keeping"


@dataclass
class GroundingRecord:
    """The model writer's sentences since start: written, grounded as first given, grounded
    when asked again, and dropped. A metric and a health warning, never a switch."""

    written: int = 0
    grounded: int = 0
    recovered: int = 0
    dropped: int = 0

    @property
    def ungrounded_share(self) -> float | None:
        return self.dropped / self.written if self.written else None

    def warning(self) -> str | None:
        """What an operator should know when many of the model's sentences were dropped
        (at least a fifth of 20 or more)."""
        share = self.ungrounded_share
        if share is None or self.written < _WARN_AFTER or share < _WARN_SHARE:
            return None
        return (
            f"{share:.0%} of the memory model's sentences were not grounded in their "
            "conversations and were dropped: a model that quotes the conversation keeps "
            "more, and MNEMOLOOP_MEMORY_WRITER=extractive keeps the speakers' own words"
        )
