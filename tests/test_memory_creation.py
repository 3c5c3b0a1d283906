from __future__ import annotations

import pytest

from memory_agent import ChatMessage, ChatReply, MemoryCreationRequest, MemorySubAgent, TokenUsage
from memory_agent.errors import ChatModelUnavailable, InvalidMemoryText
from tests.conftest import install_app
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall, memory_model

pytestmark = pytest.mark.anyio

CONVERSATION = [
    ChatMessage("user", "Please book meetings after 2pm, mornings are busy."),
    ChatMessage("assistant", "Noted: afternoons only."),
]


def request(app_id: str = "calendar", conversation_id: str = "c1") -> MemoryCreationRequest:
    return MemoryCreationRequest(app_id, conversation_id, CONVERSATION)


async def test_creation_stores_one_valid_memory_for_the_conversation(database, clock):
    await install_app(database, "calendar")
    model = memory_model("User prefers meetings after 2pm. Mornings are busy for them.")
    agent = MemorySubAgent(database, model, clock=clock)

    created = await agent.create_memory(request())

    memories = await agent.get_memories("calendar")
    assert [m.content for m in memories] == [
        "User prefers meetings after 2pm. Mornings are busy for them."
    ]
    assert memories[0].source_conversation_id == "c1"
    assert memories[0].id == created.memory.id
    assert created.compactions == []


async def test_creation_prompt_is_the_seeds_with_the_transcript(database, clock):
    await install_app(database, "calendar")
    model = memory_model()
    await MemorySubAgent(database, model, clock=clock).create_memory(request())

    prompt = model.calls[0].prompt
    assert prompt.startswith(CREATION_PREFIX + " Analyze this conversation")
    assert "User: Please book meetings after 2pm, mornings are busy." in prompt
    assert "Assistant: Noted: afternoons only." in prompt
    assert prompt.rstrip().endswith("Create memory:")


@pytest.mark.parametrize(
    "answer",
    [
        "<think>they said 2pm</think>Memory: User wants afternoon meetings. Mornings are busy.",
        "```\nUser wants afternoon meetings. Mornings are busy.\n```",
        "**Memory:** User wants afternoon meetings.\n\nMornings are busy.",
    ],
)
async def test_creation_strips_reasoning_fences_and_labels(database, clock, answer):
    await install_app(database, "calendar")
    agent = MemorySubAgent(database, memory_model(answer), clock=clock)
    created = await agent.create_memory(request())
    assert created.memory.content == "User wants afternoon meetings. Mornings are busy."


async def test_an_invalid_answer_gets_one_repair_round(database, clock):
    await install_app(database, "calendar")
    answers = iter(["Afternoons.", "User wants afternoon meetings. Mornings are busy."])
    model = memory_model(lambda call: next(answers))
    created = await MemorySubAgent(database, model, clock=clock).create_memory(request())

    assert created.memory.content == "User wants afternoon meetings. Mornings are busy."
    repair = model.calls[1].messages
    assert [m.role for m in repair] == ["user", "assistant", "user"]
    assert "1 sentence" in repair[-1].content


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty"),
        ("Afternoons.", "sentence"),
        ("This " + "very " * 90 + "long sentence. It never ends.", "characters"),
    ],
)
async def test_an_answer_that_stays_invalid_is_not_stored(database, clock, answer, reason):
    await install_app(database, "calendar")
    agent = MemorySubAgent(database, memory_model(answer), clock=clock)
    with pytest.raises(InvalidMemoryText, match=reason):
        await agent.create_memory(request())
    assert await agent.get_memory_count("calendar") == 0
    assert agent.stats.creation_failures == 1


async def test_trailing_sentences_are_dropped_to_fit_the_length_limit(database, clock):
    await install_app(database, "calendar")
    answer = "The user likes tea. They drink it at noon. They also said " + "much " * 80 + "more."
    agent = MemorySubAgent(database, memory_model(answer), clock=clock, max_chars=100)
    created = await agent.create_memory(request())
    assert created.memory.content == "The user likes tea. They drink it at noon."


async def test_more_than_four_sentences_keep_the_first_four(database, clock):
    await install_app(database, "calendar")
    answer = "One is here. Two is here. Three is here. Four is here. Five is here."
    agent = MemorySubAgent(database, memory_model(answer), clock=clock)
    created = await agent.create_memory(request())
    assert created.memory.content == "One is here. Two is here. Three is here. Four is here."


async def test_llm_error_skips_creation_and_is_logged(database, clock, caplog):
    await install_app(database, "calendar")

    def unavailable(call: ModelCall) -> str:
        raise ChatModelUnavailable("connection refused")

    agent = MemorySubAgent(database, FunctionModel(unavailable), clock=clock)
    with pytest.raises(ChatModelUnavailable):
        await agent.create_memory(request(conversation_id="c9"))
    assert await agent.get_memory_count("calendar") == 0
    assert "❌ Memory creation failed for c9: connection refused" in caplog.text


async def test_an_empty_conversation_costs_no_model_call(database, clock):
    await install_app(database, "calendar")
    model = memory_model()
    agent = MemorySubAgent(database, model, clock=clock)
    with pytest.raises(InvalidMemoryText, match="no messages"):
        await agent.create_memory(MemoryCreationRequest("calendar", "c1", []))
    assert model.calls == []


async def test_apps_never_see_each_others_memories(database, clock):
    await install_app(database, "a")
    await install_app(database, "b")
    texts = iter(["App A fact one. It matters.", "App B fact one. It matters too."])
    agent = MemorySubAgent(database, memory_model(lambda call: next(texts)), clock=clock)
    await agent.create_memory(request("a", "ca"))
    await agent.create_memory(request("b", "cb"))

    assert [m.content for m in await agent.get_memories("a")] == ["App A fact one. It matters."]
    assert [m.content for m in await agent.get_memories("b")] == ["App B fact one. It matters too."]


async def test_energy_reported_equals_what_the_calls_cost(database, clock):
    await install_app(database, "calendar")
    usages = iter([TokenUsage(150, 51), TokenUsage(99, 2)])  # 201 -> 3 units, 101 -> 2 units

    def answer(call: ModelCall) -> ChatReply:
        text = "Only one sentence." if len(call.messages) == 1 else "Two facts. Both true."
        return ChatReply(text, usage=next(usages))

    agent = MemorySubAgent(database, FunctionModel(answer), clock=clock, tokens_per_energy_unit=100)
    await agent.create_memory(request())

    assert agent.get_energy_consumed_since_last_poll() == 5
    assert agent.get_energy_consumed_since_last_poll() == 0
