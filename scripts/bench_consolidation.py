"""The benchmark's consolidation figures: a pass over every space of a database of one app's
users, each with memories of their own, a profile and the app's shared ones, with an instant
model writer (`ScriptedModel` merges two memories of one space whole); how long it takes, and
the p99 of a turn's memory block built meanwhile on the same event loop, beside it built with
no pass running; and how long linking a memory to those of its space takes (`edge_write_ms`,
p50 and p99, a transaction each)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import anyio
from bench_recall import settings
from bench_support import percentile, seed_profiles
from scripted_models import ScriptedModel

from loop.jobs.consolidating import ConsolidationRunner
from loop.service import Services, open_services
from loop.storage import database_for
from memory_agent import SqlTransaction
from memory_agent.links.linking import link_in_space
from memory_agent.storage.store import MemoryStore

STAMP = "2025-11-01T10:00:00.000000Z"


def bench_consolidation(tmp: Path, quick: bool) -> dict[str, Any]:
    users = 2_000 if quick else 10_000
    db = tmp / f"consolidation-{users}.db"
    seed_profiles(db, users=users, per_user=3, shared=5)
    figures = anyio.run(_pass_and_hot_path, db, users, 2_000 if quick else 10_000)
    figures.update(anyio.run(_edges, db, users, 500 if quick else 2_000))
    return figures


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


async def _pass_and_hot_path(db: Path, users: int, samples: int) -> dict[str, Any]:
    model = ScriptedModel()
    async with open_services(
        settings(db, memory_writer="model", energy_capacity=1e9),
        chat_model=model, memory_model=model,
    ) as services:
        app = await services.stores.registry.require("app0")
        rng = random.Random(1)

        async def block_seconds() -> float:
            user_id = f"user{rng.randrange(users)}"
            started = time.perf_counter()
            await services.central.contexts.build(
                app, [], user_id=user_id, conversation_id=f"now-{user_id}")
            return time.perf_counter() - started

        quiet = [await block_seconds() for _ in range(samples)]
        runner = _runner(services)
        asked = await services.stores.consolidations.request(None, None)
        during: list[float] = []
        async with anyio.create_task_group() as group:
            done = anyio.Event()

            async def run_pass() -> None:
                started = time.perf_counter()
                await runner.run_next()
                timings["pass_s"] = time.perf_counter() - started
                done.set()

            timings: dict[str, float] = {}
            group.start_soon(run_pass)
            while not done.is_set():
                during.append(await block_seconds())
                # The loop serves a turn now and then, as conversations arrive.
                await anyio.sleep(0.001)
        ended = await services.stores.consolidations.get(asked.id)
        assert ended is not None and ended.status == "done", ended
    return {
        "consolidation_spaces": ended.spaces,
        "consolidation_pass_s": round(timings["pass_s"], 2),
        "consolidation_pairs_asked": ended.pairs_asked,
        "consolidation_changes": ended.changes,
        "consolidation_model_calls": ended.model_calls,
        "consolidation_block_p99_ms": [round(percentile(quiet, 99) * 1000, 3),
                                       round(percentile(during, 99) * 1000, 3)],
        "consolidation_block_samples": [len(quiet), len(during)],
    }


def _runner(services: Services) -> ConsolidationRunner:
    """The worker's runner of passes, as `open_services` builds it (5 pairs per space)."""
    stores = services.stores
    return ConsolidationRunner(
        passes=stores.consolidations, agent=stores.agent, registry=stores.registry,
        energy=stores.energy, metrics=services.metrics, clock=services.clock,
        pairs_per_space=services.settings.consolidation_pairs_per_space, every_seconds=0,
    )
