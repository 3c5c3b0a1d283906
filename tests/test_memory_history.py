"""A memory's history: every creation, compaction and purge recorded with its actor and
reason, read by page or by memory, erased with a purge; a refused commit records nothing."""

from __future__ import annotations

import pytest

from memory_agent.core.errors import MemoryWriteRefused
from memory_agent.storage.store import EventSource, MemoryStore
from tests.conftest import install_app
from tests.fakes import (
    ModelCall,
    decision,
    fill_with_friends,
    friend_memory,
    friend_request,
    friends_agent,
    memory_lines,
)

pytestmark = pytest.mark.anyio


async def test_history_records_creation_and_compaction_with_reasons(database, clock):
    await install_app(database, "app")

    def merge(call: ModelCall) -> str:
        lines = memory_lines(call)
        target = sorted(lines)[1]
        return decision("edit", target, f"{lines[target]} {lines[0]}", "both are friends")

    agent = friends_agent(database, clock, merge)
    await fill_with_friends(agent, 11)
    target = (await agent.list_memories("app"))[-1]

    events = await agent.history("app", memory_id=target.id)
    assert [(e.event, e.actor) for e in events] == [("created", "job"), ("edited", "model")]
    created, edited = events
    assert created.content_after == friend_memory(1) and created.conversation_id == "c1"
    assert edited.content_before == friend_memory(1)
    assert edited.content_after == f"{friend_memory(1)} {friend_memory(11)}"
    assert edited.reason == "merged: both are friends" and edited.conversation_id == "c11"
    page = await agent.history("app", after_id=events[0].id, limit=3)
    assert len(page) == 3 and page[0].id > events[0].id


async def test_latest_history_of_a_page_of_memories_is_each_ones_own_newest_events(
    database, clock
):
    await install_app(database, "app")
    agent = friends_agent(database, clock, "not json")
    await fill_with_friends(agent, 3)
    memories = await agent.list_memories("app")
    ids = [memory.id for memory in memories]
    store = MemoryStore(database)
    # The memories' events interleaved: four more edits of the first, one of the last.
    for n, memory_id in enumerate([ids[0], ids[2], ids[0], ids[0], ids[0]]):
        await store.record_event(
            "app", memory_id, "edited", "admin", EventSource(f"2026-01-0{n + 1}"), after=f"v{n}"
        )

    histories = await agent.latest_history_of("app", [*ids, 999_999], limit=3)
    for memory_id in ids:
        own = await agent.history("app", memory_id=memory_id, limit=3, newest_first=True)
        assert histories[memory_id] == own[::-1]
    assert [event.content_after for event in histories[ids[0]]] == ["v2", "v3", "v4"]
    assert [event.event for event in histories[ids[1]]] == ["created"]
    assert [event.content_after for event in histories[ids[2]]][1:] == ["v1"]
    assert histories[999_999] == []
    assert await agent.latest_history_of("app", [], limit=3) == {}
    assert await agent.latest_history_of("other", ids, limit=3) == {i: [] for i in ids}


async def test_a_refused_commit_writes_nothing(database, clock):
    await install_app(database, "app")
    agent = friends_agent(database, clock, "not json")

    class CancelledJob:
        """A job's record that a purge cancelled meanwhile."""

        async def done(self, tx, result, energy_units) -> bool:
            return False

        async def copies_wanted(self, tx) -> bool:
            return False

    with pytest.raises(MemoryWriteRefused):
        await agent.create_memory(friend_request(1), CancelledJob())
    assert await agent.get_memory_count("app") == 0
    assert await agent.history("app") == []


async def test_purge_erases_text_from_history_and_leaves_other_apps(database, clock):
    await install_app(database, "a")
    await install_app(database, "b")
    agent = friends_agent(database, clock, "not json")
    await fill_with_friends(agent, 3, "a")
    await fill_with_friends(agent, 2, "b")
    assert await agent.delete_memory("a", (await agent.list_memories("a"))[0].id)

    # The deleted memory, restorable until its grace period ends, is purged with the rest
    # (the count is of the live ones, as an operator is shown them).
    assert await agent.delete_app_memories("a") == 2
    assert await agent.list_memories("a", state="all") == []
    assert await agent.get_memory_count("a") == 0
    assert await agent.get_memory_count("b") == 2
    events = await agent.history("a")
    # The memory deleted before is erased by the purge; the live ones are deleted.
    assert [(e.event, e.actor) for e in events[3:]] == [
        ("deleted", "admin"), ("deleted", "purge"), ("deleted", "purge"), ("erased", "purge")]
    assert all(e.erased and e.content_before is None and e.content_after is None for e in events)
    assert all(not e.erased for e in await agent.history("b"))
