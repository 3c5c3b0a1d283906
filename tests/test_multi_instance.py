"""Several instances on one PostgreSQL database, as real processes against the stand-in
Ollama: each message answered once, a killed instance's work taken over when its lease runs
out, the cap held, and a database restart survived with 503s and nothing lost. And on SQLite,
a second process on the same file is refused in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest

from tests.db_query import query
from tests.fake_ollama import MODEL, fake_ollama
from tests.fakes import CITIES, FRIENDS
from tests.live_service import free_port, start_serve, start_worker, wait_healthy

pytestmark = [pytest.mark.fault, pytest.mark.anyio]
TOKEN = "multi"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
# A short lease, so that a killed instance's work is taken over within seconds.
INSTANCE = {"lease_seconds": "2", "energy_capacity": "1e9", "max_concurrent_memory_jobs": "2"}


def fact(n: int) -> str:
    return f"My friend {FRIENDS[n % len(FRIENDS)]} lives in {CITIES[n * 7 % len(CITIES)]}."


def job_counts(db: str) -> dict[str, int]:
    return dict(query(db, "SELECT status, COUNT(*) FROM memory_jobs GROUP BY status"))


def largest_app(db: str) -> int:
    rows = query(db, "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM app_memories"
                     " GROUP BY app_id) AS counts")
    return int(rows[0][0])


def duplicated_memories(db: str) -> int:
    """Conversations that gave more than one memory (by the memories, or by the history)."""
    by_source = query(db, "SELECT COUNT(*) FROM (SELECT source_conversation_id FROM app_memories"
                          " WHERE source_conversation_id IS NOT NULL GROUP BY 1"
                          " HAVING COUNT(*) > 1) AS d")[0][0]
    by_history = query(db, "SELECT COUNT(*) FROM (SELECT conversation_id FROM memory_events"
                           " WHERE event = 'created' GROUP BY 1 HAVING COUNT(*) > 1) AS d")[0][0]
    return int(by_source) + int(by_history)


def answers_per_question(db: str) -> Counter[int]:
    """How many assistant messages each conversation got (each asked one question)."""
    rows = query(db, "SELECT c.conversation_id, COUNT(m.id) FROM conversations c LEFT JOIN"
                     " messages m ON m.conversation_id = c.conversation_id"
                     " AND m.role = 'assistant' GROUP BY c.conversation_id")
    return Counter(int(n) for _, n in rows)


class Instances:
    """`serve` processes on free ports (and `worker` processes), stopped at the end."""

    def __init__(self, db: str, ollama: str, folder: Path) -> None:
        self.db, self.ollama, self.folder = db, ollama, folder
        self.processes: list[subprocess.Popen[bytes]] = []
        self.urls: list[str] = []

    async def serve(self, count: int, **settings: str) -> list[str]:
        for _ in range(count):
            port = free_port()
            log = self.folder / f"serve-{port}.log"
            self.processes.append(
                start_serve(self.db, port, self.ollama, log, TOKEN, **{**INSTANCE, **settings}))
            self.urls.append(f"http://127.0.0.1:{port}")
        for url in self.urls[-count:]:
            await wait_healthy(url)
        return self.urls[-count:]

    def worker(self, **settings: str) -> subprocess.Popen[bytes]:
        process = start_worker(self.db, self.ollama, self.folder / "worker.log",
                               **{**INSTANCE, **settings})
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def ask_and_end(client: httpx.AsyncClient, app_id: str, text: str,
                      wait_for_answer: bool = False) -> str:
    opened = await client.post(f"/apps/{app_id}/conversations")
    conversation_id = opened.json()["conversationId"]
    await client.post(f"/conversations/{conversation_id}/messages", json={"content": text})
    if wait_for_answer:
        with anyio.fail_after(60):
            while True:
                state = (await client.get(f"/conversations/{conversation_id}")).json()
                if any(m["role"] == "assistant" for m in state["messages"]):
                    break
                await anyio.sleep(0.05)
    await client.post(f"/conversations/{conversation_id}/end", json={"reason": "done"})
    return conversation_id


async def wait_until_holding(db: str, pid: int) -> None:
    """Until the instance with this process id holds a claim on a job or an answer."""
    owner = f"%:{pid}:%"
    with anyio.fail_after(30):
        while not query(db, "SELECT 1 FROM memory_jobs WHERE status = 'running' AND lease_owner"
                            " LIKE ? UNION ALL SELECT 1 FROM conversations WHERE answer_state ="
                            " 'answering' AND answer_owner LIKE ?", (owner, owner)):
            await anyio.sleep(0.01)


async def wait_until_settled(db: str, jobs: int, timeout: float = 120) -> dict[str, int]:  # noqa: ASYNC109
    with anyio.fail_after(timeout):
        while True:
            counts = job_counts(db)
            if sum(counts.get(s, 0) for s in ("done", "skipped", "failed")) >= jobs:
                return counts
            await anyio.sleep(0.1)


@pytest.mark.postgresql_only
async def test_three_instances_answer_once_and_finish_a_killed_ones_jobs(db_path, tmp_path):
    with fake_ollama(delay=0.15) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            urls = await instances.serve(3)
            # Requests go to the first two; the third takes part through its claims (answers
            # and memory jobs), and dies mid-burst with work in hand.
            clients = [httpx.AsyncClient(base_url=u, headers=HEADERS, timeout=30)
                       for u in urls[:2]]
            await clients[0].post("/apps", json={"appId": "team", "name": "Team"})
            await clients[0].post("/apps", json={"appId": "solo", "name": "Solo"})

            async def one(n: int) -> None:
                await ask_and_end(clients[n % 2], ("team", "solo")[n % 2], fact(n),
                                  wait_for_answer=True)

            victim = instances.processes[2]
            async with anyio.create_task_group() as group:
                for n in range(36):
                    group.start_soon(one, n)
                    if n == 24:  # kill the third instance while it holds a claim
                        await wait_until_holding(db_path, victim.pid)
                        victim.send_signal(signal.SIGKILL)
            counts = await wait_until_settled(db_path, 36)
            for client in clients:
                await client.aclose()
        finally:
            instances.stop()
    answers = answers_per_question(db_path)
    killed_log = (tmp_path / f"serve-{urls[2].rsplit(':', 1)[1]}.log").read_text()
    taken_over = query(db_path, "SELECT COUNT(*) FROM memory_jobs WHERE attempts > 1")[0][0]
    answers_retried = query(
        db_path, "SELECT COUNT(*) FROM conversations WHERE answer_attempts > 1")[0][0]
    print(f"\njobs {counts}; answers per question {dict(answers)}; duplicates "
          f"{duplicated_memories(db_path)}; largest app {largest_app(db_path)}; memories the "
          f"killed instance wrote {killed_log.count('Created memory')}; jobs taken over "
          f"{taken_over}; answers taken over {answers_retried}")
    assert taken_over + answers_retried >= 1, "the killed instance's claim was taken over"
    assert counts == {"done": 36}, "no job lost"
    assert answers == Counter({1: 36}), "each question answered exactly once"
    assert duplicated_memories(db_path) == 0
    assert largest_app(db_path) == 10


@pytest.mark.postgresql_only
async def test_fifty_ends_of_one_app_over_three_instances_keep_the_cap(db_path, tmp_path):
    largest_seen = 0
    with fake_ollama(delay=0.02) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            urls = await instances.serve(3, max_concurrent_memory_jobs="4")
            clients = [httpx.AsyncClient(base_url=u, headers=HEADERS, timeout=30) for u in urls]
            await clients[0].post("/apps", json={"appId": "burst", "name": "Burst"})
            done = anyio.Event()

            async def watch() -> None:
                nonlocal largest_seen
                while not done.is_set():
                    largest_seen = max(largest_seen, largest_app(db_path))
                    await anyio.sleep(0.01)

            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                async with anyio.create_task_group() as burst:
                    for n in range(50):
                        burst.start_soon(ask_and_end, clients[n % 3], "burst", fact(n))
                counts = await wait_until_settled(db_path, 50)
                done.set()
            for client in clients:
                await client.aclose()
        finally:
            instances.stop()
    print(f"\njobs {counts}; largest count seen {largest_seen}")
    assert counts == {"done": 50}
    assert largest_seen == largest_app(db_path) == 10
    assert duplicated_memories(db_path) == 0


@pytest.mark.postgresql_only
async def test_a_worker_process_alone_runs_the_queued_memory_jobs(db_path, tmp_path):
    at = "2025-10-01T09:00:00.000000Z"
    query(db_path, "INSERT INTO apps (app_id, name, installed, installed_at) VALUES"
                   " ('w', 'W', 1, ?)", (at,))
    for n in range(3):
        query(db_path, "INSERT INTO conversations (conversation_id, app_id, status, created_at,"
                       " last_activity_at) VALUES (?, 'w', 'ended', ?, ?)", (f"c{n}", at, at))
        query(db_path, "INSERT INTO messages (conversation_id, role, content, created_at)"
                       " VALUES (?, 'user', ?, ?)", (f"c{n}", fact(n), at))
        query(db_path, "INSERT INTO memory_jobs (app_id, conversation_id, status, created_at,"
                       " updated_at) VALUES ('w', ?, 'pending', ?, ?)", (f"c{n}", at, at))
    with fake_ollama(delay=0.02) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            instances.worker()
            counts = await wait_until_settled(db_path, 3, timeout=60)
        finally:
            instances.stop()
    assert counts == {"done": 3}
    assert len(query(db_path, "SELECT id FROM app_memories WHERE app_id = 'w'")) == 3


@pytest.mark.postgresql_only
async def test_a_database_restart_mid_run_gives_503s_and_loses_nothing(db_path, tmp_path,
                                                                       postgres_server):
    statuses: Counter[int] = Counter()
    with fake_ollama(delay=0.05) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            urls = await instances.serve(2)
            clients = [httpx.AsyncClient(base_url=u, headers=HEADERS, timeout=30) for u in urls]
            await clients[0].post("/apps", json={"appId": "calm", "name": "Calm"})
            async with anyio.create_task_group() as burst:
                for n in range(10):
                    burst.start_soon(ask_and_end, clients[n % 2], "calm", fact(n))
            down = anyio.Event()
            back = anyio.Event()

            async def poll() -> None:
                while not back.is_set():
                    for client in clients:
                        for path in ("/apps", "/apps/calm/memories", "/memory-jobs"):
                            statuses[(await client.get(path)).status_code] += 1
                    await anyio.sleep(0.02)

            async def restart() -> None:
                await anyio.sleep(0.2)
                await anyio.to_thread.run_sync(postgres_server.stop)
                down.set()
                await anyio.sleep(2)
                await anyio.to_thread.run_sync(postgres_server.restart)
                back.set()

            async with anyio.create_task_group() as group:
                group.start_soon(poll)
                group.start_soon(restart)
                await down.wait()
                refused = await clients[0].post("/apps/calm/conversations")
                assert refused.status_code == 503
                assert refused.headers["content-type"].startswith("application/problem+json")

            async def after(n: int) -> None:
                with anyio.fail_after(30):  # the pools reconnect on their own
                    while (await clients[n % 2].get("/apps")).status_code != 200:
                        await anyio.sleep(0.1)
                await ask_and_end(clients[n % 2], "calm", fact(n), wait_for_answer=True)

            async with anyio.create_task_group() as burst:
                for n in range(10, 20):
                    burst.start_soon(after, n)
            counts = await wait_until_settled(db_path, 20)
            for client in clients:
                await client.aclose()
        finally:
            instances.stop()
    print(f"\nstatuses while the database restarted {dict(statuses)}; jobs {counts}")
    assert set(statuses) <= {200, 503} and statuses[503] > 0, statuses
    assert counts == {"done": 20}
    assert duplicated_memories(db_path) == 0


@pytest.mark.sqlite_only
async def test_a_second_process_on_a_sqlite_file_is_refused_in_one_line(db_path, tmp_path):
    with fake_ollama() as ollama:
        instances = Instances(str(db_path), ollama, tmp_path)
        try:
            await instances.serve(1)
            for command in ("serve", "worker"):
                second = await anyio.run_process(
                    [sys.executable, "-m", "mnemoloop", command], check=False,
                    env={**os.environ, "MNEMOLOOP_DB": str(db_path), "MNEMOLOOP_PORT": "0",
                         "MNEMOLOOP_ADMIN_TOKEN": "x", "MNEMOLOOP_LLM": f"ollama:{MODEL}",
                         "OLLAMA_HOST": ollama})
                assert second.returncode != 0
                named, line = second.stderr.decode().strip().splitlines()
                assert named.startswith("mnemoloop: database ")
                assert "is in use by another mnemoloop (pid" in line, line
                assert "postgresql://" in line
            # The admin commands may still run beside it.
            listed = await anyio.run_process(
                [sys.executable, "-m", "mnemoloop", "apps", "list"], check=False,
                env={**os.environ, "MNEMOLOOP_DB": str(db_path)})
            assert listed.returncode == 0, listed.stderr
        finally:
            instances.stop()
