"""Durable memory jobs: queued when a conversation ends, claimed by a memory worker.

A claim is a lease: the claiming instance (`owner`) holds the job until `lease_until`,
renewing it while it works. A job whose lease ran out (its instance died or froze) is claimed
again by any instance. Every claim adds one to `attempts`, and the job's end (`done`,
`pending` again, `skipped`, `failed`) is recorded only by the claim that still holds it, so
a claim that lost its job can never end it twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from loop.backoff import backoff_seconds
from loop.leases import LeasedStore
from memory_agent import (
    ChatMessage,
    CompactionOutcome,
    format_timestamp,
    in_space,
    now_text,
    stored_outcome_label,
)

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
    # The space the memory goes to: its conversation's user, or "" for the app's shared one.
    user_id: str = ""

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
            row["user_id"],
        )


# Each outcome a compaction step has, with whose decision it can be (the FIFO fallback is the
# model writer's policy; an update is the model's word or the extractive writer's rules).
TALLIED_OUTCOMES = (
    ("delete", "model"), ("merge", "model"), ("delete", "policy"), ("merge", "policy"),
    ("fifo", "policy"), ("update", "model"), ("update", "policy"),
)


@dataclass(frozen=True)
class CompactionTally:
    """How compactions were decided: steps by what they did and whose decision it was
    ("delete by model", "merge by policy", "fifo by policy", "update by model"...), and why
    the model's decision was not used, by reason."""

    jobs: int
    outcomes: dict[str, int]
    fallback_reasons: dict[str, int]


@dataclass(frozen=True)
class ClaimedJob:
    """A job this instance holds, with what running it needs: its conversation's messages."""

    job: MemoryJob
    messages: list[ChatMessage]
    # A user's conversation of an app whose users' memories go to its shared space too.
    also_shared: bool = False
    # The app's default time to live of a new memory, in seconds (None: memories last).
    memory_ttl_seconds: int | None = None
    # A user's conversation of an app that shares its users' profiles.
    to_profile: bool = False


_RELEASE = "lease_owner = NULL, lease_until = NULL"
_HELD = "status = 'running' AND id = ? AND attempts = ?"


