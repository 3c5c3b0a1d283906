"""JSON as real servers give it: prose around the object, a trailing comma, single quotes, an
unquoted key are read where that takes no guess (json-repair); an answer cut at its token
limit is never finished by guessing, it is asked for again with more room."""

from __future__ import annotations

import json

import pytest
import respx

from loop.llm.ollama import OllamaChatModel
from memory_agent import ChatMessage, ChatReply, MemoryCreationRequest, MemorySubAgent
from memory_agent.core.errors import InvalidCompactionDecision, InvalidMemoryText
from memory_agent.writers.answers import json_object
from memory_agent.writers.model.answers import parse_memory_answer
from tests.conftest import install_app
from tests.fakes import FunctionModel, ModelCall
from tests.ollama_wire import chat_body, show_body

pytestmark = pytest.mark.anyio

WHOLE = {"sentences": [{"quote": "I am 25", "text": "The user is 25."}], "updates": []}


@pytest.mark.parametrize("answer", [
    'Here is the memory:\n{"sentences": [{"quote": "I am 25", "text": "The user is 25."}],'
    ' "updates": []}\nLet me know if you need more.',
    '{"sentences": [{"quote": "I am 25", "text": "The user is 25.",},], "updates": [],}',
    "{'sentences': [{'quote': 'I am 25', 'text': 'The user is 25.'}], 'updates': []}",
    '{sentences: [{quote: "I am 25", text: "The user is 25."}], updates: []}',
    '```json\n{"sentences": [{"quote": "I am 25", "text": "The user is 25."}],'
    ' "updates": [],}\n```',
], ids=["prose-around", "trailing-commas", "single-quotes", "unquoted-keys", "fenced"])
def test_json_as_servers_give_it_is_read(answer):
    assert parse_memory_answer(answer).model_dump(by_alias=True, exclude_none=True) == {
        "sentences": [{"quote": "I am 25", "text": "The user is 25.", "aboutPerson": False}],
        "updates": []}


@pytest.mark.parametrize("answer", [
    '{"sentences": [{"quote": "I am 25", "text": "The user is',  # cut inside a string
    '{"sentences": [{"quote": "I am 25", "text": "The user is 25."}, {"quote": "I li',
    '{"sentences": [{"quote": "I am 25", "text": "The user is 25."}], "upd',
    "The user is 25 and lives in Oslo.",  # no JSON at all
])
def test_an_answer_cut_short_is_not_finished_by_guessing(answer):
    with pytest.raises(InvalidMemoryText):
        parse_memory_answer(answer)


def test_a_decision_with_a_trailing_comma_is_read():
    text = '{"action": "delete", "targetMemoryId": 3, "reason": "old",}'
    assert json_object(text, InvalidCompactionDecision)["targetMemoryId"] == 3


async def test_a_json_answer_cut_at_its_limit_is_asked_again_with_more_room(database):
    await install_app(database, "app")

    def answer(call: ModelCall) -> ChatReply | str:
        if call.json_schema is None:
            return "Sure."
        if call.answer_tokens is None:
            return ChatReply('{"sentences": [{"quote": "I am 25", "text": "The', truncated=True)
        return json.dumps(WHOLE)

    model = FunctionModel(answer)
    agent = MemorySubAgent(database, model, writer="model")
    created = await agent.create_memory(MemoryCreationRequest(
        "app", "c1", [ChatMessage("user", "I am 25 years old."), ChatMessage("assistant", "Ok.")]))
    assert created.memory.content == "The user is 25."
    assert [c.answer_tokens for c in model.calls] == [None, 2 * model.json_answer_tokens]


@respx.mock
@pytest.mark.usefixtures("allow_model_requests")
async def test_ollamas_length_stop_is_asked_again_with_a_larger_num_predict(database):
    host = "http://ollama.answers:11434"
    respx.post(f"{host}/api/show").respond(json=show_body())
    route = respx.post(f"{host}/api/chat")
    route.side_effect = [
        respx.MockResponse(json=chat_body('{"sentences": [{"quote": "I am', done_reason="length")),
        respx.MockResponse(json=chat_body(json.dumps(WHOLE))),
    ]
    await install_app(database, "app")
    model = OllamaChatModel("llama3.2:1b", host=host)
    agent = MemorySubAgent(database, model, writer="model")
    created = await agent.create_memory(MemoryCreationRequest(
        "app", "c1", [ChatMessage("user", "I am 25 years old."), ChatMessage("assistant", "Ok.")]))
    assert created.memory.content == "The user is 25."
    options = [json.loads(call.request.content).get("options") or {} for call in route.calls]
    assert "num_predict" not in options[0]
    assert options[1]["num_predict"] == 2 * model.json_answer_tokens
