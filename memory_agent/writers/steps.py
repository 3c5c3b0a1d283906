"""What a memory job does to a space besides writing the new memory: one step at a time, each
deleting a memory or rewriting one (and folding another into it), with who decided it.

Both writers (`writing.MemoryWriter`) decide in these terms, and `commit.apply_write` applies
them inside the job's transaction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from memory_agent.core.kinds import KEPT_BEFORE
from memory_agent.models import DEFAULT_IMPORTANCE, DecidedBy, FallbackCause, Memory

# The id the new memory goes by until it is written.
NEW_MEMORY_ID = 0


@dataclass(frozen=True)
class Candidate:
    """A memory as a decision sees it; `NEW_MEMORY_ID` is the one being written now."""

    id: int
    content: str
    importance: int = DEFAULT_IMPORTANCE
    # Never injected: never merged with a memory that is (nor it into a private one).
    private: bool = False
    # Its creation time in the stored form ("" for the new memory): FIFO's order.
    created_at: str = ""
    # How often replies used its values, and how often turns were given it.
    citations: int = 0
    accesses: int = 0
    # Its level (`models.Sensitivity`): two memories merge only at the same known level.
    sensitivity: str = "public"
    # Its kind (`core.kinds`): two memories merge only of the same kind, so that no text
    # reaches a reader its own kind would be kept from.
    kind: str = KEPT_BEFORE

    @property
    def use(self) -> float:
        """What weighs, among equally important memories, for keeping it: the replies that
        cited it (not the turns it was given, which only grow with its age). The new memory,
        which no reply could cite yet, is never the least used."""
        return math.inf if self.id == NEW_MEMORY_ID else self.citations


def mergeable(one: Candidate, other: Candidate) -> bool:
    """Whether one's text may go into the other's: both of the same known level (a private
    memory's text must not reach an injected one, nor a secret one's a memory shown to a
    model) and of the same kind (an app or an agent may read one kind and not the other)."""
    return one.sensitivity == other.sensitivity != "unknown" and one.kind == other.kind


@dataclass(frozen=True)
class Step:
    """Delete `target`, or (edit) rewrite `target` as `new_content` and fold `folded` into it."""

    action: Literal["delete", "edit"]
    target: int
    reason: str
    new_content: str | None = None
    folded: int | None = None
    # The FIFO fallback's step: the oldest of the least important memories goes.
    fifo: bool = False

    @property
    def removed(self) -> int | None:
        """The memory that stops existing (None: an edit that folds nothing in)."""
        return self.target if self.action == "delete" else self.folded


@dataclass(frozen=True)
class DecidedStep:
    step: Step
    decided_by: DecidedBy
    # Why the fallback decided instead of the model ("LLM error: …", "invalid decision: …",
    # "overruled: …"); None when the model's decision was applied.
    fallback_reason: str | None = None
    # A step that retires what the new memory updates, before any compaction.
    update: bool = False
    # Why this step is the fallback's and not the model's; only on the step that replaced the
    # model's decision.
    fallback_cause: FallbackCause | None = None


def candidates_of(
    existing: Sequence[Memory], new_content: str, new_kind: str = KEPT_BEFORE
) -> list[Candidate]:
    """The space's memories as candidates (oldest first), the new one (of `new_kind`) last."""
    candidates = [
        Candidate(m.id, m.content, m.importance, m.private, m.created_at, m.citation_count,
                  m.access_count, m.sensitivity, m.kind)
        for m in existing
    ]
    candidates.append(Candidate(NEW_MEMORY_ID, new_content, kind=new_kind))
    return candidates


def movable(existing: Sequence[Memory], limit: int) -> tuple[list[Memory], int]:
    """The memories a job may touch (the unpinned), and how many of them, with the new one,
    the cap leaves room for. An app pins at most the cap less one, so there is always room
    for the new memory."""
    unpinned = [m for m in existing if not m.pinned]
    return unpinned, max(1, limit - (len(existing) - len(unpinned)))


def after(candidates: Sequence[Candidate], step: Step) -> list[Candidate]:
    """The candidates as they stand once `step` is applied."""
    remaining = []
    for candidate in candidates:
        if candidate.id == step.removed:
            continue
        if step.action == "edit" and candidate.id == step.target:
            # Its importance and privacy stay: a later step of the same decision weighs them.
            candidate = replace(candidate, content=step.new_content or candidate.content)
        remaining.append(candidate)
    return remaining


def as_memories(existing: Sequence[Memory], candidates: Sequence[Candidate]) -> list[Memory]:
    """The memories as a model is shown them: as the candidates stand (after the updates),
    with each memory's own date and importance."""
    by_id = {m.id: m for m in existing}
    return [replace(by_id[c.id], content=c.content) for c in candidates if c.id in by_id]


def fifo_step(candidates: Sequence[Candidate], reason: str) -> Step:
    """The seed's fallback: delete the least important memory, the least cited and then the
    oldest first among equals (never the new one, which is the newest)."""
    older = [c for c in candidates if c.id != NEW_MEMORY_ID] or list(candidates)
    oldest = min(older, key=lambda c: (c.importance, c.use, c.created_at, c.id))
    return Step("delete", oldest.id, reason, fifo=True)
