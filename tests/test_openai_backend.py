"""The OpenAI-compatible backend driven over the real `/v1` wire format with respx: chat,
structured answers, tool calls, streaming, usage, retries after `Retry-After`, and every
fault a server or a proxy in front of it gives."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import respx

from loop.llm.openai import OpenAIChatModel
from memory_agent import ChatMessage, ToolCall, ToolSpec
from memory_agent.core.errors import ChatModelError, ChatModelResponseError, ChatModelTimeout
from memory_agent.writers.decision import decision_schema
from tests.openai_wire import (
    chunk,
    completion_body,
    error_body,
    models_body,
    stream_response,
    tool_call,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]

BASE = "http://vllm.test:8000/v1"
CHAT = f"{BASE}/chat/completions"
SCHEMA = decision_schema([3, 7, 0], max_chars=400)
JSON = "application/json"
END = ToolSpec("end_conversation", "End it.", {"type": "object", "properties": {}})


@pytest.fixture
def model():
    return OpenAIChatModel("qwen2.5-7b-instruct", base_url=BASE, api_key="sk-test", timeout=2)


def sent(route: respx.Route, call: int = -1) -> dict:
    return json.loads(route.calls[call].request.content)


@respx.mock
async def test_chat_sends_the_messages_and_reads_the_answer_and_its_usage(model):
    route = respx.post(CHAT).respond(json=completion_body("Hello there."))
    reply = await model.chat([ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")],
                             answer_tokens=64)

    body = sent(route)
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Hi"}]
    assert body["max_tokens"] == 64
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-test"
    assert reply.text == "Hello there."
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (31, 9)
    assert reply.truncated is False


@respx.mock
async def test_an_answer_cut_at_its_limit_is_marked_truncated(model):
    respx.post(CHAT).respond(json=completion_body('{"act', finish_reason="length"))
    assert (await model.chat([ChatMessage("user", "x")])).truncated is True


@respx.mock
async def test_a_tool_call_cut_at_its_limit_is_never_handed_on(model):
    """`{"to": "bob", "amount": 15` would read as a call of its own (json-repair guesses
    the end): an answer cut inside a call is an error, not a call."""
    respx.post(CHAT).respond(json=completion_body(
        None, tool_calls=[tool_call("pay", '{"to": "bob", "amount": 15')],
        finish_reason="length"))
    with pytest.raises(ChatModelError, match="cut at its token limit inside a tool call"):
        await model.chat([ChatMessage("user", "Pay Bob 150")], tools=[END])


@respx.mock
async def test_arguments_that_cannot_be_read_without_a_guess_are_refused(model):
    respx.post(CHAT).respond(json=completion_body(
        None, tool_calls=[tool_call("pay", '{"to": "bob", "amount": 15')],
        finish_reason="tool_calls"))
    with pytest.raises(ChatModelError, match="not a JSON object"):
        await model.chat([ChatMessage("user", "Pay Bob 150")], tools=[END])


@respx.mock
async def test_a_server_that_gives_no_usage_has_it_estimated(model):
    body = completion_body("An answer of some words.")
    body.pop("usage")
    respx.post(CHAT).respond(json=body)
    reply = await model.chat([ChatMessage("user", "A question of some words, asked.")])
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0


@respx.mock
async def test_a_structured_answer_asks_for_the_json_schema(model):
    route = respx.post(CHAT).respond(json=completion_body('{"action": "delete"}'))
    await model.chat([ChatMessage("user", "decide")], json_schema=SCHEMA)

    body = sent(route)
    assert body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    assert body["temperature"] == 0


@respx.mock
async def test_a_server_without_json_schema_is_asked_for_a_json_object_from_then_on(model):
    route = respx.post(CHAT)
    refusal = {"detail": [{
        "type": "literal_error", "loc": ["body", "response_format", "type"],
        "msg": "Input should be 'text' or 'json_object'", "input": "json_schema"}]}
    route.side_effect = [
        # llama-cpp-python's server: FastAPI's validation error naming the field.
        httpx.Response(500, json=refusal),
        httpx.Response(200, json=completion_body('{"action": "delete"}')),
        httpx.Response(200, json=completion_body('{"action": "edit"}')),
    ]
    first = await model.chat([ChatMessage("user", "decide")], json_schema=SCHEMA)
    second = await model.chat([ChatMessage("user", "decide again")], json_schema=SCHEMA)

    assert (first.text, second.text) == ('{"action": "delete"}', '{"action": "edit"}')
    for call in (1, 2):
        body = sent(route, call)
        assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
        assert json.dumps(SCHEMA) in body["messages"][-1]["content"]
    assert route.call_count == 3


@respx.mock
async def test_a_server_that_takes_neither_schema_gets_a_plain_json_object(model):
    route = respx.post(CHAT)
    route.side_effect = [
        httpx.Response(400, json=error_body("response_format json_schema is not supported")),
        httpx.Response(400, json=error_body("Unknown field response_format.schema")),
        httpx.Response(200, json=completion_body('{"action": "delete"}')),
    ]
    await model.chat([ChatMessage("user", "decide")], json_schema=SCHEMA)
    assert sent(route, 2)["response_format"] == {"type": "json_object"}


@respx.mock
async def test_a_refusal_not_of_the_format_is_not_taken_for_one(model):
    route = respx.post(CHAT).respond(400, json=error_body("messages: too many tokens"))
    with pytest.raises(ChatModelResponseError, match="too many tokens"):
        await model.chat([ChatMessage("user", "decide")], json_schema=SCHEMA)
    assert route.call_count == 1
    assert sent(route)["response_format"]["type"] == "json_schema"


@respx.mock
async def test_tool_calls_come_back_with_their_ids_and_results_name_them(model):
    route = respx.post(CHAT).respond(json=completion_body(
        None, tool_calls=[tool_call("book_table", '{"party": 2, "time": "19:00",}')],
        finish_reason="tool_calls"))
    reply = await model.chat([ChatMessage("user", "Book for two at seven")], tools=[END])

    assert sent(route)["tools"] == [{"type": "function", "function": {
        "name": "end_conversation", "description": "End it.",
        "parameters": {"type": "object", "properties": {}}}}]
    # A trailing comma is read (json-repair), not refused.
    assert reply.tool_calls == (ToolCall("book_table", {"party": 2, "time": "19:00"},
                                         "call_7Fq2"),)

    respx.post(CHAT).respond(json=completion_body("Booked."))
    await model.chat([
        ChatMessage("user", "Book for two at seven"),
        ChatMessage("assistant", "", tool_calls=reply.tool_calls),
        ChatMessage("tool", '{"ok": true}', tool_name="book_table"),
    ])
    messages = sent(respx.routes[-1])["messages"]
    assert messages[1]["tool_calls"][0]["id"] == "call_7Fq2"
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"party": 2, "time": "19:00"})
    assert messages[2] == {"role": "tool", "content": '{"ok": true}', "tool_call_id": "call_7Fq2"}


@respx.mock
async def test_a_stream_hands_on_each_piece_and_reads_usage_from_its_last_chunk(model):
    route = respx.post(CHAT).mock(return_value=stream_response([
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo."}),
        chunk({}, finish_reason="stop"),
        chunk({}, usage={"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}),
    ]))
    pieces: list[str] = []
    reply = await model.chat_streaming([ChatMessage("user", "Hi")], on_text=pieces.append)

    assert pieces == ["Hel", "lo."]
    assert reply.text == "Hello."
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 2)
    body = sent(route)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@respx.mock
async def test_a_streamed_tool_call_is_put_together_from_its_pieces(model):
    respx.post(CHAT).mock(return_value=stream_response([
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
               "function": {"name": "end_conversation", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"reason": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"goodbye"}'}}]}),
        chunk({}, finish_reason="tool_calls"),
    ]))
    reply = await model.chat_streaming([ChatMessage("user", "bye")], on_text=lambda _: None,
                                       tools=[END])
    assert reply.tool_calls == (ToolCall("end_conversation", {"reason": "goodbye"}, "call_1"),)


@respx.mock
async def test_a_server_that_refuses_stream_options_streams_without_them(model):
    route = respx.post(CHAT)
    route.side_effect = [
        httpx.Response(400, json=error_body("Unrecognized request argument: stream_options")),
        stream_response([chunk({"content": "Hi."}), chunk({}, finish_reason="stop")]),
    ]
    reply = await model.chat_streaming([ChatMessage("user", "Hi")], on_text=lambda _: None)
    assert reply.text == "Hi."
    assert "stream_options" not in sent(route, 1)
    assert reply.usage.completion_tokens > 0  # estimated, as the server gave none


@respx.mock
async def test_a_dropped_stream_is_tried_again_while_nothing_was_handed_on(model):
    route = respx.post(CHAT)
    route.side_effect = [
        stream_response([chunk({"role": "assistant", "content": ""})], done=False),
        stream_response([chunk({"content": "Whole."}), chunk({}, finish_reason="stop")]),
    ]
    reply = await model.chat_streaming([ChatMessage("user", "Hi")], on_text=lambda _: None)
    assert reply.text == "Whole."
    assert route.call_count == 2


@respx.mock
async def test_a_stream_dropped_after_text_was_handed_on_is_an_error_not_a_repeat(model):
    route = respx.post(CHAT).mock(return_value=stream_response(
        [chunk({"content": "Half an ans"})], done=False))
    pieces: list[str] = []
    with pytest.raises(ChatModelError, match="stream stopped"):
        await model.chat_streaming([ChatMessage("user", "Hi")], on_text=pieces.append)
    assert pieces == ["Half an ans"]
    assert route.call_count == 1


@respx.mock
@pytest.mark.parametrize("status", [429, 503])
async def test_429_and_503_are_tried_again_after_retry_after(model, status):
    route = respx.post(CHAT)
    route.side_effect = [
        httpx.Response(status, headers={"retry-after": "0.6"},
                       json=error_body("Rate limit reached", "rate_limit_error")),
        httpx.Response(200, json=completion_body("ok")),
    ]
    started = time.monotonic()
    assert (await model.chat([ChatMessage("user", "x")])).text == "ok"
    assert route.call_count == 2
    assert time.monotonic() - started >= 0.6


@respx.mock
@pytest.mark.parametrize(("status", "said"), [
    (401, "Incorrect API key provided"),
    (403, "You are not allowed to use this model"),
    (404, "The model `qwen2.5-7b-instruct` does not exist"),
    (413, "Request too large"),
])
async def test_a_refusal_is_permanent_and_says_why(model, status, said):
    route = respx.post(CHAT).respond(status, json=error_body(said))
    with pytest.raises(ChatModelResponseError, match=said) as caught:
        await model.chat([ChatMessage("user", "x")])
    assert caught.value.transient is False
    assert route.call_count == 1


@respx.mock
async def test_a_proxys_html_page_is_a_clear_transient_error(model):
    page = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>" \
           "<hr><center>nginx/1.25.3</center></body></html>"
    route = respx.post(CHAT).respond(502, text=page, headers={"content-type": "text/html"})
    with pytest.raises(ChatModelResponseError, match="502 Bad Gateway") as caught:
        await model.chat([ChatMessage("user", "x")])
    assert caught.value.transient is True
    assert route.call_count == 3  # the backend's attempts


@respx.mock
@pytest.mark.parametrize("answer", [
    httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 1,
                              "model": "m", "choices": []}),
    httpx.Response(200, text="upstream connect error", headers={"content-type": "text/plain"}),
    httpx.Response(200, text="{\"id\": \"x\", \"choi", headers={"content-type": JSON}),
], ids=["no-choices", "not-json", "cut-json"])
async def test_a_200_with_nothing_in_it_is_tried_again_then_a_clear_error(model, answer):
    route = respx.post(CHAT).mock(return_value=answer)
    with pytest.raises(ChatModelError) as caught:
        await model.chat([ChatMessage("user", "x")])
    assert caught.value.transient is True
    assert str(caught.value)
    assert route.call_count == 3


@respx.mock
async def test_a_timeout_is_a_transient_timeout(model):
    respx.post(CHAT).mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(ChatModelTimeout):
        await model.chat([ChatMessage("user", "x")])


@respx.mock
async def test_the_window_is_what_the_server_says_the_model_holds(model):
    respx.get(f"{BASE}/models").respond(json=models_body(
        "qwen2.5-7b-instruct", max_model_len=32768))
    window = await model.context_window()
    assert window is not None and window.tokens == 32768
    assert "max_model_len" in window.source


@respx.mock
async def test_llama_servers_window_comes_from_its_props(model):
    respx.get(f"{BASE}/models").respond(json=models_body("qwen2.5-7b-instruct"))
    respx.get("http://vllm.test:8000/props").respond(json={
        "default_generation_settings": {"n_ctx": 8192, "model": "qwen"}, "total_slots": 1})
    window = await model.context_window()
    assert window is not None and (window.tokens, window.source) == (
        8192, "http://vllm.test:8000/props: n_ctx")


@respx.mock
async def test_a_server_that_says_nothing_of_the_window_gives_none(model):
    respx.get(f"{BASE}/models").respond(json=models_body("qwen2.5-7b-instruct"))
    respx.get("http://vllm.test:8000/props").respond(404, json=error_body("Not Found"))
    assert await model.context_window() is None


@respx.mock
async def test_a_refused_key_and_an_unknown_model_are_said_by_the_health_check(model):
    respx.get(f"{BASE}/models").respond(401, json=error_body("Incorrect API key provided"))
    reason = await model.unready_reason()
    assert reason is not None and "OPENAI_API_KEY" in reason and "401" in reason

    model = OpenAIChatModel("qwen2.5-7b", base_url=BASE, api_key="sk-test")
    respx.get(f"{BASE}/models").respond(json=models_body("qwen2.5-7b-instruct", "llama3.1-8b"))
    reason = await model.unready_reason()
    assert reason is not None and "has no model qwen2.5-7b" in reason
    assert "qwen2.5-7b-instruct" in reason

    model = OpenAIChatModel("llama3.1-8b", base_url=BASE, api_key="sk-test")
    assert await model.unready_reason() is None


@respx.mock
async def test_the_configuration_is_the_openai_packages_own(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://lmstudio.test:1234/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "lm-studio")
    route = respx.post("http://lmstudio.test:1234/v1/chat/completions").respond(
        json=completion_body("ok"))
    model = OpenAIChatModel("local-model")
    await model.chat([ChatMessage("user", "x")])
    assert route.calls.last.request.headers["authorization"] == "Bearer lm-studio"
