"""The model's window, known and kept: learned from the model (Ollama's `/api/show`, an
OpenAI-compatible server's model list, llama.cpp's `n_ctx`) or the setting, told to Ollama
with every request, and never exceeded by a request the service sends; a server that cuts a
prompt anyway is logged and counted. Against a stand-in Ollama that reads as Ollama does
(within `num_ctx`, 4,096 when none is sent, counted with a real tokenizer)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import uuid

import httpx
import pytest
import respx

from loop.llm.ollama import OllamaChatModel
from loop.llm.openai import OpenAIChatModel
from loop.llm.windows import DEFAULT_WINDOW, MAX_ROOM, budgets, choose_window
from memory_agent import ChatMessage, estimate_tokens
from memory_agent.storage.store import MemoryStore
from tests.fake_ollama import MODEL, SHOW_PROMPT, _tokens, ollama_stand_in
from tests.harness import eventually, http_client, running, service, settings_for
from tests.ollama_wire import chat_body, show_body
from tests.openai_wire import chunk, completion_body, models_body, stream_response

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("allow_model_requests")]

HOST = "http://ollama.window:11434"
ADMIN = {"Authorization": "Bearer admin"}


async def _window_of(model, tmp_path, **settings):
    return await choose_window(model, settings_for(tmp_path / "w.db", **settings))


@respx.mock
async def test_ollamas_modelfile_num_ctx_is_what_the_model_holds(tmp_path, caplog):
    respx.post(f"{HOST}/api/show").respond(json=show_body(131072, num_ctx=16384))
    route = respx.post(f"{HOST}/api/chat").respond(json=chat_body("ok"))
    model = OllamaChatModel("llama3.2:1b", host=HOST)
    caplog.set_level(logging.INFO)

    chosen = await _window_of(model, tmp_path, prompt_tokens=6000)
    # Enough for the prompt budget and a JSON answer's room, in steps of 1,024, within 16,384.
    assert chosen.tokens == 8192 == model.context_tokens
    assert "the Modelfile's num_ctx" in chosen.said and "8192" in chosen.said

    for question in ("one", "two"):
        await model.chat([ChatMessage("user", question)])
    await model.chat([ChatMessage("user", "three")], json_schema={"type": "object"},
                     answer_tokens=300)
    options = [json.loads(call.request.content)["options"] for call in route.calls]
    assert [o["num_ctx"] for o in options] == [8192, 8192, 8192]  # one steady value
    assert options[2]["num_predict"] == 300


@respx.mock
async def test_ollama_is_never_asked_for_more_than_the_model_holds(tmp_path):
    respx.post(f"{HOST}/api/show").respond(json=show_body(2048))
    model = OllamaChatModel("tiny", host=HOST)
    chosen = await _window_of(model, tmp_path, prompt_tokens=6000)
    assert chosen.tokens == 2048
    assert "llama.context_length" in chosen.said


@respx.mock
async def test_a_model_that_says_nothing_is_taken_to_hold_ollamas_default(tmp_path, caplog):
    respx.post(f"{HOST}/api/show").respond(500, json={"error": "show failed"})
    model = OllamaChatModel("llama3.2:1b", host=HOST, attempts=1)
    caplog.set_level(logging.INFO)
    chosen = await _window_of(model, tmp_path)
    assert chosen.tokens == DEFAULT_WINDOW == 4096
    assert "could not ask what the model holds" in caplog.text
    assert "MNEMOLOOP_MODEL_CONTEXT" in chosen.said


@respx.mock
async def test_the_setting_overrides_what_the_model_says(tmp_path):
    respx.post(f"{HOST}/api/show").respond(json=show_body(131072))
    route = respx.post(f"{HOST}/api/chat").respond(json=chat_body("ok"))
    model = OllamaChatModel("llama3.2:1b", host=HOST)
    chosen = await _window_of(model, tmp_path, model_context=16384, prompt_tokens=20000)
    assert chosen.tokens == 16384
    assert chosen.said == "16384 tokens (MNEMOLOOP_MODEL_CONTEXT); it is asked for 16384 (num_ctx)"
    await model.chat([ChatMessage("user", "x")])
    assert json.loads(route.calls.last.request.content)["options"]["num_ctx"] == 16384
    # A budget that takes less asks for less: Ollama keeps a cache as large as num_ctx.
    smaller = OllamaChatModel("llama3.2:1b", host=HOST)
    assert (await _window_of(smaller, tmp_path, model_context=16384)).tokens == 8192


@respx.mock
async def test_a_hosted_models_large_window_leaves_an_answer_no_more_than_it_may_write(
    tmp_path,
):
    """MNEMOLOOP_MODEL_CONTEXT=128000 for a hosted model: max_tokens stays within the output
    limit a hosted API enforces, for a reply and for a memory's JSON."""
    base = "http://hosted.example/v1"
    respx.get(f"{base}/models").respond(json=models_body("gpt-4o-mini"))
    respx.get("http://hosted.example/props").respond(404)
    route = respx.post(f"{base}/chat/completions").respond(json=completion_body("ok"))
    model = OpenAIChatModel("gpt-4o-mini", base_url=base, api_key="k")
    settings = settings_for(tmp_path / "w.db", model_context=128000)
    await choose_window(model, settings)
    budgets(model, settings)
    await model.chat([ChatMessage("user", "x")])
    await model.chat([ChatMessage("user", "x")], json_schema={"type": "object"})
    sent = [json.loads(call.request.content)["max_tokens"] for call in route.calls]
    assert sent == [MAX_ROOM, MAX_ROOM] == [2048, 2048]
    await model.aclose()


