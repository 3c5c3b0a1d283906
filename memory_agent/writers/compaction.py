"""One compaction, for both writers: what the new memory updates goes first, then, over the
cap, the model is asked the seed's DELETE/EDIT question, its decision checked, and the writer's
fallback decides whatever the model could not.

A writer plugs in three things (`Compaction`'s abstract methods): what the new memory updates
(the model's word, or the retention policy's rules), how the model's decision is checked (the
invariants any language holds, or the retention policy's review), and its fallback step
(FIFO, or the retention policy's choice).

Pinned memories are never shown nor touched: the others are kept to the cap less the pinned
ones (`steps.movable`). The decision is made before the new memory becomes visible, on a
snapshot of the space; the job applies it in the transaction that inserts the new memory,
after checking that the snapshot still holds.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from memory_agent.core.kinds import KEPT_BEFORE
from memory_agent.models import DecidedBy, Memory
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.decision import CompactionDecision, DecisionRefused, ask_for_decision
from memory_agent.writers.steps import (
    NEW_MEMORY_ID,
    Candidate,
    DecidedStep,
    Step,
    after,
    as_memories,
    candidates_of,
    movable,
)
from memory_agent.writers.written import WrittenMemory

log = logging.getLogger("mnemoloop.memory")

# Why a step beyond the first is the fallback's: one decision removes one memory.
MORE_THAN_ONE_OVER = "more than one over the cap"


class Compaction(ABC):
    """Brings a space plus its new memory back to the cap."""

    # Whose word the update steps are: the model's (it said what the new memory updates) or
    # the writer's policy.
    updated_by: DecidedBy

    def __init__(self, model: MemoryModel, limits: MemoryLimits) -> None:
        self._model = model
        self._limits = limits

    def steps_if_they_fit(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> list[DecidedStep] | None:
        """The steps when the space fits its cap with the new memory after its updates (no
        model call); None when a decision must be asked for (`decide`)."""
        updates, candidates, room = self._updated(current, written)
        return updates if len(candidates) <= room else None

    async def decide(
        self, current: Sequence[Memory], written: WrittenMemory, today: str
    ) -> list[DecidedStep]:
        """The steps that bring the space plus the new memory back to its cap: the updates,
        the model's step (or the fallback's, with why), and the fallback's for any more."""
        updates, candidates, room = self._updated(current, written)
        if len(candidates) <= room:
            return updates
        first = await self._first_step(current, candidates, today, room, updated=bool(updates))
        rest = self._fallback_steps(after(candidates, first.step), room, MORE_THAN_ONE_OVER)
        return [*updates, first, *rest]

    def fallback(
        self, current: Sequence[Memory], written: WrittenMemory, reason: str
    ) -> list[DecidedStep]:
        """The steps without a model call, inside the transaction: for a space that kept
        changing while the model decided."""
        updates, candidates, room = self._updated(current, written)
        return [*updates, *self._fallback_steps(candidates, room, reason)]

    # -- what a writer plugs in -------------------------------------------------------------

    @abstractmethod
    def updates(
        self, unpinned: Sequence[Memory], candidates: list[Candidate], written: WrittenMemory
    ) -> list[Step]:
        """The steps that retire what the new memory (the last candidate) gives newer values
        of, whether or not the space is at its cap."""

    @abstractmethod
    def checked(
        self, decision: CompactionDecision, candidates: Sequence[Candidate],
        shown: Sequence[Memory], *, updated: bool,
    ) -> Step:
        """The model's decision as a step, or `DecisionRefused` when it breaks what the writer
        holds to. `updated`: the new memory has retired older values."""

    @abstractmethod
    def fallback_step(self, candidates: Sequence[Candidate]) -> Step:
        """The writer's own step for candidates one over the cap."""

    def overruled(self, candidates: Sequence[Candidate], step: Step) -> tuple[Step, str] | None:
        """The fallback's step and why, where the writer overrules a valid decision; None to
        apply it (the default)."""
        return None

    # -- the skeleton -----------------------------------------------------------------------

    def _updated(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> tuple[list[DecidedStep], list[Candidate], int]:
        """The update steps, the candidates after them (the new memory last), and the room
        the cap leaves."""
        unpinned, room = movable(current, self._limits.memories)
        candidates = candidates_of(unpinned, written.content, written.kind or KEPT_BEFORE)
        steps = []
        for step in self.updates(unpinned, candidates, written):
            steps.append(DecidedStep(step, self.updated_by, update=True))
            candidates = after(candidates, step)
        return steps, candidates, room

    async def _first_step(
        self, current: Sequence[Memory], candidates: list[Candidate], today: str, room: int,
        *, updated: bool,
    ) -> DecidedStep:
        """The model's decision, checked, or the fallback's step and why."""
        # A secret memory (or one of unknown sensitivity) is never shown to a model: only
        # the fallback may take it.
        shown = [memory for memory in as_memories(
            current, [c for c in candidates if c.id != NEW_MEMORY_ID]
        ) if memory.shown_to_models]
        try:
            decision = await ask_for_decision(
                self._model, shown, candidates[-1].content, today, room=room,
                max_chars=self._limits.max_chars,
            )
            step = self.checked(decision, candidates, shown, updated=updated)
        except DecisionRefused as refused:
            log.warning("⚠️ The model's compaction decision was not applied: %s", refused.reason)
            return DecidedStep(
                self.fallback_step(candidates), "policy", refused.reason,
                fallback_cause=refused.cause,
            )
        overruled = self.overruled(candidates, step)
        if overruled is not None:
            return DecidedStep(overruled[0], "policy", overruled[1], fallback_cause="overruled")
        return DecidedStep(step, "model")

    def _fallback_steps(
        self, candidates: list[Candidate], room: int, reason: str
    ) -> list[DecidedStep]:
        steps = []
        while len(candidates) > room:
            step = self.fallback_step(candidates)
            steps.append(DecidedStep(step, "policy", reason))
            candidates = after(candidates, step)
        return steps
