"""Consolidation passes (`memory_agent.consolidation`) as the host keeps them: requested (an
operator's `POST /consolidations`, or the daily schedule), claimed by one memory worker under a
lease as memory jobs are, and ended with what they did. A purge, an uninstall or an erasure
cancels the passes of that app or person, and a pass no longer held writes nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loop.leases import LeasedStore
from memory_agent import PROFILE_APP, PassFigures, now_text

PassStatus = Literal["pending", "running", "done", "failed", "cancelled"]
PassOrigin = Literal["request", "schedule"]
# A pass interrupted this many times (by crashes) is failed rather than tried forever.
MAX_INTERRUPTIONS = 3
_RELEASE = "lease_owner = NULL, lease_until = NULL"
_HELD = "status = 'running' AND id = ? AND attempts = ?"


@dataclass(frozen=True)
class ConsolidationPass:
    id: int
    app_id: str | None
    user_id: str | None
    origin: PassOrigin
    status: PassStatus
    requested_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    spaces: int
    pairs_asked: int
    # Pairs the writer could not judge (the model failed): asked again by the next pass.
    pairs_unjudged: int
    changes: int
    model_calls: int
    error: str | None

    @classmethod
    def from_row(cls, row: Any) -> ConsolidationPass:
        return cls(
            int(row["id"]), row["app_id"], row["user_id"], row["origin"], row["status"],
            row["requested_at"], row["started_at"], row["finished_at"], int(row["attempts"]),
            int(row["spaces"]), int(row["pairs_asked"]), int(row["pairs_unjudged"]),
            int(row["changes"]),
            int(row["model_calls"]), row["error"],
        )


class ConsolidationStore(LeasedStore):
    async def request(
        self, app_id: str | None, user_id: str | None, origin: PassOrigin = "request"
    ) -> ConsolidationPass:
        rows = await self._db.execute_returning(
            "INSERT INTO consolidations (app_id, user_id, origin, requested_at)"
            " VALUES (?, ?, ?, ?) RETURNING *",
            (app_id, user_id, origin, now_text(self._clock)),
        )
        return ConsolidationPass.from_row(rows[0])

    async def get(self, pass_id: int) -> ConsolidationPass | None:
        row = await self._db.fetch_one("SELECT * FROM consolidations WHERE id = ?", (pass_id,))
        return ConsolidationPass.from_row(row) if row else None

    async def recent(self, limit: int) -> list[ConsolidationPass]:
        rows = await self._db.fetch_all(
            "SELECT * FROM consolidations ORDER BY id DESC LIMIT ?", (limit,)
        )
        return [ConsolidationPass.from_row(row) for row in rows]

    async def request_scheduled(self, due: str) -> ConsolidationPass | None:
        """A scheduled pass over every space, unless one was asked for after `due`."""
        rows = await self._db.execute_returning(
            "INSERT INTO consolidations (app_id, user_id, origin, requested_at)"
            " SELECT NULL, NULL, 'schedule', ? WHERE NOT EXISTS (SELECT 1 FROM consolidations"
            " WHERE origin = 'schedule' AND requested_at > ?) RETURNING *",
            (now_text(self._clock), due),
        )
        return ConsolidationPass.from_row(rows[0]) if rows else None

    async def claim_next(self) -> ConsolidationPass | None:
        """Take the oldest pass whose claim ran out, else the oldest pending one, under this
        instance's lease (a pass interrupted `MAX_INTERRUPTIONS` times is failed instead)."""
        now = now_text(self._clock)
        await self._db.execute(
            "UPDATE consolidations SET status = 'failed', finished_at = ?,"
            f" error = 'interrupted ' || attempts || ' times', {_RELEASE}"
            " WHERE status = 'running' AND lease_until < ? AND attempts >= ?",
            (now, now, MAX_INTERRUPTIONS),
        )
        skip = self._db.dialect.skip_locked
        rows = await self._db.execute_returning(
            "UPDATE consolidations SET status = 'running', attempts = attempts + 1,"
            " started_at = COALESCE(started_at, ?), lease_owner = ?, lease_until = ?"
            " WHERE id = (SELECT COALESCE("
            "(SELECT id FROM consolidations WHERE status = 'running' AND lease_until < ?"
            f" ORDER BY id LIMIT 1{skip}),"
            f" (SELECT id FROM consolidations WHERE status = 'pending' ORDER BY id LIMIT 1{skip})"
            ")) RETURNING *",
            (now, self.owner, self._lease_end(), now),
        )
        return ConsolidationPass.from_row(rows[0]) if rows else None

    async def renew(self, held: ConsolidationPass) -> bool:
        renewed = await self._db.execute(
            f"UPDATE consolidations SET lease_until = ? WHERE {_HELD}",
            (self._lease_end(), held.id, held.attempts),
        )
        return renewed == 1

    async def still_held(self, held: ConsolidationPass) -> bool:
        """Inside a change's transaction: whether this claim still holds the pass (no purge,
        uninstall or erasure cancelled it, no other instance took it over)."""
        row = await self._db.fetch_one(
            f"SELECT id FROM consolidations WHERE {_HELD}", (held.id, held.attempts)
        )
        return row is not None

    async def change_allowed(
        self, held: ConsolidationPass, spaces: Sequence[tuple[str, str]]
    ) -> bool:
        """Inside a change's transaction: this claim still holds the pass, every app of
        `spaces` is installed, and where a person's profile is among them, shares it."""
        if not await self.still_held(held):
            return False
        apps = sorted({app for app, _ in spaces if app != PROFILE_APP})
        if not apps:
            return True
        rows = await self._db.fetch_all(
            f"SELECT app_id, installed, shares_profile FROM apps"
            f" WHERE app_id IN ({','.join('?' * len(apps))})",
            apps,
        )
        found = {str(row[0]): (bool(row[1]), bool(row[2])) for row in rows}
        crossing = any(app == PROFILE_APP for app, _ in spaces)
        return all(app in found and found[app][0] and (found[app][1] or not crossing)
                   for app in apps)

    async def record_progress(self, held: ConsolidationPass, figures: PassFigures) -> None:
        await self._db.execute(
            "UPDATE consolidations SET spaces = ?, pairs_asked = ?, pairs_unjudged = ?,"
            f" changes = ?, model_calls = ? WHERE {_HELD}",
            (figures.spaces, figures.pairs_asked, figures.unjudged, figures.changes,
             figures.model_calls, held.id, held.attempts),
        )

    async def finish(
        self, held: ConsolidationPass, status: PassStatus, figures: PassFigures,
        error: str | None = None,
    ) -> bool:
        """End the pass as `status` with what it did, if this claim still holds it."""
        ended = await self._db.execute(
            "UPDATE consolidations SET status = ?, finished_at = ?, spaces = ?,"
            " pairs_asked = ?, pairs_unjudged = ?, changes = ?, model_calls = ?, error = ?,"
            f" {_RELEASE} WHERE {_HELD}",
            (status, now_text(self._clock), figures.spaces, figures.pairs_asked,
             figures.unjudged, figures.changes, figures.model_calls, error, held.id,
             held.attempts),
        )
        return ended == 1

    async def cancel_for(
        self, reason: str, *, app_id: str | None = None, user_id: str | None = None
    ) -> int:
        """Cancel the waiting and running passes over the app, or over the person (in the
        app, when both are given)."""
        condition, params = "", []
        for column, value in (("app_id", app_id), ("user_id", user_id)):
            if value is not None:
                condition += f" AND {column} = ?"
                params.append(value)
        return await self._db.execute(
            "UPDATE consolidations SET status = 'cancelled', error = ?, finished_at = ?,"
            f" {_RELEASE} WHERE status IN ('pending', 'running'){condition}",
            (reason, now_text(self._clock), *params),
        )

    async def recover_interrupted(self) -> int:
        """At the start of the only instance on a database: passes it left running wait
        again at once."""
        return await self._db.execute(
            f"UPDATE consolidations SET status = 'pending', {_RELEASE}"
            " WHERE status = 'running'"
        )

