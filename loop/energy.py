"""The energy budget: a level that refills continuously up to capacity, kept in the database
and shared by every instance using it.

A charge refills the level for the time gone by and spends from it in one statement, so
instances charging at once never lose each other's spending. Each instance keeps the last
state it read or wrote; on a shared database `refresh` reads the others' spending before a
decision that depends on it (whether memory work may run). The only instance on its
database knows every charge already and reads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory_agent.ports import Clock, Database, Row, SqlSession, now_text

SpendingKind = Literal["memory", "conversation"]


@dataclass(frozen=True)
class EnergyReport:
    capacity: float
    level: float
    memory_spent: int
    conversation_spent: int


_STATE = "level, as_of_s, memory_spent, conversation_spent"


class EnergyBudget:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        *,
        capacity: float,
        refill_per_second: float,
        memory_floor: float,
        shared: bool = True,
    ) -> None:
        self._db = database
        self._shared = shared
        self._clock = clock
        self.capacity = capacity
        self.refill_per_second = refill_per_second
        self.memory_floor = memory_floor
        self._level = capacity
        self._as_of = clock.now().timestamp()
        self._spent = {"memory": 0, "conversation": 0}

    async def load(self) -> None:
        """Store a full budget on the database's first start; read the stored state."""
        await self._db.execute(
            "INSERT INTO energy_state (id, level, updated_at, as_of_s) VALUES (1, ?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING",
            (float(self.capacity), now_text(self._clock), self._clock.now().timestamp()),
        )
        await self._read()

    async def refresh(self) -> None:
        """Read the shared state (other instances' spending included), on a shared database."""
        if self._shared:
            await self._read()

    async def _read(self) -> None:
        row = await self._db.fetch_one(f"SELECT {_STATE} FROM energy_state WHERE id = 1")
        if row is not None:
            self._remember(row)

    @property
    def level(self) -> float:
        """The level now, as of the last state this instance read or wrote."""
        elapsed = max(self._clock.now().timestamp() - self._as_of, 0.0)
        return min(self.capacity, self._level + elapsed * self.refill_per_second)

    async def charge(self, kind: SpendingKind, units: int) -> None:
        """Spend `units`; the level does not go below zero, the spending is kept in full."""
        self.remember(await self.charge_within(self._db, kind, units))

    async def charge_within(self, tx: SqlSession, kind: SpendingKind, units: int) -> Row | None:
        """Spend `units` inside `tx` (with the work that used them); returns the state it
        leaves, for `remember` once `tx` has committed. It changes nothing of this
        object, so it may run on the database's thread."""
        if units <= 0:
            return None
        greatest, least = tx.dialect.greatest, tx.dialect.least
        now = self._clock.now().timestamp()
        rows = await tx.execute_returning(
            f"UPDATE energy_state SET level = {greatest}(0.0, {least}(?,"
            f" level + {greatest}(0.0, ? - as_of_s) * ?) - ?),"
            f" as_of_s = {greatest}(as_of_s, ?), updated_at = ?,"
            " memory_spent = memory_spent + ?, conversation_spent = conversation_spent + ?"
            f" WHERE id = 1 RETURNING {_STATE}",
            (
                float(self.capacity),
                now,
                float(self.refill_per_second),
                float(units),
                now,
                now_text(self._clock),
                units if kind == "memory" else 0,
                units if kind == "conversation" else 0,
            ),
        )
        return rows[0] if rows else None

    async def set_level(self, level: float) -> None:
        """For operators and tests: put the level at `level` now."""
        rows = await self._db.execute_returning(
            f"UPDATE energy_state SET level = ?, as_of_s = ?, updated_at = ? WHERE id = 1"
            f" RETURNING {_STATE}",
            (
                max(0.0, min(self.capacity, float(level))),
                self._clock.now().timestamp(),
                now_text(self._clock),
            ),
        )
        if rows:
            self._remember(rows[0])

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

    async def report(self) -> EnergyReport:
        await self.refresh()
        return EnergyReport(
            self.capacity, round(self.level, 3), self._spent["memory"], self._spent["conversation"]
        )

    def remember(self, state: Row | None) -> None:
        """Take the state a committed `charge_within` returned as the last one known (None:
        it spent nothing)."""
        if state is not None:
            self._remember(state)

    def _remember(self, row: Row) -> None:
        self._level = min(float(row[0]), self.capacity)
        self._as_of = float(row[1])
        self._spent = {"memory": int(row[2]), "conversation": int(row[3])}
