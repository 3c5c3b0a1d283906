"""Runs consolidation passes (`loop.jobs.consolidations`) for the memory worker, at low
priority: a pass starts only when no memory job is waiting and energy is above the memory
floor, visits one group of spaces at a time (resting after each, `REST_FACTOR` times as long
as it took, and waiting while energy is low), and renews its lease as memory jobs do. The
schedule asks for a pass over every space once per `every_seconds` (0: never), the first when
the worker first looks. Whatever a pass meets (a model that fails, a database that goes
away) is its status and error, a log line and a metric; it never stops the worker."""

from __future__ import annotations

import logging
from datetime import timedelta

import anyio

from loop.jobs.consolidations import ConsolidationPass, ConsolidationStore, PassStatus
from loop.leases import while_renewing
from loop.operations.energy import EnergyBudget
from loop.operations.metrics import Metrics
from loop.operations.registry import AppRegistry
from memory_agent import (
    PROFILE_APP,
    Clock,
    MemorySubAgent,
    MnemoloopError,
    PassFigures,
    format_timestamp,
)

log = logging.getLogger("mnemoloop.worker")

# How long a pass waits, between groups, for energy to come back above the memory floor.
_ENERGY_WAIT_SECONDS = 5.0
# After each group of spaces, a pass rests this many times as long as the group took
# (`MNEMOLOOP_CONSOLIDATION_REST_FACTOR`): it shares the event loop, the database's threads
# and the interpreter lock with the turns being answered, whose p99 doubles when it works a
# quarter of the time (`bench.py`, bench_consolidation); working 1 % of the time, a daily
# pass over 20,000 spaces ends in one and a half to three hours on a 2-core machine.
REST_FACTOR = 99.0


class ConsolidationRunner:
    def __init__(
        self,
        *,
        passes: ConsolidationStore,
        agent: MemorySubAgent,
        registry: AppRegistry,
        energy: EnergyBudget,
        metrics: Metrics,
        clock: Clock,
        pairs_per_space: int,
        every_seconds: float,
        rest_factor: float = REST_FACTOR,
    ) -> None:
        self._passes = passes
        self._agent = agent
        self._registry = registry
        self._energy = energy
        self._metrics = metrics
        self._clock = clock
        self._pairs_per_space = pairs_per_space
        self._every = every_seconds
        self._rest = rest_factor
        # A pass is running (or starting) here: the worker starts no other.
        self.busy = False

    async def request_scheduled_if_due(self) -> ConsolidationPass | None:
        """Ask for the scheduled pass over every space when none was asked for in the last
        `every_seconds` (stored times sort as the times do)."""
        if self._every <= 0:
            return None
        due = format_timestamp(self._clock.now() - timedelta(seconds=self._every))
        return await self._passes.request_scheduled(due)

    async def recover_interrupted(self) -> None:
        recovered = await self._passes.recover_interrupted()
        if recovered:
            log.info("%d consolidation passes interrupted by a stop wait again", recovered)

    async def run_next(self) -> PassStatus | None:
        """Claim the next pass and run it to its end; None when none waits."""
        held = await self._passes.claim_next()
        if held is None:
            return None
        return await while_renewing(
            lambda: self._run(held),
            lambda: self._passes.renew(held),
            every=self._passes.lease_seconds / 3,
            what=f"consolidation pass {held.id}",
        )

    async def _run(self, held: ConsolidationPass) -> PassStatus:
        figures = PassFigures()
        status: PassStatus = "done"
        error: str | None = None
        try:
            apps = {app.app_id: app for app in await self._registry.list()}

            def shares_profile(app_id: str) -> bool:
                return app_id in apps and apps[app_id].installed and apps[app_id].shares_profile

            def installed(app_id: str) -> bool:
                # An uninstalled app's memories wait for it to come back.
                return app_id == PROFILE_APP or (app_id in apps and apps[app_id].installed)

            groups = await self._agent.consolidation_groups(
                held.app_id, held.user_id, shares_profile, installed
            )
            for group in groups:
                if not await self._passes.still_held(held):
                    status, error = "cancelled", None
                    break
                await self._wait_for_energy()
                started = anyio.current_time()
                await self._agent.consolidate(
                    group, figures, pairs_per_space=self._pairs_per_space,
                    wanted=lambda tx, spaces: self._passes.within(tx).change_allowed(
                        held, spaces),
                )
                await self._passes.record_progress(held, figures)
                # What its model calls spent, before it looks at the energy again.
                await self._charge()
                await anyio.sleep((anyio.current_time() - started) * self._rest)
            if figures.unjudged and status == "done":
                error = (f"{figures.unjudged} pairs were not judged (the next pass asks again):"
                         f" {figures.last_failure}")
            await self._agent.forget_old_checks()
        except MnemoloopError as failure:
            status, error = "failed", f"{type(failure).__name__}: {failure}"
            log.error("consolidation pass %d failed: %s", held.id, error)
        except Exception as failure:
            log.exception("consolidation pass %d failed unexpectedly", held.id)
            status, error = "failed", f"{type(failure).__name__}: {failure}"
        finally:
            await self._charge()
        if status != "cancelled" and not await self._passes.finish(held, status, figures, error):
            status = "cancelled"  # a purge or an erasure ended it meanwhile
        self._metrics.consolidations.labels(status=status).inc()
        self._metrics.consolidation_changes.inc(figures.changes)
        log.info("🧹 Consolidation pass %d %s: %d spaces, %d pairs asked, %d changed,"
                 " %d model calls", held.id, status, figures.spaces, figures.pairs_asked,
                 figures.changes, figures.model_calls)
        return status

    async def _charge(self) -> None:
        await self._energy.charge("memory", self._agent.get_energy_consumed_since_last_poll())

    async def _wait_for_energy(self) -> None:
        while True:
            await self._energy.refresh()
            if self._energy.memory_work_allowed():
                return
            await anyio.sleep(min(max(self._energy.seconds_until_memory_work(), 0.05),
                                  _ENERGY_WAIT_SECONDS))

