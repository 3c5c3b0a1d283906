"""Scripted chat models for unit tests, in the manner of pydantic-ai's FunctionModel."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio

from memory_agent import MemoryCreationRequest, MemorySubAgent
from memory_agent.core.chat_model import (
    ChatMessage,
    ChatModel,
    ChatReply,
    JsonSchema,
    TextSink,
    TokenUsage,
    ToolSpec,
)
from memory_agent.core.energy import EnergyMeter
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.extractive.writer import ExtractiveWriter

CREATION_PREFIX = "You are a memory creation assistant."
COMPACTION_PREFIX = "You are a memory management assistant."


@dataclass(frozen=True)
class ModelCall:
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    json_schema: JsonSchema | None
    answer_tokens: int | None = None

    @property
    def prompt(self) -> str:
        return self.messages[0].content if self.messages else ""


Answer = str | ChatReply
ModelFunction = Callable[[ModelCall], Answer | Awaitable[Answer]]


class FunctionModel(ChatModel):
    """Answers with `fn(call)`; a plain string becomes a reply costing 1 token per 4 chars."""

    __test__ = False

    def __init__(self, fn: ModelFunction, name: str = "function-model") -> None:
        self.name = name
        self._fn = fn
        self.calls: list[ModelCall] = []

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        call = ModelCall(list(messages), list(tools), json_schema, answer_tokens)
        self.calls.append(call)
        answer = self._fn(call)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ChatReply):
            return answer
        prompt_chars = sum(len(m.content) for m in messages)
        return ChatReply(answer, usage=TokenUsage(prompt_chars // 4, len(answer) // 4))

    def calls_starting_with(self, prefix: str) -> list[ModelCall]:
        return [c for c in self.calls if c.prompt.startswith(prefix)]


# What PieceByPieceModel writes, piece by piece.
PIECES = ("The ", "meeting ", "is ", "at ", "two.")


class PieceByPieceModel(FunctionModel):
    """Writes its conversation answers in pieces, a moment apart, as a streaming backend does
    (and anything else as FunctionModel does)."""

    async def chat_streaming(
        self, messages: Sequence[ChatMessage], *, on_text: TextSink, tools: Sequence[ToolSpec] = ()
    ) -> ChatReply:
        for piece in PIECES:
            on_text(piece)
            await anyio.sleep(0.03)
        return ChatReply("".join(PIECES))


def asked_again(call: ModelCall) -> bool:
    """Whether `call` asks for a memory again: the prompt with why the answer failed."""
    last = call.messages[-1].content
    return "could not be checked against the conversation" in last or (
        "was not the JSON object asked for" in last)


def decision(action: str, target: Any, new_content: str | None = None, reason: str = "r") -> str:
    body: dict[str, Any] = {"action": action, "targetMemoryId": target, "reason": reason}
    if new_content is not None:
        body["newContent"] = new_content
    return json.dumps(body)


def memory_model(
    memory: str | Callable[[ModelCall], Answer] = "The user likes tea. They drink it at noon.",
    compaction: Callable[[ModelCall], Answer | Awaitable[Answer]] | str = "not json",
) -> FunctionModel:
    """A model that writes `memory` when asked to create (plain text is answered in the model
    writer's JSON, each sentence quoting the conversation's first user turn: `quoted`), and
    answers `compaction` to compact."""

    def answer(call: ModelCall) -> Answer | Awaitable[Answer]:
        if call.prompt.startswith(COMPACTION_PREFIX):
            return compaction(call) if callable(compaction) else compaction
        if call.prompt.startswith(CREATION_PREFIX):
            written = memory(call) if callable(memory) else memory
            if isinstance(written, str) and not written.lstrip().startswith("{"):
                return quoted(written, call)
            return written
        return "Sure."

    return FunctionModel(answer)


def transcript_turns(call: ModelCall) -> list[str]:
    """The turns of the conversation shown in a creation prompt, without their labels."""
    import re

    shown = call.prompt.split("<<<CONVERSATION\n", 1)[-1].split("\nCONVERSATION>>>", 1)[0]
    return [re.sub(r"^(User|Assistant|Tool): ", "", line) for line in shown.splitlines()]


def quoted(
    text: str, call: ModelCall, *, quote: str | None = None,
    updates: Sequence[tuple[int, str]] = (),
    keep_until: tuple[str, str] | None = None,
) -> str:
    """`text` as the model writer's answer: each sentence quoting `quote` (by default the
    conversation's first user turn), `updates` as (memory id, what still holds), and the end
    the user asked for as (date, their words asking it)."""
    import re

    turns = transcript_turns(call)
    evidence = quote if quote is not None else (turns[0] if turns else "")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    if text.strip().upper() == "NOTHING":
        sentences = []
    answer: dict[str, object] = {
        "sentences": [{"text": s, "quote": evidence} for s in sentences],
        "updates": [{"memoryId": i, "stillTrue": rest} for i, rest in updates],
    }
    if keep_until is not None:
        answer["keepUntil"] = {"date": keep_until[0], "quote": keep_until[1]}
    return json.dumps(answer)


def ids_in_prompt(call: ModelCall) -> list[int]:
    import re

    return [int(n) for n in re.findall(r"\[id=(\d+)\]", call.prompt)]


def new_memory_id(call: ModelCall) -> int:
    return ids_in_prompt(call)[-1]


FRIENDS = (
    "Alice Bruno Chloe Dmitri Elena Farid Greta Hugo Ines Jonas Kira Luca Mona Nils Olga "
    "Pavel Quinn Rosa Sven Tara Umar Vera Walt Xenia Yusuf Zora Anton Bianca Cyril Dora "
    "Emil Fiona"
).split()
CITIES = (
    "Oslo Porto Quito Riga Sofia Tunis Utrecht Vienna Warsaw Zagreb Aachen Bergen Cork "
    "Dublin Essen Faro Genoa Hanoi Izmir Jena Kyoto Lagos Malmo Nantes Odense Parma Rabat "
    "Seville Tallinn Uppsala Verona Wells"
).split()


def friend_fact(n: int) -> str:
    """A user message stating one lasting fact of its own (friend n lives in city n)."""
    return f"My friend {FRIENDS[n]} lives in {CITIES[n]}."


def friend_memory(n: int) -> str:
    """The model's grounded memory of `friend_fact(n)`."""
    return f"The user's friend {FRIENDS[n]} lives in {CITIES[n]}."