@respx.mock
async def test_an_openai_compatible_servers_window_sets_the_prompt_budget(tmp_path):
    base = "http://vllm.window:8000/v1"
    respx.get(f"{base}/models").respond(json=models_body("qwen", max_model_len=2048))
    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return stream_response([chunk({"content": "Noted."}), chunk({}, "stop")])
        return httpx.Response(200, json=completion_body("Noted."))

    route = respx.post(f"{base}/chat/completions").mock(side_effect=answer)
    model = OpenAIChatModel("qwen", base_url=base, api_key="k")
    async with service(tmp_path / "o.db", model, prompt_tokens=6000) as services, \
            running(services):
        assert services.models.chat_window.tokens == 2048
        await services.stores.registry.install("app", "App")
        conversation = await services.stores.conversations.open("app")
        for n in range(12):
            await services.stores.conversations.add_message(
                conversation, "user", f"Turn {n}: " + "words of a long turn " * 60)
            await eventually(lambda: _answered(services, conversation))
    # Every request fits the window less the answer's room, as counted by the estimate.
    for call in route.calls:
        messages = json.loads(call.request.content)["messages"]
        assert sum(estimate_tokens(m["content"] or "") + 4 for m in messages) <= 2048 - 512


def test_the_estimate_is_never_below_a_real_tokenizers_count():
    """Texts in scripts the story sets do not hold, code, numbers, ids and emoji: the estimate is
    at least what SmolLM2's byte-level tokenizer counts; in English it is generous (some 2.4
    times), the price of never being under."""
    texts = [
        "ჩემი მეგობარი ნინო თბილისში ცხოვრობს და ექიმად მუშაობს.",  # Georgian
        "ጓደኛዬ አበበ በአዲስ አበባ ይኖራል።",  # Amharic
        "Իմ ընկերը ապրում է Երևանում։",  # Armenian
        "என் நண்பர் சென்னையில் வசிக்கிறார்.",  # Tamil
        "Bạn tôi sống ở Hà Nội và làm bác sĩ.",  # Vietnamese
        "私の友達は大阪に住んでいて、毎週金曜日にテニスをします。",  # Japanese
        "제 친구는 부산에 살고 있어요.",  # Korean
        "صديقي يعيش في الدار البيضاء.",  # Arabic
        "ਮੇਰਾ ਦੋਸਤ ਅੰਮ੍ਰਿਤਸਰ ਵਿੱਚ ਰਹਿੰਦਾ ਹੈ।",  # Punjabi (Gurmukhi)
        "Ο φίλος μου μένει στη Θεσσαλονίκη.",  # Greek
        "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ",  # Mongolian
        "def total(items):\n    return sum(i['price'] * i.get('qty', 1) for i in items)\n",
        '{"order": 48213, "items": [{"sku": "X-22", "qty": 3}], "eta": "2026-03-14T15:00Z"}',
        "IBAN DE89 3704 0044 0532 0130 00, ref #A7-99/2026, €1.234,56",
        "https://example.org/path?query=a%20b&x=1#frag",
        # What a vocabulary of words cannot merge: ids, hex, base64, a key.
        " ".join(str(uuid.UUID(int=n * 7919 + 13)) for n in range(20)),
        hashlib.sha256(b"mnemoloop").hexdigest() * 8,
        base64.b64encode(hashlib.sha512(b"x").digest() * 12).decode(),
        "sk-proj-" + hashlib.sha1(b"k").hexdigest().upper() + "xQzRtYvWkLpMnBcD",
        "🎉🎂🥳 party at 19:30 👍🏽👨‍👩‍👧",
        "My friend Alice lives in Oslo and works as a nurse at the university hospital.",
    ]
    for text in texts:
        assert estimate_tokens(text) >= len(_tokens(text)), text
    english = texts[-1]
    assert estimate_tokens(english) <= 2.5 * len(_tokens(english))


