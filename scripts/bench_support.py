"""Pieces of scripts/bench.py: seeding, scripted models, and the two processes it starts.

    python scripts/bench_support.py serve {floor|memories} DB PORT TOKEN [LAG_FILE]
    python scripts/bench_support.py load PORT PATH_TEMPLATE APPS SECONDS TOKEN
    python scripts/bench_support.py worker DB
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio

from loop.storage import apply_migrations

STAMP = "2025-10-01T00:00:00.000000Z"


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(pct / 100 * len(ordered)) - 1)]


def migrated_with_apps(db: Path, apps: int) -> sqlite3.Connection:
    apply_migrations(db)
    connection = sqlite3.connect(db)
    connection.executemany(
        "INSERT INTO apps (app_id, name, installed, installed_at) VALUES (?, ?, 1, ?)",
        ((f"app{n}", f"App {n}", STAMP) for n in range(apps)))
    return connection


def seed_memories(db: Path, *, apps: int, per_app: int) -> None:
    with closing(migrated_with_apps(db, apps)) as connection, connection:
        connection.executemany(
            "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
            " VALUES (?, ?, ?, ?, '{}')",
            ((f"app{n}", f"The user of app {n} said thing {k}. It matters for later work.",
              f"2025-10-{k + 1:02d}T10:00:00.000000Z", STAMP)
             for n in range(apps) for k in range(per_app)))
        connection.execute("ANALYZE")


def seed_user_spaces(db: Path, *, users: int, per_user: int, shared: int) -> None:
    """One app (`app0`) with `shared` memories in its shared space and `per_user` in each of
    `users` users' spaces."""
    with closing(migrated_with_apps(db, 1)) as connection, connection:
        rows = [("", k) for k in range(shared)]
        rows += [(f"user{n}", k) for n in range(users) for k in range(per_user)]
        connection.executemany(
            "INSERT INTO app_memories (app_id, user_id, content, created_at, updated_at,"
            " metadata) VALUES ('app0', ?, ?, ?, ?, '{}')",
            ((user, f"{user or 'Everyone'} said thing {k}. It matters for later work.",
              f"2025-10-{k + 1:02d}T10:00:00.000000Z", STAMP) for user, k in rows))
        connection.execute("ANALYZE")


def seed_profiles(db: Path, *, users: int, per_user: int, shared: int) -> None:
    """`seed_user_spaces`, with `app0` sharing its users' profiles: each user also has
    `per_user` profile memories, every memory its `created` history event, and a previous
    conversation that saw the user's first event (so the delta header has changes to name)
    beside the current one (`now-user<n>`)."""
    seed_user_spaces(db, users=users, per_user=per_user, shared=shared)
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE apps SET shares_profile = 1 WHERE app_id = 'app0'")
        connection.executemany(
            "INSERT INTO app_memories (app_id, user_id, content, created_at, updated_at,"
            " metadata) VALUES ('', ?, ?, ?, ?, '{}')",
            ((f"user{n}", f"user{n} is vegetarian, fact {k}.",
              f"2025-10-{k + 1:02d}T10:00:00.000000Z", STAMP)
             for n in range(users) for k in range(per_user)))
        connection.execute(
            "INSERT INTO memory_events (app_id, user_id, memory_id, event, actor,"
            " content_after, created_at) SELECT app_id, user_id, id, 'created', 'job',"
            " content, created_at FROM app_memories ORDER BY user_id, id"
        )
        connection.executemany(
            "INSERT INTO conversations (conversation_id, app_id, user_id, status,"
            " created_at, last_activity_at, memory_revision) VALUES (?, 'app0', ?, ?, ?, ?, ?)",
            ((f"{kind}-user{n}", f"user{n}", status, STAMP, STAMP, None)
             for n in range(users) for kind, status in (("prev", "ended"), ("now", "open"))))
        connection.execute(
            # By the index on (app_id, user_id, id): a user id alone would scan every event.
            "UPDATE conversations SET memory_revision = (SELECT MIN(e.id) FROM memory_events e"
            " WHERE e.app_id = 'app0' AND e.user_id = conversations.user_id)"
            " WHERE conversation_id LIKE 'prev-%'"
        )
        connection.execute("ANALYZE")


