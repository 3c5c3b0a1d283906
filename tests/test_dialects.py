"""The OpenAI and Ollama dialects, driven by their own official Python clients against a real
`mnemoloop serve` process (in front of the stand-in Ollama): several requests of a client are
one conversation, its memory is written when it ends, a later conversation of the same app
gets it in its system prompt, and another app never does."""

from __future__ import annotations

import concurrent.futures
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import ollama
import openai
import pytest
from pydantic import BaseModel

from tests.fake_ollama import MODEL, OTHER_MODEL, SHOW_PROMPT, SLOW, WHICH_MODEL, fake_ollama
from tests.live_service import free_port, start_serve

pytestmark = pytest.mark.anyio
ADMIN = "dialect-admin"
END = {"X-Mnemoloop-End-Conversation": "true"}


class Service:
    def __init__(self, url: str, db: Path) -> None:
        self.url = url
        self.db = db
        self.admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"})
        self.keys: dict[str, str] = {}
        self.clients: list[Any] = [self.admin]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def install(self, app_id: str) -> str:
        response = self.admin.post("/apps", json={"appId": app_id, "name": app_id})
        assert response.status_code == 201, response.text
        self.keys[app_id] = response.json()["apiKey"]
        return self.keys[app_id]

    def openai(self, app_id: str, **headers: str) -> openai.OpenAI:
        return self.kept(openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys.get(
            app_id, app_id), default_headers=headers or None, max_retries=0))

    def ollama(self, app_id: str, **headers: str) -> ollama.Client:
        return self.kept(ollama.Client(host=self.url, headers={
            "Authorization": f"Bearer {self.keys[app_id]}", **headers}))

    def kept(self, client: Any) -> Any:
        """`client`, closed with the service."""
        self.clients.append(client)
        return client

    def conversations(self, app_id: str) -> list[dict[str, Any]]:
        """The app's conversations, oldest first, as the database file holds them."""
        with closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as db:
            rows = db.execute(
                "SELECT c.status, (SELECT COUNT(*) FROM messages m"
                " WHERE m.conversation_id = c.conversation_id) FROM conversations c"
                " WHERE c.app_id = ? ORDER BY c.created_at, c.rowid", (app_id,)).fetchall()
        return [{"state": status, "messageCount": count} for status, count in rows]

    def memories_once_written(self, app_id: str) -> list[str]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            items = self.admin.get(f"/apps/{app_id}/memories").json()["memories"]
            if items:
                return [item["content"] for item in items]
            time.sleep(0.1)
        raise AssertionError(f"no memory was written for {app_id}")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from serving(tmp_path_factory)


