"""How memories are used: each turn's injections and each reply's citations, counted per
conversation and on the memory, shown by the API, and weighed where a memory must go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from memory_agent import Memory
from memory_agent.recall.selection import ranked
from memory_agent.recall.usage import cited, values_of
from memory_agent.writers.steps import NEW_MEMORY_ID, Candidate, fifo_step, mergeable
from tests.harness import assistant_model, http_client, running, service

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}
REPLY = "Your locker code is 4417, as Dr. Ruiz's office said."


def memory(memory_id: int, content: str, **usage: int) -> Memory:
    return Memory(memory_id, "cal", content, "2026-11-01T10:00:00Z", "2026-11-01T10:00:00Z",
                  **usage)


# -- citations -----------------------------------------------------------------------------


def test_a_memorys_values_are_its_numbers_codes_and_names():
    assert values_of("The user's locker code is 4417 and their dentist is Dr. Ruiz.") == {
        "4417", "dr", "ruiz"}
    assert values_of('The user said: "I moved to Lisbon on 3 May, flight TP-1234 at 16:00."') == {
        "lisbon", "may", "tp1234", "1600"}
    # A sentence's first word is no name; a lone digit is no value.
    assert values_of("Coffee. Tea at 7 is fine") == set()


def test_a_reply_cites_the_memories_whose_values_it_holds_that_the_user_did_not_say():
    locker = memory(1, "The user's locker code is 4417.")
    dentist = memory(2, "The user's dentist is Dr. Ruiz.")
    tennis = memory(3, "The user plays tennis on Saturdays.")
    shown = [locker, dentist, tennis]
    assert cited(shown, REPLY, "what is my locker code?") == {1, 2}
    # The user gave the value: the reply echoes them, not the memory.
    assert cited(shown, "Yes, 4417 it is.", "is my code 4417?") == set()
    assert cited(shown, "No idea, sorry.", "what is my code?") == set()


# -- where use weighs ----------------------------------------------------------------------


def test_fifo_takes_the_least_cited_of_the_least_important_then_the_oldest():
    candidates = [
        Candidate(1, "old and cited", created_at="2026-01-01", citations=2, accesses=5),
        Candidate(2, "newer, never cited", created_at="2026-02-01", accesses=9),
        Candidate(4, "newest, never cited", created_at="2026-03-01"),
        Candidate(3, "important", importance=8, created_at="2025-01-01"),
        Candidate(NEW_MEMORY_ID, "new"),
    ]
    # Turns given a memory grow with its age: they do not turn FIFO around.
    assert fifo_step(candidates, "r").target == 2


def test_the_retention_policy_never_takes_the_new_memory_for_the_least_cited():
    older = Candidate(1, "The user said: \"my locker code is 4417.\"", created_at="2026-01-01",
                      citations=3)
    new = Candidate(NEW_MEMORY_ID, "The user said: \"my locker code is 5521.\"")
    assert older.use < new.use


def test_memories_of_different_sensitivity_are_never_merged():
    public = Candidate(1, "The user said: \"I like tea.\"", created_at="2026-01-01")
    private = replace(public, id=2, private=True, sensitivity="private")
    secret = replace(public, id=3, private=True, sensitivity="secret")
    unknown = replace(public, id=4, private=True, sensitivity="unknown")
    assert mergeable(public, replace(public, id=5))
    assert mergeable(secret, replace(secret, id=6))
    assert not any(mergeable(a, b) for a, b in [
        (public, private), (private, secret), (secret, public), (unknown, replace(unknown, id=7))])


def test_at_equal_relevance_the_more_used_memory_ranks_first():
    memories = [memory(1, "The user likes tea."),
                memory(2, "The user likes coffee.", citation_count=1, access_count=3),
                memory(3, "The user likes juice.", access_count=4)]
    assert [m.id for m in ranked(memories, "what do I like to drink?")] == [2, 3, 1]


# -- on a running service ------------------------------------------------------------------


@pytest.fixture
async def running_service(db_path) -> AsyncIterator:
    async with service(db_path, assistant_model(REPLY)) as services, running(services):
        yield services


@pytest.fixture
async def client(running_service) -> AsyncIterator:
    async with http_client(running_service, "admin-secret") as client:
        yield client


async def seeded(client) -> dict[str, int]:
    installed = await client.post("/apps", json={"appId": "cal", "name": "Calendar"},
                                  headers=ADMIN)
    assert installed.status_code == 201, installed.text
    imported = await client.post("/apps/cal/memories/import?userId=ana", headers=ADMIN, json={
        "memories": [{"content": text, "createdAt": "2026-11-01T10:00:00Z"} for text in (
            "The user's locker code is 4417.", "The user plays tennis on Saturdays.")]})
    assert imported.status_code == 201, imported.text
    listed = (await client.get("/apps/cal/memories?userId=ana", headers=ADMIN)).json()
    return {m["content"].split()[2]: m["id"] for m in listed["memories"]}


async def turn(client, conversation_id: str, text: str) -> None:
    posted = await client.post(f"/conversations/{conversation_id}/messages?wait=10",
                               json={"content": text}, headers=ADMIN)
    assert posted.status_code == 200 and posted.json()["reply"]["content"] == REPLY, posted.text


async def test_each_turn_counts_its_memories_and_the_ones_its_reply_used(
    client, running_service
):
    ids = await seeded(client)
    opened = await client.post("/apps/cal/conversations", json={"userId": "ana"},
                               headers=ADMIN)
    conversation_id = opened.json()["conversationId"]
    await turn(client, conversation_id, "What is my locker code?")
    await turn(client, conversation_id, "Thanks. And again?")

    memories = {m["id"]: m for m in (await client.get(
        "/apps/cal/memories?userId=ana", headers=ADMIN)).json()["memories"]}
    locker, tennis = memories[ids["locker"]], memories[ids["plays"]]
    assert (locker["accessCount"], locker["citationCount"]) == (2, 2)
    assert (tennis["accessCount"], tennis["citationCount"]) == (2, 0)
    assert locker["lastAccessed"] is not None
    injections = await running_service.stores.agent.injections(conversation_id)
    assert injections == {ids["locker"]: (2, 2), ids["plays"]: (2, 0)}

    # Erasing the person takes their conversations' injections with them.
    erased = await client.delete("/users/ana/memories", headers=ADMIN)
    assert erased.status_code == 200, erased.text
    assert await running_service.stores.agent.injections(conversation_id) == {}


async def test_a_turn_whose_use_cannot_be_stored_is_answered_and_says_so(
    client, running_service, caplog
):
    await seeded(client)
    await running_service.database.execute("DROP TABLE memory_injections")
    opened = await client.post("/apps/cal/conversations", json={"userId": "ana"},
                               headers=ADMIN)
    await turn(client, opened.json()["conversationId"], "What is my locker code?")
    metrics = (await client.get("/metrics", headers=ADMIN)).text
    # Its counts could not be read (every memory shown in full), nor its use stored.
    assert "mnemoloop_memory_use_unrecorded_total 2.0" in metrics
    assert "could not be read" in caplog.text and "shown in full" in caplog.text
    assert "were not counted as used" in caplog.text


async def test_a_users_memories_are_counted_in_their_conversations_only(
    client, running_service
):
    ids = await seeded(client)
    bob = (await client.post("/apps/cal/conversations", json={"userId": "bob"},
                             headers=ADMIN)).json()["conversationId"]
    await turn(client, bob, "What is my locker code?")
    assert await running_service.stores.agent.injections(bob) == {}
    listed = (await client.get("/apps/cal/memories?userId=ana", headers=ADMIN)).json()
    assert {m["id"]: m["accessCount"] for m in listed["memories"]} == {
        ids["locker"]: 0, ids["plays"]: 0}
