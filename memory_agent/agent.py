"""The memory sub-agent as the host holds it: the memory job when a conversation ends
(`job.creation`, through the operator's writer), and the reads, steering, purges and transfers
of memories for the loop, the API and the console."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from memory_agent.consent.fields import DEFAULT_FIELDS, SensitiveFields, checked_fields
from memory_agent.consent.holding import Consent
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
    MemoryCreation,
    MemoryCreationRequest,
)
from memory_agent.job.outcome import JobRecord, MemoryCreated
from memory_agent.links.likeness import trigrams
from memory_agent.models import (
    ImportedMemory,
    Memory,
    MemoryActor,
)
from memory_agent.proposals import ProposalDesk
from memory_agent.reads import MemoryReads
from memory_agent.steering import changes as steering
from memory_agent.steering import transfer
from memory_agent.steering.changes import MemoryChange
from memory_agent.storage.store import PROFILE_APP, EventSource, MemoryStore
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.calibration import Calibration, calibrate
from memory_agent.writers.choice import writer_of
from memory_agent.writers.writer import WriterKind
from memory_agent.writers.written import GroundingRecord

log = logging.getLogger("mnemoloop.memory")

T = TypeVar("T")
# Memories the worker erases in one transaction when their grace period is over.
ERASE_BATCH = 200


class MemorySubAgent(MemoryReads):
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
        sensitive_fields: Sequence[str] = DEFAULT_FIELDS,
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
        # What in a person's profile changes only with their consent (`consent`).
        self.sensitive_fields = SensitiveFields(checked_fields(sensitive_fields))
        consent = Consent(self.sensitive_fields, self._clock) if sensitive_fields else None
        self._creation = MemoryCreation(
            database, self._store, self._writer, self._clock, self._meter,
            limits=self._limits, profile_limits=self._profile_limits, consent=consent,
        )
        self._consolidator = Consolidator(
            database, self._store, lambda: self._writer, self._clock, consent
        )
        self.proposals = ProposalDesk(
            database, self._store, self._creation, self._consolidator, self._clock
        )

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
        self, app_id: str | None, user_id: str | None, shares_profile: Callable[[str], bool],
        visited: Callable[[str], bool] = lambda app_id: True,
    ) -> list[Group]:
        """The groups of spaces a consolidation pass over the scope visits (an app's, a
        person's, or both; None: all), of the apps `visited` says, each person's profile
        crossed with their spaces in the apps that `shares_profile` says share it
        (`consolidation.consolidator`)."""
        return groups_of(
            await self._consolidator.spaces(app_id, user_id), shares_profile, visited
        )

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
        await store.forget_proposals_of(app_id, user_id)
        # No text of what went stays in this process either.
        trigrams.cache_clear()
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
        await store.forget_proposals_of(None if app_id == PROFILE_APP else app_id, user_id)
        trigrams.cache_clear()
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
