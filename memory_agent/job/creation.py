"""One memory job: an ended conversation's memory written into its space, in one transaction,
whatever the model takes.

The writer (`writers.MemoryWriter`) has the memory first (a model call, no lock, no
transaction). Then one transaction reads the space's memories: when the new one fits under
the cap after its updates, it is written there and then. When it does not, the writer's
compaction decides on what that transaction read (no lock held while the model thinks), and
the next transaction applies the decision only if the memories are still as the decision saw
them; after `MODEL_DECISIONS` tries the compaction's fallback decides inside the transaction.
Either way the new memory, its updates, the compaction, the history and the host's record of
its job (`JobRecord.done`: the job done, its energy spent) commit together. So the cap holds
in every committed state, a crash leaves either nothing or everything, and a job cancelled
meanwhile (purge) cannot write. Then the copies: the same memory in the app's shared space,
and its facts about the person in their profile, each in a transaction of its own.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from memory_agent.consent.holding import Consent
from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.energy import EnergyMeter
from memory_agent.core.errors import MemoryWriteRefused, MnemoloopError
from memory_agent.core.ports import (
    Clock,
    Database,
    SqlTransaction,
    format_timestamp,
    now_text,
)
from memory_agent.core.redaction import redact_json, redact_text
from memory_agent.job.commit import apply_write
from memory_agent.job.held import changed_by, decided_steps, held_as_proposal, shown_as
from memory_agent.job.outcome import (
    Allowed,
    CommitCheck,
    JobRecord,
    MemoryCreated,
    decision_fingerprint,
    fate_of_new,
)
from memory_agent.models import Memory, ProfileProposal
from memory_agent.storage.store import PROFILE_APP, EventSource, MemoryStore
from memory_agent.writers.asking import MemoryLimits
from memory_agent.writers.compaction import Compaction
from memory_agent.writers.steps import NEW_MEMORY_ID, DecidedStep
from memory_agent.writers.writer import MemoryWriter
from memory_agent.writers.written import NothingToKeep, WrittenMemory

log = logging.getLogger("mnemoloop.memory")

# Decisions made with the model before the fallback decides inside the transaction instead:
# the space's memories changed under the first ones (another writer, an admin delete).
MODEL_DECISIONS = 2


@dataclass(frozen=True)
class MemoryCreationRequest:
    app_id: str
    conversation_id: str
    messages: Sequence[ChatMessage]
    job_id: int | None = None
    # The space the memory is written to: "" for the app's shared one, else the user's.
    user_id: str = ""
    # Written to the app's shared space as well (an app whose users' memories are shared).
    also_shared: bool = False
    # The memory's facts about the person go to the user's profile too (an app that shares
    # it).
    to_profile: bool = False
    # The app a profile write comes from (the history says so); None: the request's own.
    from_app: str | None = None
    # The app's default time to live of a new memory, in seconds (None: it lasts). A date the
    # user gave ("remember this until Friday") comes first.
    ttl_seconds: int | None = None
    # When the memory expires, in the stored form (set from the two above); None: never.
    expires_at: str | None = None


@dataclass
class AgentStats:
    """Running counts for metrics; never reset."""

    memories_created: int = 0
    nothing_worth_keeping: int = 0
    # Written from the conversation's statements alone, no model asked (the extractive writer).
    written_without_model: int = 0
    creation_failures: int = 0
    # Compaction steps by (what they did, whose decision it was).
    compactions: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Why the fallback decided instead of the model: llm_error, invalid_decision, overruled.
    fallbacks: Counter[str] = field(default_factory=Counter)
    # Memory requests whose prompt the model's server cut (`ChatReply.cut`).
    prompts_cut: int = 0


class MemoryCreation:
    """Writes conversations' memories into their spaces through the operator's writer: an
    app's spaces at `limits`, a person's profile at `profile_limits`."""

    def __init__(
        self,
        database: Database,
        store: MemoryStore,
        writer: MemoryWriter,
        clock: Clock,
        meter: EnergyMeter,
        *,
        limits: MemoryLimits,
        profile_limits: MemoryLimits,
        consent: Consent | None = None,
    ) -> None:
        self._db = database
        self._store = store
        self._writer = writer
        self._spaces = writer.compaction(limits)
        self._profiles = writer.compaction(profile_limits)
        self._clock = clock
        self._meter = meter
        self._limits = limits
        self._profile_limits = profile_limits
        # The profile's changes to sensitive facts wait for the person (None: none do).
        self._consent = consent
        self.stats = AgentStats()

    def use_writer(self, writer: MemoryWriter) -> None:
        """Write with `writer` from now on (the writer `auto` chose once it tried the
        model)."""
        self._writer = writer
        self._spaces = writer.compaction(self._limits)
        self._profiles = writer.compaction(self._profile_limits)

    async def create(
        self, request: MemoryCreationRequest, record: JobRecord | None = None
    ) -> MemoryCreated:
        """Write the conversation's memory and keep its space at its cap, in one transaction
        with `record.done` (when it says the job is no longer held, nothing is written and
        `MemoryWriteRefused` is raised); then its copies. Raises `ChatModelError`,
        `InvalidMemoryText` or `StorageError` when no memory could be written; every failure
        is logged here once."""
        commit = CommitCheck(record=record, meter=self._meter)
        try:
            # The model never reads a secret, and what it writes is checked again.
            messages = [
                replace(m, content=redact_text(m.content), tool_calls=tuple(
                    replace(call, arguments=redact_json(call.arguments))
                    for call in m.tool_calls
                ))
                for m in request.messages
            ]
            space = (
                await self._store.list_oldest_first(request.app_id, user_id=request.user_id)
                if self._writer.reads_space else []
            )
            written = await self._writer.write(messages, space, self._clock.now())
            if isinstance(written, NothingToKeep):
                result = MemoryCreated(None, [], written.why)

                async def nothing(tx: SqlTransaction) -> None:
                    await commit.check(tx, result)

                await commit.run(self._db, nothing)
                self.stats.nothing_worth_keeping += 1
                log.info(
                    "📝 Nothing kept from conversation %s of app %s: %s",
                    request.conversation_id,
                    request.app_id,
                    written.why,
                )
                return result
            written = replace(
                written, content=redact_text(written.content),
                about_person=redact_text(written.about_person),
            )
            request = self._with_expiry(request, written)
            result = await self._store_with_compaction(request, written, self._spaces, commit)
            self.stats.written_without_model += not written.asked_model
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error("❌ Memory creation failed for %s: %s", request.conversation_id, error)
            raise
        self._log_created(request, result)
        if request.also_shared:
            await self._write_shared_too(request, written, result, record)
        if request.to_profile and request.user_id and written.about_person:
            await self._write_profile_too(request, written, record)
        return result

    def _with_expiry(
        self, request: MemoryCreationRequest, written: WrittenMemory
    ) -> MemoryCreationRequest:
        """The request with its memory's expiry: the one its user asked for ("remember this
        until Friday", as the writer read it), else the app's default time to live from now,
        else none."""
        until = written.keep_until
        if until is None and request.ttl_seconds is not None:
            until = self._clock.now() + timedelta(seconds=request.ttl_seconds)
        return request if until is None else replace(request, expires_at=format_timestamp(until))

    async def _write_shared_too(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        first: MemoryCreated,
        record: JobRecord | None,
    ) -> None:
        """The same memory in the app's shared space, after the user's was committed (and
        the job recorded done with it), if the job's record still wants it in the writing
        transaction (a purge or an erasure meanwhile does not). A failure here is logged and
        counted, and leaves the user's memory as it is."""
        shared = replace(request, user_id="", also_shared=False)

        async def allowed(tx: SqlTransaction) -> bool:
            # The user's memory, when one was written, is still there (no purge, erasure or
            # delete since), and the caller's own conditions hold.
            if first.memory is not None:
                kept = await self._store.within(tx).get(request.app_id, first.memory.id)
                if kept is None or kept.deleted_at is not None:
                    return False
            return record is None or await record.copies_wanted(tx)

        # The model's updates name memories of the user's space, not of the shared one.
        copy = replace(written, updates=())
        await self._write_copy(shared, copy, allowed, self._spaces, "the shared copy")

    async def _write_profile_too(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        record: JobRecord | None,
    ) -> None:
        """The memory's facts about the person in their profile, with its own cap and
        compaction, after the app's memory was committed, if the job's record still wants it
        (an erasure meanwhile does not). The app's time to live is not the profile's. A failure
        is logged and counted, and leaves the app's memory as it is."""
        profile = replace(
            request, app_id=PROFILE_APP, also_shared=False, to_profile=False,
            from_app=request.app_id, expires_at=None,
        )
        about = WrittenMemory(written.about_person, written.source, written.asked_model,
                              kind=self._writer.kinds.of("profile"))
        allowed = None if record is None else record.copies_wanted
        await self._write_copy(profile, about, allowed, self._profiles, "the profile part")

    async def _write_copy(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        allowed: Allowed | None,
        compaction: Compaction,
        what: str,
    ) -> None:
        """Write `what` of a memory already committed elsewhere: a refusal (its job or the
        memory it copies is gone) and a failure are logged, the failure counted too."""
        try:
            result = await self._store_with_compaction(
                request, written, compaction, CommitCheck(allowed=allowed)
            )
        except MemoryWriteRefused:
            log.info("📝 %s of the memory of %s was not written: its memory or job is gone",
                     what.capitalize(), request.conversation_id)
            return
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error("❌ %s of the memory of %s was not written: %s",
                      what.capitalize(), request.conversation_id, error)
            return
        self._log_created(request, result)

    async def _store_with_compaction(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        compaction: Compaction,
        commit: CommitCheck,
    ) -> MemoryCreated:
        # Most writes fit under the cap: one transaction reads the space's memories and
        # writes. When they do not, the writer decides on what that transaction read (no lock
        # held while the model thinks), and the next one applies the decision if nothing
        # changed meanwhile.
        today = now_text(self._clock)[:10]
        decided: tuple[list[Memory], list[DecidedStep]] | None = None
        for decisions in range(MODEL_DECISIONS + 1):

            async def apply_or_read(
                tx: SqlTransaction, decided: tuple[list[Memory], list[DecidedStep]] | None = decided
            ) -> MemoryCreated | list[Memory]:
                current = await self._current_memories(tx, request)
                steps = compaction.steps_if_they_fit(current, written)
                if steps is None and decided and (
                    decision_fingerprint(current) == decision_fingerprint(decided[0])
                ):
                    steps = decided[1]
                if steps is None:
                    return current  # decide (again) on these
                return await self._apply(tx, request, written, current, steps, commit)

            outcome = await commit.run(self._db, apply_or_read)
            if isinstance(outcome, MemoryCreated):
                return outcome
            if decisions < MODEL_DECISIONS:
                steps = await compaction.decide(outcome, written, today)
                decided = (outcome, steps)

        # Still changing: the fallback decides on what is there now, inside the transaction.
        async def apply_fallback(tx: SqlTransaction) -> MemoryCreated:
            current = await self._current_memories(tx, request)
            steps = compaction.fallback(
                current, written, "the space's memories kept changing while the model decided"
            )
            return await self._apply(tx, request, written, current, steps, commit)

        return await commit.run(self._db, apply_fallback)

    async def _current_memories(
        self, tx: SqlTransaction, request: MemoryCreationRequest
    ) -> list[Memory]:
        """The space's memories as of now (the cap holds per space), the app's row held so
        that no other write (from this instance or another) changes them before this
        transaction ends."""
        store = self._store.within(tx)
        await store.lock_space(request.app_id, request.user_id)
        return await store.list_oldest_first(request.app_id, user_id=request.user_id)

    async def _apply(
        self,
        tx: SqlTransaction,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        current: list[Memory],
        steps: list[DecidedStep],
        commit: CommitCheck,
        *,
        hold: bool = True,
    ) -> MemoryCreated:
        if hold and request.app_id == PROFILE_APP and self._consent is not None:
            proposal = await held_as_proposal(
                self._consent, self._store.within(tx), request, written, current, steps,
                kind=self._writer.kinds.of(written.kind), model=self._writer.model_name,
            )
            if proposal is not None:
                held = MemoryCreated(
                    None, [], f"waits for the person's consent (profile proposal {proposal})",
                    written.content,
                )
                await commit.check(tx, held)
                return held
        memory, outcomes = await apply_write(
            self._store.within(tx),
            app_id=request.app_id,
            content=written.content,
            source_conversation_id=request.conversation_id,
            written_by=written.source
            + (f", from the app {request.from_app}" if request.from_app else ""),
            current=current,
            steps=steps,
            source=EventSource(
                now_text(self._clock), request.conversation_id, request.job_id,
                self._writer.model_name,
            ),
            user_id=request.user_id,
            expires_at=request.expires_at,
            kind=self._writer.kinds.of(written.kind),
        )
        note = f"memory {memory.id} written" if memory else fate_of_new(outcomes)
        if written.note:
            note += f"; {written.note}"
        result = MemoryCreated(memory, outcomes, note, written.content)
        await commit.check(tx, result)
        return result

    async def apply_proposal(
        self, tx: SqlTransaction, proposal: ProfileProposal, change: dict[str, Any],
        through: str,
    ) -> tuple[int | None, int]:
        """Inside the answer's transaction: an accepted proposal written into the profile as
        the job would have: with its decision when the profile is as it saw it; else with
        what fits now or the writer's fallback, unless that would change another sensitive
        fact than the person was shown, which is proposed anew instead. The memory it wrote
        or went into, and the proposal asking anew (0: none)."""
        request = MemoryCreationRequest(
            app_id=PROFILE_APP, conversation_id=proposal.conversation_id or "", messages=(),
            user_id=proposal.user_id,
            from_app=f"{proposal.app_id}; proposal {proposal.id}, accepted through {through}",
        )
        written = WrittenMemory(proposal.content or "", change["source"], asked_model=False,
                                kind=change["kind"])
        current = await self._current_memories(tx, request)
        steps = decided_steps(change, current)
        if steps is None:
            steps = self._profiles.steps_if_they_fit(current, written)
            if steps is None:
                steps = self._profiles.fallback(
                    current, written, "the profile changed between the proposal and its answer"
                )
            shown = set((proposal.before or "").split("\n"))
            unseen = [m.content for m in changed_by(current, steps) if shown_as(m) not in shown]
            if self._consent is not None and self._consent.touched(unseen):
                again = await held_as_proposal(
                    self._consent, self._store.within(tx),
                    replace(request, from_app=proposal.app_id), written, current, steps,
                    kind=change["kind"], model=change.get("model"),
                )
                return None, again or 0
        result = await self._apply(tx, request, written, current, steps, CommitCheck(),
                                   hold=False)
        self._log_created(request, result)
        if result.memory is not None:
            return result.memory.id, 0
        return next((o.target_memory_id for o in result.compactions
                     if o.folded_memory_id == NEW_MEMORY_ID), None), 0

    def _log_created(self, request: MemoryCreationRequest, result: MemoryCreated) -> None:
        if result.memory is not None:
            self.stats.memories_created += 1
            log.info(
                "📝 Created memory for app %s from conversation %s",
                request.app_id,
                request.conversation_id,
            )
        else:
            log.info(
                "📝 Memory of conversation %s for app %s: %s",
                request.conversation_id,
                request.app_id,
                result.note,
            )
        for outcome in result.compactions:
            self.stats.compactions[outcome.outcome, outcome.decided_by] += 1
            if outcome.fallback_cause:
                self.stats.fallbacks[outcome.fallback_cause] += 1
            log.info(
                "🗜️  Compacted memories for app %s: %s memory %s (%s%s)",
                request.app_id,
                outcome.action,
                outcome.target_memory_id or "new",
                outcome.decided_by,
                f": {outcome.fallback_reason}" if outcome.fallback_reason else "",
            )
