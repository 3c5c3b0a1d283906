"""What a memory job's transaction checks and returns: the job's outcome (`MemoryCreated`),
the host's record it commits with (`JobRecord`), the check made before each commit
(`CommitCheck`), and what a decision depends on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from memory_agent.core.energy import EnergyMeter
from memory_agent.core.errors import MemoryWriteRefused
from memory_agent.core.ports import Database, SqlTransaction, TransactionBody
from memory_agent.models import CompactionOutcome, Memory
from memory_agent.writers.steps import NEW_MEMORY_ID


@dataclass(frozen=True)
class MemoryCreated:
    """What a memory job did: the memory written (None when there was nothing worth keeping,
    or the new memory was deleted or folded into another), and the compaction steps."""

    memory: Memory | None
    compactions: list[CompactionOutcome]
    note: str
    # The text written for the conversation, even if compaction then deleted or folded it.
    content: str | None = None


class JobRecord(Protocol):
    """The host's record of one memory job, written in the transactions that write its
    memory: so a memory is written once, with its job done, or not at all."""

    async def done(self, tx: SqlTransaction, result: MemoryCreated, energy_units: int) -> bool:
        """Inside the memory's transaction: the job done with what it wrote, and
        `energy_units` (what its model calls cost so far) spent. False when the job is no
        longer held (a purge cancelled it, another instance took it over): nothing is
        written then."""
        ...

    async def copies_wanted(self, tx: SqlTransaction) -> bool:
        """Inside the transaction of a copy written after the job's own memory (the app's
        shared space, the person's profile): whether the job is still done and its app
        installed (a purge or an erasure meanwhile says no)."""
        ...


Allowed = Callable[[SqlTransaction], Awaitable[bool]]
T = TypeVar("T")


class CommitCheck:
    """What a memory's transaction checks before it commits: the job's record (the job done,
    its energy spent) for the job's own memory, or whether a copy is still wanted. Energy
    taken from the meter for a transaction that then rolls back goes back to it."""

    def __init__(
        self, *, record: JobRecord | None = None, meter: EnergyMeter | None = None,
        allowed: Allowed | None = None,
    ) -> None:
        self._record = record
        self._meter = meter
        self._allowed = allowed
        self._taken = 0

    async def check(self, tx: SqlTransaction, result: MemoryCreated) -> None:
        if self._record is not None:
            self._taken = self._meter.take() if self._meter is not None else 0
            held = await self._record.done(tx, result, self._taken)
        else:
            held = self._allowed is None or await self._allowed(tx)
        if not held:
            raise MemoryWriteRefused(
                "the memory job is no longer held (cancelled or taken over); nothing was written"
            )

    async def run(self, database: Database, body: TransactionBody[T]) -> T:
        try:
            return await database.run_transaction(body)
        except Exception:
            if self._taken and self._meter is not None:
                self._meter.give_back(self._taken)
            self._taken = 0
            raise



def decision_fingerprint(memories: Sequence[Memory]) -> list[tuple[object, ...]]:
    """What a decision depends on: each memory's version, and how it is steered (a pin or a
    new importance meanwhile makes the decision stale too)."""
    return [(m.id, m.updated_at, m.pinned, m.private, m.importance) for m in memories]



def fate_of_new(outcomes: Sequence[CompactionOutcome]) -> str:
    for outcome in outcomes:
        if outcome.action == "edit" and outcome.folded_memory_id == NEW_MEMORY_ID:
            return f"folded into memory {outcome.target_memory_id}"
    return "the new memory was the one compaction deleted"