def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`mnemoloop serve` in front of the stand-in Ollama, until the generator is closed."""
    folder: Path = tmp_path_factory.mktemp("dialects")
    port = free_port()
    with fake_ollama(delay=0.005) as backend:
        process = start_serve(folder / "dialects.db", port, backend, folder / "serve.log",
                              token=ADMIN)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(url + "/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, (folder / "serve.log").read_text()
                time.sleep(0.1)
            running = Service(url, folder / "dialects.db")
            yield running
            running.close()
        finally:
            process.terminate()
            assert process.wait(timeout=30) == 0, (folder / "serve.log").read_text()


def test_an_openai_client_gets_a_memory_that_a_later_conversation_is_given(service):
    service.install("locker")
    service.install("elsewhere")
    client = service.openai("locker")
    history: list[Any] = [{"role": "system", "content": "You run the gym's front desk."}]
    ids = set()
    for said in ("Hello!", "My locker code is 4821.", "Thanks, bye."):
        history.append({"role": "user", "content": said})
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=history,
            extra_headers=END if said == "Thanks, bye." else None)
        ids.add(raw.headers["x-mnemoloop-conversation-id"])
        completion = raw.parse()
        assert completion.model == MODEL  # the client's model is not the backend's
        assert completion.choices[0].message.content == "Noted."
        assert completion.usage and completion.usage.completion_tokens > 0
        history.append({"role": "assistant", "content": completion.choices[0].message.content})
    assert len(ids) == 1  # three requests, one conversation
    [conversation] = service.conversations("locker")
    assert conversation["state"] == "ended" and conversation["messageCount"] == 6
    assert any("4821" in memory for memory in service.memories_once_written("locker"))

    later = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "You run the gym's front desk."},
                  {"role": "user", "content": SHOW_PROMPT}])
    prompt = later.choices[0].message.content or ""
    assert prompt.startswith("You run the gym's front desk.")  # the client's own system prompt
    assert "4821" in prompt  # and the app's memory block after it
    other = service.openai("elsewhere").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": SHOW_PROMPT}])
    assert "4821" not in (other.choices[0].message.content or "")


async def test_an_async_openai_client_streams_with_usage(service):
    service.install("streamer")
    client = openai.AsyncOpenAI(base_url=f"{service.url}/v1",
                                api_key=service.keys["streamer"], max_retries=0)
    stream = await client.chat.completions.create(
        model=OTHER_MODEL, messages=[{"role": "user", "content": WHICH_MODEL}], stream=True,
        stream_options={"include_usage": True})
    text, usage, models = "", None, set()
    async for chunk in stream:
        models.add(chunk.model)
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text == OTHER_MODEL and models == {OTHER_MODEL}  # the model the client named
    assert usage is not None and usage.prompt_tokens > 0
    models_listed = [model.id async for model in client.models.list()]
    assert models_listed == [MODEL, OTHER_MODEL]
    await client.close()


def test_an_ollama_client_continues_one_conversation_streamed_or_not(service):
    service.install("pantry")
    client = service.ollama("pantry")
    history = [{"role": "user", "content": "Hi there."}]
    first = client.chat(model=MODEL, messages=history, stream=False)
    assert first.done and first.done_reason == "stop" and first.message.content == "Noted."
    assert first.eval_count and first.eval_count > 0
    history += [{"role": "assistant", "content": first.message.content},
                {"role": "user", "content": "My locker code is 1357."}]
    pieces = list(client.chat(model=MODEL, messages=history, stream=True))
    assert "".join(p.message.content or "" for p in pieces) == "Noted."
    assert pieces[-1].done and pieces[-1].done_reason == "stop"
    assert [c["messageCount"] for c in service.conversations("pantry")] == [4]
    history += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Bye."}]
    service.ollama("pantry", **END).chat(model=MODEL, messages=history, stream=False)
    assert [c["state"] for c in service.conversations("pantry")] == ["ended"]
    assert any("1357" in memory for memory in service.memories_once_written("pantry"))
    tags = client.list()
    assert [model.model for model in tags.models] == [MODEL, OTHER_MODEL]
    named = client.chat(model=OTHER_MODEL, messages=[{"role": "user", "content": WHICH_MODEL}])
    assert named.model == OTHER_MODEL and named.message.content == OTHER_MODEL


async def test_an_async_ollama_client_is_given_the_memory(service):
    service.install("notes")
    client = ollama.AsyncClient(host=service.url,
                                headers={"Authorization": f"Bearer {service.keys['notes']}"})
    ender = ollama.AsyncClient(host=service.url, headers={
        "Authorization": f"Bearer {service.keys['notes']}", **END})
    await ender.chat(model=MODEL, messages=[{"role": "user", "content": "My locker code is 2468."}])
    with anyio.fail_after(30):
        while not service.admin.get("/apps/notes/memories").json()["memories"]:
            await anyio.sleep(0.1)
    reply = ""
    async for part in await client.chat(
        model="llama3.2", stream=True, messages=[{"role": "user", "content": SHOW_PROMPT}]):
        reply += part.message.content or ""
    assert "2468" in reply
    await client.close()
    await ender.close()


def test_refusals_come_in_each_dialect(service):
    service.install("strict")
    client = service.openai("strict")
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            tool_choice={"type": "function", "function": {"name": "g"}})
    assert "tool_choice" in refused.value.message
    with pytest.raises(openai.BadRequestError) as unnamed_result:
        client.chat.completions.create(model="m", messages=[
            {"role": "user", "content": "hi"}, {"role": "tool", "content": "{}"}])
    assert "tool_call_id" in unnamed_result.value.message
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", n=2,
                                       messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as image:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}])
    assert "image_url" in image.value.message
    with pytest.raises(openai.AuthenticationError):
        service.openai("wrong-key").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ollama.ResponseError) as ollama_refused:
        service.ollama("strict").chat(
            model=MODEL, messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "bad name!", "parameters": {}}}])
    assert ollama_refused.value.status_code == 400 and "tools" in ollama_refused.value.error
    yaml = httpx.post(f"{service.url}/api/chat", headers={
        "Authorization": f"Bearer {service.keys['strict']}"}, json={
        "model": MODEL, "format": "yaml", "messages": [{"role": "user", "content": "hi"}]})
    assert yaml.status_code == 400 and "format" in yaml.json()["error"]
    with pytest.raises(openai.BadRequestError) as unknown_format:
        client.chat.completions.create(model="m", response_format={"type": "xml"},
                                       messages=[{"role": "user", "content": "hi"}])
    assert "response_format" in unknown_format.value.message
    # The admin token works once it names the app; without the name it is refused.
    admin = service.openai(ADMIN)
    with pytest.raises(openai.BadRequestError) as unnamed:
        admin.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "X-Mnemoloop-App" in unnamed.value.message
    named = admin.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                          extra_headers={"X-Mnemoloop-App": "strict"})
    assert named.choices[0].message.content == "Noted."
    assert service.conversations("strict")[0]["messageCount"] == 2  # refusals stored nothing


def test_concurrent_requests_of_one_thread(service):
    service.install("busy")
    client = service.openai("busy")
    question = [{"role": "user", "content": f"{SLOW} What is on today?"}]

    def ask(messages: list[Any]) -> str:
        reply = client.chat.completions.create(model="m", messages=messages)
        return reply.choices[0].message.content or ""

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        first = pool.submit(ask, question)
        time.sleep(0.5)
        # The same question again follows the same answer; ten other histories at once (a
        # client's batch, ten people behind one key) are ten conversations, none refused.
        again = pool.submit(ask, question)
        others = [
            pool.submit(ask, [{"role": "user", "content": f"Question {n}."}]) for n in range(10)
        ]
        assert [other.result(timeout=60) for other in others] == ["Noted."] * 10
        assert first.result(timeout=30) == again.result(timeout=30) == "Noted."
    conversations = service.conversations("busy")
    assert len(conversations) == 11
    assert sorted(c["messageCount"] for c in conversations) == [2] * 11
    # Another user of the app is another thread, and is not held up.
    other = client.chat.completions.create(
        model="m", user="someone-else", messages=[{"role": "user", "content": "Hi."}])
    assert other.choices[0].message.content == "Noted."
    assert len(service.conversations("busy")) == 12


BOOK_TABLE = {"type": "function", "function": {
    "name": "book_table", "description": "Book a table at the restaurant.",
    "parameters": {"type": "object", "properties": {
        "party": {"type": "integer"}, "time": {"type": "string"}},
        "required": ["party", "time"]}}}
BOOKED = json.dumps({"confirmation": "LUI-2231", "status": "confirmed"})


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


class City(BaseModel):
    name: str
    population: int
    coastal: bool


def test_structured_output_passes_through_in_each_dialect(service):
    """OpenAI's `response_format` and Ollama's `format` reach the backend as its schema
    (Ollama's `format`), and the answer validates; the memory block is injected as for chat."""
    service.install("atlas")
    client = service.openai("atlas")
    parsed = client.chat.completions.parse(
        model="m", response_format=City,
        messages=[{"role": "user", "content": "Which city should I visit?"}])
    city = parsed.choices[0].message.parsed
    assert isinstance(city, City) and city.name == "Lisbon"
    whole = client.chat.completions.create(
        model="m", response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "Answer in JSON."}])
    assert isinstance(json.loads(whole.choices[0].message.content or ""), dict)
    answered = service.ollama("atlas").chat(
        model=MODEL, format=City.model_json_schema(), stream=False,
        messages=[{"role": "user", "content": "And from Ollama?"}])
    assert City.model_validate_json(answered.message.content or "").coastal is True
    # A later plain request of the same history is text again.
    again = client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": "Which city should I visit?"},
        {"role": "assistant", "content": parsed.choices[0].message.content},
        {"role": "user", "content": "Thanks, and in words?"}])
    assert again.choices[0].message.content == "Noted."


