"""The energy budget: a level that refills continuously up to capacity, kept in the database
and shared by every instance using it.

A charge refills the level for the time gone by and spends from it in one statement, so
instances charging at once never lose each other's spending. Each instance keeps the last
state it read or wrote; on a shared database `refresh` reads the others' spending before a
decision that depends on it (whether memory work may run). The only instance on its
database knows every charge already and reads nothing.

Spending is also counted by the minute for the console's chart. Each instance adds up its
spending in memory and writes it every minute (`write_spending_every`, while it runs), when it
reads the chart and on close: a statement a minute, not one per charge. The totals above are
exact; the chart may miss the last minute of an instance that was killed. Minutes older than
`KEEP_SPENDING_SECONDS` are deleted as new ones are written.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import anyio

from memory_agent import Clock, Database, Row, SqlSession, now_text

log = logging.getLogger("mnemoloop")

SpendingKind = Literal["memory", "conversation"]
KEEP_SPENDING_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class EnergyReport:
    capacity: float
    level: float
    memory_spent: int
    conversation_spent: int


@dataclass(frozen=True)
class MinuteSpending:
    """What was spent in the minute that starts at `minute_s` (seconds since 1970)."""

    minute_s: int
    memory: int
    conversation: int


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
        # This instance's spending not yet written to `energy_spending`, by (minute, kind).
        self._unwritten: Counter[tuple[int, SpendingKind]] = Counter()

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
        self.remember(await self.charge_within(self._db, kind, units), kind, units)

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

    async def write_spending(self) -> None:
        """Add this instance's unwritten spending to the minutes' rows."""
        unwritten, self._unwritten = self._unwritten, Counter()
        if not unwritten:
            return
        try:
            async with self._db.transaction() as tx:
                oldest_kept = int(self._clock.now().timestamp()) - KEEP_SPENDING_SECONDS
                await tx.execute("DELETE FROM energy_spending WHERE minute_s < ?", (oldest_kept,))
                for (minute, kind), units in sorted(unwritten.items()):
                    await tx.execute(
                        "INSERT INTO energy_spending (minute_s, kind, units) VALUES (?, ?, ?)"
                        " ON CONFLICT (minute_s, kind)"
                        " DO UPDATE SET units = energy_spending.units + excluded.units",
                        (minute, kind, units),
                    )
        except BaseException:
            self._unwritten.update(unwritten)  # kept for the next try
            raise

    async def write_spending_every(self, seconds: float = 60.0) -> None:
        """Write this instance's spending every `seconds` until cancelled, so that a chart read
        on another instance shows it even while this one spends nothing more."""
        while True:
            await anyio.sleep(seconds)
            await self._write_spending_or_keep()

    async def _write_spending_or_keep(self) -> None:
        try:
            await self.write_spending()
        except Exception as error:
            log.warning("energy: spending by the minute kept for the next try: %s", error)

    async def spending(self, minutes: int) -> list[MinuteSpending]:
        """Every instance's spending in each of the last `minutes` minutes (this one
        included), oldest first; a minute without spending is there with zeros."""
        await self.write_spending()
        last = int(self._clock.now().timestamp() // 60) * 60
        first = last - 60 * (minutes - 1)
        rows = await self._db.fetch_all(
            "SELECT minute_s, kind, units FROM energy_spending WHERE minute_s >= ?", (first,)
        )
        spent: Counter[tuple[int, str]] = Counter({(int(r[0]), r[1]): int(r[2]) for r in rows})
        return [
            MinuteSpending(m, spent[(m, "memory")], spent[(m, "conversation")])
            for m in range(first, last + 1, 60)
        ]

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

    def remember(self, state: Row | None, kind: SpendingKind, units: int) -> None:
        """After a committed `charge_within`: the state it returned is the last one known,
        and its units count in this minute's spending (None: it spent nothing)."""
        if state is not None:
            self._remember(state)
            minute = int(self._clock.now().timestamp() // 60) * 60
            self._unwritten[(minute, kind)] += units

    def _remember(self, row: Row) -> None:
        self._level = min(float(row[0]), self.capacity)
        self._as_of = float(row[1])
        self._spent = {"memory": int(row[2]), "conversation": int(row[3])}
