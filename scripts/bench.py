"""Benchmarks of the running code on this machine; prints one JSON object.

    .venv/bin/python scripts/bench.py            # full run (a few minutes)
    .venv/bin/python scripts/bench.py --quick    # under a minute, smaller data
    .venv/bin/python scripts/bench.py --json     # the same object on one line

Every figure is measured in the same run as its reference, so ratios hold on a noisy machine.
Data is seeded into temporary SQLite files; a user's database is never touched. HTTP load
comes from `wrk` in a separate process when it is installed (Debian package `wrk`), else from
a small asyncio client in a separate process (`http_client` says which).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_support import (
    TIMED_MODEL_SECONDS,
    InstantModel,
    TimedModel,
    percentile,
    seed_ended_conversations,
    seed_memories,
)

from loop.llm.choice import NoModelLoaded
from loop.llm.local import LocalChatModel, local_backend_available
from loop.service import open_services
from loop.settings import Settings
from loop.storage import SqliteDatabase
from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent

ADMIN_TOKEN = "bench-token"


def settings(db: Path, **overrides: Any) -> Settings:
    return Settings(db=db, llm="local", admin_token=ADMIN_TOKEN, **overrides)


# -- retrieval ---------------------------------------------------------------------------------

async def retrieval_latencies(dbs: dict[int, Path], samples: int, rounds: int = 20
                              ) -> dict[int, list[float]]:
    """Seconds to read an app's memories and format its context, for random apps, per
    database (keyed by its number of apps). The databases take turns in short rounds, so a
    noisy moment of the machine falls on all of them alike."""
    async with AsyncExitStack() as stack:
        agents = {}
        for apps, db in dbs.items():
            database = await stack.enter_async_context(SqliteDatabase(db))
            agents[apps] = MemorySubAgent(database, NoModelLoaded())
        rng = random.Random(1)
        timings: dict[int, list[float]] = {apps: [] for apps in dbs}
        for _ in range(rounds):
            for apps, agent in agents.items():
                for _ in range(samples // rounds):
                    app_id = f"app{rng.randrange(apps)}"
                    started = time.perf_counter()
                    memories = await agent.get_memories(app_id)
                    agent.format_memories_for_context(app_id, memories)
                    timings[apps].append(time.perf_counter() - started)
        return timings


def bench_retrieval(tmp: Path, quick: bool) -> dict[str, Any]:
    main_apps, small_apps, large_apps = (2_000, 100, 20_000) if quick else (10_000, 100, 100_000)
    samples = 5_000 if quick else 20_000
    dbs = {}
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


# -- memory jobs -------------------------------------------------------------------------------

async def run_all_jobs(db: Path, model: Any, concurrency: int) -> float:
    async with open_services(settings(db, max_concurrent_memory_jobs=concurrency,
                                      energy_capacity=1e12),
                             chat_model=model, memory_model=model) as services:
        worker = services.worker()
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)
            # The job table is the truth about what is left; polling it is the measurement.
            while await services.jobs.has_waiting() or (  # noqa: ASYNC110
                    (await services.jobs.counts_by_status())["running"]):
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        elapsed = time.perf_counter() - started
        counts = await services.jobs.counts_by_status()
        assert counts["done"] == sum(counts.values()), counts
        return elapsed


def bench_jobs(tmp: Path, quick: bool) -> dict[str, Any]:
    apps, per_app = (200, 11) if quick else (1_000, 11)
    db = tmp / "jobs.db"
    seed_ended_conversations(db, apps=apps, per_app=per_app)
    elapsed = anyio.run(run_all_jobs, db, InstantModel(), 8)
    return {"jobs_per_s": round(apps * per_app / elapsed, 1), "jobs_total": apps * per_app}


async def job_overhead(db: Path, jobs: int) -> float:
    """(job time − model time) ÷ model time, jobs run one at a time as the worker runs them."""
    model = TimedModel()
    async with open_services(settings(db, energy_capacity=1e12), chat_model=model,
                             memory_model=model) as services:
        worker = services.worker()
        total = 0.0
        for _ in range(jobs):
            started = time.perf_counter()  # what the worker does per job: claim, run, record
            job = await services.jobs.claim_next(())
            assert job is not None
            await worker.run_job(job)
            total += time.perf_counter() - started
        return (total - model.seconds) / model.seconds


def bench_overhead(tmp: Path, quick: bool) -> dict[str, Any]:
    jobs = 20 if quick else 60
    db = tmp / "overhead.db"
    seed_ended_conversations(db, apps=jobs, per_app=1)
    overhead = anyio.run(job_overhead, db, jobs)
    return {"overhead_pct": round(overhead * 100, 3),
            "overhead_model_ms": TIMED_MODEL_SECONDS * 1000}


# -- HTTP --------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def load(port: int, path_template: str, apps: int, seconds: int) -> dict[str, float]:
    """Run the load generator in its own process against 127.0.0.1:port."""
    support = Path(__file__).resolve().parent / "bench_support.py"
    command = [sys.executable, str(support), "load", str(port), path_template, str(apps),
               str(seconds), ADMIN_TOKEN]
    out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed: {out.stderr.strip()}")
    figures: dict[str, float] = json.loads(out.stdout)
    return figures


def serve_in_background(kind: str, db: Path, port: int) -> subprocess.Popen[bytes]:
    support = Path(__file__).resolve().parent / "bench_support.py"
    server = subprocess.Popen([sys.executable, str(support), "serve", kind, str(db), str(port),
                               ADMIN_TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"the {kind} server did not start: {server.stderr.read().decode()}")


def bench_http(tmp: Path, quick: bool) -> dict[str, Any]:
    apps, seconds = (1_000, 4) if quick else (10_000, 10)
    db = tmp / "http.db"
    seed_memories(db, apps=apps, per_app=10)
    results = {}
    for kind, template in (("floor", "/floor"), ("memories", "/apps/app{n}/memories")):
        port = free_port()
        server = serve_in_background(kind, db, port)
        try:
            load(port, template, apps, 1)  # warm-up
            results[kind] = load(port, template, apps, seconds)
        finally:
            server.terminate()
            server.wait(timeout=10)
    memories, floor = results["memories"], results["floor"]
    return {
        "http_rps": round(memories["rps"], 1),
        "http_p99_ms": round(memories["p99_ms"], 3),
        "http_floor_rps": round(floor["rps"], 1),
        "http_vs_floor": round(memories["rps"] / floor["rps"], 3),
        "http_errors": int(memories["errors"]),
        "http_client": "wrk" if memories.get("wrk") else "python-asyncio",
    }


# -- the embedded model ------------------------------------------------------------------------

CONVERSATION = [
    ChatMessage("user", "Please book my meetings after 2pm. Mornings are for deep work."),
    ChatMessage("assistant", "Understood: I will only schedule meetings in the afternoon."),
    ChatMessage("user", "Also, project Phoenix is due on November 1."),
    ChatMessage("assistant", "Noted: the Phoenix deadline is November 1."),
]


async def model_memory(db: Path, runs: int) -> dict[str, Any]:
    model = LocalChatModel()
    async with open_services(settings(db), chat_model=model, memory_model=model) as services:
        await services.registry.install("bench", "Bench")
        timings, tokens, written = [], 0, 0
        recording = TimedModel(inner=model)
        agent = MemorySubAgent(services.database, recording)
        for n in range(runs):
            started = time.perf_counter()
            # A different detail each run, so no answer comes from llama.cpp's prompt cache.
            conversation = [*CONVERSATION, ChatMessage("user", f"My desk is number {n + 7}.")]
            try:
                await agent.create_memory(MemoryCreationRequest("bench", f"c{n}", conversation))
                written += 1
            except Exception:  # the figure counts failures; the job would be skipped
                pass
            timings.append(time.perf_counter() - started)
        tokens = recording.completion_tokens
    await model.aclose()
    return {
        "model_memory_s": round(statistics.median(timings), 3),
        "model_tokens_per_s": round(tokens / recording.seconds, 1),
        "model_memories_written": f"{written}/{runs}",
    }


def bench_model(tmp: Path, quick: bool) -> dict[str, Any]:
    if not local_backend_available():
        return {"model_memory_s": None, "model_tokens_per_s": None,
                "model_memories_written": None}
    return anyio.run(model_memory, tmp / "model.db", 3 if quick else 10)


async def energy_share(db: Path, conversations: int, model: Any) -> float:
    async with open_services(settings(db, energy_capacity=1e12), chat_model=model,
                             memory_model=model) as services:
        await services.registry.install("bench", "Bench")
        worker = services.worker()
        for n in range(conversations):
            conversation_id = await services.conversations.open("bench")
            for turn in range(6):
                await services.conversations.add_message(
                    conversation_id, "user", f"Turn {turn} of conversation {n}: my note {turn}.")
                await services.central.answer(conversation_id)
            await services.conversations.end(conversation_id, "app")
            await worker.run_now(conversation_id)
        report = await services.energy.report()
        return report.memory_spent / (report.memory_spent + report.conversation_spent)


def bench_energy(tmp: Path, quick: bool) -> dict[str, Any]:
    if local_backend_available():
        model: Any = LocalChatModel()
        kind = "embedded"
    else:
        model, kind = InstantModel(), "scripted"
    try:
        share = anyio.run(energy_share, tmp / "energy.db", 1 if quick else 3, model)
    finally:
        if isinstance(model, LocalChatModel):
            model.close()
    return {"energy_memory_share": round(share, 4), "energy_workload_model": kind}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, under a minute")
    parser.add_argument("--json", action="store_true", help="print the object on one line")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the 🧠 lines are per retrieval; keep them out of timings
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="mnemoloop-bench-") as folder:
        tmp = Path(folder)
        for bench in (bench_retrieval, bench_jobs, bench_overhead, bench_http, bench_model,
                      bench_energy):
            started = time.perf_counter()
            results.update(bench(tmp, args.quick))
            print(f"bench: {bench.__name__} took {time.perf_counter() - started:.1f} s",
                  file=sys.stderr, flush=True)
    results["rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    sqlite3.enable_callback_tracebacks(True)
    main()