def seed_ended_conversations(db: Path, *, apps: int, per_app: int) -> None:
    """Ended conversations with their pending memory jobs, interleaved across apps."""
    with closing(migrated_with_apps(db, apps)) as connection, connection:
        for round_ in range(per_app):
            rows = [(f"c{round_}-{n}", f"app{n}") for n in range(apps)]
            connection.executemany(
                "INSERT INTO conversations (conversation_id, app_id, status, end_reason,"
                " created_at, ended_at, last_activity_at) VALUES (?, ?, 'ended', 'app', ?, ?, ?)",
                ((c, a, STAMP, STAMP, STAMP) for c, a in rows))
            connection.executemany(
                "INSERT INTO messages (conversation_id, role, content, created_at)"
                " VALUES (?, ?, ?, ?)",
                ((c, role, text, STAMP) for c, _ in rows for role, text in (
                    ("user", f"Remember note {round_} for me please."),
                    ("assistant", f"Noted: note {round_}."))))
            connection.executemany(
                "INSERT INTO memory_jobs (app_id, conversation_id, status, created_at,"
                " updated_at) VALUES (?, ?, 'pending', ?, ?)",
                ((a, c, STAMP, STAMP) for c, a in rows))


# Tables seeded into SQLite and copied to PostgreSQL, parents first; `id` columns are left for
# PostgreSQL to number.
_COPIED = ("apps", "conversations", "messages", "app_memories", "memory_jobs")


async def copy_to_postgres(sqlite_db: Path, url: str) -> None:
    """Migrate the PostgreSQL database and copy the seeded SQLite file's rows into it."""
    import asyncpg

    from loop.storage import migrate

    await migrate(url)
    connection = await asyncpg.connect(url)
    try:
        with closing(sqlite3.connect(sqlite_db)) as source:
            for table in _COPIED:
                # The profiles' apps row ('') is the migration's on both sides.
                where = " WHERE app_id <> ''" if table == "apps" else ""
                cursor = source.execute(f"SELECT * FROM {table}{where}")
                columns = [d[0] for d in cursor.description]
                keep = [i for i, name in enumerate(columns) if name != "id"]
                rows = [tuple(row[i] for i in keep) for row in cursor]
                if rows:
                    await connection.copy_records_to_table(
                        table, records=rows, columns=[columns[i] for i in keep])
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


