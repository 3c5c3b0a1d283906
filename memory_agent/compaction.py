"""Deciding compaction: the model proposes one step, the retention policy checks it.

Pinned memories are never touched: they are left out of everything here (neither shown to
the model nor candidates of the policy, nor retired by an update), and the others are kept to
the cap less the pinned ones (`room`). An app pins at most the cap less one, so there is
always room for the new memory.

Before any compaction, what the new memory updates is retired: by the checks
(`retention.refresh`), and, for a model that is trusted or on its way to trust
(`MemoryWriter.promising`), by the model too. It is shown the memories a
claim could apply to (`update_claims.may_update`: a value of a kind the new one gives anew,
tied to it by a word beside both, a topic, or a change announced) and asked which of them the
new one gives newer values for (it reads "versandkostenfrei ab 39 €" and "Gratisversand jetzt
ab 49 €" as one thing); each claim is applied as `update_claims.claimed_update` allows, never
taking a fact with it.

A model whose latest decisions were nearly all invalid or overruled is asked one decision in
ten; the policy makes the others (`not_asked`), as it would have on the model's answer.

The decision is made before the new memory becomes visible, on a snapshot of the app's
memories; the caller applies it in the transaction that inserts the new memory, after checking
that the snapshot still holds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from memory_agent import prompts, retention, text, update_claims
from memory_agent.chat_model import ChatMessage, ChatReply, JsonSchema
from memory_agent.errors import ChatModelError, InvalidCompactionDecision, InvalidMemoryText
from memory_agent.models import DecidedBy, FallbackCause, Memory
from memory_agent.retention import NEW_MEMORY_ID, Candidate, Step
from memory_agent.track_record import TrackRecord
from memory_agent.validation import (
    decision_schema,
    normalise_memory_text,
    parse_compaction_decision,
    parse_update_review,
    update_review_schema,
)

log = logging.getLogger("mnemoloop.memory")

AskJson = Callable[[list[ChatMessage], JsonSchema], Awaitable[ChatReply]]


@dataclass(frozen=True)
class DecidedStep:
    step: Step
    decided_by: DecidedBy
    # Why the policy decided instead of the model ("LLM error: …", "invalid decision: …",
    # "overruled: …"); None when the model's decision was applied.
    fallback_reason: str | None = None
    # A step that retires what the new memory updates, before any compaction.
    update: bool = False
    # Why this step is the policy's and not the model's; only on the step that replaced the
    # model's decision.
    fallback_cause: FallbackCause | None = None


@dataclass(frozen=True)
class Rejection:
    """Why the model's decision could not be used."""

    cause: FallbackCause
    reason: str


# How many of the model's latest compaction decisions tell whether it decides usefully (at
# least `_RECORD_MIN` of them). One that adds little (`TrackRecord`) is asked one decision in
# ten, and the policy makes the others, as it would have on the model's answer. Until its
# decisions say, its memories speak for it (`writer_adds_little`).
_RECORD = 20
_RECORD_MIN = 5
_NOT_ASKED = (
    "the model was not asked: nearly all its latest decisions (or, before it had made enough, "
    "its memory sentences) added nothing"
)