class Undercounting(OllamaChatModel):
    """Counts a tenth of the tokens there are (a tokenizer unlike the server's)."""

    def count_tokens(self, text: str) -> int:
        return len(text) // 40


async def test_a_server_that_cuts_a_prompt_anyway_is_logged_and_counted(tmp_path, caplog):
    with ollama_stand_in(0.01, context_length=2048) as ollama:
        model = Undercounting(MODEL, host=ollama.url)
        caplog.set_level(logging.WARNING)
        async with service(tmp_path / "c.db", model) as services, running(services):
            await services.stores.registry.install("app", "App")
            conversation = await services.stores.conversations.open("app")
            await services.stores.conversations.add_message(
                conversation, "user", "A long question. " + "More words of it. " * 900)
            await eventually(lambda: _answered(services, conversation))
            async with http_client(services, "admin") as http:
                metrics = (await http.get("/metrics", headers=ADMIN)).text
        assert ollama.cut == 1
    assert 'mnemoloop_prompts_cut_total{work="conversation"} 1.0' in metrics
    assert "cut the prompt" in caplog.text and "MNEMOLOOP_MODEL_CONTEXT" in caplog.text


@respx.mock
async def test_a_setting_above_what_the_model_holds_is_warned_of(tmp_path, caplog):
    respx.post(f"{HOST}/api/show").respond(json=show_body(2048))
    model = OllamaChatModel("tiny", host=HOST)
    caplog.set_level(logging.INFO)
    chosen = await _window_of(model, tmp_path, model_context=16384)
    assert chosen.tokens == 8192  # the setting, less what the budget does not take
    assert "more than the model says it holds (2048" in caplog.text


async def _answered(services, conversation_id):
    messages = (await services.stores.conversations.get(conversation_id)).messages
    return messages and messages[-1].role == "assistant"


# A turn's filler: about 360 tokens of ordinary talk that states no fact.
FILLER = " ".join(
    f"We talked about item {n} on the list, how long it could take and whether it was worth"
    f" doing this week or the next, and moved on." for n in range(12)
)
FACTS = {1: "My friend Ana lives in Lisbon.", 20: "My friend Bruno lives in Porto.",
         40: "My friend Carla lives in Faro."}


async def test_a_40_turn_conversation_at_ollamas_default_window_keeps_every_fact(tmp_path):
    """About 15,000 tokens with its replies, against a model that holds Ollama's default
    4,096: a fact in the first, the 20th and the last turn all reach the memory; no request,
    for a reply or for memory work, is cut; the last reply still carries the memory block."""
    with ollama_stand_in(0.005, context_length=4096) as ollama:
        model = OllamaChatModel(MODEL, host=ollama.url)
        async with service(tmp_path / "long.db", model) as services, running(services):
            assert services.models.chat_window.tokens == 4096
            await services.stores.registry.install("app", "App")
            await MemoryStore(services.database).insert(
                "app", "The user prefers answers in metric units.",
                created_at="2026-11-01T00:00:00.000000Z")
            conversation = await services.stores.conversations.open("app")
            for turn in range(1, 42):
                # A fact in the middle of its turn.
                half = len(FILLER) // 2
                text = SHOW_PROMPT if turn == 41 else (
                    f"{FILLER[:half]} {FACTS.get(turn, '')} {FILLER[half:]}")
                await services.stores.conversations.add_message(conversation, "user", text)
                await eventually(lambda: _answered(services, conversation))
            messages = (await services.stores.conversations.get(conversation)).messages
            last_reply = messages[-1].content
            total = sum(len(_tokens(m.content)) for m in messages)
            await services.stores.conversations.end(conversation, "app")
            memories = await eventually(lambda: _new_memories(services), timeout=60)
            async with http_client(services, "admin") as http:
                metrics = (await http.get("/metrics", headers=ADMIN)).text
                jobs = (await http.get("/memory-jobs", headers=ADMIN)).json()["jobs"]
    assert total > 14000
    assert "prefers answers in metric units" in last_reply  # the memory block is there
    text = " ".join(memories)
    for city in ("Lisbon", "Porto", "Faro"):
        assert city in text, text
    assert ollama.cut == 0, ollama.reads
    assert max(read for read, _ in ollama.reads) <= 4096
    assert 'mnemoloop_prompts_cut_total{work="conversation"} 0.0' in metrics
    assert 'mnemoloop_prompts_cut_total{work="memory"} 0.0' in metrics
    notes = json.dumps(jobs)
    parts = math.ceil(total / 4096)
    assert "parts of 82 turns" in notes, notes
    assert parts >= 4


async def _new_memories(services):
    memories = await MemoryStore(services.database).list_oldest_first("app")
    texts = [m.content for m in memories if "metric units" not in m.content]
    return texts
