"""The model writer's compaction: the model's updates and its DELETE/EDIT, applied unless they
break an invariant that can be shown without reading meaning.

- What the new memory updates (`WrittenMemory.updates`, the model's word when it wrote it) is
  retired first, whether or not the space is at its cap: a memory with nothing left that
  holds is deleted, one with something left is rewritten to it. A claim is not applied when
  it names a memory that is not the space's or is pinned, or when what is left is longer than
  the limit or has a sentence grounded in neither that memory (`grounding.shares_enough`).
- Over the cap, the model is asked the seed's compaction question, and its decision applied
  unless: its id is not one shown; an edit names the new memory, merges a private memory with
  an injected one, is over the length limit, or has a sentence grounded in neither memory.
- Otherwise (that, an LLM error, an answer that is not the decision) the seed's fallback:
  the least important memory goes, the oldest first (`steps.fifo_step`), with the reason.

Pinned memories are never shown nor touched. Nothing here reads a word of any language.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memory_agent import grounding
from memory_agent.answers import (
    CompactionDecision,
    strip_reasoning,
)
from memory_agent.asking import AskJson, DecisionRefused, ask_for_decision, invalid, reason_given
from memory_agent.models import Memory
from memory_agent.steps import (
    NEW_MEMORY_ID,
    Candidate,
    DecidedStep,
    Step,
    after,
    as_memories,
    candidates_of,
    fifo_step,
    movable,
)
from memory_agent.writing import UpdateClaim, WrittenMemory

log = logging.getLogger("mnemoloop.memory")

class ModelCompactor:
    def __init__(self, ask_json: AskJson, *, limit: int, max_chars: int) -> None:
        self._ask_json = ask_json
        self._limit = limit
        self._max_chars = max_chars

    def steps_if_they_fit(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> list[DecidedStep] | None:
        updates, candidates, room = self._updated(current, written)
        return updates if len(candidates) <= room else None

    async def decide(
        self, current: Sequence[Memory], written: WrittenMemory, today: str
    ) -> list[DecidedStep]:
        updates, candidates, room = self._updated(current, written)
        if len(candidates) <= room:
            return updates
        try:
            step = await self._model_step(current, candidates, today, room, bool(updates))
            first = DecidedStep(step, "model")
        except DecisionRefused as refused:
            log.warning("⚠️ The model's compaction decision was not applied: %s", refused.reason)
            first = DecidedStep(
                fifo_step(candidates, "the oldest, least important memory (FIFO)"),
                "policy", refused.reason, fallback_cause=refused.cause,
            )
        rest = self._fifo(after(candidates, first.step), room, "more than one over the cap")
        return [*updates, first, *rest]

    def fallback(
        self, current: Sequence[Memory], written: WrittenMemory, reason: str
    ) -> list[DecidedStep]:
        updates, candidates, room = self._updated(current, written)
        return [*updates, *self._fifo(candidates, room, reason)]

    def _fifo(self, candidates: list[Candidate], room: int, reason: str) -> list[DecidedStep]:
        steps = []
        while len(candidates) > room:
            step = fifo_step(candidates, "the oldest, least important memory (FIFO)")
            steps.append(DecidedStep(step, "policy", reason))
            candidates = after(candidates, step)
        return steps

    def _updated(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> tuple[list[DecidedStep], list[Candidate], int]:
        """The steps that apply the model's updates, the candidates after them (the new
        memory last), and the room the cap leaves."""
        unpinned, room = movable(current, self._limit)
        candidates = candidates_of(unpinned, written.content)
        by_id = {m.id: m for m in unpinned}
        steps = []
        for claim in written.updates:
            memory = by_id.get(claim.memory_id)
            why = self._claim_invalid(memory, claim)
            if why is not None:
                log.info("📝 Not applied: the model's word that the new memory updates memory"
                         " %s (%s)", claim.memory_id, why)
                continue
            reason = "the new memory gives newer values of its facts"
            step = (
                Step("edit", claim.memory_id, f"{reason}; what still holds is kept",
                     claim.still_true)
                if claim.still_true
                else Step("delete", claim.memory_id, reason)
            )
            steps.append(DecidedStep(step, "model", update=True))
            candidates = after(candidates, step)
        return steps, candidates, room

    def _claim_invalid(self, memory: Memory | None, claim: UpdateClaim) -> str | None:
        if memory is None or memory.private:
            return "not a memory of this space that may change (unknown, pinned or private)"
        if claim.seen_at and memory.updated_at != claim.seen_at:
            return "it changed after the model read it"
        if len(claim.still_true) > self._max_chars:
            return f"what still holds is over the {self._max_chars}-character limit"
        return _ungrounded(claim.still_true, memory.content)

    async def _model_step(
        self,
        current: Sequence[Memory],
        candidates: list[Candidate],
        today: str,
        room: int,
        updated: bool,
    ) -> Step:
        shown = as_memories(current, [c for c in candidates if c.id != NEW_MEMORY_ID])
        decision = await ask_for_decision(
            self._ask_json, shown, candidates[-1].content, today, room=room,
            max_chars=self._max_chars,
        )
        return self._checked(decision, {c.id: c for c in candidates}, updated=updated)

    def _checked(
        self, decision: CompactionDecision, by_id: dict[int, Candidate], *, updated: bool
    ) -> Step:
        """The decision as a step, or `DecisionRefused`. `updated`: the new memory has
        retired older values, so it may not go itself (both values would be lost)."""
        target = by_id[decision.target_memory_id]
        reason = reason_given(decision)
        content = " ".join(strip_reasoning(decision.new_content or "").split())
        if decision.action == "edit" and target.id == NEW_MEMORY_ID:
            raise invalid("an edit must name an existing memory, not the new one")
        if decision.action == "edit" and not content:
            # An edit that leaves its target no text is that memory's delete.
            decision = decision.model_copy(update={"action": "delete"})
            reason = f"{reason} (an edit to no text)"
        if decision.action == "delete":
            if target.id == NEW_MEMORY_ID and updated:
                raise invalid("the new memory holds the newer values of the memories it "
                              "updated: it is not deleted")
            return Step("delete", target.id, reason)
        if target.private:
            raise invalid(f"memory {target.id} is private: the new memory, which is "
                           "injected, is not merged into it")
        if len(content) > self._max_chars:
            raise invalid(f"newContent is {len(content)} characters, the limit is "
                           f"{self._max_chars}")
        new = by_id[NEW_MEMORY_ID].content
        why = _ungrounded(content, f"{target.content}\n{new}")
        if why is not None:
            raise invalid(f"newContent: {why}")
        if _ungrounded(new, content) is not None:
            raise invalid("newContent leaves out the new memory it folds in")
        return Step("edit", target.id, reason, content, NEW_MEMORY_ID)


def _ungrounded(text: str, memories: str) -> str | None:
    """Why `text` is not what `memories` say (a sentence grounded in neither), or None."""
    for sentence in grounding.sentences_of(text):
        if not grounding.shares_enough(sentence, memories):
            shown = sentence if len(sentence) <= 80 else sentence[:79] + "…"
            return f'"{shown}" is grounded in neither memory'
    return None


