"""The memory lifecycle through the service: history on record, purge wins over jobs in
flight, and purged text leaves no byte behind."""

from __future__ import annotations

import re

import anyio
import pytest

from loop.jobs.store import ClaimedJob
from memory_agent import ChatMessage, MemoryCreationRequest
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall, friend_fact, quoted
from tests.harness import assistant_model, eventually, http_client, running, service

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin"}


async def talk_and_end(services, app_id: str, text: str) -> str:
    conversation_id = await services.stores.conversations.open(app_id)
    await services.stores.conversations.add_message(conversation_id, "user", text)
    await services.stores.conversations.add_message(conversation_id, "assistant", "Noted.")
    await services.stores.conversations.end(conversation_id, "app")
    return conversation_id


async def settled(services, conversation_id: str) -> str | None:
    job = await services.stores.jobs.for_conversation(conversation_id)
    return job.status if job and job.status not in ("pending", "running") else None


async def three_memories(services) -> None:
    """Install cal and write three memories of it, each job settled."""
    await services.stores.registry.install("cal", "Calendar")
    for n in range(3):
        done = await talk_and_end(services, "cal", friend_fact(n))
        await eventually(lambda c=done: settled(services, c))


async def test_history_routes_page_through_every_change(db_path):
    async with service(db_path, assistant_model()) as services, running(services), \
            http_client(services, "admin") as client:
        await three_memories(services)
        memories = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
        doomed = memories[0]["id"]
        gone = await client.delete(f"/apps/cal/memories/{doomed}", headers=ADMIN)
        assert gone.status_code == 200

        first = (await client.get("/apps/cal/history?limit=2", headers=ADMIN)).json()
        assert [e["event"] for e in first["events"]] == ["created", "created"]
        assert first["nextCursor"] == first["events"][-1]["id"]
        rest = (await client.get(f"/apps/cal/history?since={first['nextCursor']}&limit=2",
                                 headers=ADMIN)).json()
        assert [e["event"] for e in rest["events"]] == ["created", "deleted"]
        last = (await client.get(f"/apps/cal/history?since={rest['nextCursor']}",
                                 headers=ADMIN)).json()
        assert last == {"events": [], "nextCursor": None}

        one = (await client.get(f"/apps/cal/memories/{doomed}/history", headers=ADMIN)).json()
        created, deleted = one["events"]
        assert (created["actor"], created["jobId"] is not None) == ("job", True)
        assert created["contentAfter"] == memories[0]["content"]
        assert (deleted["actor"], deleted["contentBefore"]) == ("admin", memories[0]["content"])
        assert one["nextCursor"] is None

        missing = await client.get("/apps/cal/memories/999999/history", headers=ADMIN)
        assert missing.status_code == 404
        assert (await client.get("/apps/nobody/history", headers=ADMIN)).status_code == 404
        bad = await client.get("/apps/cal/history?since=-1", headers=ADMIN)
        assert bad.status_code == 400


async def test_memory_jobs_show_what_they_wrote_and_their_compaction_steps(db_path):
    model = assistant_model(compaction=lambda call: "I cannot decide.", small_talk="Hi,")
    async with service(db_path, model) as services, running(services), \
            http_client(services, "admin") as client:
        await services.stores.registry.install("cal", "Calendar")
        ids = []
        for n in range(11):
            ids.append(await talk_and_end(services, "cal", friend_fact(n)))
            await eventually(lambda c=ids[-1]: settled(services, c))
        small_talk = await talk_and_end(services, "cal", "Hi, how are you?")
        await eventually(lambda: settled(services, small_talk))

        jobs = (await client.get("/memory-jobs?appId=cal", headers=ADMIN)).json()["jobs"]
        by_conversation = {j["conversationId"]: j for j in jobs}
        first = by_conversation[ids[0]]
        assert first["status"] == "done" and first["memoryId"] and first["steps"] == []
        eleventh = by_conversation[ids[10]]
        [step] = eleventh["steps"]
        assert step["decidedBy"] == "policy" and step["action"] in ("delete", "edit")
        assert "invalid decision: the answer holds no JSON object" in step["fallbackReason"]
        assert step["reason"]
        nothing = by_conversation[small_talk]
        assert (nothing["status"], nothing["note"], nothing["memoryId"]) == (
            "done", "the model found nothing worth keeping", None)

        metrics = (await client.get("/metrics", headers=ADMIN)).text
        assert 'mnemoloop_compactions_total{decided_by="policy",outcome="fifo"} 1.0' in metrics
        assert 'mnemoloop_compaction_fallbacks_total{cause="invalid_decision"} 1.0' in metrics
        assert "mnemoloop_memories_not_written_total 1.0" in metrics


