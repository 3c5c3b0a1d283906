"""Creating one memory for an ended conversation: one transaction, whatever the model takes.

The writer (`writing.MemoryWriter`) has the memory first (a model call, no lock, no
transaction). Then one transaction reads the space's memories: when the new one fits under
the cap after its updates, it is written there and then. When it does not, the writer decides
on what that transaction read (no lock held while the model thinks), and the next transaction
applies the decision only if the memories are still as the decision saw them; after
`MODEL_DECISIONS` tries the writer's fallback decides inside the transaction. Either way the
new memory, its updates, the compaction, the history and the caller's own mark of its job
(`commit_guard`) commit together. So the cap holds in every committed state, a crash leaves
either nothing or everything, and a job cancelled meanwhile (purge) cannot write.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from memory_agent.chat_model import ChatMessage
from memory_agent.commit import apply_write
from memory_agent.errors import MemoryWriteRefused, MnemoloopError
from memory_agent.expiry import remembered_until
from memory_agent.models import CompactionOutcome, Memory
from memory_agent.ports import Clock, Database, SqlTransaction, format_timestamp, now_text
from memory_agent.secrets import redact_json, redact_text
from memory_agent.steps import NEW_MEMORY_ID, DecidedStep
from memory_agent.store import PROFILE_APP, EventSource, MemoryStore
from memory_agent.writing import MemoryWriter, NothingToKeep, WrittenMemory

log = logging.getLogger("mnemoloop.memory")

# Decisions made with the model before the fallback decides inside the transaction instead:
# the app's memories changed under the first ones (another writer, an admin delete).
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


@dataclass(frozen=True)
class MemoryCreated:
    """What a memory job did: the memory written (None when there was nothing worth keeping,
    or the new memory was deleted or folded into another), and the compaction steps."""

    memory: Memory | None
    compactions: list[CompactionOutcome]
    note: str
    # The text written for the conversation, even if compaction then deleted or folded it.
    content: str | None = None


CommitGuard = Callable[[SqlTransaction, MemoryCreated], Awaitable[bool]]


@dataclass
class AgentStats:
    """Running counts for metrics; never reset."""

    memories_created: int = 0
    nothing_worth_keeping: int = 0
    # Written from the conversation's statements alone, no model asked (the extractive writer).
    written_without_model: int = 0
    creation_failures: int = 0
    compactions: Counter[str] = field(default_factory=Counter)
    # Why the fallback decided instead of the model: llm_error, invalid_decision, overruled.
    fallbacks: Counter[str] = field(default_factory=Counter)


class MemoryCreation:
    """Writes conversations' memories into their spaces through `writer`."""

    def __init__(
        self,
        database: Database,
        store: MemoryStore,
        writer: MemoryWriter,
        clock: Clock,
        stats: AgentStats,
        model_name: str,
        profile_writer: MemoryWriter | None = None,
    ) -> None:
        self._db = database
        self._store = store
        self._writer = writer
        # The same kind of writer, at the profile's own cap.
        self._profile_writer = profile_writer or writer
        self._clock = clock
        self.stats = stats
        self._model_name = model_name

    async def create(
        self,
        request: MemoryCreationRequest,
        *,
        commit_guard: CommitGuard | None = None,
        shared_guard: CommitGuard | None = None,
    ) -> MemoryCreated:
        """Write the conversation's memory and keep the app at its cap, in one transaction.

        `commit_guard(tx, result)` runs inside that transaction; when it returns False (the
        job was cancelled) nothing is written and `MemoryWriteRefused` is raised. Raises
        `ChatModelError`, `InvalidMemoryText` or `StorageError` when no memory could be
        written; every failure is logged here once.
        """
        try:
            # The model never reads a secret, and what it writes is checked again.
            messages = [
                replace(m, content=redact_text(m.content), tool_calls=tuple(
                    replace(call, arguments=redact_json(call.arguments))
                    for call in m.tool_calls
                ))
                for m in request.messages
            ]
            written = await self._writer.write(messages, await self._space_of(request))
            if isinstance(written, NothingToKeep):
                result = MemoryCreated(None, [], written.why)
                await self._db.run_transaction(
                    lambda tx: _check_guard(commit_guard, tx, result)
                )
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
            request = self._with_expiry(request)
            result = await self._store_with_compaction(request, written, commit_guard)
            self.stats.written_without_model += not written.asked_model
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error("❌ Memory creation failed for %s: %s", request.conversation_id, error)
            raise
        self._log_created(request, result)
        if request.also_shared:
            await self._write_shared_too(request, written, result, shared_guard)
        if request.to_profile and request.user_id and written.about_person:
            await self._write_profile_too(request, written, shared_guard)
        return result

    async def _space_of(self, request: MemoryCreationRequest) -> list[Memory]:
        """What the request's space already holds, oldest first, for the model writer (it
        says which of them the new memory updates); the extractive writer reads none."""
        if self._writer.kind != "model":
            return []
        return await self._store.list_oldest_first(request.app_id, user_id=request.user_id)

    def _with_expiry(self, request: MemoryCreationRequest) -> MemoryCreationRequest:
        """The request with its memory's expiry: the one its user asked for ("remember this
        until Friday"), else the app's default time to live from now, else none."""
        now = self._clock.now()
        until = remembered_until(request.messages, now)
        if until is None and request.ttl_seconds is not None:
            until = now + timedelta(seconds=request.ttl_seconds)
        return request if until is None else replace(request, expires_at=format_timestamp(until))

    async def _write_shared_too(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        first: MemoryCreated,
        shared_guard: CommitGuard | None,
    ) -> None:
        """The same memory in the app's shared space, after the user's was committed (and
        the job recorded done with it), if `shared_guard(tx, first)` still allows it in the
        writing transaction (a purge or an erasure meanwhile does not). A failure here is
        logged and counted, and leaves the user's memory as it is."""
        shared = replace(request, user_id="", also_shared=False)

        async def allowed(tx: SqlTransaction, _: MemoryCreated) -> bool:
            # The user's memory, when one was written, is still there (no purge, erasure or
            # delete since), and the caller's own conditions hold.
            if first.memory is not None:
                kept = await self._store.within(tx).get(request.app_id, first.memory.id)
                if kept is None or kept.deleted_at is not None:
                    return False
            return shared_guard is None or await shared_guard(tx, first)

        # The model's updates name memories of the user's space, not of the shared one.
        copy = replace(written, updates=())
        await self._write_copy(shared, copy, allowed, self._writer, "the shared copy")

    async def _write_profile_too(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        guard: CommitGuard | None,
    ) -> None:
        """The memory's facts about the person in their profile, with its own cap and
        compaction, after the app's memory was committed, if `guard` still allows it (an
        erasure meanwhile does not). The app's time to live is not the profile's. A failure
        is logged and counted, and leaves the app's memory as it is."""
        profile = replace(
            request, app_id=PROFILE_APP, also_shared=False, to_profile=False,
            from_app=request.app_id, expires_at=None,
        )
        about = WrittenMemory(written.about_person, written.source, written.asked_model)
        await self._write_copy(profile, about, guard, self._profile_writer, "the profile part")

    async def _write_copy(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        guard: CommitGuard | None,
        writer: MemoryWriter,
        what: str,
    ) -> None:
        """Write `what` of a memory already committed elsewhere: a refusal (its job or the
        memory it copies is gone) and a failure are logged, the failure counted too."""
        try:
            result = await self._store_with_compaction(request, written, guard, writer)
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
        commit_guard: CommitGuard | None,
        writer: MemoryWriter | None = None,
    ) -> MemoryCreated:
        # Most writes fit under the cap: one transaction reads the app's memories and writes.
        # When they do not, the model decides on what that transaction read (no lock held
        # while it thinks), and the next one applies the decision if nothing changed meanwhile.
        writer = writer or self._writer
        today = now_text(self._clock)[:10]
        decided: tuple[list[Memory], list[DecidedStep]] | None = None
        for decisions in range(MODEL_DECISIONS + 1):

            async def apply_or_read(
                tx: SqlTransaction, decided: tuple[list[Memory], list[DecidedStep]] | None = decided
            ) -> MemoryCreated | list[Memory]:
                current = await self._current_memories(tx, request)
                steps = writer.steps_if_they_fit(current, written)
                if steps is None and decided and _fingerprint(current) == _fingerprint(decided[0]):
                    steps = decided[1]
                if steps is None:
                    return current  # decide (again) on these
                return await self._apply(tx, request, written, current, steps, commit_guard)

            outcome = await self._db.run_transaction(apply_or_read)
            if isinstance(outcome, MemoryCreated):
                return outcome
            if decisions < MODEL_DECISIONS:
                steps = await writer.decide(outcome, written, today)
                decided = (outcome, steps)

        # Still changing: the fallback decides on what is there now, inside the transaction.
        async def apply_policy(tx: SqlTransaction) -> MemoryCreated:
            current = await self._current_memories(tx, request)
            steps = writer.fallback(
                current, written, "the space's memories kept changing while the model decided"
            )
            return await self._apply(tx, request, written, current, steps, commit_guard)

        return await self._db.run_transaction(apply_policy)

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
        commit_guard: CommitGuard | None,
    ) -> MemoryCreated:
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
                now_text(self._clock), request.conversation_id, request.job_id, self._model_name
            ),
            user_id=request.user_id,
            expires_at=request.expires_at,
        )
        note = f"memory {memory.id} written" if memory else _fate_of_new(outcomes)
        if written.note:
            note += f"; {written.note}"
        result = MemoryCreated(memory, outcomes, note, written.content)
        await _check_guard(commit_guard, tx, result)
        return result

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
            self.stats.compactions[outcome.outcome] += 1
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


async def _check_guard(
    commit_guard: CommitGuard | None, tx: SqlTransaction, result: MemoryCreated
) -> None:
    if commit_guard is not None and not await commit_guard(tx, result):
        raise MemoryWriteRefused(
            "the memory job is no longer held (cancelled or taken over); nothing was written"
        )


def _fingerprint(memories: Sequence[Memory]) -> list[tuple[object, ...]]:
    """What a decision depends on: each memory's version, and how it is steered (a pin or a
    new importance meanwhile makes the decision stale too)."""
    return [(m.id, m.updated_at, m.pinned, m.private, m.importance) for m in memories]


def _fate_of_new(outcomes: Sequence[CompactionOutcome]) -> str:
    for outcome in outcomes:
        if outcome.action == "edit" and outcome.folded_memory_id == NEW_MEMORY_ID:
            return f"folded into memory {outcome.target_memory_id}"
    return "the new memory was the one compaction deleted"
