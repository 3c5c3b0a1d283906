"""Exactly once and never over the cap, with a real `mnemoloop serve` against the stand-in
Ollama: SIGKILL twenty times at random moments of memory work, and watch a 50-conversation
burst on one app through HTTP and the database file."""

from __future__ import annotations

import random
import signal
import sqlite3
from pathlib import Path

import anyio
import httpx
import pytest

from tests.fake_ollama import fake_ollama
from tests.fakes import CITIES, FRIENDS
from tests.live_service import free_port, start_serve, wait_healthy

pytestmark = [pytest.mark.fault, pytest.mark.anyio]
TOKEN = {"Authorization": "Bearer once"}
SERVE = {"token": "once", "max_concurrent_memory_jobs": "2", "energy_capacity": "1e9"}
KILLS = 20


def fact(n: int) -> str:
    return f"My friend {FRIENDS[n % len(FRIENDS)]} lives in {CITIES[n * 7 % len(CITIES)]}."


def counts(db: Path) -> tuple[dict[str, int], int]:
    """Jobs by status, and the largest number of memories any app holds."""
    with sqlite3.connect(db, timeout=10) as connection:
        jobs = dict(connection.execute("SELECT status, COUNT(*) FROM memory_jobs GROUP BY 1"))
        largest = connection.execute(
            "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM app_memories"
            " GROUP BY app_id)").fetchone()[0]
    return jobs, largest


def duplicates(db: Path) -> int:
    """Conversations that gave more than one memory (by the memories, or by the history)."""
    with sqlite3.connect(db, timeout=10) as connection:
        by_source = connection.execute(
            "SELECT COUNT(*) FROM (SELECT source_conversation_id FROM app_memories"
            " WHERE source_conversation_id IS NOT NULL GROUP BY 1 HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        by_history = connection.execute(
            "SELECT COUNT(*) FROM (SELECT conversation_id FROM memory_events"
            " WHERE event = 'created' GROUP BY 1 HAVING COUNT(*) > 1)").fetchone()[0]
    return int(by_source + by_history)


async def end_conversations(client: httpx.AsyncClient, app_id: str, texts: list[str]) -> None:
    async def one(text: str) -> None:
        opened = await client.post(f"/apps/{app_id}/conversations")
        conversation_id = opened.json()["conversationId"]
        await client.post(f"/conversations/{conversation_id}/messages", json={"content": text})
        await client.post(f"/conversations/{conversation_id}/end", json={"reason": "done"})

    async with anyio.create_task_group() as group:
        for text in texts:
            group.start_soon(one, text)


async def test_sigkill_at_random_moments_never_duplicates_nor_passes_the_cap(tmp_path):
    db, log, port = tmp_path / "once.db", tmp_path / "serve.log", free_port()
    rng = random.Random(11)
    url = f"http://127.0.0.1:{port}"
    with fake_ollama(delay=0.12) as ollama:
        server = start_serve(db, port, ollama, log, **SERVE)
        try:
            await wait_healthy(url)
            async with httpx.AsyncClient(base_url=url, headers=TOKEN, timeout=30) as client:
                await client.post("/apps", json={"appId": "cap", "name": "At its cap"})
                await end_conversations(client, "cap", [fact(n) for n in range(60)])
        finally:
            server.send_signal(signal.SIGKILL)
            server.wait()

        kills, largest_seen = 0, 0
        for _ in range(KILLS):
            server = start_serve(db, port, ollama, log, **SERVE)
            try:
                await wait_healthy(url)
                await anyio.sleep(rng.uniform(0.05, 1.0))
            finally:
                server.send_signal(signal.SIGKILL)
                server.wait()
            kills += 1
            jobs, largest = counts(db)
            largest_seen = max(largest_seen, largest)
            assert duplicates(db) == 0, f"after kill {kills}"
            assert largest <= 10, f"after kill {kills}: {largest} memories"

        server = start_serve(db, port, ollama, log, **SERVE)
        try:
            with anyio.fail_after(180):
                while set(counts(db)[0]) - {"done", "skipped", "failed"}:
                    await anyio.sleep(0.1)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)

    jobs, largest = counts(db)
    print(f"\n{kills} SIGKILLs; jobs {jobs}; duplicates {duplicates(db)}; "
          f"largest count seen {max(largest_seen, largest)}")
    assert jobs == {"done": 60}
    assert duplicates(db) == 0
    assert largest == 10
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_a_burst_on_one_app_never_shows_more_than_the_cap(tmp_path):
    db, log, port = tmp_path / "burst.db", tmp_path / "serve.log", free_port()
    url = f"http://127.0.0.1:{port}"
    largest_http = largest_file = 0
    with fake_ollama(delay=0.02) as ollama:
        server = start_serve(db, port, ollama, log, **{**SERVE, "max_concurrent_memory_jobs": "4"})
        try:
            await wait_healthy(url)
            async with httpx.AsyncClient(base_url=url, headers=TOKEN, timeout=30) as client:
                await client.post("/apps", json={"appId": "burst", "name": "Burst"})
                done = anyio.Event()

                async def watch() -> None:
                    nonlocal largest_http, largest_file
                    while not done.is_set():
                        listed = await client.get("/apps/burst/memories")
                        largest_http = max(largest_http, len(listed.json()["memories"]))
                        largest_file = max(largest_file, counts(db)[1])
                        await anyio.sleep(0.005)

                async with anyio.create_task_group() as group:
                    group.start_soon(watch)
                    await end_conversations(client, "burst", [fact(n) for n in range(50)])
                    with anyio.fail_after(120):
                        while counts(db)[0].get("done", 0) < 50:
                            await anyio.sleep(0.05)
                    done.set()
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    print(f"\nlargest count: {largest_http} over HTTP, {largest_file} in the file")
    assert largest_http == largest_file == 10
