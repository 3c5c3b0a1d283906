"""A request waiting for a slow model is never ended as idle, and no client ever gets an
empty success: an answer that cannot be given is an error in the dialect's own shape."""

from __future__ import annotations

import anyio
import pytest

from memory_agent import ChatReply, ToolCall
from tests.fakes import FunctionModel, ModelCall
from tests.harness import http_client, running, service

pytestmark = pytest.mark.anyio

ADMIN = {"Authorization": "Bearer admin"}


async def test_questions_queued_behind_a_slow_model_are_all_answered(db_path):
    """Ten requests of one app at once through the OpenAI drop-in, a model taking 1.5 s, two
    answer slots for the app and an idle time of 2 s: the last waits some 7 s for its slot,
    and still gets its answer."""

    async def slow(call: ModelCall) -> str:
        await anyio.sleep(1.5)
        return f"Answer to: {call.messages[-1].content}"

    async with service(db_path, FunctionModel(slow), idle_end_seconds=2.0,
                       max_concurrent_per_app=2) as services, running(services), \
            http_client(services, "admin") as client:
        await services.stores.registry.install("desk", "Desk")
        headers = {**ADMIN, "X-Mnemoloop-App": "desk"}
        results: dict[int, tuple[int, str]] = {}

        async def ask(n: int) -> None:
            answer = await client.post("/v1/chat/completions", headers=headers, timeout=60,
                                       json={"model": "any", "messages": [
                                           {"role": "user", "content": f"question {n}"}]})
            content = answer.json()["choices"][0]["message"]["content"] \
                if answer.status_code == 200 else answer.text
            results[n] = (answer.status_code, content)

        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(ask, n)
    assert {n: status for n, (status, _) in results.items()} == dict.fromkeys(range(10), 200)
    for n, (_, content) in results.items():
        assert content == f"Answer to: question {n}"


async def test_a_model_that_answers_nothing_is_an_error_not_an_empty_reply(db_path):
    model = FunctionModel(lambda call: "   ")
    async with service(db_path, model, answer_attempts=2) as services, running(services), \
            http_client(services, "admin") as client:
        services.central._retry_base = 0.05
        await services.stores.registry.install("desk", "Desk")
        answer = await client.post(
            "/v1/chat/completions", headers={**ADMIN, "X-Mnemoloop-App": "desk"}, timeout=30,
            json={"model": "any", "messages": [{"role": "user", "content": "Hello?"}]})
        assert answer.status_code == 502, answer.text
        assert "answered nothing" in answer.json()["error"]["message"]
        ollama = await client.post(
            "/api/chat", headers={**ADMIN, "X-Mnemoloop-App": "desk"}, timeout=30,
            json={"model": "any", "stream": False,
                  "messages": [{"role": "user", "content": "Hello again?"}]})
        assert ollama.status_code == 502, ollama.text
        assert "answered nothing" in ollama.json()["error"]
        conversations = await services.stores.conversations.recent("desk")
        for summary in conversations:
            stored = await services.stores.conversations.get(summary.conversation_id)
            assert [m.role for m in stored.messages] == ["user"]  # no empty reply stored


async def test_a_conversation_ended_before_its_answer_is_an_error_in_the_dialects_shape(db_path):
    started = anyio.Event()

    async def slow(call: ModelCall) -> str:
        started.set()
        await anyio.sleep(1.0)
        return "Too late."

    async with service(db_path, FunctionModel(slow)) as services, running(services), \
            http_client(services, "admin") as client:
        await services.stores.registry.install("desk", "Desk")
        status: dict[str, object] = {}

        async def ask() -> None:
            answer = await client.post(
                "/v1/chat/completions", headers={**ADMIN, "X-Mnemoloop-App": "desk"},
                timeout=30,
                json={"model": "any", "messages": [{"role": "user", "content": "Hi?"}]})
            status["code"], status["body"] = answer.status_code, answer.json()

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await started.wait()
            [summary] = await services.stores.conversations.recent("desk")
            await services.stores.conversations.end(summary.conversation_id, "app")
    assert status["code"] == 409, status
    assert "ended before its question was answered" in status["body"]["error"]["message"]


async def test_a_model_that_ends_the_conversation_without_a_word_still_answers(db_path):
    """The model calls end_conversation with no text: its closing line is asked for (no
    tools offered), the client gets it, and the conversation ends."""

    def closing(call: ModelCall) -> str | ChatReply:
        if call.tools:
            return ChatReply("", tool_calls=(ToolCall("end_conversation"),))
        return "Take care, and good luck with the move!"

    model = FunctionModel(closing)
    async with service(db_path, model) as services, running(services), \
            http_client(services, "admin") as client:
        await services.stores.registry.install("desk", "Desk")
        answer = await client.post(
            "/v1/chat/completions", headers={**ADMIN, "X-Mnemoloop-App": "desk"}, timeout=30,
            json={"model": "any", "messages": [{"role": "user", "content": "Thanks, bye!"}]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == (
            "Take care, and good luck with the move!")
        conversation_id = answer.headers["x-mnemoloop-conversation-id"]
        conversation = await services.stores.conversations.get(conversation_id)
        assert conversation.state == "ended"
        assert [bool(call.tools) for call in model.calls[:2]] == [True, False]


async def test_a_call_of_a_tool_never_offered_is_no_answer(db_path):
    """With a client's tools, a call the model made up is dropped; with nothing else in the
    answer, that is no answer (an error), never an empty success."""
    model = FunctionModel(lambda call: ChatReply("", tool_calls=(ToolCall("launch", {}),)))
    async with service(db_path, model, answer_attempts=1) as services, running(services), \
            http_client(services, "admin") as client:
        await services.stores.registry.install("desk", "Desk")
        tool = {"type": "function", "function": {"name": "book", "parameters": {
            "type": "object", "properties": {}}}}
        answer = await client.post(
            "/v1/chat/completions", headers={**ADMIN, "X-Mnemoloop-App": "desk"}, timeout=30,
            json={"model": "any", "tools": [tool],
                  "messages": [{"role": "user", "content": "Book it."}]})
        assert answer.status_code == 502, answer.text
        assert "answered nothing" in answer.json()["error"]["message"]
