"""The memory sub-agent as the host holds it: the memory job when a conversation ends
(`job.creation`, through the operator's writer), and the reads, steering, purges and transfers
of memories for the loop, the API and the console."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from memory_agent.consolidation.consolidator import (
    Consolidator,
    Group,
    PassFigures,
    Wanted,
    groups_of,
)
from memory_agent.core.chat_model import ChatModel
from memory_agent.core.energy import EnergyMeter
from memory_agent.core.kinds import BUNDLED_KINDS, Kinds
from memory_agent.core.ports import (
    Clock,
    Database,
    SqlTransaction,
    SystemClock,
    now_text,
)
from memory_agent.job.creation import (
    AgentStats,
    JobRecord,
    MemoryCreated,
    MemoryCreation,
    MemoryCreationRequest,
)
from memory_agent.models import (
    ImportedMemory,
    Memory,
    MemoryActor,
    MemoryEvent,
)
from memory_agent.recall.decay import Given, stale_before
from memory_agent.recall.delta import MAX_CHANGES, delta_header
from memory_agent.recall.query import (
    POOL,
    POOL_WITH_IMPORTANCE,
    SCAN_LIMIT,
    MemoryQuery,
    QueryAnswer,
    answer,
)
from memory_agent.recall.usage import cited
from memory_agent.steering import changes as steering
from memory_agent.steering import transfer
from memory_agent.steering.changes import MemoryChange
from memory_agent.storage.search import search_terms
from memory_agent.storage.store import PROFILE_APP, EventSource, MemoryState, MemoryStore
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.calibration import Calibration, calibrate
from memory_agent.writers.choice import writer_of
from memory_agent.writers.writer import WriterKind
from memory_agent.writers.written import GroundingRecord

log = logging.getLogger("mnemoloop.memory")

T = TypeVar("T")
# Memories the worker erases in one transaction when their grace period is over.
ERASE_BATCH = 200


class MemorySubAgent:
    def __init__(
        self,
        database: Database,
        chat_model: ChatModel,
        *,
        clock: Clock | None = None,
        memory_limit: int = 10,
        profile_limit: int = 10,
        max_chars: int = 400,
        llm_timeout: float = 30.0,
        tokens_per_energy_unit: int = 100,
        prompt_tokens: int = 6000,
        grace_seconds: float = 7 * 24 * 3600,
        writer: WriterKind = "model",
        kinds: Kinds = BUNDLED_KINDS,
    ) -> None:
        self._db = database
        self._clock = clock or SystemClock()
        self._store = MemoryStore(database, self._clock)
        self._grace = grace_seconds
        self._limits = MemoryLimits(memory_limit, max_chars, prompt_tokens)
        self._profile_limits = MemoryLimits(profile_limit, max_chars, prompt_tokens)
        self._meter = EnergyMeter(tokens_per_energy_unit)
        self._model = MemoryModel(chat_model, timeout=llm_timeout, meter=self._meter)
        # The kinds of memory, and who may read which (`core.kinds`).
        self.kinds = kinds
        self._writer = writer_of(writer, self._model, self._limits, kinds)
        self._creation = MemoryCreation(
            database, self._store, self._writer, self._clock, self._meter,
            limits=self._limits, profile_limits=self._profile_limits,
        )
        self._consolidator = Consolidator(database, self._store, lambda: self._writer, self._clock)

    @property
    def memory_limit(self) -> int:
        return self._limits.memories

    @property
    def profile_limit(self) -> int:
        return self._profile_limits.memories

    @property
    def stats(self) -> AgentStats:
        """Running counts of the memory jobs, for the metrics."""
        stats = self._creation.stats
        stats.prompts_cut = self._model.prompts_cut
        return stats

    async def get_profile(self, user_id: str) -> list[Memory]:
        """A person's profile memories that may be injected, newest first (the loop's read
        for a conversation of an app that shares it)."""
        return await self._store.list_newest(
            PROFILE_APP, self.profile_limit, user_id=user_id, injectable=True
        )

    @property
    def writer(self) -> WriterKind:
        return self._writer.kind

    async def calibrate_writer(self) -> Calibration:
        """Try the model writer on a few fixed conversations (`writers.calibration`), and
        write with the writer it shows this model should have."""
        calibration = await calibrate(self._model, self._limits, self._clock.now())
        self.use_writer(calibration.writer)
        return calibration

    def use_writer(self, kind: WriterKind) -> None:
        """Write memories with `kind` from now on."""
        if kind != self._writer.kind:
            self._writer = writer_of(kind, self._model, self._limits)
            self._creation.use_writer(self._writer)

    @property
    def grounding(self) -> GroundingRecord | None:
        """The model writer's record of its sentences since start (None: extractive)."""
        return self._writer.record

    def warnings(self) -> list[str]:
        """What an operator should know of the memory work (`GET /health`)."""
        warning = self.grounding.warning() if self.grounding is not None else None
        return [warning] if warning else []

    # -- the memory job ---------------------------------------------------------------------

    async def create_memory(
        self, request: MemoryCreationRequest, record: JobRecord | None = None
    ) -> MemoryCreated:
        """Write the conversation's memory and keep its space at its cap, in one transaction
        with the job's `record` (`job.creation.MemoryCreation.create`)."""
        return await self._creation.create(request, record)

    # -- consolidation ----------------------------------------------------------------------

    async def consolidation_groups(
        self, app_id: str | None, user_id: str | None, shares_profile: Callable[[str], bool]
    ) -> list[Group]:
        """The groups of spaces a consolidation pass over the scope visits (an app's, a
        person's, or both; None: all), each person's profile crossed with their spaces in the
        apps that `shares_profile` says share it (`consolidation.consolidator`)."""
        return groups_of(await self._consolidator.spaces(app_id, user_id), shares_profile)

    async def consolidate(
        self, group: Group, figures: PassFigures, *, pairs_per_space: int, wanted: Wanted
    ) -> None:
        """Consolidate one group's pairs, at most `pairs_per_space` asked per space, each
        change in its own transaction where `wanted` still says yes; counted in `figures`."""
        await self._consolidator.consolidate(
            group, figures, pairs_per_space=pairs_per_space, wanted=wanted
        )

    async def forget_old_checks(self) -> int:
        """Drop the records of consolidation pairs whose recheck period is over."""
        return await self._consolidator.forget_old_checks()

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
        """Every memory of a space in `state` (live, retired, or all), private and secret ones
        too (never one of unknown sensitivity), newest first (for operators)."""
        return await self._store.list_newest(
            app_id, max(self._limits.memories * 10, 1000), user_id=user_id, state=state
        )

    async def held_back(self, app_id: str, *, user_id: str = "") -> list[int]:
        """The ids of a space's memories of unknown sensitivity, held back from every read."""
        return await self._store.held_back(app_id, user_id=user_id)

    async def get_memory(self, app_id: str, memory_id: int) -> Memory | None:
        """One memory, live or retired; never one of unknown sensitivity (fail-closed)."""
        memory = await self._store.get(app_id, memory_id)
        return memory if memory is not None and memory.returned else None

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

    async def query_memories(
        self, spaces: Sequence[tuple[str, str]], query: MemoryQuery,
        cost: Callable[[Memory], int],
    ) -> QueryAnswer:
        """The memories of `spaces` (app, user) that answer `query`, scored, the best first,
        within its `top_k` and budget (`cost`: a memory's tokens as it will be given). Never
        a private one (`recall.query`)."""
        async def candidates(terms: list[str] | None, limit: int) -> list[Memory]:
            return await self._store.query_candidates(
                spaces, terms, limit, pinned=query.pinned, updated_after=query.updated_after,
                updated_before=query.updated_before,
            )

        # Spaces of ordinary size are read whole; beyond that, the engine's search picks.
        found = await candidates(None, SCAN_LIMIT + 1)
        if len(found) > SCAN_LIMIT:
            pool = POOL_WITH_IMPORTANCE if query.importance_range else POOL
            found = await candidates(query.terms, pool)
        return answer(found, query, cost)

    async def record_use(
        self, conversation_id: str, shown: Sequence[Memory], reply: str, asked: str
    ) -> set[int]:
        """A turn of the conversation was given the memories `shown` and answered `reply` to
        the user's `asked`: each one's injection is counted, and its citation when the reply
        holds its values (`recall.usage`). The ids of those cited."""
        if not shown:
            return set()
        used = cited(shown, reply, asked)
        async with self._db.transaction() as tx:
            now = self.now()
            await self._store.within(tx).record_use(
                conversation_id, [memory.id for memory in shown], used, now, stale_before(now)
            )
        return used

    async def given_in(self, conversation_id: str) -> dict[int, Given]:
        """How often the conversation's turns were given each memory, as its decay counts it
        (`recall.decay`)."""
        counts = await self._store.given_in(conversation_id)
        return {memory_id: Given(times, stale) for memory_id, (times, stale) in counts.items()}

    async def injections(self, conversation_id: str) -> dict[int, tuple[int, int]]:
        """How often each memory was given to the conversation's turns, and cited."""
        return await self._store.injections(conversation_id)

    async def memory_counts_by_app(self) -> dict[str, int]:
        """How many live memories each app holds, in all its spaces."""
        return await self._store.counts_by_app()

    async def spaces_holding_memories(self) -> int:
        """How many apps' memory spaces hold at least one live memory."""
        return await self._store.spaces_holding_memories()

    async def has_memory(self, app_id: str, memory_id: int) -> bool:
        """Whether the app holds the memory, as a read may tell (not one of unknown
        sensitivity)."""
        return await self.get_memory(app_id, memory_id) is not None

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
        for_a_model: bool = False,
    ) -> list[MemoryEvent]:
        """The app's history (`storage.history`): never a memory's of unknown sensitivity,
        nor, `for_a_model` (an MCP tool), a secret one's."""
        return await self._store.history(
            app_id, memory_id=memory_id, after_id=after_id, limit=limit,
            newest_first=newest_first, user_id=user_id, for_a_model=for_a_model,
        )

    async def latest_history_of(
        self, app_id: str, memory_ids: Sequence[int], limit: int
    ) -> dict[int, list[MemoryEvent]]:
        """Each memory's newest `limit` events, oldest first."""
        return await self._store.latest_history_of(app_id, memory_ids, limit)

    async def revision(self, spaces: Sequence[tuple[str, str]]) -> int:
        """The spaces' (app id, user id) revision: their newest change
        (`memory_agent.recall.delta`)."""
        return await self._store.revision(spaces)

    async def changes_header(
        self, spaces: Sequence[tuple[str, str]], since: int, up_to: int,
        kinds: Sequence[str] | None = None,
    ) -> str:
        """The delta header of the spaces' changes after revision `since` up to `up_to`, of
        memories of `kinds` only (when given)."""
        # A change may be told in each of the spaces (the header names it once).
        changes = await self._store.changes(
            spaces, since, up_to, MAX_CHANGES * len(spaces),
            None if kinds is None else frozenset(kinds),
        )
        return delta_header(since, changes)

    async def kinds_of(self, app_id: str, memory_ids: Sequence[int]) -> dict[int, str]:
        """The kinds of these memories of the app that are still kept."""
        return await self._store.kinds_of(app_id, memory_ids)

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
                store, app_id, memory_id, actor=actor, source=source, limit=self.memory_limit,
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
                store, app_id, memory_id, change, actor=actor, source=source,
                limit=self.memory_limit,
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
                source=source, limit=self.memory_limit,
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
    def erase_batch(self) -> int:
        """The most `erase_retired` erases at once: when it erased that many, more wait."""
        return ERASE_BATCH

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
        await store.forget_checks_of(app_id, user_id)
        await store.compact_search_index()
        return sum(not retired for _, _, retired in deleted)

    async def lock_space(self, app_id: str, user_id: str, *, tx: SqlTransaction) -> None:
        """Inside the caller's transaction: hold what memory writes to the space hold."""
        await self._store.within(tx).lock_space(app_id, user_id)

    async def erase_space(self, app_id: str, user_id: str, *, tx: SqlTransaction) -> int:
        """Erasing a person, inside the caller's transaction (which holds the app's row): the
        user's space and its history go, and the search index is compacted as a purge does.
        Returns how many memories went."""
        store = self._store.within(tx)
        erased = await store.erase_space(app_id, user_id)
        # A pair with a profile memory is kept with the other memory's space: a profile's
        # erasure takes the person's records in every app.
        await store.forget_checks_of(None if app_id == PROFILE_APP else app_id, user_id)
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
        prepared = transfer.checked(memories, max_chars=self._limits.max_chars, kinds=self.kinds)
        # A person's profile (`PROFILE_APP`) has its own cap.
        limit = self.profile_limit if app_id == PROFILE_APP else self.memory_limit
        async with self._db.transaction() as tx:
            return await transfer.import_into(
                self._store.within(tx), app_id, prepared, replacing=replace, limit=limit,
                source=EventSource(now_text(self._clock)), user_id=user_id,
            )

    # -- energy -----------------------------------------------------------------------------

    def get_energy_consumed_since_last_poll(self) -> int:
        """The energy the model calls used since the last poll (from any thread)."""
        return self._meter.take()

    def give_back_energy(self, units: int) -> None:
        """Polled units whose spending was not recorded (its transaction rolled back): the
        next poll hands them out again."""
        self._meter.give_back(units)
