"""Runs memory jobs in order: one at a time per app, many apps at once, above the energy floor."""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskGroup

from loop.conversations.store import ConversationStore
from loop.jobs.consolidating import ConsolidationRunner
from loop.jobs.record import ClaimedJobRecord
from loop.jobs.store import ClaimedJob, JobStatus, MemoryJob, MemoryJobStore
from loop.leases import while_renewing
from loop.operations.energy import EnergyBudget
from loop.operations.metrics import Metrics
from loop.wakeups import InFlight
from memory_agent import (
    MemoryCreationRequest,
    MemorySubAgent,
    MemoryWriteRefused,
    MnemoloopError,
)

log = logging.getLogger("mnemoloop.worker")


class MemoryWorker:
    def __init__(
        self,
        *,
        jobs: MemoryJobStore,
        conversations: ConversationStore,
        agent: MemorySubAgent,
        energy: EnergyBudget,
        metrics: Metrics,
        max_concurrent: int,
        attempts: int = 5,
        retry_base_seconds: float = 5.0,
        poll_interval: float = 0.5,
        recover_on_start: bool = True,
        keep_conversation_secrets: bool = False,
        consolidation: ConsolidationRunner | None = None,
    ) -> None:
        self._jobs = jobs
        self._keep_secrets = keep_conversation_secrets
        self._conversations = conversations
        self._agent = agent
        self._energy = energy
        self._metrics = metrics
        self._max_concurrent = max_concurrent
        self._attempts = attempts
        self._retry_base = retry_base_seconds
        self._poll_interval = poll_interval
        self._recover_on_start = recover_on_start
        self._running_apps = InFlight()
        self._stopping = False
        self.running = False  # inside `run`: taking jobs
        # Jobs may have been deferred before a restart; after one resume we know.
        self._may_have_deferred = True
        self._next_exhaustion_check = 0.0  # on anyio's clock
        self._next_erasure = 0.0  # on anyio's clock
        # Erasing what the grace period no longer keeps: often enough that nothing outstays
        # it by much, never more than once a second.
        self._erase_every = min(60.0, max(agent.grace_seconds / 4, 1.0))
        # Consolidation passes, run when no memory job waits (`loop.jobs.consolidating`).
        self._consolidation = consolidation
        self._next_pass_look = 0.0  # on anyio's clock
        self._next_schedule_look = 0.0  # on anyio's clock

    async def run(self) -> None:
        # The only instance on its database takes back at once what it left `running`;
        # instances sharing one take over jobs whose lease ran out.
        if self._recover_on_start:
            recovered = await self._jobs.recover_interrupted()
            if recovered:
                log.info("requeued %d memory jobs interrupted by a stop", recovered)
            if self._consolidation is not None:
                await self._consolidation.recover_interrupted()
        self.running = True
        try:
            await self._take_jobs_until_stopped()
        finally:
            self.running = False

    async def _take_jobs_until_stopped(self) -> None:
        async with anyio.create_task_group() as group:
            while not self._stopping:
                try:
                    wait = await self._start_ready_jobs(group)
                except MnemoloopError as error:
                    # The database is busy or gone for a moment: say so, and look again.
                    log.error("the memory worker could not look for jobs: %s", error)
                    self._metrics.loop_errors.inc()
                    wait = self._poll_interval * 4
                await self._conversations.job_queued.wait(wait)

    async def drain(self, grace: float) -> None:
        """Stop taking jobs; wait up to `grace` seconds for running ones (the rest are requeued)."""
        self._stopping = True
        self._conversations.job_queued.set()
        with anyio.move_on_after(grace):
            await self._running_apps.wait_empty()

    async def _start_ready_jobs(self, group: TaskGroup) -> float:
        """Start what may start now; return how long to wait before looking again."""
        await self._erase_retired_now_and_then()
        await self._energy.refresh()  # other instances spend from the same budget
        if not self._energy.memory_work_allowed():
            deferred = await self._jobs.defer_pending(
                f"energy {self._energy.level:.0f} is below the memory floor"
            )
            if deferred:
                self._may_have_deferred = True
                log.info("deferred %d memory jobs until energy recovers", deferred)
            return min(max(self._energy.seconds_until_memory_work(), 0.05), 5.0)
        if self._may_have_deferred:
            self._may_have_deferred = False
            resumed = await self._jobs.resume_deferred()
            if resumed:
                log.info("resumed %d deferred memory jobs", resumed)
        await self._fail_exhausted_now_and_then()
        idle = True
        while len(self._running_apps) < self._max_concurrent and not self._stopping:
            claimed = await self.claim_next()
            if claimed is None:
                break
            idle = False
            self._running_apps.add(claimed.job.app_id)
            group.start_soon(self._run_and_release, claimed)
        if idle and not self._running_apps:
            await self._consolidate_when_idle(group)
        return self._poll_interval

    async def _consolidate_when_idle(self, group: TaskGroup) -> None:
        """With no memory job waiting or running: ask for the scheduled pass when it is due
        (looked at once a minute), and run the next waiting pass (looked for every two
        seconds), one at a time."""
        runner = self._consolidation
        if runner is None or runner.busy or self._stopping:
            return
        now = anyio.current_time()
        if now >= self._next_schedule_look:
            self._next_schedule_look = now + 60.0
            await runner.request_scheduled_if_due()
            self._next_pass_look = 0.0
        if now < self._next_pass_look:
            return
        self._next_pass_look = now + 2.0
        runner.busy = True
        group.start_soon(self._run_consolidation, runner)

    async def _run_consolidation(self, runner: ConsolidationRunner) -> None:
        try:
            await runner.run_next()
        except MnemoloopError as error:
            # Claiming or recording the pass failed (the database went away): a restart or
            # the lease's end gives it to a worker again.
            log.error("a consolidation pass could not be run or recorded: %s", error)
            self._metrics.loop_errors.inc()
        finally:
            runner.busy = False

    async def _fail_exhausted_now_and_then(self) -> None:
        # A claim runs out a whole lease after it was taken or last renewed, so looking a few
        # times a lease is enough; looking each time a job ends was one more write per job.
        if anyio.current_time() >= self._next_exhaustion_check:
            await self._jobs.fail_exhausted()
            self._next_exhaustion_check = anyio.current_time() + self._jobs.lease_seconds / 3

    async def _erase_retired_now_and_then(self) -> None:
        """Erase deleted and expired memories whose grace period is over (a database write,
        no model: it runs whatever the energy)."""
        if anyio.current_time() < self._next_erasure:
            return
        self._next_erasure = anyio.current_time() + self._erase_every
        erased = await self._agent.erase_retired()
        if erased:
            self._metrics.memories_erased.inc(erased)
            log.info("erased %d deleted or expired memories whose grace period is over", erased)
            if erased >= self._agent.erase_batch:
                self._next_erasure = 0.0  # more are waiting

    async def claim_next(self) -> ClaimedJob | None:
        """The next job for an app with none running here, with its conversation's messages."""
        busy = self._running_apps.keys()
        return await self._conversations.claim_job(
            lambda tx: self._jobs.within(tx).claim_next(busy)
        )

    async def _run_and_release(self, claimed: ClaimedJob) -> None:
        try:
            await self.run_job(claimed)
        except MnemoloopError as error:
            # Recording the job's end failed (the database went away): the job stays
            # `running`, which a restart requeues; the worker carries on.
            log.error("memory job %d could not be recorded: %s", claimed.job.id, error)
            self._metrics.loop_errors.inc()
        finally:
            self._running_apps.discard(claimed.job.app_id)
            self._conversations.job_queued.set()

    async def run_job(self, claimed: ClaimedJob) -> JobStatus:
        """Write the conversation's memory; the job ends `done` in the memory's own
        transaction (`ClaimedJobRecord`), or `pending` again after a transient failure (until
        its attempts run out), or `skipped` (with why), `failed` or `cancelled`."""
        status: JobStatus
        job, messages = claimed.job, claimed.messages
        record = ClaimedJobRecord(self._jobs, self._energy, job)
        request = MemoryCreationRequest(
            job.app_id, job.conversation_id, messages, job.id, user_id=job.user_id,
            also_shared=claimed.also_shared, ttl_seconds=claimed.memory_ttl_seconds,
            to_profile=claimed.to_profile,
        )
        try:
            await while_renewing(
                lambda: self._agent.create_memory(request, record),
                lambda: self._jobs.renew(job),
                every=self._jobs.lease_seconds / 3,
                what=f"memory job {job.id}",
            )
            record.committed()
            status = "done"
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                # Stopped mid-job: leave it `running`, which a restart requeues (or, on a
                # shared database, another instance takes over when the lease runs out).
                # Stopped right after the commit, the job is done and its energy spent.
                if record.units and await self._jobs.done_by(job):
                    record.committed()
                else:
                    self._agent.give_back_energy(record.units)
                await self._charge_memory_energy()
            raise
        except MemoryWriteRefused:
            # A purge cancelled it meanwhile, or its lease ran out and another instance took
            # it over: the job's record says which, and this claim writes nothing.
            status = "cancelled"
        except MnemoloopError as failure:
            # Already logged by the sub-agent; the conversation is unaffected.
            error = f"{type(failure).__name__}: {failure}"
            if failure.transient and job.attempts < self._attempts:
                delay = await self._jobs.retry_later(job, error, self._retry_base)
                log.warning("memory job %d will be tried again in %.0f s: %s", job.id, delay, error)
                status = "pending"
            else:
                status = "skipped"
                await self._jobs.finish(job, status, error)
        except Exception as failure:
            log.exception("memory job %d failed unexpectedly", job.id)
            status = "failed"
            await self._jobs.finish(job, status, f"{type(failure).__name__}: {failure}")
        await self._charge_memory_energy()
        if status != "pending" and not self._keep_secrets:
            # The job has read the conversation for the last time: its secrets go.
            await self._conversations.redact_messages(job.conversation_id)
        return status

    async def run_now(self, conversation_id: str) -> MemoryJob | None:
        """Run this conversation's waiting job at once (for the terminal chat and the demo).

        Below the energy floor the job is left waiting for `serve`. Returns the job as it ends.
        """
        await self._energy.refresh()
        if self._energy.memory_work_allowed():
            claimed = await self._conversations.claim_job(
                lambda tx: self._jobs.within(tx).claim_for_conversation(conversation_id)
            )
            if claimed is not None:
                await self.run_job(claimed)
        return await self._jobs.for_conversation(conversation_id)

    async def _charge_memory_energy(self) -> None:
        """Spend what the model calls used and no job's transaction spent (failed jobs, and
        calls since)."""
        await self._energy.charge("memory", self._agent.get_energy_consumed_since_last_poll())
