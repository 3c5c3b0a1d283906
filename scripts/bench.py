"""Benchmarks of the running code on this machine; prints one JSON object.

    .venv/bin/python scripts/bench.py            # full run (ten minutes or so)
    .venv/bin/python scripts/bench.py --quick    # about a minute: smaller data, shorter loads
    .venv/bin/python scripts/bench.py --json     # the same object on one line

Every figure is measured in the same run as its reference, so ratios hold on a noisy machine.
Data is seeded into temporary SQLite files, and for the `pg_*` figures into a throwaway
PostgreSQL server started from initdb/pg_ctl; a user's database is never touched. HTTP load
comes from `wrk` in a separate process when it is installed (Debian package `wrk`), else from
a small asyncio client in a separate process (`http_client` says which).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_consolidation import bench_consolidation
from bench_dialects import bench_dialects
from bench_query import bench_query
from bench_recall import bench_profiles, bench_retrieval, bench_spaces, retrieval_latencies
from bench_support import (
    copy_to_postgres,
    percentile,
    seed_ended_conversations,
    seed_memories,
)
from scripted_models import TIMED_MODEL_SECONDS, ScriptedModel, Timed

from loop.conversations.prompt_budget import PromptBudget
from loop.llm import LocalChatModel, local_backend_available
from loop.llm.windows import DEFAULT_WINDOW, MARGIN_TOKENS
from loop.service import open_services
from loop.settings import Settings
from memory_agent import (
    ChatMessage,
    ImportedMemory,
    MemoryCreationRequest,
    MemorySubAgent,
    estimate_tokens,
    memory_writer_for,
)

ADMIN_TOKEN = "bench-token"


def settings(db: Path, **overrides: Any) -> Settings:
    # No scheduled consolidation pass beside what a figure measures (`bench_consolidation`
    # measures the pass).
    return Settings(**{"db": db, "llm": "local", "admin_token": ADMIN_TOKEN,
                       "consolidation_every_seconds": 0, **overrides})


# -- memory jobs -------------------------------------------------------------------------------

async def run_all_jobs(db: Path, model: Any, concurrency: int, writer: str = "auto") -> float:
    async with open_services(settings(db, max_concurrent_memory_jobs=concurrency,
                                      energy_capacity=1e12, memory_writer=writer),
                             chat_model=model, memory_model=model) as services:
        worker = services.worker
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)
            # The job table is the truth about what is left; polling it is the measurement.
            while await services.stores.jobs.has_waiting() or (  # noqa: ASYNC110
                    (await services.stores.jobs.counts_by_status())["running"]):
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        elapsed = time.perf_counter() - started
        counts = await services.stores.jobs.counts_by_status()
        assert counts["done"] == sum(counts.values()), counts
        return elapsed


def bench_jobs(tmp: Path, quick: bool) -> dict[str, Any]:
    """Memory jobs a second with an instant model, for each writer (`jobs_per_s` is the
    model writer's, the default for such a model)."""
    apps, per_app = (200, 11) if quick else (1_000, 11)
    rates = {}
    for writer in ("model", "extractive"):
        db = tmp / f"jobs-{writer}.db"
        seed_ended_conversations(db, apps=apps, per_app=per_app)
        elapsed = anyio.run(run_all_jobs, db, ScriptedModel(), 8, writer)
        rates[writer] = round(apps * per_app / elapsed, 1)
    return {
        "jobs_per_s": rates["model"],
        "jobs_per_s_extractive": rates["extractive"],
        "jobs_total": apps * per_app,
    }


async def job_overhead(db: Path, jobs: int) -> float:
    """(job time − model time) ÷ model time, jobs run one at a time as the worker runs them."""
    model = Timed(ScriptedModel(seconds=TIMED_MODEL_SECONDS))
    async with open_services(settings(db, energy_capacity=1e12), chat_model=model,
                             memory_model=model) as services:
        worker = services.worker
        total = 0.0
        for _ in range(jobs):
            started = time.perf_counter()  # what the worker does per job: claim, run, record
            claimed = await worker.claim_next()
            assert claimed is not None
            await worker.run_job(claimed)
            total += time.perf_counter() - started
        return (total - model.seconds) / model.seconds


def bench_overhead(tmp: Path, quick: bool) -> dict[str, Any]:
    jobs = 20 if quick else 60
    db = tmp / "overhead.db"
    seed_ended_conversations(db, apps=jobs, per_app=1)
    overhead = anyio.run(job_overhead, db, jobs)
    return {"overhead_pct": round(overhead * 100, 3),
            "overhead_model_ms": TIMED_MODEL_SECONDS * 1000}


# -- the context window ------------------------------------------------------------------------

CONTEXT_TURNS = 40


def bench_context(tmp: Path, quick: bool) -> dict[str, Any]:
    """What keeping a request within the model's window adds to it, as `CentralLoop` does for
    every request: the system prompt, a memory block of ten memories and a 40-turn
    conversation (about 15,000 tokens) counted with the safe estimate, and the newest turns
    that fit a 4,096-token window's budget kept. `context_work_p50_ms`: a turn of a running
    conversation (its newest message new, the rest counted before); `context_work_cold_p50_ms`:
    every text new (a client's first request carrying a whole history)."""
    budget = PromptBudget(DEFAULT_WINDOW - 512 - MARGIN_TOKENS, estimate_tokens)
    turn = ("We talked about the trip, the train times, the hotel near the river and what the"
            " museum opens on Sundays. ") * 12

    def request(number: int, history: str) -> tuple[list[ChatMessage], list[ChatMessage]]:
        block = "\n".join(f"- [Created: 2026-11-0{n % 9 + 1}] The user said their locker code"
                          f" is {41000 + n} ({history}) and they train on Tuesdays."
                          for n in range(10))
        fixed = [ChatMessage("system", "You are the assistant of the app Tutor."),
                 ChatMessage("system", block)]
        conversation = [ChatMessage("user" if n % 2 == 0 else "assistant",
                                    f"{history} {n}: {turn}") for n in range(CONTEXT_TURNS * 2)]
        conversation.append(ChatMessage("user", f"question {number}: {turn}"))
        return fixed, conversation

    running: list[float] = []
    cold: list[float] = []
    for number in range(200 if quick else 2000):
        for history, seconds in (("same", running), (f"new {number}", cold)):
            fixed, conversation = request(number, history)
            started = time.perf_counter()
            kept = budget.newest_turns_that_fit(fixed, conversation)
            seconds.append(time.perf_counter() - started)
    return {
        "context_work_p50_ms": round(statistics.median(running) * 1000, 3),
        "context_work_cold_p50_ms": round(statistics.median(cold) * 1000, 3),
        "context_work_cold_p99_ms": round(percentile(cold, 99) * 1000, 3),
        "context_conversation_tokens": sum(estimate_tokens(m.content) for m in conversation),
        "context_turns_kept": len(kept),
    }


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


def serve_in_background(kind: str, db: Path | str, port: int, lag_file: Path | None = None
                        ) -> subprocess.Popen[bytes]:
    support = Path(__file__).resolve().parent / "bench_support.py"
    extra = [str(lag_file)] if lag_file else []
    server = subprocess.Popen([sys.executable, str(support), "serve", kind, str(db), str(port),
                               ADMIN_TOKEN, *extra], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
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
    apps = 1_000 if quick else 10_000
    db = tmp / "http.db"
    seed_memories(db, apps=apps, per_app=10)
    return http_figures(tmp, db, apps, quick)


def http_figures(tmp: Path, db: Path | str, apps: int, quick: bool, prefix: str = ""
                 ) -> dict[str, Any]:
    """Requests per second for an app's memories against a floor (a handler that reads
    nothing) in the same run, and the event loop's lag while the memories are served."""
    seconds = 2 if quick else 10
    results, lag_file = {}, tmp / f"{prefix}lag.json"
    window = (0.0, 0.0)
    for kind, template in (("floor", "/floor"), ("memories", "/apps/app{n}/memories")):
        port = free_port()
        server = serve_in_background(kind, db, port, lag_file if kind == "memories" else None)
        try:
            load(port, template, apps, 1)  # warm-up
            started = time.time()
            results[kind] = load(port, template, apps, seconds)
            window = (started, time.time()) if kind == "memories" else window
        finally:
            server.terminate()
            server.wait(timeout=30)
    lags = [lag for at, lag in json.loads(lag_file.read_text()) if window[0] <= at <= window[1]]
    memories, floor = results["memories"], results["floor"]
    figures = {
        "http_rps": round(memories["rps"], 1),
        "http_p99_ms": round(memories["p99_ms"], 3),
        "http_floor_rps": round(floor["rps"], 1),
        "http_vs_floor": round(memories["rps"] / floor["rps"], 3),
        "http_errors": int(memories["errors"]),
        "loop_lag_p99_ms": round(percentile(lags, 99) * 1000, 3),
    }
    figures = {f"{prefix}{key}": value for key, value in figures.items()}
    if not prefix:
        figures["http_client"] = "wrk" if memories.get("wrk") else "python-asyncio"
    return figures


# -- PostgreSQL --------------------------------------------------------------------------------

def bench_postgres(tmp: Path, quick: bool) -> dict[str, Any]:
    """The same figures on PostgreSQL, and memory jobs with 1 and 4 worker processes."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.postgres_server import PostgresServer

    server = PostgresServer.start(tmp)
    try:
        database = server.create_database
        apps = 1_000 if quick else 10_000
        seeded = tmp / "pg-seed.db"
        seed_memories(seeded, apps=apps, per_app=10)
        reads = database("reads")
        anyio.run(copy_to_postgres, seeded, reads)
        samples = 3_000 if quick else 20_000
        timings = anyio.run(retrieval_latencies, {apps: reads}, samples)[apps]
        results: dict[str, Any] = {
            "pg_retrieval_p50_ms": round(percentile(timings, 50) * 1000, 4),
            "pg_retrieval_p99_ms": round(percentile(timings, 99) * 1000, 4),
        }
        results.update(http_figures(tmp, reads, apps, quick, prefix="pg_"))
        jobs = 100 if quick else 600
        rates = {}
        for workers in (1, 4):
            db = database(f"jobs{workers}")
            rates[workers] = worker_processes_rate(tmp, db, workers, jobs)
        results["pg_jobs_per_s_1_worker"] = round(rates[1], 1)
        results["pg_jobs_per_s_4_workers"] = round(rates[4], 1)
        results["pg_worker_scaling"] = round(rates[4] / rates[1], 2)
        results["pg_jobs_model_ms"] = TIMED_MODEL_SECONDS * 1000
        return results
    finally:
        server.cleanup()


def worker_processes_rate(tmp: Path, db: str, workers: int, jobs: int) -> float:
    """Jobs per second done by `workers` worker processes with the 50 ms model. The jobs are
    seeded held back (due in the far future); the clock starts when every worker is ready
    and they are released."""
    import asyncpg

    seeded = tmp / f"pg-jobs-{workers}.db"
    seed_ended_conversations(seeded, apps=jobs // 2, per_app=2)
    with sqlite3.connect(seeded) as connection:
        connection.execute("UPDATE memory_jobs SET not_before = '9999'")
    anyio.run(copy_to_postgres, seeded, db)
    support = Path(__file__).resolve().parent / "bench_support.py"
    processes = [subprocess.Popen([sys.executable, str(support), "worker", db],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                 for _ in range(workers)]
    try:
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == b"ready"

        async def release_and_wait() -> float:
            connection = await asyncpg.connect(db)
            try:
                started = time.perf_counter()
                await connection.execute("UPDATE memory_jobs SET not_before = NULL")
                await connection.execute("SELECT pg_notify('mnemoloop_jobs', '')")
                while await connection.fetchval(  # noqa: ASYNC110 (another process's work)
                        "SELECT COUNT(*) FROM memory_jobs WHERE status <> 'done'"):
                    await anyio.sleep(0.02)
                return time.perf_counter() - started
            finally:
                await connection.close()

        return jobs / anyio.run(release_and_wait)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


# -- the embedded model ------------------------------------------------------------------------

CONVERSATION = [
    ChatMessage("user", "Please book my meetings after 2pm. Mornings are for deep work."),
    ChatMessage("assistant", "Understood: I will only schedule meetings in the afternoon."),
    ChatMessage("user", "Also, project Phoenix is due on November 1."),
    ChatMessage("assistant", "Noted: the Phoenix deadline is November 1."),
]


# Ten memories of a space at its cap, which the bench's job compacts.
_FULL_SPACE = [
    ImportedMemory(f"The user's locker {n} code is {4400 + n}.", "2025-01-01T00:00:00.000000Z")
    for n in range(10)
]


async def model_memory(db: Path, runs: int) -> dict[str, Any]:
    """A memory job as the service runs it with the bundled model: `auto` gives it the
    extractive writer, so the memory is the conversation's statements and the model's one
    call is the compaction of a space at its cap (each run's space holds ten memories)."""
    model = LocalChatModel()
    async with open_services(settings(db), chat_model=model, memory_model=model) as services:
        await services.stores.registry.install("bench", "Bench")
        timings, tokens, written = [], 0, 0
        recording = Timed(model)
        agent = MemorySubAgent(
            services.database, recording, writer=memory_writer_for("auto", model)
        )
        for n in range(runs):
            # Each run compacts a full space of its own user's.
            user = f"u{n}"
            await agent.import_memories("bench", _FULL_SPACE, user_id=user)
            started = time.perf_counter()
            # A different detail each run, so no answer comes from llama.cpp's prompt cache.
            conversation = [*CONVERSATION, ChatMessage("user", f"My desk is number {n + 7}.")]
            request = MemoryCreationRequest("bench", f"c{n}", conversation, user_id=user)
            try:
                created = await agent.create_memory(request)
                written += created.content is not None
            except Exception:  # the figure counts failures; the job would be skipped
                pass
            timings.append(time.perf_counter() - started)
        tokens = recording.completion_tokens
    await model.aclose()
    return {
        "model_memory_s": round(statistics.median(timings), 3),
        "model_tokens_per_s": round(tokens / recording.seconds, 1) if recording.seconds else None,
        "model_memories_written": f"{written}/{runs}",
    }


def bench_model(tmp: Path, quick: bool) -> dict[str, Any]:
    if not local_backend_available():
        return {"model_memory_s": None, "model_tokens_per_s": None,
                "model_memories_written": None, "model_memory_s_busy_core": None}
    figures = anyio.run(model_memory, tmp / "model.db", 3 if quick else 10)
    busy = None
    if not quick:
        # The same job beside a process that keeps one core busy, as a loaded machine would.
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            busy = anyio.run(model_memory, tmp / "model-busy.db", 5)["model_memory_s"]
        finally:
            spinner.kill()
            spinner.wait(timeout=30)
    return {**figures, "model_memory_s_busy_core": busy}


_FRIENDS = ("Ana", "Ben", "Caro", "Dev", "Eli", "Fay")
_CITIES = ("Lisbon", "Oslo", "Quito", "Perth", "Cairo", "Lima")


async def energy_spending(db: Path, conversations: int, model: Any) -> list[tuple[int, int]]:
    """Energy spent on memory and on the conversation, for each 6-turn conversation in turn."""
    spent: list[tuple[int, int]] = []
    async with open_services(settings(db, energy_capacity=1e12), chat_model=model,
                             memory_model=model) as services:
        await services.stores.registry.install("bench", "Bench")
        worker = services.worker
        before = await services.stores.energy.report()
        for number in range(conversations):
            conversation_id = await services.stores.conversations.open("bench")
            for turn in range(6):
                # Each turn states a lasting fact, so the memory model has one to write.
                friend = _FRIENDS[(number + turn) % len(_FRIENDS)]
                fact = f"My friend {friend} lives in {_CITIES[turn]}."
                await services.stores.conversations.add_message(conversation_id, "user", fact)
                await services.central.answer(conversation_id)
            await services.stores.conversations.end(conversation_id, "app")
            await worker.run_now(conversation_id)
            after = await services.stores.energy.report()
            spent.append((after.memory_spent - before.memory_spent,
                          after.conversation_spent - before.conversation_spent))
            before = after
    return spent


def _memory_share(spent: list[tuple[int, int]]) -> float | None:
    memory, conversation = sum(m for m, _ in spent), sum(c for _, c in spent)
    return round(memory / (memory + conversation), 4) if memory + conversation else None


# Conversations left out of the steady share: the first ones, when nothing is compacted yet.
_WARM_UP = 2


def bench_energy(tmp: Path, quick: bool) -> dict[str, Any]:
    if local_backend_available():
        model: Any = LocalChatModel()
        kind = "embedded"
    else:
        model, kind = ScriptedModel(), "scripted"
    try:
        spent = anyio.run(energy_spending, tmp / "energy.db", 1 if quick else 16, model)
    finally:
        if isinstance(model, LocalChatModel):
            model.close()
    return {
        "energy_memory_share": _memory_share(spent),
        # The same after the first conversations.
        "energy_memory_share_steady": _memory_share(spent[_WARM_UP:]),
        "energy_workload_model": kind,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a minute: smaller data")
    parser.add_argument("--json", action="store_true", help="print the object on one line")
    parser.add_argument("--only", metavar="NAME", help="one benchmark, such as bench_dialects")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the 🧠 lines are per retrieval; keep them out of timings
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="mnemoloop-bench-") as folder:
        tmp = Path(folder)
        benches = (bench_retrieval, bench_spaces, bench_profiles, bench_query, bench_jobs,
                   bench_overhead, bench_context, bench_http, bench_dialects, bench_postgres,
                   bench_model, bench_energy, bench_consolidation)
        for bench in benches:
            if args.only and bench.__name__ != args.only:
                continue
            started = time.perf_counter()
            results.update(bench(tmp, args.quick))
            print(f"bench: {bench.__name__} took {time.perf_counter() - started:.1f} s",
                  file=sys.stderr, flush=True)
    results["rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    sqlite3.enable_callback_tracebacks(True)
    main()
