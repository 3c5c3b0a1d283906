"""The client packages people build apps with, pointed at a running `mnemoloop serve` by base
URL and key, in front of the stand-in Ollama (which answers with tool calls and structured
output in Ollama's wire format): LangChain's `ChatOpenAI` and `ChatOllama`, `litellm` and
`llm`. Each runs a tool round trip (the call, the result, the final answer), a structured
answer that validates, a batch of 10 unnamed prompts at once with no error, and a memory
written and then injected into a later conversation."""

from __future__ import annotations

import os

# litellm reads its model prices from the internet at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import gc
import json
import time
from collections.abc import Iterator
from typing import Any

import litellm
import llm
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI
from llm.default_plugins.openai_models import Chat
from pydantic import BaseModel

from tests.dialect_service import BOOKED, END, City, Service, serving
from tests.fake_ollama import MODEL, SHOW_PROMPT

USER = "X-Mnemoloop-User"
pytestmark = [
    # litellm's own typed dicts, built by pydantic at run time, say so on every call.
    pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier"),
    # LangChain's and litellm's HTTP clients offer no close: their sockets go with the
    # garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    yield from serving(tmp_path_factory)


@pytest.fixture(autouse=True)
def collected() -> Iterator[None]:
    """The clients' unclosed sockets are collected within the test that left them."""
    yield
    gc.collect()


@tool
def book_table(party: int, time: str) -> str:
    """Book a table at the restaurant."""
    return BOOKED


class Booking(BaseModel):
    party: int
    time: str


def memory_reaches_a_later_conversation(
    service: Service, app: str, ask: Any, user: str
) -> None:
    """`ask(text, headers)` tells the app a locker code and ends the conversation; the code is
    in the prompt of the user's next conversation."""
    code = str(abs(hash(app)) % 9000 + 1000)
    ask(f"My locker code is {code}.", {USER: user, **END})
    deadline = time.monotonic() + 30
    while not service.admin.get(f"/apps/{app}/memories", params={"userId": user}
                                ).json()["memories"]:
        assert time.monotonic() < deadline, "no memory was written"
        time.sleep(0.1)
    assert code in ask(SHOW_PROMPT, {USER: user})


def test_langchain_chat_openai(service):
    key = service.install("lc-openai")
    chat = ChatOpenAI(base_url=f"{service.url}/v1", api_key=key, model="gpt-4o-mini",
                      max_retries=0)
    asked = [HumanMessage("Book us a table tonight, please.")]
    call = chat.bind_tools([book_table]).invoke(asked)
    [called] = call.tool_calls
    assert called["name"] == "book_table" and isinstance(called["args"]["party"], int)
    result = ToolMessage(book_table.invoke(called["args"]), tool_call_id=called["id"])
    final = chat.bind_tools([book_table]).invoke([*asked, call, result])
    assert "LUI-2231" in str(final.content) and not final.tool_calls

    city = chat.with_structured_output(City).invoke("Which city should I visit?")
    assert isinstance(city, City) and city.name == "Lisbon"

    replies = chat.batch([f"Question {n}." for n in range(10)])
    assert [reply.content for reply in replies] == ["Noted."] * 10

    def ask(text: str, headers: dict[str, str]) -> str:
        with_headers = ChatOpenAI(base_url=f"{service.url}/v1", api_key=key, model="m",
                                  max_retries=0, default_headers=headers)
        return str(with_headers.invoke(text).content)

    memory_reaches_a_later_conversation(service, "lc-openai", ask, "dee")


def test_langchain_chat_ollama(service):
    key = service.install("lc-ollama")
    auth = {"Authorization": f"Bearer {key}"}
    chat = ChatOllama(base_url=service.url, model=MODEL, client_kwargs={"headers": auth})
    asked = [HumanMessage("Book us a table tonight, please.")]
    call = chat.bind_tools([book_table]).invoke(asked)
    [called] = call.tool_calls
    assert called["name"] == "book_table" and isinstance(called["args"]["party"], int)
    result = ToolMessage(book_table.invoke(called["args"]), tool_call_id=called["id"])
    final = chat.bind_tools([book_table]).invoke([*asked, call, result])
    assert "LUI-2231" in str(final.content) and not final.tool_calls

    booking = chat.with_structured_output(Booking).invoke("Book for two at seven.")
    assert isinstance(booking, Booking)

    replies = chat.batch([f"Question {n}." for n in range(10)])
    assert [reply.content for reply in replies] == ["Noted."] * 10

    def ask(text: str, headers: dict[str, str]) -> str:
        with_headers = ChatOllama(base_url=service.url, model=MODEL,
                                  client_kwargs={"headers": {**auth, **headers}})
        return str(with_headers.invoke(text).content)

    memory_reaches_a_later_conversation(service, "lc-ollama", ask, "eve")


TOOLS = [{"type": "function", "function": {
    "name": "book_table", "description": "Book a table at the restaurant.",
    "parameters": {"type": "object", "properties": {
        "party": {"type": "integer"}, "time": {"type": "string"}},
        "required": ["party", "time"]}}}]


@pytest.mark.parametrize("dialect", ["openai", "ollama_chat"])
def test_litellm(service, dialect):
    app = f"litellm-{dialect}"
    key = service.install(app)
    where: dict[str, Any] = (
        {"model": "openai/m", "api_base": f"{service.url}/v1", "api_key": key}
        if dialect == "openai"
        else {"model": f"ollama_chat/{MODEL}", "api_base": service.url,
              "extra_headers": {"Authorization": f"Bearer {key}"}}
    )
    asked: list[dict[str, Any]] = [{"role": "user", "content": "A table tonight, please."}]
    call = litellm.completion(messages=asked, tools=TOOLS, **where).choices[0].message
    [called] = call.tool_calls
    assert called.function.name == "book_table"
    assert isinstance(json.loads(called.function.arguments)["party"], int)
    asked += [call.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": called.id, "content": BOOKED}]
    final = litellm.completion(messages=asked, tools=TOOLS, **where).choices[0].message
    assert "LUI-2231" in final.content and not final.tool_calls

    structured = litellm.completion(
        messages=[{"role": "user", "content": "Which city?"}], response_format=City, **where)
    assert City.model_validate_json(structured.choices[0].message.content).name == "Lisbon"

    replies = litellm.batch_completion(
        messages=[[{"role": "user", "content": f"Question {n}."}] for n in range(10)], **where)
    assert [reply.choices[0].message.content for reply in replies] == ["Noted."] * 10

    def ask(text: str, headers: dict[str, str]) -> str:
        extra = {**where.get("extra_headers", {}), **headers}
        given = {**where, "extra_headers": extra}
        reply = litellm.completion(messages=[{"role": "user", "content": text}], **given)
        return str(reply.choices[0].message.content)

    memory_reaches_a_later_conversation(service, app, ask, "fay")


def test_llm(service):
    key = service.install("llm-cli")

    def model(headers: dict[str, str] | None = None) -> Chat:
        return Chat("mnemoloop", key=key, model_name="m", api_base=f"{service.url}/v1",
                    headers=headers, supports_tools=True, supports_schema=True)

    booked: list[dict[str, Any]] = []

    def book_table(party: int, time: str) -> str:
        """Book a table at the restaurant."""
        booked.append({"party": party, "time": time})
        return BOOKED

    chain = model().chain("Book us a table tonight, please.", tools=[book_table])
    assert "LUI-2231" in chain.text()
    assert booked and isinstance(booked[0]["party"], int)

    answer = model().prompt("Which city?", schema=City).text()
    assert City.model_validate_json(answer).name == "Lisbon"

    def ask(text: str, headers: dict[str, str]) -> str:
        return model(headers).prompt(text).text()

    memory_reaches_a_later_conversation(service, "llm-cli", ask, "gus")
    assert isinstance(llm.__name__, str)
