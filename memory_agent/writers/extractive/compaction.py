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

from memory_agent.core.errors import InvalidMemoryText
from memory_agent.models import Memory
from memory_agent.writers.compaction import Compaction
from memory_agent.writers.decision import CompactionDecision, invalid, reason_given
from memory_agent.writers.extractive import retention
from memory_agent.writers.extractive.paragraph import normalise_memory_text
from memory_agent.writers.extractive.words import text
from memory_agent.writers.steps import NEW_MEMORY_ID, Candidate, Step
from memory_agent.writers.written import WrittenMemory


class RetentionCompaction(Compaction):
    updated_by = "policy"

    def updates(
        self, unpinned: Sequence[Memory], candidates: list[Candidate], written: WrittenMemory
    ) -> list[Step]:
        """What the new memory updates, by the retention policy's rules."""
        return retention.refresh(candidates)

    def fallback_step(self, candidates: Sequence[Candidate]) -> Step:
        return retention.choose(candidates, max_chars=self._limits.max_chars)

    def overruled(self, candidates: Sequence[Candidate], step: Step) -> tuple[Step, str] | None:
        """The policy's step and why, when the model's would lose what the policy can see is
        worth keeping (`retention.review`)."""
        policy, why = retention.review(candidates, step, max_chars=self._limits.max_chars)
        return None if why is None else (policy, why)

    def checked(
        self, decision: CompactionDecision, candidates: Sequence[Candidate],
        shown: Sequence[Memory], *, updated: bool,
    ) -> Step:
        """The model's proposal as a step; raises `DecisionRefused` when it is not one."""
        reason = reason_given(decision)
        if decision.action == "edit" and not (decision.new_content or "").strip():
            # An edit that leaves its target no text is that memory's delete (small models
            # often say so), and is checked as one.
            return Step("delete", decision.target_memory_id, f"{reason} (an edit to no text)")
        if decision.action == "delete":
            return Step("delete", decision.target_memory_id, reason)
        try:
            content = normalise_memory_text(
                decision.new_content or "", max_chars=self._limits.max_chars
            )
        except InvalidMemoryText as error:
            raise invalid(f"newContent: {error.reason}") from None
        target = decision.target_memory_id
        if target == NEW_MEMORY_ID:
            # Models often name the new memory as the one they rewrite: the memory the
            # rewrite was merged with is the existing one whose values it carries.
            merged_with = _merged_with(shown, content)
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
