"""The Ollama backend driven over the real `/api/chat` wire format with respx."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from loop.llm.ollama import OllamaChatModel
from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent, ToolSpec
from memory_agent.core.errors import ChatModelResponseError, ChatModelTimeout, ChatModelUnavailable
from memory_agent.writers.decision import decision_schema
from tests.conftest import install_app
from tests.fakes import FRIENDS, ModelCall, friend_fact, friend_memory, memory_lines
from tests.ollama_wire import chat_body

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]

HOST = "http://ollama.test:11434"
SCHEMA = decision_schema([3, 7, 0], max_chars=400)


@pytest.fixture
def model():
    return OllamaChatModel("llama3.2:1b", host=HOST, timeout=2)


@respx.mock
async def test_chat_sends_messages_and_schema_and_reads_usage(model):
    route = respx.post(f"{HOST}/api/chat").respond(json=chat_body('{"action": "delete"}'))
    reply = await model.chat(
        [ChatMessage("user", "decide")], json_schema=SCHEMA
    )

    sent = json.loads(route.calls.last.request.content)
    assert sent["model"] == "llama3.2:1b"
    assert sent["messages"] == [{"role": "user", "content": "decide"}]
    assert sent["format"] == SCHEMA
    assert sent["stream"] is False
    assert reply.text == '{"action": "delete"}'
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (26, 12)
    assert reply.truncated is False


@respx.mock
async def test_tool_calls_come_back_parsed(model):
    call = {"function": {"name": "end_conversation", "arguments": {"reason": "goodbye"}}}
    route = respx.post(f"{HOST}/api/chat").respond(json=chat_body(tool_calls=[call]))
    tool = ToolSpec("end_conversation", "End it.", {"type": "object", "properties": {}})
    reply = await model.chat([ChatMessage("user", "bye")], tools=[tool])

    sent = json.loads(route.calls.last.request.content)
    assert sent["tools"][0]["function"]["name"] == "end_conversation"
    assert reply.tool_calls[0].name == "end_conversation"
    assert reply.tool_calls[0].arguments == {"reason": "goodbye"}


@respx.mock
async def test_a_cut_off_answer_is_marked_truncated(model):
    respx.post(f"{HOST}/api/chat").respond(json=chat_body('{"act', done_reason="length"))
    assert (await model.chat([ChatMessage("user", "x")])).truncated is True


@respx.mock
async def test_a_500_is_retried_then_succeeds(model):
    route = respx.post(f"{HOST}/api/chat")
    route.side_effect = [
        httpx.Response(500, json={"error": "busy"}),
        httpx.Response(200, json=chat_body("ok")),
    ]
    assert (await model.chat([ChatMessage("user", "x")])).text == "ok"
    assert route.call_count == 2


@respx.mock
async def test_a_lasting_500_becomes_a_transient_response_error(model):
    route = respx.post(f"{HOST}/api/chat").respond(500, json={"error": "runner crashed"})
    with pytest.raises(ChatModelResponseError, match="runner crashed") as caught:
        await model.chat([ChatMessage("user", "x")])
    assert caught.value.status_code == 500 and caught.value.transient
    assert route.call_count == 3


@respx.mock
async def test_model_not_found_is_not_retried(model):
    route = respx.post(f"{HOST}/api/chat").respond(
        404, json={"error": 'model "llama3.2:1b" not found, try pulling it first'}
    )
    with pytest.raises(ChatModelResponseError, match="not found") as caught:
        await model.chat([ChatMessage("user", "x")])
    assert caught.value.status_code == 404 and not caught.value.transient
    assert route.call_count == 1


@respx.mock
async def test_a_timeout_becomes_chat_model_timeout(model):
    respx.post(f"{HOST}/api/chat").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(ChatModelTimeout):
        await model.chat([ChatMessage("user", "x")])


@respx.mock
async def test_connection_refused_becomes_unavailable(model):
    respx.post(f"{HOST}/api/chat").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(ChatModelUnavailable):
        await model.chat([ChatMessage("user", "x")])


TAGS = {"models": [{
    "name": "llama3.2:1b", "model": "llama3.2:1b", "modified_at": "2025-10-01T10:00:00Z",
    "size": 1321098329,
    "digest": "baf6a787fdffd633537aa2eb51cfd54cb93ff08e28040095462bb63daf552878",
    "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                "parameter_size": "1.2B", "quantization_level": "Q8_0"},
}]}


@respx.mock
async def test_has_model_reads_the_pulled_models(model):
    respx.get(f"{HOST}/api/tags").respond(json=TAGS)
    assert await model.has_model() is True
    other = OllamaChatModel("qwen2.5", host=HOST)
    assert await other.has_model() is False


@respx.mock
async def test_sub_agent_writes_and_compacts_through_ollama(model, database):
    """The model writer's memory and a structured edit decision, end to end over the Ollama
    wire: each call's JSON schema goes as `format`."""
    await install_app(database, "app")
    agent = MemorySubAgent(database, model)
    shown: list[list[int]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        prompt = body["messages"][0]["content"]
        if prompt.startswith("You are a memory management assistant."):
            lines = memory_lines(ModelCall([ChatMessage("user", prompt)], [], None))
            delete, _ = body["format"]["anyOf"]
            assert delete["properties"]["targetMemoryId"]["enum"] == [*sorted(lines)[1:], 0]
            first_id = sorted(lines)[1]
            merged = f"{lines[first_id]} {lines[0]}"
            decision = {"action": "edit", "targetMemoryId": first_id, "newContent": merged,
                        "reason": "both are friends"}
            return httpx.Response(
                200, json=chat_body(json.dumps(decision), prompt=150, completion=50)
            )
        # The memory: its schema lists the space's ids as those an update may name.
        updates = body["format"]["properties"]["updates"]
        shown.append(updates.get("items", {}).get("properties", {}).get("memoryId", {})
                     .get("enum", []))
        name = prompt.split("User: My friend ")[1].split()[0]
        written = {"sentences": [{"text": friend_memory(FRIENDS.index(name)),
                                  "quote": friend_fact(FRIENDS.index(name))}], "updates": []}
        return httpx.Response(200, json=chat_body(json.dumps(written), prompt=180, completion=20))

    respx.post(f"{HOST}/api/chat").mock(side_effect=answer)
    for n in range(11):
        await agent.create_memory(
            MemoryCreationRequest("app", f"c{n}", [ChatMessage("user", friend_fact(n))])
        )
    assert await agent.get_memory_count("app") == 10
    assert agent.stats.compactions["merge", "model"] == 1
    assert [len(ids) for ids in shown] == list(range(11))
    # 11 memories at ceil(200/100)=2 units, one decision at ceil((150+50)/100)=2 units
    assert agent.get_energy_consumed_since_last_poll() == 24


def ndjson(*chunks: dict) -> bytes:
    return b"".join(json.dumps(chunk).encode() + b"\n" for chunk in chunks)


def stream_chunk(content: str) -> dict:
    return {"model": "llama3.2:1b", "created_at": "2025-10-11T14:13:43.4Z",
            "message": {"role": "assistant", "content": content}, "done": False}


@respx.mock
async def test_streaming_hands_on_each_piece_and_reads_the_last_chunks_usage(model):
    end_call = [{"function": {"name": "end_conversation", "arguments": {}}}]
    route = respx.post(f"{HOST}/api/chat").respond(
        content=ndjson(
            stream_chunk("Booked "), stream_chunk("after "), stream_chunk("2pm."),
            {**chat_body("", tool_calls=end_call, prompt=30, completion=3)},
        ),
        headers={"content-type": "application/x-ndjson"},
    )
    pieces: list[str] = []
    reply = await model.chat_streaming(
        [ChatMessage("user", "book")], on_text=pieces.append,
        tools=[ToolSpec("end_conversation", "end")],
    )
    assert json.loads(route.calls.last.request.content)["stream"] is True
    assert pieces == ["Booked ", "after ", "2pm."]
    assert reply.text == "Booked after 2pm."
    assert [call.name for call in reply.tool_calls] == ["end_conversation"]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (30, 3)


@respx.mock
async def test_streaming_is_tried_again_only_before_the_first_piece(model):
    route = respx.post(f"{HOST}/api/chat")
    route.side_effect = [
        httpx.Response(503, json={"error": "loading"}),
        httpx.Response(200, content=ndjson(stream_chunk("Hi"), chat_body("")),
                       headers={"content-type": "application/x-ndjson"}),
    ]
    pieces: list[str] = []
    reply = await model.chat_streaming([ChatMessage("user", "hello")], on_text=pieces.append)
    assert pieces == ["Hi"] and reply.text == "Hi" and route.call_count == 2

    # Cut off after a piece was handed on: not tried again, which would repeat the piece.
    route.side_effect = [
        httpx.Response(200, content=ndjson(stream_chunk("Hel")),
                       headers={"content-type": "application/x-ndjson"}),
    ]
    pieces.clear()
    with pytest.raises(Exception, match="stopped before it was done"):
        await model.chat_streaming([ChatMessage("user", "hello")], on_text=pieces.append)
    assert pieces == ["Hel"] and route.call_count == 3
