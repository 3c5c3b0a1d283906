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

from memory_agent.core.sentences import sentences_of
from memory_agent.models import Memory
from memory_agent.writers.answers import strip_reasoning
from memory_agent.writers.compaction import Compaction
from memory_agent.writers.decision import CompactionDecision, invalid, reason_given
from memory_agent.writers.model import grounding
from memory_agent.writers.steps import NEW_MEMORY_ID, Candidate, Step, fifo_step
from memory_agent.writers.written import UpdateClaim, WrittenMemory

log = logging.getLogger("mnemoloop.memory")


class ModelCompaction(Compaction):
    updated_by = "model"

    def updates(
        self, unpinned: Sequence[Memory], candidates: list[Candidate], written: WrittenMemory
    ) -> list[Step]:
        """The model's word of what the new memory updates, each claim applied unless it
        names a memory that may not change, one changed since the model read it, or leaves
        a text that is too long or grounded in neither memory."""
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
            steps.append(
                Step("edit", claim.memory_id, f"{reason}; what still holds is kept",
                     claim.still_true)
                if claim.still_true
                else Step("delete", claim.memory_id, reason)
            )
        return steps

    def fallback_step(self, candidates: Sequence[Candidate]) -> Step:
        return fifo_step(candidates, "the oldest, least important memory (FIFO)")

    def _claim_invalid(self, memory: Memory | None, claim: UpdateClaim) -> str | None:
        if memory is None or memory.private:
            return "not a memory of this space that may change (unknown, pinned or private)"
        if claim.seen_at and memory.updated_at != claim.seen_at:
            return "it changed after the model read it"
        if len(claim.still_true) > self._limits.max_chars:
            return f"what still holds is over the {self._limits.max_chars}-character limit"
        return ungrounded(claim.still_true, memory.content)

    def checked(
        self, decision: CompactionDecision, candidates: Sequence[Candidate],
        shown: Sequence[Memory], *, updated: bool,
    ) -> Step:
        """The decision as a step, or `DecisionRefused`. `updated`: the new memory has
        retired older values, so it may not go itself (both values would be lost)."""
        by_id = {c.id: c for c in candidates}
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
        if target.kind != by_id[NEW_MEMORY_ID].kind:
            raise invalid(f"memory {target.id} is of kind {target.kind}, the new memory of kind"
                          f" {by_id[NEW_MEMORY_ID].kind}: one is not merged into the other")
        if len(content) > self._limits.max_chars:
            raise invalid(f"newContent is {len(content)} characters, the limit is "
                           f"{self._limits.max_chars}")
        new = by_id[NEW_MEMORY_ID].content
        why = ungrounded(content, f"{target.content}\n{new}")
        if why is not None:
            raise invalid(f"newContent: {why}")
        if ungrounded(new, content) is not None:
            raise invalid("newContent leaves out the new memory it folds in")
        return Step("edit", target.id, reason, content, NEW_MEMORY_ID)


def ungrounded(text: str, memories: str) -> str | None:
    """Why `text` is not what `memories` say (a sentence grounded in neither), or None."""
    for sentence in sentences_of(text):
        if not grounding.shares_enough(sentence, memories):
            shown = sentence if len(sentence) <= 80 else sentence[:79] + "…"
            return f'"{shown}" is grounded in neither memory'
    return None


