"""The memory sub-agent: writes a memory when a conversation ends and keeps each app at its cap.

Creating a memory is one transaction, whatever the model takes. The memory text is had first
(a model call, no lock, no transaction). Then one transaction reads the app's memories: when
the new one fits under the cap (and the model is not to be asked what it updates) it is
written there and then. When it does not, the model decides on what that transaction read (no
lock held while it thinks), and the next transaction applies the decision only if the memories
are still as the decision saw them. Either way the new memory, the compaction, the history
and the caller's own mark of its job (`commit_guard`) commit together. So the cap holds in
every committed state, a crash leaves either nothing or everything, and a job cancelled
meanwhile (purge) cannot write.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TypeVar

import anyio

from memory_agent import steering, transfer
from memory_agent.chat_model import ChatMessage, ChatModel, ChatReply, JsonSchema
from memory_agent.commit import apply_write
from memory_agent.compaction import Compactor, DecidedStep
from memory_agent.context import format_memories_for_context
from memory_agent.creation import MemoryWriter, WrittenMemory
from memory_agent.energy import EnergyMeter
from memory_agent.errors import ChatModelTimeout, MemoryWriteRefused, MnemoloopError
from memory_agent.expiry import remembered_until
from memory_agent.models import (
    CompactionOutcome,
    ImportedMemory,
    Memory,
    MemoryActor,
    MemoryEvent,
)
from memory_agent.ports import (
    Clock,
    Database,
    SqlTransaction,
    SystemClock,
    format_timestamp,
    now_text,
)
from memory_agent.retention import NEW_MEMORY_ID
from memory_agent.search import search_terms
from memory_agent.secrets import redact_text
from memory_agent.steering import MemoryChange
from memory_agent.store import EventSource, MemoryState, MemoryStore

log = logging.getLogger("mnemoloop.memory")

# Decisions made with the model before the policy decides inside the transaction instead:
# the app's memories changed under the first ones (another writer, an admin delete).
MODEL_DECISIONS = 2
NOTHING_WORTH_KEEPING = "nothing worth keeping"
T = TypeVar("T")
# Memories the worker erases in one transaction when their grace period is over.
ERASE_BATCH = 200


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
    # Written from the conversation's statements alone, the model not asked: it adds next to
    # nothing to them (`TrackRecord.adds_little`).
    written_without_model: int = 0
    creation_failures: int = 0
    compactions: Counter[str] = field(default_factory=Counter)
    # Why the policy decided instead of the model: llm_error, invalid_decision, overruled,
    # not_asked.
    fallbacks: Counter[str] = field(default_factory=Counter)


class MemorySubAgent:
    def __init__(
        self,
        database: Database,
        chat_model: ChatModel,
        *,
        clock: Clock | None = None,
        memory_limit: int = 10,
        max_chars: int = 400,
        llm_timeout: float = 30.0,
        tokens_per_energy_unit: int = 100,
        max_transcript_chars: int = 6000,
        grace_seconds: float = 7 * 24 * 3600,
    ) -> None:
        self._db = database
        self._clock = clock or SystemClock()
        self._store = MemoryStore(database, self._clock)
        self._model = chat_model
        self._grace = grace_seconds
        self._limit = memory_limit
        self._max_chars = max_chars
        self._timeout = llm_timeout
        self._meter = EnergyMeter(tokens_per_energy_unit)
        self._writer = MemoryWriter(
            self._ask, max_chars=max_chars, max_transcript_chars=max_transcript_chars
        )
        self._compactor = Compactor(
            self._ask_json,
            limit=memory_limit,
            max_chars=max_chars,
            writer_adds_little=lambda: self._writer.adds_little,
        )
        self.stats = AgentStats()

    @property
    def memory_limit(self) -> int:
        return self._limit

    @property
    def model_sentences(self) -> tuple[int, int]:
        """The sentences the model wrote for memories, and those the checks kept."""
        return self._writer.sentences_written, self._writer.sentences_kept

    # -- creation ---------------------------------------------------------------------------

    async def create_memory(
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
            messages = [ChatMessage(m.role, redact_text(m.content)) for m in request.messages]
            written = await self._writer.write(messages, await self._known_to(request))
            if written is not None:
                written = replace(written, content=redact_text(written.content))
                request = self._with_expiry(request)
            if written is None:
                result = MemoryCreated(None, [], NOTHING_WORTH_KEEPING)
                await self._db.run_transaction(
                    lambda tx: _check_guard(commit_guard, tx, result)
                )
                self.stats.nothing_worth_keeping += 1
                log.info(
                    "📝 Nothing worth keeping in conversation %s of app %s",
                    request.conversation_id,
                    request.app_id,
                )
                return result
            result = await self._store_with_compaction(request, written, commit_guard)
            self.stats.written_without_model += not written.asked_model
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error("❌ Memory creation failed for %s: %s", request.conversation_id, error)
            raise
        self._log_created(request, result)
        if request.also_shared and written is not None:
            await self._write_shared_too(request, written, result, shared_guard)
        return result

    async def _known_to(self, request: MemoryCreationRequest) -> list[str]:
        """What the request's space already remembers: a trusted model sees it when it writes
        (it tells who and what a conversation speaks of), and the names it holds are no
        invention of a promising model's (`MemoryWriter.write`). Nothing is read for any
        other model."""
        if not self._writer.promising:
            return []
        memories = await self._store.list_oldest_first(request.app_id, user_id=request.user_id)
        return [memory.content for memory in memories]

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

        try:
            result = await self._store_with_compaction(shared, written, allowed)
        except MemoryWriteRefused:
            log.info("📝 The shared copy of the memory of %s was not written: its user's memory"
                     " or job is gone", request.conversation_id)
            return
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error(
                "❌ The shared copy of the memory of %s was not written: %s",
                request.conversation_id, error,
            )
            return
        self._log_created(shared, result)

    async def _store_with_compaction(
        self,
        request: MemoryCreationRequest,
        written: WrittenMemory,
        commit_guard: CommitGuard | None,
    ) -> MemoryCreated:
        # Most writes fit under the cap: one transaction reads the app's memories and writes.
        # When they do not, the model decides on what that transaction read (no lock held
        # while it thinks), and the next one applies the decision if nothing changed meanwhile.
        today = now_text(self._clock)[:10]
        decided: tuple[list[Memory], list[DecidedStep]] | None = None
        for decisions in range(MODEL_DECISIONS + 1):

            async def apply_or_read(
                tx: SqlTransaction, decided: tuple[list[Memory], list[DecidedStep]] | None = decided
            ) -> MemoryCreated | list[Memory]:
                current = await self._current_memories(tx, request)
                steps = self._compactor.steps_if_they_fit(
                    current, written.content, reviews_updates=self._writer.promising
                )
                if steps is None and decided and _fingerprint(current) == _fingerprint(decided[0]):
                    steps = decided[1]
                if steps is None:
                    return current  # decide (again) on these
                return await self._apply(tx, request, written, current, steps, commit_guard)

            outcome = await self._db.run_transaction(apply_or_read)
            if isinstance(outcome, MemoryCreated):
                return outcome
            if decisions < MODEL_DECISIONS:
                steps = await self._compactor.decide(
                    outcome,
                    written.content,
                    today,
                    trusted=self._writer.trusted,
                    reviews_updates=self._writer.promising,
                )
                decided = (outcome, steps)

        # Still changing: the policy decides on what is there now, inside the transaction.
        async def apply_policy(tx: SqlTransaction) -> MemoryCreated:
            current = await self._current_memories(tx, request)
            steps = self._compactor.policy_only(current, written.content)
            return await self._apply(tx, request, written, current, steps, commit_guard)

        return await self._db.run_transaction(apply_policy)

    async def _current_memories(
        self, tx: SqlTransaction, request: MemoryCreationRequest
    ) -> list[Memory]:
        """The space's memories as of now (the cap holds per space), the app's row held so
        that no other write (from this instance or another) changes them before this
        transaction ends."""
        store = self._store.within(tx)
        await store.lock_app(request.app_id)
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
            written_by=written.source,
            current=current,
            steps=steps,
            source=EventSource(
                now_text(self._clock), request.conversation_id, request.job_id, self._model.name
            ),
            user_id=request.user_id,
            expires_at=request.expires_at,
        )
        note = f"memory {memory.id} written" if memory else _fate_of_new(outcomes)
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

    # -- recall -----------------------------------------------------------------------------

    async def get_memories(
        self, app_id: str, limit: int = 10, *, user_id: str = ""
    ) -> list[Memory]:
        """A space's newest memories that may be injected (live, not private), newest first
        (the loop's read for a conversation)."""
        memories = await self._store.list_newest(app_id, limit, user_id=user_id, injectable=True)
        log.info("🧠 Retrieved %d memories for app %s", len(memories), app_id)
        return memories

    async def list_memories(
        self, app_id: str, *, user_id: str = "", state: MemoryState = "live"
    ) -> list[Memory]:
        """Every memory of a space in `state` (live, retired, or all), private ones too,
        newest first (for operators)."""
        return await self._store.list_newest(
            app_id, max(self._limit * 10, 1000), user_id=user_id, state=state
        )

    async def get_memory(self, app_id: str, memory_id: int) -> Memory | None:
        """One memory, live or retired."""
        return await self._store.get(app_id, memory_id)

    async def spaces(self, app_id: str) -> list[tuple[str, int]]:
        """The app's spaces that hold memories, with their counts, the shared one ("")
        first."""
        return await self._store.spaces(app_id)

    async def search_memories(
        self, app_id: str, query: str, limit: int = 20, *, user_id: str = "",
        injectable: bool = False,
    ) -> list[Memory]:
        """A space's live memories matching `query` (its words), most relevant first;
        `injectable`: without private ones (for a model). Raises `InvalidSearchQuery` for an
        empty or overlong query."""
        return await self._store.search(
            app_id, search_terms(query), limit, user_id=user_id, injectable=injectable
        )

    async def has_memory(self, app_id: str, memory_id: int) -> bool:
        return await self._store.get(app_id, memory_id) is not None

    async def get_memory_count(
        self, app_id: str, *, tx: SqlTransaction | None = None, user_id: str | None = None
    ) -> int:
        """How many memories the app holds, in all its spaces or in one (inside the caller's
        transaction when one is given)."""
        store = self._store.within(tx) if tx is not None else self._store
        return await store.count(app_id, user_id=user_id)

    async def history(
        self,
        app_id: str,
        *,
        memory_id: int | None = None,
        after_id: int = 0,
        limit: int = 100,
        newest_first: bool = False,
        user_id: str | None = None,
    ) -> list[MemoryEvent]:
        return await self._store.history(
            app_id, memory_id=memory_id, after_id=after_id, limit=limit,
            newest_first=newest_first, user_id=user_id,
        )

    async def latest_history_of(
        self, app_id: str, memory_ids: Sequence[int], limit: int
    ) -> dict[int, list[MemoryEvent]]:
        """Each memory's newest `limit` events, oldest first."""
        return await self._store.latest_history_of(app_id, memory_ids, limit)

    def format_memories_for_context(
        self, app_name: str, memories: Sequence[Memory], user_memories: Sequence[Memory] = ()
    ) -> str:
        return format_memories_for_context(app_name, memories, user_memories)

    # -- admin ------------------------------------------------------------------------------

    async def delete_memory(
        self, app_id: str, memory_id: int, *, actor: MemoryActor = "admin",
        reason: str | None = None,
    ) -> Memory:
        """Delete one memory softly: out of sight at once, restorable until the grace period
        ends (then the worker erases it). Never waits for a model. `MemoryNotFound` when
        there is none."""
        return await self._steering(
            lambda store, source: steering.soft_delete(
                store, app_id, memory_id, actor=actor, source=source,
                grace_seconds=self._grace, reason=reason,
            )
        )

    async def restore_memory(
        self, app_id: str, memory_id: int, *, actor: MemoryActor = "admin",
        expires_at: str | None = None,
    ) -> Memory:
        """Bring back a deleted or expired memory before the worker erases it
        (`steering.restore`)."""
        return await self._steering(
            lambda store, source: steering.restore(
                store, app_id, memory_id, actor=actor, source=source, limit=self._limit,
                expires_at=expires_at, grace_seconds=self._grace,
            )
        )

    async def steer_memory(
        self, app_id: str, memory_id: int, change: MemoryChange, *,
        actor: MemoryActor = "admin",
    ) -> Memory:
        """Pin, weigh, make private or set the expiry of one live memory (`steering.steer`)."""
        return await self._steering(
            lambda store, source: steering.steer(
                store, app_id, memory_id, change, actor=actor, source=source, limit=self._limit
            )
        )

    async def tag_memory(
        self, app_id: str, memory_id: int, *, relevant: bool, reason: str,
        actor: MemoryActor = "app",
    ) -> Memory:
        """The seed's relevance tags: the importance moves up or down, the reason kept."""
        return await self._steering(
            lambda store, source: steering.tag_relevance(
                store, app_id, memory_id, relevant=relevant, reason=reason, actor=actor,
                source=source, limit=self._limit,
            )
        )

    async def erase_retired(self, batch: int = ERASE_BATCH) -> int:
        """Erase what the grace period no longer keeps (deleted or expired memories), up to
        `batch` of them in one transaction; returns how many went."""
        return await self._steering(
            lambda store, source: steering.erase_retired(
                store, source=source, grace_seconds=self._grace, limit=batch
            )
        )

    @property
    def grace_seconds(self) -> float:
        return self._grace

    def now(self) -> str:
        """The agent's time now, in the stored form (what a memory's state is judged at)."""
        return now_text(self._clock)

    async def _steering(
        self, change: Callable[[MemoryStore, EventSource], Awaitable[T]]
    ) -> T:
        async with self._db.transaction() as tx:
            return await change(self._store.within(tx), EventSource(now_text(self._clock)))

    async def delete_app_memories(
        self, app_id: str, *, tx: SqlTransaction | None = None, user_id: str | None = None
    ) -> int:
        """Purge: delete every memory of the app (of all its spaces, or of one) and erase
        their text from the history too (the events stay). Inside the caller's transaction
        when one is given. Deleted and expired memories kept for restoring go too. Returns how
        many live memories were deleted (the count an operator was shown)."""
        if tx is None:
            async with self._db.transaction() as own:
                return await self.delete_app_memories(app_id, tx=own, user_id=user_id)
        source = EventSource(now_text(self._clock))
        store = self._store.within(tx)
        await store.lock_app(app_id)
        deleted = await store.delete_all(app_id, user_id=user_id)
        for memory_id, space, retired in deleted:
            # A memory already deleted (or expired) is erased now; a live one deleted.
            await store.record_event(
                app_id, memory_id, "erased" if retired else "deleted", "purge", source,
                user_id=space,
            )
        await store.erase_history_text(app_id, user_id=user_id)
        await store.compact_search_index()
        return sum(not retired for _, _, retired in deleted)

    async def erase_space(self, app_id: str, user_id: str, *, tx: SqlTransaction) -> int:
        """Erasing a person, inside the caller's transaction (which holds the app's row): the
        user's space and its history go, and the search index is compacted as a purge does.
        Returns how many memories went."""
        store = self._store.within(tx)
        erased = await store.erase_space(app_id, user_id)
        await store.compact_search_index()
        return erased

    async def import_memories(
        self,
        app_id: str,
        memories: Sequence[ImportedMemory],
        *,
        replace: bool = False,
        user_id: str = "",
    ) -> int:
        """Store memories from an export in a space, all or none: refused
        (`MemoryImportRefused`) when one cannot be stored or the space would hold more than
        its limit. With `replace`, the space's memories are deleted first. Returns how many
        memories the space holds after."""
        prepared = transfer.checked(memories, max_chars=self._max_chars)
        async with self._db.transaction() as tx:
            store = self._store.within(tx)
            await store.lock_app(app_id)
            kept = 0 if replace else await store.count(app_id, user_id=user_id)
            transfer.check_room(app_id, len(prepared), kept, self._limit)
            pins = 0 if replace else await store.count_pinned(app_id, user_id)
            transfer.check_pins(
                app_id, sum(m.pinned for m in prepared), pins, self._limit
            )
            await transfer.write_imported(
                store, app_id, prepared, replacing=replace,
                source=EventSource(now_text(self._clock)), user_id=user_id,
            )
            return await store.count(app_id, user_id=user_id)

    # -- energy -----------------------------------------------------------------------------

    def get_energy_consumed_since_last_poll(self) -> int:
        """The energy the model calls used since the last poll (from any thread)."""
        return self._meter.take()

    def give_back_energy(self, units: int) -> None:
        """Polled units whose spending was not recorded (its transaction rolled back): the
        next poll hands them out again."""
        self._meter.give_back(units)

    # -- helpers ----------------------------------------------------------------------------

    async def _ask(self, messages: list[ChatMessage]) -> ChatReply:
        return await self._ask_json(messages, None)

    async def _ask_json(
        self, messages: list[ChatMessage], json_schema: JsonSchema | None
    ) -> ChatReply:
        try:
            with anyio.fail_after(self._timeout):
                reply = await self._model.chat(messages, json_schema=json_schema)
        except TimeoutError:
            raise ChatModelTimeout(
                f"no answer within {self._timeout:g} s", model=self._model.name
            ) from None
        self._meter.charge(reply.usage)
        return reply



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