async def test_purge_cancels_jobs_and_a_job_talking_to_the_model_writes_nothing(db_path):
    release = anyio.Event()
    writing = anyio.Event()

    async def slow_memory(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            writing.set()
            await release.wait()
            return quoted("The user's friend Alice lives in Oslo.", call)
        return "Noted."

    async with service(db_path, FunctionModel(slow_memory), max_concurrent_memory_jobs=1) \
            as services, running(services), http_client(services, "admin") as client:
        await services.stores.registry.install("priv", "Private")
        running_job = await talk_and_end(services, "priv", friend_fact(0))
        with anyio.fail_after(5):
            await writing.wait()  # the worker's only slot is busy with the model
        waiting_job = await talk_and_end(services, "priv", friend_fact(1))

        with anyio.fail_after(2):  # the purge does not wait for the model
            purged = await client.delete("/apps/priv?purgeMemories=true", headers=ADMIN)
        assert purged.json() == {"success": True, "purgedMemories": 0}
        release.set()
        for conversation_id in (running_job, waiting_job):
            assert await eventually(lambda c=conversation_id: settled(services, c)) == "cancelled"
        await anyio.sleep(0.3)
        assert await services.stores.agent.get_memory_count("priv") == 0
        assert await services.stores.agent.history("priv") == []
        job = await services.stores.jobs.for_conversation(running_job)
        assert job is not None and "purged" in (job.last_error or "")


async def test_purge_answers_the_true_count(db_path):
    async with service(db_path, assistant_model()) as services, running(services), \
            http_client(services, "admin") as client:
        await three_memories(services)
        purged = await client.delete("/apps/cal/memories", headers=ADMIN)
        assert purged.json() == {"success": True, "deletedCount": 3}
        assert (await client.get("/apps/cal/memories", headers=ADMIN)).json() == {
            "memories": [], "heldBack": []}


@pytest.mark.sqlite_only
async def test_purged_text_leaves_no_byte_in_the_database_files(db_path):
    secret = "Zanzibar Quokka 7781"
    # The extractive writer keeps the speakers' words, and retires the old rent by its rules.
    model = FunctionModel(lambda call: "no")
    async with service(db_path, model, memory_writer="extractive") as services:
        await services.stores.registry.install("vault", "Vault")
        for n, text in enumerate([f"My vault phrase is {secret} and my rent is 1650 a month.",
                                  "I work as a nurse at St Mary's.",
                                  "The landlord raised my rent. It is 1900 a month now."]):
            await services.stores.agent.create_memory(MemoryCreationRequest(
                "vault", f"c{n}", [ChatMessage("user", text), ChatMessage("assistant", "Ok.")]))
        history = await services.stores.agent.history("vault")
        assert any(secret in (e.content_before or "") for e in history)
        assert await services.stores.registry.purge_memories("vault") == 2
    files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]
    assert files
    for path in files:
        data = path.read_bytes()
        # The search index keeps terms lowercased.
        for word in (b"Zanzibar", b"Quokka", b"zanzibar", b"quokka"):
            assert word not in data, f"{word!r} found in {path.name}"
        # The number alone, not as part of a longer run of digits: a timestamp's microseconds
        # may hold "7781" by chance.
        assert not re.search(rb"(?<![0-9])7781(?![0-9])", data), f"7781 found in {path.name}"