class Compactor:
    def __init__(
        self,
        ask_json: AskJson,
        *,
        limit: int,
        max_chars: int,
        writer_adds_little: Callable[[], bool] | None = None,
    ) -> None:
        self._ask_json = ask_json
        self._limit = limit
        self._max_chars = max_chars
        # Whether each of the model's latest decisions was applied (not invalid, not
        # overruled; a failed call says nothing of its judgement and is not counted).
        self._applied = TrackRecord(
            size=_RECORD, minimum=_RECORD_MIN, prior=writer_adds_little
        )

    async def decide(
        self,
        existing: Sequence[Memory],
        new_content: str,
        created_date: str,
        *,
        trusted: bool = False,
        reviews_updates: bool = False,
    ) -> list[DecidedStep]:
        """The steps that bring `existing` plus the new memory back to the cap (none if they
        fit): the first proposed by the model and checked, any further ones by the policy.
        `trusted`: the model has written faithful memories (`retention.review`);
        `reviews_updates`: it is asked which memories the new one updates."""
        existing, room = self._movable(existing)
        updates, candidates = _refreshed(existing, new_content)
        if reviews_updates:
            reviewed = await self._review_updates(existing, candidates, created_date)
            for decided in reviewed:
                candidates = _after(candidates, decided.step)
            updates = [*updates, *reviewed]
        if len(candidates) <= room:
            return updates
        shown = _as_memories(existing, [c for c in candidates if c.id != NEW_MEMORY_ID])
        if self._applied.spares_the_model():
            first = DecidedStep(
                self.policy_step(candidates), "policy", _NOT_ASKED, fallback_cause="not_asked"
            )
        else:
            first = await self._model_step(shown, candidates, new_content, created_date, room,
                                           trusted=trusted)
        rest = self._policy_steps(_after(candidates, first.step), first.fallback_reason, room)
        return [*updates, first, *rest]

    async def _model_step(
        self,
        shown: Sequence[Memory],
        candidates: Sequence[Candidate],
        new_content: str,
        created_date: str,
        room: int,
        *,
        trusted: bool,
    ) -> DecidedStep:
        """The model's proposal, checked by the policy, or the policy's step and why."""
        proposed, rejection = await self._ask_model(shown, new_content, created_date, room)
        if proposed is None:
            assert rejection is not None
            if rejection.cause != "llm_error":
                self._applied.add(False)
            return DecidedStep(
                self.policy_step(candidates), "policy", rejection.reason,
                fallback_cause=rejection.cause,
            )
        step, overruled = retention.review(
            candidates, proposed, max_chars=self._max_chars, trusted=trusted
        )
        self._applied.add(overruled is None)
        if overruled:
            return DecidedStep(step, "policy", overruled, fallback_cause="overruled")
        return DecidedStep(step, "model")

    def steps_if_they_fit(
        self, existing: Sequence[Memory], new_content: str, *, reviews_updates: bool = False
    ) -> list[DecidedStep] | None:
        """The steps when `existing` plus the new memory fit the cap after the updates (no
        model call needed); None when the model must be asked: to compact, or, when it
        `reviews_updates`, which memories the new one gives newer values for."""
        existing, room = self._movable(existing)
        updates, candidates = _refreshed(existing, new_content)
        if reviews_updates and _reviewable(candidates):
            return None
        return updates if len(candidates) <= room else None

    def policy_only(self, existing: Sequence[Memory], new_content: str) -> list[DecidedStep]:
        """The policy's steps alone: for a decision that must be made without a model call."""
        existing, room = self._movable(existing)
        updates, candidates = _refreshed(existing, new_content)
        reason = "the app's memories kept changing while the model decided"
        return [*updates, *self._policy_steps(candidates, reason, room)]

    def policy_step(self, candidates: Sequence[Candidate]) -> Step:
        return retention.choose(candidates, max_chars=self._max_chars)

    def _movable(self, existing: Sequence[Memory]) -> tuple[list[Memory], int]:
        """The memories compaction may touch (the unpinned), and how many of them, with the
        new one, the cap leaves room for."""
        movable = [m for m in existing if not m.pinned]
        return movable, max(1, self._limit - (len(existing) - len(movable)))

    def _policy_steps(
        self, candidates: list[Candidate], reason: str | None, room: int
    ) -> list[DecidedStep]:
        steps = []
        while len(candidates) > room:
            step = self.policy_step(candidates)
            steps.append(DecidedStep(step, "policy", reason or "more than one over the cap"))
            candidates = _after(candidates, step)
        return steps

    async def _review_updates(
        self, existing: Sequence[Memory], candidates: list[Candidate], created_date: str
    ) -> list[DecidedStep]:
        """The steps that retire what a trusted model says the new memory (the last
        candidate) gives newer values for, beyond what the checks found (`_refreshed`): it
        reads "the cabot circus store" and "the St David's store" as one thing in any words.
        Each claim is applied as `update_claims.claimed_update` allows; a failed call retires
        nothing and is logged."""
        suspects = _reviewable(candidates)
        if not suspects:
            return []
        shown = _as_memories(existing, suspects)
        new_line = prompts.candidate_line(NEW_MEMORY_ID, created_date, candidates[-1].content)
        ids = [c.id for c in suspects]
        try:
            reply = await self._ask_json(
                prompts.update_messages(shown, new_line), update_review_schema(ids)
            )
            review = parse_update_review(reply.text)
        except (ChatModelError, InvalidCompactionDecision) as error:
            log.warning("⚠️ The model's review of what a new memory updates failed: %s", error)
            return []
        reason = _reason_given(review.reason)
        steps = []
        for memory_id in dict.fromkeys(review.updated_memory_ids):
            step = None
            if memory_id in ids:
                step = update_claims.claimed_update(
                    candidates, memory_id, f"the new memory updates it: {reason}"
                )
            if step is None:
                log.info("📝 Not applied: the model's claim that the new memory updates %s "
                         "(not a memory shown to it, or one it cannot update without loss)",
                         memory_id)
                continue
            steps.append(DecidedStep(step, "model", update=True))
            candidates = _after(candidates, step)
        return steps

    async def _ask_model(
        self, existing: Sequence[Memory], new_content: str, created_date: str, room: int
    ) -> tuple[Step | None, Rejection | None]:
        """The model's proposal as a step, or None and why it could not be had."""
        new_line = prompts.candidate_line(NEW_MEMORY_ID, created_date, new_content)
        messages = prompts.compaction_messages(
            existing, new_line, limit=room, max_chars=self._max_chars
        )
        ids = [m.id for m in existing] + [NEW_MEMORY_ID]
        try:
            reply = await self._ask_json(messages, decision_schema(ids, max_chars=self._max_chars))
        except ChatModelError as error:
            return None, Rejection("llm_error", f"LLM error: {error}")
        if reply.truncated:
            return None, _invalid("cut off at the token limit")
        try:
            decision = parse_compaction_decision(reply.text)
        except InvalidCompactionDecision as error:
            return None, _invalid(error.reason)
        if decision.target_memory_id not in ids:
            return None, _invalid(
                f"memory {decision.target_memory_id} is not one of this app's memories"
            )
        reason = _reason_given(decision.reason)
        if decision.action == "edit" and not (decision.new_content or "").strip():
            # An edit that leaves its target no text is that memory's delete (small models
            # often say so), and is checked as one.
            return Step("delete", decision.target_memory_id, f"{reason} (an edit to no text)"), None
        if decision.action == "delete":
            return Step("delete", decision.target_memory_id, reason), None
        try:
            content = normalise_memory_text(decision.new_content or "", max_chars=self._max_chars)
        except InvalidMemoryText as error:
            return None, _invalid(f"newContent: {error.reason}")
        target = decision.target_memory_id
        if target == NEW_MEMORY_ID:
            # Models often name the new memory as the one they rewrite: the memory the
            # rewrite was merged with is the existing one whose values it carries.
            merged_with = _merged_with(existing, content)
            if merged_with is None:
                return None, _invalid("an edit must target an existing memory")
            target = merged_with
        return Step("edit", target, reason, content, NEW_MEMORY_ID), None


