"""The consolidation question both writers answer (`MemoryWriter.judge_pair`): two memories
that share enough to say the same thing, or the same thing's two values, and what to do with
them: keep both, merge them into one (the older takes the merged text, the newer goes), or
update (the older's stale part goes: deleted, or rewritten to what still holds of it).

A verdict that cannot be applied without loss is never given: a writer that cannot tell keeps
both. Two memories of different spaces are never merged (each space has its own readers); an
update may cross spaces (a person's profile holds their newer city, an app's memory the old
one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory_agent.models import DecidedBy

PairAction = Literal["keep", "merge", "update"]


@dataclass(frozen=True)
class PairVerdict:
    action: PairAction
    reason: str
    decided_by: DecidedBy
    # merge: the merged text the older memory takes; update: what still holds of the older
    # memory (None: nothing, it is deleted).
    content: str | None = None
    # Model calls the verdict took.
    model_calls: int = 0
    # False when the writer could not judge (the model failed, or gave no verdict): the pair
    # is kept, and asked again by the next pass.
    judged: bool = True


def keep(reason: str, decided_by: DecidedBy, model_calls: int = 0) -> PairVerdict:
    return PairVerdict("keep", reason, decided_by, model_calls=model_calls)


def unjudged(reason: str, model_calls: int = 1) -> PairVerdict:
    return PairVerdict("keep", reason, "policy", model_calls=model_calls, judged=False)