async def test_a_stale_claim_cannot_commit_after_the_job_was_claimed_again(db_path):
    """A worker that lost its job (a restart requeued it, another claim took it) writes
    nothing when its model call finally returns; only the current claim commits."""
    release = anyio.Event()

    async def slow_memory(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            await release.wait()
            return quoted("The user's friend Bruno lives in Porto.", call)
        return "Noted."

    async with service(db_path, FunctionModel(slow_memory)) as services:
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk_and_end(services, "cal", friend_fact(1))
        stale = await services.stores.jobs.claim_for_conversation(conversation_id)
        assert stale is not None
        async with anyio.create_task_group() as group:
            messages = await services.stores.conversations.chat_messages(conversation_id)
            group.start_soon(services.worker.run_job, ClaimedJob(stale, messages))
            await anyio.sleep(0.1)
            await services.stores.jobs.recover_interrupted()  # as a restart would
            current = await services.stores.jobs.claim_for_conversation(conversation_id)
            assert current is not None and current.attempts == stale.attempts + 1
            release.set()
        assert await services.stores.agent.get_memory_count("cal") == 0
        await services.worker.run_job(ClaimedJob(current, messages))
        assert await services.stores.agent.get_memory_count("cal") == 1
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None and (job.status, job.attempts) == ("done", 2)


MEMORY_FIELDS = ("content", "createdAt", "updatedAt", "sourceConversationId", "metadata")


def without_ids(memories: list[dict]) -> list[dict]:
    return [{field: m[field] for field in MEMORY_FIELDS} for m in memories]


async def test_export_and_import_round_trip_in_the_apis_json(db_path):
    async with service(db_path, assistant_model()) as services, running(services), \
            http_client(services, "admin") as client:
        await three_memories(services)
        exported = await client.get("/apps/cal/memories/export", headers=ADMIN)
        assert exported.status_code == 200
        document = exported.json()
        assert document["appId"] == "cal" and len(document["memories"]) == 3
        assert set(document["memories"][0]) >= {"id", *MEMORY_FIELDS}

        await client.post("/apps", json={"appId": "copy", "name": "Copy"}, headers=ADMIN)
        imported = await client.post("/apps/copy/memories/import", json=document, headers=ADMIN)
        assert imported.status_code == 201, imported.text
        assert imported.json() == {"imported": 3, "memoryCount": 3}

        copied = (await client.get("/apps/copy/memories/export", headers=ADMIN)).json()
        assert without_ids(copied["memories"]) == without_ids(document["memories"])
        assert {m["id"] for m in copied["memories"]}.isdisjoint(
            m["id"] for m in document["memories"])
        history = (await client.get("/apps/copy/history", headers=ADMIN)).json()["events"]
        assert [(e["event"], e["actor"]) for e in history] == [("created", "import")] * 3
        # Imported memories are the app's own: found by search, in the model's context.
        first = document["memories"][0]["content"]
        assert await services.stores.agent.search_memories("copy", first)


async def test_an_import_past_the_cap_is_refused_whole_or_replaces_when_asked(db_path):
    async with service(db_path, assistant_model()) as services, running(services), \
            http_client(services, "admin") as client:
        await three_memories(services)
        document = {"memories": [
            {"content": f"The user's friend number {n} lives in Paris.",
             "createdAt": f"2025-01-{n + 1:02d}T09:00:00Z"}
            for n in range(8)
        ]}
        refused = await client.post("/apps/cal/memories/import", json=document, headers=ADMIN)
        assert refused.status_code == 409
        assert "above its limit of 10: import at most 7" in refused.json()["detail"]
        assert await services.stores.agent.get_memory_count("cal") == 3

        replaced = await client.post("/apps/cal/memories/import?replace=true", json=document,
                                     headers=ADMIN)
        assert replaced.json() == {"imported": 8, "memoryCount": 8}
        listed = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
        # Newest first, with the times they were given.
        assert listed[0]["createdAt"] == "2025-01-08T09:00:00.000000Z"
        events = (await client.get("/apps/cal/history", headers=ADMIN)).json()["events"]
        replaced_events = [e for e in events if e["actor"] == "import" and e["event"] == "deleted"]
        assert len(replaced_events) == 3 and all(e["contentBefore"] for e in replaced_events)

        too_many = {"memories": document["memories"] * 2}
        refused = await client.post("/apps/cal/memories/import?replace=true", json=too_many,
                                    headers=ADMIN)
        assert refused.status_code == 409 and "more than app 'cal' may hold" in refused.text


async def test_a_bad_import_names_the_memory_and_stores_nothing(db_path):
    async with service(db_path, assistant_model()) as services, \
            http_client(services, "admin") as client:
        installed = await client.post("/apps", json={"appId": "cal", "name": "C"}, headers=ADMIN)
        key = {"Authorization": f"Bearer {installed.json()['apiKey']}"}
        good = {"content": "Likes tea.", "createdAt": "2025-01-01T09:00:00Z"}
        for memory, named in [
            ({**good, "createdAt": "yesterday"}, "memories[1].createdAt"),
            ({**good, "content": "   "}, "memories[1]: the content is empty"),
            ({**good, "content": "x" * 401}, "above the limit of 400"),
            ({"content": "no time"}, "createdAt"),
        ]:
            response = await client.post("/apps/cal/memories/import",
                                         json={"memories": [good, memory]}, headers=ADMIN)
            assert response.status_code == 400, response.text
            assert named in response.json()["detail"]
        assert await services.stores.agent.get_memory_count("cal") == 0

        # The app's own key exports its memories, but only the admin imports.
        assert (await client.get("/apps/cal/memories/export", headers=key)).status_code == 200
        forbidden = await client.post("/apps/cal/memories/import",
                                      json={"memories": [good]}, headers=key)
        assert forbidden.status_code == 403
        missing = await client.post("/apps/nobody/memories/import",
                                    json={"memories": [good]}, headers=ADMIN)
        assert missing.status_code == 404
