"""What a consolidation pass reads and keeps in the store (`memory_agent.consolidation`): the
spaces a pass covers, and the pairs it has asked about (their fingerprints, when)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.core.ports import SqlSession, of_app_and_user
from memory_agent.storage.history import live_condition


class ConsolidationReads:
    """The consolidation statements, on the session of the `MemoryStore` they are part of."""

    _db: SqlSession

    async def spaces_holding(
        self, now: str, app_id: str | None = None, user_id: str | None = None,
        *, at_least: int = 1,
    ) -> list[tuple[str, str]]:
        """The spaces (app, user) holding at least `at_least` live memories, of one app and
        one person when given, in order."""
        live, params = live_condition(now)
        condition, scope = "", []
        for column, value in (("app_id", app_id), ("user_id", user_id)):
            if value is not None:
                condition += f" AND {column} = ?"
                scope.append(value)
        rows = await self._db.fetch_all(
            f"SELECT app_id, user_id FROM app_memories WHERE 1 = 1{live}{condition}"
            " GROUP BY app_id, user_id HAVING COUNT(*) >= ? ORDER BY app_id, user_id",
            (*params, *scope, at_least),
        )
        return [(str(row[0]), str(row[1])) for row in rows]

    async def checked_since(self, fingerprints: Sequence[str], since: str) -> set[str]:
        """Those of `fingerprints` asked about after `since`."""
        if not fingerprints:
            return set()
        marks = ",".join("?" * len(fingerprints))
        rows = await self._db.fetch_all(
            f"SELECT fingerprint FROM consolidation_checks WHERE fingerprint IN ({marks})"
            " AND checked_at > ?",
            (*fingerprints, since),
        )
        return {str(row[0]) for row in rows}

    async def record_check(self, fingerprint: str, at: str, app_id: str, user_id: str) -> None:
        """A pair asked about at `at`, kept with the space (`app_id`, `user_id`) of one of
        its memories."""
        await self._db.execute(
            "INSERT INTO consolidation_checks (fingerprint, app_id, user_id, checked_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (fingerprint) DO UPDATE SET"
            " checked_at = excluded.checked_at",
            (fingerprint, app_id, user_id, at),
        )

    async def forget_checks_of(self, app_id: str | None, user_id: str | None) -> None:
        """Drop the records of pairs of the app's spaces, or of one person's (in the app,
        or, with `app_id` None, everywhere): a purge and an erasure leave nothing of them."""
        condition, params = of_app_and_user(app_id, user_id)
        await self._db.execute(f"DELETE FROM consolidation_checks WHERE {condition}", params)

    async def forget_checks_before(self, cutoff: str) -> int:
        """Drop the records of pairs asked about before `cutoff` (they may be asked again)."""
        return await self._db.execute(
            "DELETE FROM consolidation_checks WHERE checked_at <= ?", (cutoff,)
        )
