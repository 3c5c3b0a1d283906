"""Many writers at once: memory jobs, admin deletes, an HTTP purge, and a purge from a second
process (the CLI), all on one database file."""

from __future__ import annotations

import os
import random
import sys

import anyio
import pytest

from memory_agent.storage.store import MemoryStore
from tests.fakes import ModelCall, decision, friend_fact, ids_in_prompt
from tests.harness import assistant_model, eventually, http_client, running, service

pytestmark = [pytest.mark.fault, pytest.mark.anyio]
ADMIN = {"Authorization": "Bearer admin"}


async def test_fifty_endings_with_deletes_and_purges_in_flight(db_path):
    async def slowish_delete(call: ModelCall) -> str:
        await anyio.sleep(0.005)
        return decision("delete", ids_in_prompt(call)[1])

    model = assistant_model(compaction=slowish_delete)  # type: ignore[arg-type]
    async with service(db_path, model, max_concurrent_memory_jobs=8) as services, \
            running(services):
        async with http_client(services, "admin") as client:
            await client.post("/apps", json={"appId": "cal", "name": "Calendar"}, headers=ADMIN)
            store = services.stores.conversations
            conversations = []
            for n in range(50):
                conversation_id = await store.open("cal")
                await store.add_message(conversation_id, "user", friend_fact(n % 32))
                await store.add_message(conversation_id, "assistant", "Noted.")
                conversations.append(conversation_id)

            statuses: list[int] = []
            deleted_ids: list[int] = []
            purged: list[int] = []
            cli_purged: list[int] = []

            async def end(conversation_id: str) -> None:
                response = await client.post(f"/conversations/{conversation_id}/end",
                                             headers=ADMIN)
                statuses.append(response.status_code)

            async def admin_deletes() -> None:
                rng = random.Random(3)
                for _ in range(15):
                    listed = await client.get("/apps/cal/memories", headers=ADMIN)
                    statuses.append(listed.status_code)
                    ids = [m["id"] for m in listed.json()["memories"]]
                    if ids:
                        target = rng.choice(ids)
                        gone = await client.delete(f"/apps/cal/memories/{target}", headers=ADMIN)
                        statuses.append(gone.status_code)
                        if gone.status_code == 200:
                            deleted_ids.append(target)
                    await anyio.sleep(0.01)

            async def http_purge() -> None:
                await anyio.sleep(0.3)
                response = await client.delete("/apps/cal/memories", headers=ADMIN)
                statuses.append(response.status_code)
                purged.append(response.json()["deletedCount"])

            async def cli_purge() -> None:
                await anyio.sleep(0.1)
                result = await anyio.run_process(
                    [sys.executable, "-m", "mnemoloop", "memories", "purge", "cal"],
                    env={**os.environ, "MNEMOLOOP_DB": str(db_path)}, check=False)
                assert result.returncode == 0, result.stderr.decode()
                cli_purged.append(int(result.stdout.decode().split()[1]))

            async with anyio.create_task_group() as group:
                for conversation_id in conversations:
                    group.start_soon(end, conversation_id)
                group.start_soon(admin_deletes)
                group.start_soon(http_purge)
                group.start_soon(cli_purge)

            async def all_settled() -> bool:
                counts = await services.stores.jobs.counts_by_status()
                return sum(counts[s] for s in ("done", "skipped", "failed", "cancelled")) == 50

            await eventually(all_settled, timeout=60)

        jobs = await services.stores.jobs.list(app_id="cal")
        assert all(s < 500 for s in statuses), statuses
        assert not [j.last_error for j in jobs if j.last_error and "locked" in j.last_error]
        # A purge cancels the jobs still waiting or running; every other job is done.
        assert all(j.status in ("done", "cancelled") for j in jobs), [
            (j.status, j.last_error) for j in jobs
        ]
        remaining = await MemoryStore(services.database).list_oldest_first("cal")
        assert len(remaining) <= 10
        assert not {m.id for m in remaining} & set(deleted_ids), "a deleted memory came back"
        stats = services.stores.agent.stats
        print(f"\ncreated {stats.memories_created}, compactions {dict(stats.compactions)}, "
              f"admin deletes {len(deleted_ids)}, purged {purged} + cli {cli_purged}, "
              f"left {len(remaining)}")
        # The history accounts for every memory: each one created is deleted once or remains.
        events = await services.stores.agent.history("cal", limit=10_000)
        created = [e.memory_id for e in events if e.event == "created"]
        deleted = [e.memory_id for e in events if e.event == "deleted"]
        assert len(set(created)) == len(created) and len(set(deleted)) == len(deleted)
        assert set(created) == set(deleted) | {m.id for m in remaining}
        assert not set(deleted) & {m.id for m in remaining}
        created_by_jobs = {e.job_id for e in events if e.event == "created"}
        done = {j.id for j in jobs if j.status == "done"}
        assert created_by_jobs <= done, "only a job that ended done wrote a memory"
