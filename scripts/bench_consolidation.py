"""The benchmark's consolidation figures, on one app's users, each with memories of their own,
a profile and the app's shared ones, with an instant model writer (`ScriptedModel` merges two
memories of one space whole):

- `consolidation_work_s`: a pass over every space that never rests (its work alone), with the
  p99 of a turn's memory block built meanwhile on the same event loop;
- the same p99 while a pass runs as the worker runs it, resting `REST_FACTOR` times as long as
  each group took, against the p99 with no pass: windows of each in turn (quiet, paced, quiet,
  ...; the pass paused between its groups in the quiet ones), so that a machine that slows
  down or speeds up meanwhile weighs on both alike. Pooled, and each window's, to show the
  spread from one window to the next; a whole pass at that pace takes about
  `consolidation_work_s` × (1 + `REST_FACTOR`), `consolidation_pass_s`;
- `edge_write_ms`: linking a memory to those of its space, as a memory job does (p50, p99)."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
from bench_recall import settings
from bench_support import percentile, seed_profiles
from scripted_models import ScriptedModel

from loop.jobs.consolidating import REST_FACTOR, ConsolidationRunner
from loop.service import Services, open_services
from loop.storage import database_for
from memory_agent import SqlTransaction
from memory_agent.links.linking import link_in_space
from memory_agent.storage.store import MemoryStore

STAMP = "2025-11-01T10:00:00.000000Z"


def bench_consolidation(tmp: Path, quick: bool) -> dict[str, Any]:
    users = 2_000 if quick else 10_000
    seeded = tmp / f"consolidation-{users}.db"
    seed_profiles(seeded, users=users, per_user=3, shared=5)
    paced = tmp / f"consolidation-{users}-paced.db"
    shutil.copy(seeded, paced)
    samples = 2_000 if quick else 10_000
    figures = anyio.run(_whole_pass, seeded, users, samples)
    figures.update(anyio.run(_paced_pass, paced, users, 5.0 if quick else 15.0, 6))
    figures["consolidation_pass_s"] = round(figures["consolidation_work_s"] * (1 + REST_FACTOR))
    figures.update(anyio.run(_edges, seeded, users, 500 if quick else 2_000))
    return figures


async def _whole_pass(db: Path, users: int, samples: int) -> dict[str, Any]:
    async with _services(db) as services:
        block = _block_timer(services, users)
        quiet = [await block() for _ in range(samples)]
        during: list[float] = []
        asked = await services.stores.consolidations.request(None, None)
        started = time.perf_counter()
        await _sampling_while(_runner(services, rest_factor=0.0).run_next(), block, during)
        work = time.perf_counter() - started
        ended = await services.stores.consolidations.get(asked.id)
        assert ended is not None and ended.status == "done", ended
    return {
        "consolidation_spaces": ended.spaces,
        "consolidation_work_s": round(work, 2),
        "consolidation_pairs_asked": ended.pairs_asked,
        "consolidation_changes": ended.changes,
        "consolidation_model_calls": ended.model_calls,
        # Quiet, and while a pass that never rests runs.
        "consolidation_block_p99_ms": [_p99_ms(quiet), _p99_ms(during)],
    }


async def _paced_pass(db: Path, users: int, window: float, windows: int) -> dict[str, Any]:
    async with _services(db) as services:
        block = _block_timer(services, users)
        gated = _Paused(services.stores.consolidations)
        quiet: list[list[float]] = []
        paced: list[list[float]] = []
        await services.stores.consolidations.request(None, None)
        runner = _runner(services, rest_factor=REST_FACTOR, passes=gated)
        async with anyio.create_task_group() as group:
            group.start_soon(runner.run_next)
            # The pass's start (its claim, its groups found) is neither window's.
            await gated.waiting.wait()
            for turn in range(windows):
                gated.pause(turn % 2 == 0)
                timings: list[float] = []
                with anyio.move_on_after(window):
                    while True:
                        timings.append(await block())
                        await anyio.sleep(0.001)
                (quiet if gated.paused else paced).append(timings)
            group.cancel_scope.cancel()
    return {
        "consolidation_rest_factor": REST_FACTOR,
        # Quiet, and while a pass runs at the worker's pace: pooled, then each window's.
        "consolidation_paced_block_p99_ms": [_p99_ms([t for w in quiet for t in w]),
                                             _p99_ms([t for w in paced for t in w])],
        "consolidation_paced_window_p99_ms": [[_p99_ms(w) for w in quiet],
                                              [_p99_ms(w) for w in paced]],
        "consolidation_paced_samples": [sum(map(len, quiet)), sum(map(len, paced))],
        "consolidation_paced_groups": gated.groups,
    }


class _Paused:
    """The store of passes as the runner sees it, except that its check before each group
    waits while `paused`: the pass stands between two groups for the quiet windows (before
    the group's time is taken, so its rest after is as long as it would have been)."""

    def __init__(self, passes: Any) -> None:
        self._passes = passes
        self.paused = True
        self.resumed = anyio.Event()
        # The pass stands at its first group.
        self.waiting = anyio.Event()
        self.groups = 0

    def pause(self, paused: bool) -> None:
        if paused and self.resumed.is_set():
            self.resumed = anyio.Event()
        elif not paused:
            self.resumed.set()
        self.paused = paused

    def __getattr__(self, name: str) -> Any:
        return getattr(self._passes, name)

    async def still_held(self, held: Any) -> bool:
        self.waiting.set()
        while self.paused:
            await self.resumed.wait()
        self.groups += 1
        return bool(await self._passes.still_held(held))


async def _sampling_while(work: Any, block: Any, timings: list[float]) -> None:
    """Run `work`, timing a turn's block now and then (as conversations arrive) until it
    ends."""
    done = anyio.Event()

    async def run() -> None:
        await work
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        while not done.is_set():
            timings.append(await block())
            await anyio.sleep(0.001)


def _block_timer(services: Services, users: int) -> Any:
    rng = random.Random(1)

    async def block_seconds() -> float:
        app = await services.stores.registry.require("app0")
        user_id = f"user{rng.randrange(users)}"
        started = time.perf_counter()
        await services.central.contexts.build(
            app, [], user_id=user_id, conversation_id=f"now-{user_id}")
        return time.perf_counter() - started

    return block_seconds


def _services(db: Path) -> Any:
    model = ScriptedModel()
    return open_services(settings(db, memory_writer="model", energy_capacity=1e9),
                         chat_model=model, memory_model=model)


def _runner(services: Services, *, rest_factor: float, passes: Any = None) -> ConsolidationRunner:
    """The worker's runner of passes, as `open_services` builds it (5 pairs per space)."""
    stores = services.stores
    return ConsolidationRunner(
        passes=passes or stores.consolidations, agent=stores.agent, registry=stores.registry,
        energy=stores.energy, metrics=services.metrics, clock=services.clock,
        pairs_per_space=services.settings.consolidation_pairs_per_space, every_seconds=0,
        rest_factor=rest_factor,
    )


def _p99_ms(timings: list[float]) -> float:
    return round(percentile(timings, 99) * 1000, 3)


async def _edges(db: Path, users: int, samples: int) -> dict[str, Any]:
    """Milliseconds to link a memory to those of its space it shares most with, as a memory
    job does in its transaction (the space read, the likeness, the edges written): for a
    random user's space of the seeded database."""
    rng = random.Random(2)
    timings = []
    async with database_for(str(db)) as database:
        store = MemoryStore(database)
        for _ in range(samples):
            user_id = f"user{rng.randrange(users)}"

            async def link(tx: SqlTransaction, user_id: str = user_id) -> None:
                space = await store.within(tx).list_oldest_first("app0", user_id=user_id)
                texts = {m.id: m.content for m in space}
                await link_in_space(store.within(tx), [space[-1].id], texts, STAMP)

            started = time.perf_counter()
            await database.run_transaction(link)
            timings.append(time.perf_counter() - started)
    return {
        "edge_write_ms": [round(percentile(timings, 50) * 1000, 3),
                          round(percentile(timings, 99) * 1000, 3)],
    }
