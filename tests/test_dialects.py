"""The OpenAI and Ollama dialects, driven by their own official Python clients against a real
`mnemoloop serve` process (in front of the stand-in Ollama): several requests of a client are
one conversation, its memory is written when it ends, a later conversation of the same app
gets it in its system prompt, and another app never does."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import ollama
import openai
import pytest

from tests.dialect_service import ADMIN, END, City, Service, serving
from tests.fake_ollama import MODEL, OTHER_MODEL, SHOW_PROMPT, SLOW, WHICH_MODEL

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from serving(tmp_path_factory)


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
