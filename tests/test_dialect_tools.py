"""Tools through the OpenAI, Ollama and Responses dialects, with their official clients
against a real `mnemoloop serve`: the client's tools reach the model, its calls come back, the
results go back, whole or streamed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import ollama
import pytest

from tests.dialect_service import BOOK_TABLE, BOOKED, END, Service, serving
from tests.fake_ollama import MODEL

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from serving(tmp_path_factory)


def stored_turns(service: Service, conversation_id: str) -> list[tuple[str, Any, Any, Any]]:
    with closing(sqlite3.connect(f"file:{service.db}?mode=ro", uri=True)) as db:
        return db.execute(
            "SELECT role, tool_calls, tool_call_id, tool_name FROM messages"
            " WHERE conversation_id = ? ORDER BY id", (conversation_id,)).fetchall()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_openai_client_runs_a_tool_round_trip(service, stream):
    """The client's tools reach the model (in Ollama's dialect); its call comes back with an
    id and arguments the tool's parameters accept, whole or streamed; the result goes back,
    the final answer uses it, all in one conversation, and the memory keeps what the tool
    did, with its reference."""
    app = f"bistro-{stream}"
    service.install(app)
    client = service.openai(app)
    history: list[Any] = [{"role": "user", "content": "Book us a table tonight, please."}]

    def ask() -> tuple[str | None, list[Any], str, str]:
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=history, tools=[BOOK_TABLE], stream=stream,
            extra_headers=END if history[-1]["role"] == "tool" else None)
        conversation = raw.headers["x-mnemoloop-conversation-id"]
        if not stream:
            choice = raw.parse().choices[0]
            calls = [c.model_dump() for c in choice.message.tool_calls or ()]
            return choice.message.content, calls, choice.finish_reason, conversation
        text, calls, finish = "", {}, ""
        for chunk in raw.parse():
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for delta in choice.delta.tool_calls or ():
                    call = calls.setdefault(delta.index, {"id": "", "type": "function",
                                                         "function": {"name": "", "arguments": ""}})
                    call["id"] += delta.id or ""
                    call["function"]["name"] += delta.function.name or ""
                    call["function"]["arguments"] += delta.function.arguments or ""
                finish = choice.finish_reason or finish
        return text or None, list(calls.values()), finish, conversation

    content, calls, finish, first = ask()
    assert finish == "tool_calls" and not content
    [call] = calls
    assert call["function"]["name"] == "book_table" and call["id"].startswith("call_")
    arguments = json.loads(call["function"]["arguments"])
    assert isinstance(arguments["party"], int) and isinstance(arguments["time"], str)
    history += [{"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": call["id"], "content": BOOKED}]
    content, calls, finish, second = ask()
    assert finish == "stop" and not calls and "LUI-2231" in (content or "")
    assert first == second  # one conversation
    assert stored_turns(service, first) == [
        ("user", None, None, None),
        ("assistant", json.dumps([{"id": call["id"], "name": "book_table",
                                   "arguments": arguments}]), None, None),
        ("tool", None, call["id"], "book_table"),
        ("assistant", None, None, None),
    ]
    assert any("LUI-2231" in memory for memory in service.memories_once_written(app))
    shown = service.admin.get(f"/conversations/{first}").json()["messages"]
    assert shown[1]["toolCalls"] == [{"id": call["id"], "name": "book_table",
                                      "arguments": arguments}]
    assert (shown[2]["toolCallId"], shown[2]["toolName"]) == (call["id"], "book_table")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_ollama_client_runs_a_tool_round_trip(service, stream):
    app = f"ollama-bistro-{stream}"
    service.install(app)
    client = service.ollama(app)
    history: list[Any] = [{"role": "user", "content": "A table for tonight?"}]

    def ask() -> ollama.Message:
        if not stream:
            return client.chat(model=MODEL, messages=history, tools=[BOOK_TABLE],
                               stream=False).message
        content, calls = "", []
        for part in client.chat(model=MODEL, messages=history, tools=[BOOK_TABLE],
                                stream=True):
            content += part.message.content or ""
            calls += part.message.tool_calls or []
        return ollama.Message(role="assistant", content=content, tool_calls=calls or None)

    asked = ask()
    [call] = asked.tool_calls or []
    assert call.function.name == "book_table" and isinstance(call.function.arguments["party"], int)
    history += [asked, {"role": "tool", "tool_name": "book_table", "content": BOOKED}]
    answered = ask()
    assert not answered.tool_calls and "LUI-2231" in (answered.content or "")
    [conversation] = service.conversations(app)
    assert conversation["messageCount"] == 4


def test_tool_choice_none_offers_no_tool_and_the_answer_is_text(service):
    service.install("toolbox")
    client = service.openai("toolbox")
    plain = client.chat.completions.create(
        model="m", tools=[BOOK_TABLE], tool_choice="none",
        messages=[{"role": "user", "content": "Just say hi."}])
    assert plain.choices[0].message.content == "Noted." and not plain.choices[0].message.tool_calls
    assert plain.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_responses_api_runs_a_tool_round_trip(service, stream):
    """A function tool through `client.responses`: the model's `function_call` item, its
    `function_call_output` sent back (by `previous_response_id`), the final answer."""
    app = f"resp-tools-{stream}"
    service.install(app)
    client = service.openai(app)
    tool = {"type": "function", **BOOK_TABLE["function"]}

    def ask(**given: Any) -> Any:
        if not stream:
            return client.responses.create(model="m", tools=[tool], **given)
        with client.responses.stream(model="m", tools=[tool], **given) as events:
            kinds = [event.type for event in events]
            final = events.get_final_response()
        assert kinds[-1] == "response.completed"
        if any(item.type == "function_call" for item in final.output):
            assert "response.function_call_arguments.done" in kinds
        return final

    first = ask(input="Book us a table tonight, please.")
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "book_table" and isinstance(json.loads(call.arguments)["party"], int)
    second = ask(previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": BOOKED}])
    assert "LUI-2231" in second.output_text
    assert not [item for item in second.output if item.type == "function_call"]
    [conversation] = service.conversations(app)
    assert conversation["messageCount"] == 4
    # A client that keeps the history itself resends the output items as they came: the
    # same conversation.
    asked = [{"role": "user", "content": "Book us a table tonight, please."}]
    resent = [item.model_dump(exclude_none=True) for item in first.output]
    third = ask(input=[*asked, *resent, {"type": "function_call_output",
                                         "call_id": call.call_id, "output": BOOKED},
                       *[item.model_dump(exclude_none=True) for item in second.output],
                       {"role": "user", "content": "Thanks!"}])
    assert [item.name for item in third.output if item.type == "function_call"] == [
        "book_table"]  # the stand-in model calls again
    [conversation] = service.conversations(app)
    assert conversation["messageCount"] == 6