def friend_memories() -> Callable[[ModelCall], str]:
    """Writes `friend_memory(n)` for the conversation that states `friend_fact(n)`."""

    def write(call: ModelCall) -> str:
        name = call.prompt.split("User: My friend ")[1].split()[0]
        return friend_memory(FRIENDS.index(name))

    return write


def friend_request(n: int, app_id: str = "app", text: str | None = None) -> MemoryCreationRequest:
    """A conversation that states `friend_fact(n)` (or `text`)."""
    messages = [ChatMessage("user", text or friend_fact(n)), ChatMessage("assistant", "Noted.")]
    return MemoryCreationRequest(app_id, f"c{n}", messages)


async def fill_with_friends(agent: MemorySubAgent, count: int, app_id: str = "app") -> None:
    """The memories of friends 1 to `count`, written one after the other."""
    for n in range(1, count + 1):
        await agent.create_memory(friend_request(n, app_id))


def friends_agent(database: Any, clock: Any, compaction: Any, **options: Any) -> MemorySubAgent:
    """An agent whose model writes the friends' memories and decides with `compaction`."""
    return MemorySubAgent(database, memory_model(friend_memories(), compaction), clock=clock,
                          **options)


def answer_of(*sentences: tuple[str, str], updates: list[dict[str, object]] | None = None) -> str:
    """The model writer's JSON answer: each sentence with its quote, and the updates."""
    return json.dumps({
        "sentences": [{"text": text, "quote": quote} for text, quote in sentences],
        "updates": updates or [],
    })


def memory_lines(call: ModelCall) -> dict[int, str]:
    """The compaction prompt's memories by id (the new one is id 0)."""
    import re

    return {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"^\[id=(\d+)\] \(created [\d-]+\) (.*)$", call.prompt, re.M)
    }


# When the extractive writer's unit tests say a conversation ended (a Tuesday).
EXTRACTION_NOW = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)


def extractive_writer(max_chars: int = 600) -> ExtractiveWriter:
    """The extractive writer within `max_chars`, with a model it must never ask for a memory."""

    def never(call: ModelCall) -> str:
        raise AssertionError("the extractive writer asks no model for a memory")

    model = MemoryModel(FunctionModel(never), timeout=5, meter=EnergyMeter(100))
    return ExtractiveWriter(model, MemoryLimits(10, max_chars))
