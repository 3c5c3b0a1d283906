from __future__ import annotations

import anyio
import pytest

from memory_agent import ChatMessage, ChatReply, MemoryCreationRequest, MemorySubAgent
from memory_agent.errors import ChatModelResponseError
from tests.conftest import install_app
from tests.fakes import (
    COMPACTION_PREFIX,
    ModelCall,
    decision,
    ids_in_prompt,
    memory_model,
    new_memory_id,
)

pytestmark = pytest.mark.anyio


def req(n: int, app_id: str = "app") -> MemoryCreationRequest:
    return MemoryCreationRequest(app_id, f"c{n}", [ChatMessage("user", f"fact {n}")])


def numbered_memories():
    """A memory text naming the conversation's fact number, so tests can tell them apart."""

    def write(call: ModelCall) -> str:
        number = call.prompt.split("User: fact ")[1].split()[0]
        return f"Fact number {number} was shared. It is worth keeping."

    return write


async def fill(agent: MemorySubAgent, count: int, app_id: str = "app") -> None:
    for n in range(1, count + 1):
        await agent.create_memory(req(n, app_id))


async def test_eleventh_memory_compacts_back_to_ten_by_delete(database, clock):
    await install_app(database, "app")
    model = memory_model(
        numbered_memories(), lambda call: decision("delete", ids_in_prompt(call)[3])
    )
    agent = MemorySubAgent(database, model, clock=clock)
    await fill(agent, 10)
    doomed = (await agent.store.list_oldest_first("app"))[3]

    created = await agent.create_memory(req(11))

    assert [(o.action, o.target_memory_id) for o in created.compactions] == [("delete", doomed.id)]
    remaining = await agent.store.list_oldest_first("app")
    assert len(remaining) == 10
    assert doomed.id not in {m.id for m in remaining}
    assert remaining[-1].content.startswith("Fact number 11")


async def test_compaction_prompt_lists_memories_and_asks_for_the_decision_schema(database, clock):
    await install_app(database, "app")
    model = memory_model(numbered_memories(), lambda call: decision("delete", new_memory_id(call)))
    agent = MemorySubAgent(database, model, clock=clock)
    await fill(agent, 11)

    call = model.calls_starting_with(COMPACTION_PREFIX)[0]
    assert call.prompt.startswith(
        "You are a memory management assistant. You have 11 memories but can only keep 10."
    )
    existing, new = call.prompt.split("Existing memories:\n")[1].split("\n\nNew memory:\n")
    assert len(existing.splitlines()) == 10
    first = (await agent.store.list_oldest_first("app"))[0]
    assert existing.splitlines()[0] == (
        f"[id={first.id}] (created 2025-10-01) Fact number 1 was shared. It is worth keeping."
    )
    assert new.splitlines()[0].endswith("Fact number 11 was shared. It is worth keeping.")
    assert call.json_schema is not None
    assert call.json_schema["properties"]["action"]["enum"] == ["delete", "edit"]


async def test_delete_may_target_the_new_memory(database, clock):
    await install_app(database, "app")
    model = memory_model(numbered_memories(), lambda call: decision("delete", new_memory_id(call)))
    agent = MemorySubAgent(database, model, clock=clock)
    await fill(agent, 11)
    contents = [m.content for m in await agent.store.list_oldest_first("app")]
    assert len(contents) == 10
    assert not any("number 11" in c for c in contents)


async def test_edit_merges_the_new_memory_into_an_existing_one(database, clock):
    await install_app(database, "app")
    merged = "Facts number 2 and 11 were shared. Both are worth keeping."

    def merge(call: ModelCall) -> str:
        return decision("edit", ids_in_prompt(call)[1], merged, "same topic")

    agent = MemorySubAgent(database, memory_model(numbered_memories(), merge), clock=clock)
    await fill(agent, 10)
    target = (await agent.store.list_oldest_first("app"))[1]

    created = await agent.create_memory(req(11))

    assert [(o.action, o.target_memory_id) for o in created.compactions] == [("edit", target.id)]
    remaining = await agent.store.list_oldest_first("app")
    assert len(remaining) == 10
    edited = next(m for m in remaining if m.id == target.id)
    assert edited.content == merged
    assert edited.updated_at > edited.created_at
    assert edited.metadata["relatedConversations"] == ["c2", "c11"]
    assert created.memory.id not in {m.id for m in remaining}


async def test_a_slow_decision_is_applied_to_the_current_set(database, clock):
    """The target vanished while the model was deciding: the re-read sees it and FIFO runs."""
    await install_app(database, "app")
    agent: MemorySubAgent

    async def slow_delete(call: ModelCall) -> str:
        target = ids_in_prompt(call)[0]
        await agent.store.delete("app", target)  # an admin delete lands meanwhile
        await agent.store.insert(
            "app", "Admin added this. It is new.", created_at="2025-10-01T09:00:30.000000Z"
        )
        return decision("delete", target)

    agent = MemorySubAgent(database, memory_model(numbered_memories(), slow_delete), clock=clock)
    await fill(agent, 10)
    created = await agent.create_memory(req(11))

    assert [o.action for o in created.compactions] == ["fifo"]
    assert "not one of this app's memories" in (created.compactions[0].fallback_reason or "")
    assert await agent.get_memory_count("app") == 10


