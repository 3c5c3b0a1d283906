"""Durable memory jobs: queued when a conversation ends, claimed by the memory worker."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from memory_agent.ports import Clock, Database, format_timestamp

JobStatus = Literal["pending", "running", "deferred", "done", "skipped", "failed"]
JOB_STATUSES: tuple[JobStatus, ...] = (
    "pending",
    "running",
    "deferred",
    "done",
    "skipped",
    "failed",
)
# A job interrupted this many times (by crashes) is failed rather than tried forever.
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class MemoryJob:
    id: int
    app_id: str
    conversation_id: str
    status: JobStatus
    attempts: int
    last_error: str | None
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> MemoryJob:
        return cls(
            row["id"],
            row["app_id"],
            row["conversation_id"],
            row["status"],
            row["attempts"],
            row["last_error"],
            row["created_at"],
            row["updated_at"],
        )


class MemoryJobStore:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def recover_interrupted(self) -> int:
        """Jobs left `running` by a crash go back to `pending` (or `failed` after MAX_ATTEMPTS)."""
        now = self._now()
        async with self._db.transaction() as tx:
            await tx.execute(
                "UPDATE memory_jobs SET status = 'failed', updated_at = ?,"
                " last_error = 'interrupted ' || attempts || ' times'"
                " WHERE status = 'running' AND attempts >= ?",
                (now, MAX_ATTEMPTS),
            )
            result = await tx.execute(
                "UPDATE memory_jobs SET status = 'pending', updated_at = ?"
                " WHERE status = 'running'",
                (now,),
            )
        return result.rowcount

    async def claim_next(self, busy_apps: Collection[str]) -> MemoryJob | None:
        """Take the oldest pending job of an app with no job running, and mark it `running`."""
        placeholders = ",".join("?" * len(busy_apps))
        busy = f"AND app_id NOT IN ({placeholders})" if busy_apps else ""
        return await self._claim(
            f"SELECT id FROM memory_jobs WHERE status = 'pending' {busy} ORDER BY id LIMIT 1",
            tuple(busy_apps),
        )

    async def claim_for_conversation(self, conversation_id: str) -> MemoryJob | None:
        """Take this conversation's job if it is waiting (pending or deferred)."""
        return await self._claim(
            "SELECT id FROM memory_jobs WHERE conversation_id = ?"
            " AND status IN ('pending', 'deferred')",
            (conversation_id,),
        )

    async def _claim(self, select_id: str, params: tuple[str, ...]) -> MemoryJob | None:
        # One statement picks and marks the job, so two claimers can never take the same one.
        rows = await self._db.execute_returning(
            "UPDATE memory_jobs SET status = 'running', attempts = attempts + 1, updated_at = ?"
            f" WHERE id = ({select_id}) RETURNING *",
            (self._now(), *params),
        )
        return MemoryJob.from_row(rows[0]) if rows else None

    async def finish(self, job_id: int, status: JobStatus, error: str | None = None) -> None:
        await self._db.execute(
            "UPDATE memory_jobs SET status = ?, last_error = ?, updated_at = ? WHERE id = ?",
            (status, error, self._now(), job_id),
        )

    async def defer_pending(self, reason: str) -> int:
        result = await self._db.execute(
            "UPDATE memory_jobs SET status = 'deferred', last_error = ?, updated_at = ?"
            " WHERE status = 'pending'",
            (reason, self._now()),
        )
        return result.rowcount

    async def resume_deferred(self) -> int:
        result = await self._db.execute(
            "UPDATE memory_jobs SET status = 'pending', last_error = NULL, updated_at = ?"
            " WHERE status = 'deferred'",
            (self._now(),),
        )
        return result.rowcount

    async def has_waiting(self) -> bool:
        row = await self._db.fetch_one(
            "SELECT 1 FROM memory_jobs WHERE status IN ('pending', 'deferred') LIMIT 1"
        )
        return row is not None

    async def get(self, job_id: int) -> MemoryJob | None:
        row = await self._db.fetch_one("SELECT * FROM memory_jobs WHERE id = ?", (job_id,))
        return MemoryJob.from_row(row) if row else None

    async def for_conversation(self, conversation_id: str) -> MemoryJob | None:
        row = await self._db.fetch_one(
            "SELECT * FROM memory_jobs WHERE conversation_id = ?", (conversation_id,)
        )
        return MemoryJob.from_row(row) if row else None

    async def list(
        self, *, app_id: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[MemoryJob]:
        clauses, params = [], []
        if app_id is not None:
            clauses.append("app_id = ?")
            params.append(app_id)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = await self._db.fetch_all(
            f"SELECT * FROM memory_jobs {where} ORDER BY id DESC LIMIT ?", (*params, limit)
        )
        return [MemoryJob.from_row(row) for row in rows]

    async def counts_by_status(self) -> dict[str, int]:
        rows = await self._db.fetch_all("SELECT status, COUNT(*) FROM memory_jobs GROUP BY status")
        counts: dict[str, int] = dict.fromkeys(JOB_STATUSES, 0)
        counts.update({row[0]: row[1] for row in rows})
        return counts

    def _now(self) -> str:
        return format_timestamp(self._clock.now())
