"""The model writer's updates of a space's memories: shown to the model with their ids, each
may be updated; never a private or pinned one, nor one changed while the model wrote, nor on a
sentence that was dropped."""

from __future__ import annotations

import pytest

from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent
from tests.conftest import install_app
from tests.fakes import (
    FunctionModel,
    ModelCall,
    answer_of,
    memory_model,
    quoted,
)

pytestmark = pytest.mark.anyio


async def test_the_space_is_shown_with_ids_and_each_may_be_updated(database, clock):
    await install_app(database, "app")
    said = [ChatMessage("user", "I live in Oslo and my dog is Rex."),
            ChatMessage("assistant", "Ok.")]
    moved = [ChatMessage("user", "We moved to Porto last month."),
             ChatMessage("assistant", "Ok.")]

    def write(call: ModelCall) -> str:
        if "Porto" not in call.prompt:
            return quoted("The user lives in Oslo. The user's dog is Rex.", call)
        return quoted("The user lives in Porto.", call, updates=[(1, "The user's dog is Rex.")])

    model = memory_model(write)
    agent = MemorySubAgent(database, model, clock=clock)
    await agent.create_memory(MemoryCreationRequest("app", "c1", said))
    created = await agent.create_memory(MemoryCreationRequest("app", "c2", moved))

    assert "[id=1] (created 2025-10-01) The user lives in Oslo. The user's dog is Rex." in (
        model.calls[1].prompt
    )
    assert model.calls[1].json_schema["properties"]["updates"]["items"]["properties"][
        "memoryId"]["enum"] == [1]
    [update] = created.compactions
    assert (update.action, update.target_memory_id, update.decided_by, update.update) == (
        "edit", 1, "model", True
    )
    assert sorted(m.content for m in await agent.get_memories("app")) == [
        "The user lives in Porto.", "The user's dog is Rex."
    ]


async def test_private_and_pinned_memories_are_not_shown_to_the_model(database, clock):
    await install_app(database, "app")
    from memory_agent.steering.changes import MemoryChange

    model = memory_model()
    agent = MemorySubAgent(database, model, clock=clock)
    for n, said in enumerate(["My PIN hint is the cat.", "I love tea.", "I live in Oslo."]):
        said_once = [ChatMessage("user", said)]
        await agent.create_memory(MemoryCreationRequest("app", f"c{n}", said_once))
    private, pinned, shown = (m.id for m in reversed(await agent.list_memories("app")))
    await agent.steer_memory("app", private, MemoryChange(private=True))
    await agent.steer_memory("app", pinned, MemoryChange(pinned=True))
    await agent.create_memory(MemoryCreationRequest("app", "c3", [ChatMessage("user", "I moved.")]))
    prompt = model.calls[-1].prompt
    assert f"[id={shown}]" in prompt
    assert f"[id={private}]" not in prompt and f"[id={pinned}]" not in prompt


async def test_no_update_is_applied_when_a_sentence_of_the_memory_was_dropped(database, clock):
    await install_app(database, "app")
    said = [ChatMessage("user", "I live in Oslo."), ChatMessage("assistant", "Ok.")]
    moved = [ChatMessage("user", "We moved to Porto."), ChatMessage("assistant", "Ok.")]

    def write(call: ModelCall) -> str:
        if "Porto" not in call.prompt:
            return quoted("The user lives in Oslo.", call)
        return answer_of(("The user lives in Porto.", "moved to Porto"),
                         ("The user lives in Hamburg.", "Hamburg"),
                         updates=[{"memoryId": 1, "stillTrue": ""}])

    agent = MemorySubAgent(database, memory_model(write), clock=clock)
    await agent.create_memory(MemoryCreationRequest("app", "c1", said))
    created = await agent.create_memory(MemoryCreationRequest("app", "c2", moved))
    assert created.compactions == []  # the claim rested on a sentence that was dropped
    assert await agent.get_memory_count("app") == 2


async def test_an_update_of_a_memory_changed_since_the_model_read_it_is_not_applied(
    database, clock
):
    await install_app(database, "app")
    said = [ChatMessage("user", "I live in Oslo."), ChatMessage("assistant", "Ok.")]
    moved = [ChatMessage("user", "We moved to Porto."), ChatMessage("assistant", "Ok.")]

    async def write(call: ModelCall) -> str:
        if "Porto" not in call.prompt:
            return quoted("The user lives in Oslo.", call)
        # Another job rewrites the memory while the model writes.
        from memory_agent.storage.store import MemoryStore

        await MemoryStore(database).update_content(
            "app", 1, "The user lives in Oslo, and the dog is Rex.",
            updated_at="2026-01-01T00:00:00.000000Z", metadata={},
        )
        return quoted("The user lives in Porto.", call, updates=[(1, "")])

    agent = MemorySubAgent(database, FunctionModel(write), clock=clock)
    await agent.create_memory(MemoryCreationRequest("app", "c1", said))
    created = await agent.create_memory(MemoryCreationRequest("app", "c2", moved))
    assert created.compactions == []
    assert "the dog is Rex" in (await agent.get_memory("app", 1)).content
