"""The energy budget: a level that refills continuously up to capacity, kept in the database.

Every charge updates the budget in memory at once; the stored copy is written at most once
per `SAVE_INTERVAL` and when the service closes, since a write per LLM call would cost more
than the call's bookkeeping is worth. A crash can thus lose the record of the last second's
spending; a restart loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memory_agent.ports import Clock, Database, format_timestamp, parse_timestamp

SpendingKind = Literal["memory", "conversation"]
SAVE_INTERVAL = timedelta(seconds=1)


@dataclass(frozen=True)
class EnergyReport:
    capacity: float
    level: float
    memory_spent: int
    conversation_spent: int


class EnergyBudget:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        *,
        capacity: float,
        refill_per_second: float,
        memory_floor: float,
    ) -> None:
        self._db = database
        self._clock = clock
        self.capacity = capacity
        self.refill_per_second = refill_per_second
        self.memory_floor = memory_floor
        self._level = capacity
        self._as_of = clock.now()
        self._spent = {"memory": 0, "conversation": 0}
        self._saved_at: datetime | None = None
        self._unsaved = False

    async def load(self) -> None:
        """Read the stored state, or store a full budget on first start."""
        row = await self._db.fetch_one("SELECT * FROM energy_state WHERE id = 1")
        if row is None:
            await self._save()
            return
        self._level = min(float(row["level"]), self.capacity)
        self._as_of = parse_timestamp(row["updated_at"])
        self._spent = {"memory": row["memory_spent"], "conversation": row["conversation_spent"]}

    @property
    def level(self) -> float:
        elapsed = max((self._clock.now() - self._as_of).total_seconds(), 0.0)
        return min(self.capacity, self._level + elapsed * self.refill_per_second)

    async def charge(self, kind: SpendingKind, units: int) -> None:
        """Spend `units`; the level does not go below zero, the spending is kept in full."""
        if units <= 0:
            return
        now = self._clock.now()
        self._level = max(0.0, self.level - units)
        self._as_of = now
        self._spent[kind] += units
        self._unsaved = True
        if self._saved_at is None or now - self._saved_at >= SAVE_INTERVAL:
            await self._save()

    async def flush(self) -> None:
        """Write what is not stored yet (on close)."""
        if self._unsaved:
            await self._save()

    async def set_level(self, level: float) -> None:
        """For operators and tests: put the level at `level` now."""
        self._level = max(0.0, min(self.capacity, level))
        self._as_of = self._clock.now()
        await self._save()

    def memory_work_allowed(self) -> bool:
        return self.level > self.memory_floor * self.capacity

    def seconds_until_memory_work(self) -> float:
        """How long until the level rises above the floor (0 if it is there already)."""
        missing = self.memory_floor * self.capacity - self.level
        if missing < 0:
            return 0.0
        if self.refill_per_second == 0:
            return float("inf")
        return missing / self.refill_per_second + 0.01

    def report(self) -> EnergyReport:
        return EnergyReport(
            self.capacity, round(self.level, 3), self._spent["memory"], self._spent["conversation"]
        )

    async def _save(self) -> None:
        self._saved_at = self._clock.now()
        self._unsaved = False
        await self._db.execute(
            "INSERT INTO energy_state (id, level, updated_at, memory_spent, conversation_spent)"
            " VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET level = excluded.level,"
            " updated_at = excluded.updated_at, memory_spent = excluded.memory_spent,"
            " conversation_spent = excluded.conversation_spent",
            (
                self._level,
                format_timestamp(self._as_of),
                self._spent["memory"],
                self._spent["conversation"],
            ),
        )