def _merged_with(existing: Sequence[Memory], merged: str) -> int | None:
    """The existing memory that `merged` carries the most values of (all of them), if any."""
    carried = text.vocabulary(merged)
    best: tuple[int, int] | None = None
    for memory in existing:
        wanted = {value.lower() for value in text.values(memory.content)}
        if wanted and wanted <= carried and (best is None or len(wanted) > best[0]):
            best = (len(wanted), memory.id)
    return best[1] if best else None


def _as_memories(existing: Sequence[Memory], candidates: Sequence[Candidate]) -> list[Memory]:
    """The memories as the model is shown them: as the candidates stand (after the updates),
    with each memory's own date and importance."""
    by_id = {m.id: m for m in existing}
    return [replace(by_id[c.id], content=c.content) for c in candidates]


def _reason_given(raw: str) -> str:
    """A model's reason on one line, at most 300 characters."""
    return " ".join(raw.split())[:300] or "(no reason given)"


def _reviewable(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The memories a model may be asked whether the new one (the last) updates: those
    `update_claims.claimed_update` could apply a claim to."""
    new = candidates[-1]
    return [c for c in candidates[:-1] if update_claims.may_update(c.content, new.content)]


def _invalid(reason: str) -> Rejection:
    return Rejection("invalid_decision", f"invalid decision: {reason}")


def _refreshed(
    existing: Sequence[Memory], new_content: str
) -> tuple[list[DecidedStep], list[Candidate]]:
    """The steps that retire what the new memory updates, and the memories (the new one
    last) as they stand after them."""
    candidates = [Candidate(m.id, m.content, m.importance, m.private) for m in existing]
    candidates.append(Candidate(NEW_MEMORY_ID, new_content))
    updates = [DecidedStep(s, "policy", update=True) for s in retention.refresh(candidates)]
    for decided in updates:
        candidates = _after(candidates, decided.step)
    return updates, candidates


def _after(candidates: Sequence[Candidate], step: Step) -> list[Candidate]:
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
