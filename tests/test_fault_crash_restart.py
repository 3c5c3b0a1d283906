"""SIGKILL `mnemoloop serve` while 200 conversations across 20 apps are being ended, restart
it, and check that nothing was lost or corrupted."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import anyio
import httpx
import pytest

from loop.storage.sqlite import apply_migrations
from memory_agent.writers.extractive.words.text import sentences
from tests.fake_ollama import fake_ollama
from tests.live_service import free_port, start_serve, wait_healthy

pytestmark = [pytest.mark.fault, pytest.mark.anyio]
APPS, PER_APP, SEEDED, LIMIT = 20, 10, 8, 10
TOKEN = {"Authorization": "Bearer crash-test"}
SERVE = {"token": "crash-test", "max_concurrent_memory_jobs": "4", "memory_limit": str(LIMIT),
         # This test is about durability; energy exhaustion has its own.
         "energy_capacity": "1e9"}


def seed(db: Path) -> None:
    apply_migrations(db)
    with sqlite3.connect(db) as connection:
        for app in range(APPS):
            connection.execute("INSERT INTO apps (app_id, name, installed, installed_at)"
                               " VALUES (?, ?, 1, '2025-10-01T00:00:00.000000Z')",
                               (f"app{app}", f"App {app}"))
            for n in range(SEEDED):
                stamp = f"2025-09-{n + 1:02d}T00:00:00.000000Z"
                connection.execute(
                    "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
                    " VALUES (?, ?, ?, ?, '{}')",
                    (f"app{app}", f"Seeded fact {n}. It is old.", stamp, stamp))


def job_counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as connection:
        return dict(connection.execute("SELECT status, COUNT(*) FROM memory_jobs GROUP BY status"))


async def test_sigkill_mid_burst_loses_and_corrupts_nothing(tmp_path):
    db, log, port = tmp_path / "crash.db", tmp_path / "serve.log", free_port()
    seed(db)
    with fake_ollama(delay=0.03) as ollama:
        server = start_serve(db, port, ollama, log, **SERVE)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=TOKEN,
                                         timeout=30) as client:
                await wait_healthy(f"http://127.0.0.1:{port}")
                conversations = await open_and_talk(client)
                async with anyio.create_task_group() as burst:
                    for conversation_id in conversations:
                        burst.start_soon(client.post, f"/conversations/{conversation_id}/end")
                # Let some jobs finish, then kill while others are running or pending.
                with anyio.fail_after(60):
                    while job_counts(db).get("done", 0) < 30:
                        await anyio.sleep(0.02)
        finally:
            server.send_signal(signal.SIGKILL)
            server.wait()
        at_kill = job_counts(db)
        assert at_kill.get("pending", 0) + at_kill.get("running", 0) > 0, at_kill

        restarted = time.monotonic()
        server = start_serve(db, port, ollama, log, **SERVE)
        try:
            with anyio.fail_after(120):
                while set(job_counts(db)) - {"done", "skipped", "failed"}:
                    await anyio.sleep(0.05)
            recovery = time.monotonic() - restarted
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)

    print(f"\nat kill: {at_kill}; recovered in {recovery:.2f} s; after: {job_counts(db)}")
    check_invariants(db, ended=len(conversations))


def locker(app: int, n: int) -> int:
    return 1000 + app * 100 + n


async def open_and_talk(client: httpx.AsyncClient) -> list[str]:
    conversations: list[str] = []

    async def one(app: int, n: int) -> None:
        opened = await client.post(f"/apps/app{app}/conversations")
        conversation_id = opened.json()["conversationId"]
        await client.post(f"/conversations/{conversation_id}/messages",
                          json={"content": f"Please remember my locker code is {locker(app, n)}."})
        conversations.append(conversation_id)

    async with anyio.create_task_group() as group:
        for app in range(APPS):
            for n in range(PER_APP):
                group.start_soon(one, app, n)
    return conversations


def check_invariants(db: Path, *, ended: int) -> None:
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        ended_now = connection.execute(
            "SELECT COUNT(*) FROM conversations WHERE status = 'ended'").fetchone()[0]
        jobs = connection.execute("SELECT status, last_error FROM memory_jobs").fetchall()
        assert ended_now == ended == len(jobs), "every ended conversation has exactly one job"
        assert all(status == "done" or (status == "skipped" and error) for status, error in jobs)
        # Exactly once: no conversation has two memories, or two creations in the history.
        assert connection.execute(
            "SELECT source_conversation_id, COUNT(*) FROM app_memories"
            " WHERE source_conversation_id IS NOT NULL GROUP BY 1 HAVING COUNT(*) > 1"
        ).fetchall() == []
        assert connection.execute(
            "SELECT conversation_id, COUNT(*) FROM memory_events WHERE event = 'created'"
            " GROUP BY 1 HAVING COUNT(*) > 1"
        ).fetchall() == []
        per_app = connection.execute(
            "SELECT app_id, COUNT(*) FROM app_memories GROUP BY app_id").fetchall()
        assert max(count for _, count in per_app) <= LIMIT, per_app
        for content, source in connection.execute(
                "SELECT content, source_conversation_id FROM app_memories"):
            assert content.strip() and len(content) <= 400
            assert 1 <= len(sentences(content)) <= 4, content
            if source is not None:
                assert connection.execute("SELECT 1 FROM conversations WHERE conversation_id = ?",
                                          (source,)).fetchone()