class LoopLag:
    """How late the event loop wakes a task that asked to sleep 1 ms: what every request
    waiting on this loop waits on top of its own work."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (wall-clock time, lag in seconds)

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await anyio.sleep(0.001)
            lag = max(time.perf_counter() - started - 0.001, 0.0)
            self.samples.append((time.time(), lag))


# -- the server and worker processes -----------------------------------------------------------

def worker(db: str) -> None:
    """A memory worker with the 50 ms model, until SIGTERM; prints `ready` once it runs."""
    from scripted_models import TIMED_MODEL_SECONDS, ScriptedModel

    from loop.service import open_services
    from loop.settings import Settings

    async def run() -> None:
        model = ScriptedModel(seconds=TIMED_MODEL_SECONDS)
        # Memory jobs only: the daily consolidation pass is `bench_consolidation`'s figure.
        settings = Settings(db=db, llm="local", energy_capacity=1e12,
                            consolidation_every_seconds=0)
        async with open_services(settings, chat_model=model, memory_model=model) as services:
            worker = services.worker
            async with anyio.create_task_group() as group:
                group.start_soon(worker.run)
                group.start_soon(services.listen)
                print("ready", flush=True)
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        break
                group.cancel_scope.cancel()

    anyio.run(run)


def serve(kind: str, db: str, port: int, token: str, lag_file: str | None = None) -> None:
    import uvicorn
    from litestar import Litestar, get

    from admin_api import create_app
    from loop.llm import NoModelLoaded
    from loop.service import open_services
    from loop.settings import Settings
    from mnemoloop.runner import SignalFreeServer

    def run(app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                access_log=False)
        anyio.run(uvicorn.Server(config).serve)

    if kind == "floor":
        @get("/floor", sync_to_thread=False)
        def floor() -> dict[str, list[str]]:
            return {"memories": []}

        run(Litestar([floor], logging_config=None))
        return

    async def memories() -> LoopLag:
        model = NoModelLoaded()
        settings = Settings(db=db, llm="local")
        lag = LoopLag()
        async with open_services(settings, chat_model=model, memory_model=model) as services:
            config = uvicorn.Config(create_app(services, token), host="127.0.0.1", port=port,
                                    log_level="warning", access_log=False)
            server = SignalFreeServer(config)

            async def stop_on_sigterm() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        server.should_exit = True
                        return

            async with anyio.create_task_group() as group:
                group.start_soon(lag.run)
                group.start_soon(stop_on_sigterm)
                await server.serve()
                group.cancel_scope.cancel()
        return lag

    lag = anyio.run(memories)
    if lag_file:
        Path(lag_file).write_text(json.dumps(lag.samples))


# -- the load process --------------------------------------------------------------------------

WRK_SCRIPT = """
local apps = {apps}
math.randomseed(1)
request = function()
  local path = string.gsub("{template}", "{{n}}", tostring(math.random(0, apps - 1)))
  return wrk.format("GET", path, {{["Authorization"] = "Bearer {token}"}})
end
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def load_with_wrk(port: int, template: str, apps: int, seconds: int, token: str
                  ) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT.format(apps=apps, template=template, token=token))
    # One load thread: on a 2-core machine the server needs the other core to itself.
    out = subprocess.run(["wrk", "-t1", "-c32", f"-d{seconds}s", "--latency", "-s", script.name,
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True,
                         check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * _UNITS[p99.group(2)] if p99 else math.nan,
            "errors": int(bad.group(1)) if bad else 0, "wrk": True}


async def _connection(port: int, template: str, apps: int, token: str, until: float,
                      latencies: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rng = random.Random()
    while time.perf_counter() < until:
        path = template.replace("{n}", str(rng.randrange(apps)))
        started = time.perf_counter()
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}"
                     "\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"content-length:\s*(\d+)", head, re.I).group(1))  # type: ignore[union-attr]
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        if not head.startswith(b"HTTP/1.1 2"):
            errors.append(1)
    writer.close()


async def load_with_asyncio(port: int, template: str, apps: int, seconds: int, token: str
                            ) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[int] = []
    until = time.perf_counter() + seconds
    started = time.perf_counter()
    await asyncio.gather(*(_connection(port, template, apps, token, until, latencies, errors)
                           for _ in range(32)))
    elapsed = time.perf_counter() - started
    return {"rps": len(latencies) / elapsed, "p99_ms": percentile(latencies, 99) * 1000,
            "errors": len(errors), "wrk": False}


def main(argv: list[str]) -> None:
    if argv[0] == "serve":
        serve(argv[1], argv[2], int(argv[3]), argv[4], argv[5] if len(argv) > 5 else None)
    elif argv[0] == "worker":
        worker(argv[1])
    elif argv[0] == "load":
        port, template, token = int(argv[1]), argv[2], argv[5]
        apps, seconds = int(argv[3]), int(argv[4])
        if shutil.which("wrk"):
            figures = load_with_wrk(port, template, apps, seconds, token)
        else:
            figures = asyncio.run(load_with_asyncio(port, template, apps, seconds, token))
        print(json.dumps(figures))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
