"""Durable memory jobs: queued when a conversation ends, claimed by the memory worker."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from loop.backoff import backoff_seconds
from memory_agent.models import CompactionOutcome
from memory_agent.ports import Clock, Database, SqlTransaction, format_timestamp

JobStatus = Literal["pending", "running", "deferred", "done", "skipped", "failed", "cancelled"]
JOB_STATUSES: tuple[JobStatus, ...] = (
    "pending",
    "running",
    "deferred",
    "done",
    "skipped",
    "failed",
    "cancelled",
)
# A job interrupted this many times (by crashes) is failed rather than tried forever.
MAX_INTERRUPTIONS = 5


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
    memory_id: int | None = None
    note: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    not_before: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> MemoryJob:
        return cls(
            row["id"],
            row["app_id"],
            row["conversation_id"],
            row["status"],
            row["attempts"],
            row["last_error"],
            row["created_at"],
            row["updated_at"],
            row["memory_id"],
            row["note"],
            json.loads(row["steps"]) if row["steps"] else [],
            row["not_before"],
        )


class MemoryJobStore:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def recover_interrupted(self) -> int:
        """Jobs left `running` by a crash go back to `pending` (`failed` once interrupted
        MAX_INTERRUPTIONS times)."""
        now = self._now()
        async with self._db.transaction() as tx:
            await tx.execute(
                "UPDATE memory_jobs SET status = 'failed', updated_at = ?,"
                " last_error = 'interrupted ' || attempts || ' times'"
                " WHERE status = 'running' AND attempts >= ?",
                (now, MAX_INTERRUPTIONS),
            )
            result = await tx.execute(
                "UPDATE memory_jobs SET status = 'pending', updated_at = ?"
                " WHERE status = 'running'",
                (now,),
            )
        return result.rowcount

    async def claim_next(self, busy_apps: Collection[str]) -> MemoryJob | None:
        """Take the oldest due pending job of an app with no job running; mark it `running`."""
        placeholders = ",".join("?" * len(busy_apps))
        busy = f"AND app_id NOT IN ({placeholders})" if busy_apps else ""
        return await self._claim(
            "SELECT id FROM memory_jobs WHERE status = 'pending'"
            f" AND (not_before IS NULL OR not_before <= ?) {busy} ORDER BY id LIMIT 1",
            (self._now(), *busy_apps),
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

    async def mark_done(
        self,
        tx: SqlTransaction,
        job: MemoryJob,
        *,
        memory_id: int | None,
        note: str,
        steps: Sequence[CompactionOutcome],
    ) -> bool:
        """Inside the memory's own transaction: `done`, if this claim still holds the job (it
        is running, and no later claim took it since: a purge may have cancelled it, a restart
        requeued it). False means the write must not happen."""
        result = await tx.execute(
            "UPDATE memory_jobs SET status = 'done', last_error = NULL, memory_id = ?, note = ?,"
            " steps = ?, updated_at = ? WHERE id = ? AND status = 'running' AND attempts = ?",
            (
                memory_id,
                note,
                json.dumps([step.to_json() for step in steps]) if steps else None,
                self._now(),
                job.id,
                job.attempts,
            ),
        )
        return result.rowcount == 1

    async def finish(self, job: MemoryJob, status: JobStatus, error: str | None = None) -> None:
        """End a running job that wrote nothing (skipped, failed), if this claim still holds
        it; a cancelled job stays so."""
        await self._db.execute(
            "UPDATE memory_jobs SET status = ?, last_error = ?, updated_at = ?"
            " WHERE id = ? AND status = 'running' AND attempts = ?",
            (status, error, self._now(), job.id, job.attempts),
        )

    async def retry_later(self, job: MemoryJob, error: str, base_seconds: float) -> float:
        """Back to `pending`, due after the back-off; returns the delay in seconds."""
        delay = backoff_seconds(job.attempts, base_seconds)
        due = format_timestamp(self._clock.now() + timedelta(seconds=delay))
        await self._db.execute(
            "UPDATE memory_jobs SET status = 'pending', last_error = ?, not_before = ?,"
            " updated_at = ? WHERE id = ? AND status = 'running' AND attempts = ?",
            (error, due, self._now(), job.id, job.attempts),
        )
        return delay

    async def cancel_for_app(self, tx: SqlTransaction, app_id: str, reason: str) -> int:
        """Cancel the app's waiting and running jobs (a running one can no longer write)."""
        result = await tx.execute(
            "UPDATE memory_jobs SET status = 'cancelled', last_error = ?, updated_at = ?"
            " WHERE app_id = ? AND status IN ('pending', 'deferred', 'running')",
            (reason, self._now(), app_id),
        )
        return result.rowcount

    async def erase_steps(self, tx: SqlTransaction, app_id: str) -> None:
        """Purge: compaction reasons may quote memories; the app's job records lose them."""
        await tx.execute("UPDATE memory_jobs SET steps = NULL WHERE app_id = ?", (app_id,))

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
