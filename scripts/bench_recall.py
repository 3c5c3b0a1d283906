"""The benchmark's recall figures: how long a conversation's memories take to read and format,
for an app, for a user of an app with many users, and with a person's profile and the delta
header, each at two sizes so that their ratio shows whether the indexes hold."""

from __future__ import annotations

import random
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from bench_support import percentile, seed_memories, seed_profiles, seed_user_spaces
from scripted_models import ScriptedModel

from loop.llm import NoModelLoaded
from loop.service import open_services
from loop.settings import Settings
from loop.storage import database_for
from memory_agent import MemorySubAgent, format_memories_for_context


def settings(db: Path, **overrides: Any) -> Settings:
    return Settings(db=db, llm="local", **overrides)


# -- retrieval ---------------------------------------------------------------------------------

async def retrieval_latencies(dbs: dict[int, Path | str], samples: int, rounds: int = 20
                              ) -> dict[int, list[float]]:
    """Seconds to read an app's memories and format its context, for random apps, per
    database (keyed by its number of apps). The databases take turns in short rounds, so a
    noisy moment of the machine falls on all of them alike."""
    async with AsyncExitStack() as stack:
        agents = {}
        for apps, db in dbs.items():
            database = await stack.enter_async_context(database_for(str(db)))
            agents[apps] = MemorySubAgent(database, NoModelLoaded())
        rng = random.Random(1)
        timings: dict[int, list[float]] = {apps: [] for apps in dbs}
        for _ in range(rounds):
            for apps, agent in agents.items():
                for _ in range(samples // rounds):
                    app_id = f"app{rng.randrange(apps)}"
                    started = time.perf_counter()
                    memories = await agent.get_memories(app_id)
                    format_memories_for_context(app_id, memories)
                    timings[apps].append(time.perf_counter() - started)
        return timings


async def space_latencies(dbs: dict[int, Path | str], samples: int, rounds: int = 20
                          ) -> dict[int, list[float]]:
    """Seconds to read a random user's memories and the app's shared ones and format the
    block, as a user's conversation gets it, per database (keyed by its number of users)."""
    async with AsyncExitStack() as stack:
        agents = {}
        for users, db in dbs.items():
            database = await stack.enter_async_context(database_for(str(db)))
            agents[users] = MemorySubAgent(database, NoModelLoaded())
        rng = random.Random(1)
        timings: dict[int, list[float]] = {users: [] for users in dbs}
        for _ in range(rounds):
            for users, agent in agents.items():
                for _ in range(samples // rounds):
                    user_id = f"user{rng.randrange(users)}"
                    started = time.perf_counter()
                    shared = await agent.get_memories("app0")
                    own = await agent.get_memories("app0", user_id=user_id)
                    format_memories_for_context("app0", shared, own)
                    timings[users].append(time.perf_counter() - started)
        return timings


async def profile_latencies(dbs: dict[int, Path | str], samples: int, rounds: int = 20
                            ) -> dict[int, list[float]]:
    """Seconds the central loop takes to build a random user's memory block in an app that
    shares profiles (`TurnContexts.build`): the user's memories, the app's shared ones,
    the person's profile, and the delta header since their previous conversation."""
    async with AsyncExitStack() as stack:
        running = {}
        for users, db in dbs.items():
            services = await stack.enter_async_context(open_services(
                settings(Path(db)), chat_model=ScriptedModel(), memory_model=ScriptedModel()))
            running[users] = (services, await services.stores.registry.require("app0"))
        rng = random.Random(1)
        timings: dict[int, list[float]] = {users: [] for users in dbs}
        for _ in range(rounds):
            for users, (services, app) in running.items():
                for _ in range(samples // rounds):
                    user_id = f"user{rng.randrange(users)}"
                    started = time.perf_counter()
                    context = (await services.central.contexts.build(
                        app, [], user_id=user_id, conversation_id=f"now-{user_id}")).messages
                    timings[users].append(time.perf_counter() - started)
                    assert "Memory updates since rev" in context[1].content
        return timings


def _users_scaling(tmp: Path, quick: bool, name: str, seed: Any, latencies: Any,
                   samples: int) -> dict[str, Any]:
    """p99 of `latencies` on one app with 100 users against 100,000 (10,000 with --quick),
    each database made by `seed`; the figures named `name`."""
    small_users, large_users = (100, 10_000) if quick else (100, 100_000)
    dbs: dict[int, Path | str] = {}
    for users in (small_users, large_users):
        dbs[users] = tmp / f"{name}-{users}.db"
        seed(dbs[users], users=users, per_user=5, shared=5)
    timings = anyio.run(latencies, dbs, samples)
    small, large = timings[small_users], timings[large_users]
    return {
        f"{name}_users": [small_users, large_users],
        f"{name}_retrieval_p99_ms": [round(percentile(small, 99) * 1000, 4),
                                     round(percentile(large, 99) * 1000, 4)],
        f"{name}_p99_scaling": round(percentile(large, 99) / percentile(small, 99), 3),
    }


def bench_profiles(tmp: Path, quick: bool) -> dict[str, Any]:
    """`bench_spaces` with a profile and a delta header."""
    return _users_scaling(tmp, quick, "profile", seed_profiles, profile_latencies,
                          2_000 if quick else 10_000)


def bench_spaces(tmp: Path, quick: bool) -> dict[str, Any]:
    """One app's users: a user's conversation's memories."""
    return _users_scaling(tmp, quick, "spaces", seed_user_spaces, space_latencies,
                          3_000 if quick else 20_000)


def bench_retrieval(tmp: Path, quick: bool) -> dict[str, Any]:
    main_apps, small_apps, large_apps = (2_000, 100, 10_000) if quick else (10_000, 100, 100_000)
    samples = 3_000 if quick else 20_000
    dbs: dict[int, Path | str] = {}
    for apps in sorted({main_apps, small_apps, large_apps}):
        dbs[apps] = tmp / f"retrieval-{apps}.db"
        seed_memories(dbs[apps], apps=apps, per_app=10)
    timings = anyio.run(retrieval_latencies, dbs, samples)
    main, small, large = timings[main_apps], timings[small_apps], timings[large_apps]
    return {
        "retrieval_apps": main_apps,
        "retrieval_p50_ms": round(percentile(main, 50) * 1000, 4),
        "retrieval_p99_ms": round(percentile(main, 99) * 1000, 4),
        "retrieval_scaling": round(percentile(large, 50) / percentile(small, 50), 3),
        "retrieval_scaling_apps": [small_apps, large_apps],
    }