def unknown_action(call: ModelCall) -> str:
    return decision("archive", ids_in_prompt(call)[0])


def foreign_id(call: ModelCall) -> str:
    return decision("delete", 1)  # id 1 belongs to the other app, created first


def missing_id(call: ModelCall) -> str:
    return decision("delete", 999_999)


def string_id(call: ModelCall) -> str:
    return decision("delete", str(ids_in_prompt(call)[0]))


def empty_edit(call: ModelCall) -> str:
    return decision("edit", ids_in_prompt(call)[0], "")


def long_edit(call: ModelCall) -> str:
    return decision("edit", ids_in_prompt(call)[0], "This " + "very " * 90 + "long. It ends.")


def edit_of_new(call: ModelCall) -> str:
    return decision("edit", new_memory_id(call), "Merged text is here. It is fine.")


def llm_error(call: ModelCall) -> str:
    raise ChatModelResponseError("boom", status_code=500)


def truncated(call: ModelCall) -> ChatReply:
    return ChatReply('{"action": "delete", "targetMem', truncated=True)


async def too_slow(call: ModelCall) -> str:
    await anyio.sleep(5)
    return decision("delete", new_memory_id(call))


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (lambda call: "I would delete the oldest one.", "no JSON object"),
        (lambda call: '{"action": "delete",}', "not valid JSON"),
        (unknown_action, "action"),
        (missing_id, "not one of this app's memories"),
        (foreign_id, "not one of this app's memories"),
        (string_id, "targetMemoryId"),
        (empty_edit, "newContent"),
        (long_edit, "newContent"),
        (edit_of_new, "existing memory"),
        (llm_error, "LLM error"),
        (truncated, "cut off"),
        (too_slow, "no answer within"),
    ],
    ids=[
        "prose",
        "broken-json",
        "unknown-action",
        "missing-id",
        "other-apps-id",
        "string-id",
        "empty-edit",
        "long-edit",
        "edit-of-new",
        "llm-error",
        "truncated",
        "timeout",
    ],
)
async def test_a_failed_decision_falls_back_to_fifo(database, clock, answer, why):
    await install_app(database, "other")
    await install_app(database, "app")
    agent = MemorySubAgent(
        database, memory_model(numbered_memories(), answer), clock=clock, llm_timeout=0.3
    )
    await agent.create_memory(req(0, "other"))  # holds memory id 1
    await fill(agent, 10)
    oldest = (await agent.store.list_oldest_first("app"))[0]

    created = await agent.create_memory(req(11))

    [outcome] = created.compactions
    assert outcome.action == "fifo"
    assert outcome.target_memory_id == oldest.id
    assert why in (outcome.fallback_reason or "")
    remaining = await agent.store.list_oldest_first("app")
    assert len(remaining) == 10
    assert oldest.id not in {m.id for m in remaining}
    assert await agent.get_memory_count("other") == 1
    assert agent.stats.compactions["fifo"] == 1


async def test_the_cap_holds_when_many_memories_are_created_at_once(database, clock):
    await install_app(database, "app")

    async def slow_decision(call: ModelCall) -> str:
        await anyio.sleep(0.01)
        return decision("delete", ids_in_prompt(call)[2])

    agent = MemorySubAgent(database, memory_model(numbered_memories(), slow_decision), clock=clock)
    async with anyio.create_task_group() as tg:
        for n in range(1, 31):
            tg.start_soon(agent.create_memory, req(n))

    assert await agent.get_memory_count("app") == 10
    assert sum(agent.stats.compactions.values()) == 20


async def test_purge_returns_the_count_and_leaves_other_apps(database, clock):
    await install_app(database, "a")
    await install_app(database, "b")
    agent = MemorySubAgent(database, memory_model(numbered_memories()), clock=clock)
    await fill(agent, 3, "a")
    await fill(agent, 2, "b")
    assert await agent.delete_app_memories("a") == 3
    assert await agent.get_memory_count("a") == 0
    assert await agent.get_memory_count("b") == 2


async def test_compact_memories_steps_until_the_app_is_back_at_its_cap(database, clock):
    """The seed's compactMemories on its own: three over the cap takes three decisions."""
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(compaction=lambda call: decision(
        "delete", ids_in_prompt(call)[0])), clock=clock)
    for n in range(13):
        newest = await agent.store.insert("app", f"Fact {n} here. It stays.",
                                          created_at=f"2025-10-{n + 1:02d}T00:00:00.000000Z")
    outcomes = await agent.compact_memories("app", newest)
    assert [o.action for o in outcomes] == ["delete", "delete", "delete"]
    remaining = await agent.store.list_oldest_first("app")
    assert remaining[0].content == "Fact 3 here. It stays."
    assert len(remaining) == 10
