"""The extractive writer's compaction: the model proposes one step, the retention policy
checks it.

Pinned memories are never touched: they are left out of everything here (neither shown to
the model nor candidates of the policy, nor retired by an update), and the others are kept to
the cap less the pinned ones (`steps.movable`).

Before any compaction, what the new memory updates is retired by the policy's rules
(`retention.refresh`). Over the cap, the model is asked the seed's compaction question and
its answer checked by `retention.review`; the policy decides when the model fails, answers
something that is not a decision, or would lose what the policy can see is worth keeping.

The decision is made before the new memory becomes visible, on a snapshot of the app's
memories; the caller applies it in the transaction that inserts the new memory, after checking
that the snapshot still holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent import retention, text
from memory_agent.asking import AskJson, DecisionRefused, ask_for_decision, invalid, reason_given
from memory_agent.errors import InvalidMemoryText
from memory_agent.models import Memory
from memory_agent.steps import (
    NEW_MEMORY_ID,
    Candidate,
    DecidedStep,
    Step,
    after,
    as_memories,
    candidates_of,
    movable,
)
from memory_agent.validation import normalise_memory_text


class Compactor:
    def __init__(self, ask_json: AskJson, *, limit: int, max_chars: int) -> None:
        self._ask_json = ask_json
        self._limit = limit
        self._max_chars = max_chars

    async def decide(
        self, existing: Sequence[Memory], new_content: str, created_date: str
    ) -> list[DecidedStep]:
        """The steps that bring `existing` plus the new memory back to the cap (only the
        updates if they fit): the first proposed by the model and checked, any further ones
        by the policy."""
        existing, room = movable(existing, self._limit)
        updates, candidates = _refreshed(existing, new_content)
        if len(candidates) <= room:
            return updates
        shown = as_memories(existing, [c for c in candidates if c.id != NEW_MEMORY_ID])
        first = await self._model_step(shown, candidates, new_content, created_date, room)
        rest = self._policy_steps(after(candidates, first.step), first.fallback_reason, room)
        return [*updates, first, *rest]

    async def _model_step(
        self,
        shown: Sequence[Memory],
        candidates: Sequence[Candidate],
        new_content: str,
        created_date: str,
        room: int,
    ) -> DecidedStep:
        """The model's proposal, checked by the policy, or the policy's step and why."""
        try:
            proposed = await self._ask_model(shown, new_content, created_date, room)
        except DecisionRefused as rejection:
            return DecidedStep(
                self.policy_step(candidates), "policy", rejection.reason,
                fallback_cause=rejection.cause,
            )
        step, overruled = retention.review(candidates, proposed, max_chars=self._max_chars)
        if overruled:
            return DecidedStep(step, "policy", overruled, fallback_cause="overruled")
        return DecidedStep(step, "model")

    def steps_if_they_fit(
        self, existing: Sequence[Memory], new_content: str
    ) -> list[DecidedStep] | None:
        """The steps when `existing` plus the new memory fit the cap after the updates (no
        model call needed); None when the model must be asked to compact."""
        existing, room = movable(existing, self._limit)
        updates, candidates = _refreshed(existing, new_content)
        return updates if len(candidates) <= room else None

    def policy_only(
        self, existing: Sequence[Memory], new_content: str, reason: str
    ) -> list[DecidedStep]:
        """The policy's steps alone: for a decision that must be made without a model call."""
        existing, room = movable(existing, self._limit)
        updates, candidates = _refreshed(existing, new_content)
        return [*updates, *self._policy_steps(candidates, reason, room)]

    def policy_step(self, candidates: Sequence[Candidate]) -> Step:
        return retention.choose(candidates, max_chars=self._max_chars)

    def _policy_steps(
        self, candidates: list[Candidate], reason: str | None, room: int
    ) -> list[DecidedStep]:
        steps = []
        while len(candidates) > room:
            step = self.policy_step(candidates)
            steps.append(DecidedStep(step, "policy", reason or "more than one over the cap"))
            candidates = after(candidates, step)
        return steps

    async def _ask_model(
        self, existing: Sequence[Memory], new_content: str, created_date: str, room: int
    ) -> Step:
        """The model's proposal as a step; raises `DecisionRefused` when none can be had."""
        decision = await ask_for_decision(
            self._ask_json, existing, new_content, created_date, room=room,
            max_chars=self._max_chars,
        )
        reason = reason_given(decision)
        if decision.action == "edit" and not (decision.new_content or "").strip():
            # An edit that leaves its target no text is that memory's delete (small models
            # often say so), and is checked as one.
            return Step("delete", decision.target_memory_id, f"{reason} (an edit to no text)")
        if decision.action == "delete":
            return Step("delete", decision.target_memory_id, reason)
        try:
            content = normalise_memory_text(decision.new_content or "", max_chars=self._max_chars)
        except InvalidMemoryText as error:
            raise invalid(f"newContent: {error.reason}") from None
        target = decision.target_memory_id
        if target == NEW_MEMORY_ID:
            # Models often name the new memory as the one they rewrite: the memory the
            # rewrite was merged with is the existing one whose values it carries.
            merged_with = _merged_with(existing, content)
            if merged_with is None:
                raise invalid("an edit must target an existing memory")
            target = merged_with
        return Step("edit", target, reason, content, NEW_MEMORY_ID)


def _merged_with(existing: Sequence[Memory], merged: str) -> int | None:
    """The existing memory that `merged` carries the most values of (all of them), if any."""
    carried = text.vocabulary(merged)
    best: tuple[int, int] | None = None
    for memory in existing:
        wanted = {value.lower() for value in text.values(memory.content)}
        if wanted and wanted <= carried and (best is None or len(wanted) > best[0]):
            best = (len(wanted), memory.id)
    return best[1] if best else None


def _refreshed(
    existing: Sequence[Memory], new_content: str
) -> tuple[list[DecidedStep], list[Candidate]]:
    """The steps that retire what the new memory updates, and the memories (the new one
    last) as they stand after them."""
    candidates = candidates_of(existing, new_content)
    updates = [DecidedStep(s, "policy", update=True) for s in retention.refresh(candidates)]
    for decided in updates:
        candidates = after(candidates, decided.step)
    return updates, candidates