class MemoryJobStore(LeasedStore):
    async def recover_interrupted(self) -> int:
        """At the start of the only instance on a database (SQLite): jobs it left `running`
        go back to `pending` at once, not after their lease (`failed` once interrupted
        MAX_INTERRUPTIONS times)."""
        now = now_text(self._clock)
        await self._db.execute(
            "UPDATE memory_jobs SET status = 'failed', updated_at = ?,"
            f" last_error = 'interrupted ' || attempts || ' times', {_RELEASE}"
            " WHERE status = 'running' AND attempts >= ?",
            (now, MAX_INTERRUPTIONS),
        )
        return await self._db.execute(
            f"UPDATE memory_jobs SET status = 'pending', updated_at = ?, {_RELEASE}"
            " WHERE status = 'running'",
            (now,),
        )

    async def claim_next(self, busy_apps: Collection[str]) -> MemoryJob | None:
        """Take a due job of an app with no job running here and mark it `running` under
        this instance's lease: the oldest whose claim ran out (unless that happened
        MAX_INTERRUPTIONS times: `fail_exhausted` ends those), else the oldest pending one."""
        now = now_text(self._clock)
        placeholders = ",".join("?" * len(busy_apps))
        busy = f" AND app_id NOT IN ({placeholders})" if busy_apps else ""

        def oldest(where: str) -> str:
            # Each kind on its own walks the (status, id) index in order and stops at the
            # first it may take; one OR of both would collect every pending job and sort them.
            return (
                f"(SELECT id FROM memory_jobs WHERE {where}{busy}"
                f" ORDER BY id LIMIT 1{self._db.dialect.skip_locked})"
            )

        return await self._claim(
            "SELECT COALESCE("
            + oldest("status = 'running' AND lease_until < ? AND attempts < ?")
            + ", "
            + oldest("status = 'pending' AND (not_before IS NULL OR not_before <= ?)")
            + ")",
            (now, MAX_INTERRUPTIONS, *busy_apps, now, *busy_apps),
        )

    async def claim_for_conversation(self, conversation_id: str) -> MemoryJob | None:
        """Take this conversation's job if it is waiting (pending or deferred)."""
        return await self._claim(
            "SELECT id FROM memory_jobs WHERE conversation_id = ?"
            f" AND status IN ('pending', 'deferred'){self._db.dialect.skip_locked}",
            (conversation_id,),
        )

    async def _claim(self, select_id: str, params: tuple[object, ...]) -> MemoryJob | None:
        # One statement picks and marks the job, so two claimers can never take the same one.
        rows = await self._db.execute_returning(
            "UPDATE memory_jobs SET status = 'running', attempts = attempts + 1, updated_at = ?,"
            f" lease_owner = ?, lease_until = ? WHERE id = ({select_id}) RETURNING *",
            (now_text(self._clock), self.owner, self._lease_end(), *params),
        )
        return MemoryJob.from_row(rows[0]) if rows else None

    async def fail_exhausted(self) -> None:
        """A job whose claims ran out MAX_INTERRUPTIONS times (it kills or freezes whoever
        runs it) is failed rather than tried forever. `claim_next` never takes one; this
        records why (the worker calls it a few times a lease, not once per claim)."""
        now = now_text(self._clock)
        await self._db.execute(
            "UPDATE memory_jobs SET status = 'failed', updated_at = ?,"
            f" last_error = 'interrupted ' || attempts || ' times', {_RELEASE}"
            " WHERE status = 'running' AND lease_until < ? AND attempts >= ?",
            (now, now, MAX_INTERRUPTIONS),
        )

    async def renew(self, job: MemoryJob) -> bool:
        """Extend this claim's lease; False when the claim no longer holds the job."""
        renewed = await self._db.execute(
            f"UPDATE memory_jobs SET lease_until = ? WHERE {_HELD}",
            (self._lease_end(), job.id, job.attempts),
        )
        return renewed == 1


    async def mark_done(
        self,
        job: MemoryJob,
        *,
        memory_id: int | None,
        note: str,
        steps: Sequence[CompactionOutcome],
    ) -> bool:
        """Inside the memory's own transaction: `done`, if this claim still holds the job (it
        is running, and no later claim took it since: a purge may have cancelled it, a restart
        requeued it). False means the write must not happen."""
        done = await self._db.execute(
            "UPDATE memory_jobs SET status = 'done', last_error = NULL, memory_id = ?, note = ?,"
            f" steps = ?, updated_at = ?, {_RELEASE} WHERE {_HELD}",
            (
                memory_id,
                note,
                json.dumps([step.to_json() for step in steps]) if steps else None,
                now_text(self._clock),
                job.id,
                job.attempts,
            ),
        )
        return done == 1

    async def done_by(self, job: MemoryJob) -> bool:
        """Whether this claim ended the job `done` (its transaction committed)."""
        row = await self._db.fetch_one(
            "SELECT 1 FROM memory_jobs WHERE id = ? AND attempts = ? AND status = 'done'",
            (job.id, job.attempts),
        )
        return row is not None

    async def done_in_installed_app(self, job: MemoryJob) -> bool:
        """Whether the job is still `done` (not erased with its user) and its app installed:
        what a shared copy of its memory waits on."""
        row = await self._db.fetch_one(
            "SELECT 1 FROM memory_jobs j JOIN apps a ON a.app_id = j.app_id"
            " WHERE j.id = ? AND j.status = 'done' AND a.installed = 1",
            (job.id,),
        )
        return row is not None

    async def finish(self, job: MemoryJob, status: JobStatus, error: str | None = None) -> None:
        """End a running job that wrote nothing (skipped, failed), if this claim still holds
        it; a cancelled job stays so."""
        await self._db.execute(
            f"UPDATE memory_jobs SET status = ?, last_error = ?, updated_at = ?, {_RELEASE}"
            f" WHERE {_HELD}",
            (status, error, now_text(self._clock), job.id, job.attempts),
        )

    async def retry_later(self, job: MemoryJob, error: str, base_seconds: float) -> float:
        """Back to `pending`, due after the back-off; returns the delay in seconds."""
        delay = backoff_seconds(job.attempts, base_seconds)
        due = format_timestamp(self._clock.now() + timedelta(seconds=delay))
        await self._db.execute(
            "UPDATE memory_jobs SET status = 'pending', last_error = ?, not_before = ?,"
            f" updated_at = ?, {_RELEASE} WHERE {_HELD}",
            (error, due, now_text(self._clock), job.id, job.attempts),
        )
        return delay

    async def cancel_for_app(
        self, app_id: str, reason: str, *, user_id: str | None = None
    ) -> int:
        """Cancel the app's waiting and running jobs (a running one can no longer write): all
        of them, or those of one user's conversations."""
        space, params = in_space(user_id)
        return await self._db.execute(
            "UPDATE memory_jobs SET status = 'cancelled', last_error = ?, updated_at = ?,"
            f" {_RELEASE} WHERE app_id = ?{space}"
            " AND status IN ('pending', 'deferred', 'running')",
            (reason, now_text(self._clock), app_id, *params),
        )

    async def erase_steps(self, app_id: str, *, user_id: str | None = None) -> None:
        """Purge: compaction reasons may quote memories; the app's job records (or one
        user's) lose them."""
        space, params = in_space(user_id)
        await self._db.execute(
            f"UPDATE memory_jobs SET steps = NULL WHERE app_id = ?{space}", (app_id, *params)
        )

    async def defer_pending(self, reason: str) -> int:
        return await self._db.execute(
            "UPDATE memory_jobs SET status = 'deferred', last_error = ?, updated_at = ?"
            " WHERE status = 'pending'",
            (reason, now_text(self._clock)),
        )

    async def resume_deferred(self) -> int:
        return await self._db.execute(
            "UPDATE memory_jobs SET status = 'pending', last_error = NULL, updated_at = ?"
            " WHERE status = 'deferred'",
            (now_text(self._clock),),
        )

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

    async def compaction_tally(self, last_jobs: int = 1000) -> CompactionTally:
        """The compaction steps of the last `last_jobs` jobs that took any, counted."""
        rows = await self._db.fetch_all(
            "SELECT steps FROM memory_jobs WHERE steps IS NOT NULL"
            " ORDER BY id DESC LIMIT ?",
            (last_jobs,),
        )
        outcomes: Counter[str] = Counter(
            {f"{outcome} by {by}": 0 for outcome, by in TALLIED_OUTCOMES}
        )
        reasons: Counter[str] = Counter()
        for row in rows:
            for step in json.loads(row[0]):
                outcomes[f"{stored_outcome_label(step)} by {step['decidedBy']}"] += 1
                if step.get("fallbackReason"):
                    reasons[step["fallbackReason"]] += 1
        return CompactionTally(len(rows), dict(outcomes), dict(reasons.most_common()))

    async def counts_by_status(self) -> dict[str, int]:
        rows = await self._db.fetch_all("SELECT status, COUNT(*) FROM memory_jobs GROUP BY status")
        counts: dict[str, int] = dict.fromkeys(JOB_STATUSES, 0)
        counts.update({row[0]: row[1] for row in rows})
        return counts