def test_an_unknown_route_under_v1_answers_in_openais_error_shape(service):
    service.install("lost")
    client = service.openai("lost")
    with pytest.raises(openai.NotFoundError) as missing:
        client.post("/embeddings", body={"model": "m", "input": "hi"}, cast_to=httpx.Response)
    assert "POST /v1/embeddings is not served here" in missing.value.message
    assert missing.value.body["type"] == "not_found_error"  # type: ignore[index]
    # The routes it serves still answer.
    assert client.models.list().data


def test_the_responses_api_maps_onto_the_same_conversations(service):
    service.install("resp")
    client = service.openai("resp")
    first = client.responses.create(model="m", input="My locker code is 4417.")
    assert first.output_text == "Noted." and first.status == "completed"
    # previous_response_id continues the same conversation; instructions are the client's
    # system prompt.
    second = client.responses.create(model="m", previous_response_id=first.id,
                                     instructions="Be brief.", input=SHOW_PROMPT)
    assert "Be brief." in second.output_text
    [conversation] = service.conversations("resp")
    assert conversation["messageCount"] == 4
    # Streamed: the API's events, the text as it is written, then the whole response.
    kinds, deltas = [], []
    with client.responses.stream(model="m", previous_response_id=second.id,
                                 input=[{"role": "user", "content": "And now?"}]) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "".join(deltas) == final.output_text == "Noted."
    assert len(service.conversations("resp")) == 1
    # Structured output through `text.format`.
    parsed = client.responses.parse(model="m", input="Which city?", text_format=City)
    assert isinstance(parsed.output_parsed, City)
    # An unknown previous response is OpenAI's 404.
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", previous_response_id="resp_nothing_1", input="hi")


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


def test_an_answer_schema_no_grammar_can_hold_is_refused(service):
    # llama.cpp unrolls every length and repeat limit into its grammar: a schema asking for
    # 200,000 characters would exhaust the backend, so it is refused before it is stored.
    service.install("bounded")
    client = service.openai("bounded")
    for schema in ({"type": "string", "maxLength": 200000},
                   {"type": "string", "pattern": "^a{1,200000}$"}):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "s", "schema": schema}})
        assert "at most 1000" in refused.value.message
    assert service.conversations("bounded") == []
