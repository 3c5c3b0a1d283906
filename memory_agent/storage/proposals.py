"""Proposed changes to a person's sensitive profile facts (`memory_agent.consent`), as the
store keeps them: each with what it would change (`change`, read back only to apply it),
its status, and who answered it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from memory_agent.core.ports import SqlSession, of_app_and_user
from memory_agent.models import ProfileProposal, ProposalStatus

_COLUMNS = (
    "id, user_id, app_id, origin, fields, content, before, status, proposed_at, lapses_at,"
    " decided_at, decided_through, memory_id, conversation_id"
)


class ProfileProposals:
    """The proposals' statements, on the session of the `MemoryStore` they are part of."""

    _db: SqlSession

    async def propose(
        self, *, user_id: str, app_id: str, origin: Literal["memory", "consolidation"],
        fields: Sequence[str], content: str | None, before: str | None,
        change: dict[str, Any], at: str, lapses_at: str, conversation_id: str | None = None,
        job_id: int | None = None,
    ) -> int:
        """The proposal's id: a new one, or the person's earlier one of the same change
        still pending or declined (a person is not asked again what they were asked or
        refused)."""
        earlier = await self._db.fetch_one(
            "SELECT id FROM profile_proposals WHERE user_id = ? AND origin = ?"
            " AND status IN ('pending', 'declined') AND content IS NOT DISTINCT FROM ?"
            " AND before IS NOT DISTINCT FROM ? ORDER BY id DESC LIMIT 1",
            (user_id, origin, content, before),
        )
        if earlier is not None:
            return int(earlier[0])
        rows = await self._db.execute_returning(
            "INSERT INTO profile_proposals (user_id, app_id, origin, fields, content, before,"
            " change, conversation_id, job_id, proposed_at, lapses_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (user_id, app_id, origin, ",".join(sorted(fields)), content, before,
             json.dumps(change), conversation_id, job_id, at, lapses_at),
        )
        return int(rows[0][0])

    async def proposals_of(
        self, user_id: str, status: ProposalStatus | None = None, limit: int = 100
    ) -> list[ProfileProposal]:
        """The person's proposals, the newest first (only those of `status`, when given)."""
        condition, params = "user_id = ?", [user_id]
        if status is not None:
            condition += " AND status = ?"
            params.append(status)
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM profile_proposals WHERE {condition}"
            " ORDER BY id DESC LIMIT ?",
            [*params, limit],
        )
        return [_proposal(row) for row in rows]

    async def proposal(
        self, user_id: str, proposal_id: int, *, lock: bool = False
    ) -> tuple[ProfileProposal, dict[str, Any]] | None:
        """One of the person's proposals, with the change it would make (its row held until
        the transaction ends, with `lock`)."""
        held = self._db.dialect.lock_rows if lock else ""
        row = await self._db.fetch_one(
            f"SELECT {_COLUMNS}, change FROM profile_proposals WHERE user_id = ? AND id = ?"
            f"{held}",
            (user_id, proposal_id),
        )
        return None if row is None else (_proposal(row), json.loads(row[-1]))

    async def decide(
        self, proposal_id: int, status: ProposalStatus, at: str, through: str,
        memory_id: int | None = None,
    ) -> bool:
        """The pending proposal answered at `at`; False when it was no longer pending, or
        its time was over."""
        changed = await self._db.execute(
            "UPDATE profile_proposals SET status = ?, decided_at = ?, decided_through = ?,"
            " memory_id = ? WHERE id = ? AND status = 'pending' AND lapses_at > ?",
            (status, at, through, memory_id, proposal_id, at),
        )
        return changed > 0

    async def lapse_due(self, now: str, user_id: str | None = None) -> int:
        """Every pending proposal whose time is over lapses (the person's only, when given)."""
        condition, params = "status = 'pending' AND lapses_at <= ?", [now]
        if user_id is not None:
            condition += " AND user_id = ?"
            params.append(user_id)
        return await self._db.execute(
            "UPDATE profile_proposals SET status = 'lapsed', decided_at = ?,"
            f" decided_through = 'lapsed' WHERE {condition}",
            [now, *params],
        )

    async def forget_proposals_of(self, app_id: str | None, user_id: str | None) -> None:
        """Drop the proposals that came from the app, or the person's (from the app, or with
        `app_id` None, from everywhere): a purge and an erasure leave nothing of them."""
        condition, params = of_app_and_user(app_id, user_id)
        await self._db.execute(f"DELETE FROM profile_proposals WHERE {condition}", params)


def _proposal(row: Sequence[Any]) -> ProfileProposal:
    return ProfileProposal(
        id=int(row[0]), user_id=row[1], app_id=row[2], origin=row[3],
        fields=tuple(row[4].split(",")) if row[4] else (), content=row[5], before=row[6],
        status=row[7], proposed_at=row[8], lapses_at=row[9], decided_at=row[10],
        decided_through=row[11], memory_id=None if row[12] is None else int(row[12]),
        conversation_id=row[13],
    )
