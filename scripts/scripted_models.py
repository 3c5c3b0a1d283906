"""The scripted chat models the benchmarks and the fairness check run against, from one place:
one model that answers as the service's prompts expect (a memory with its quotes, a compaction
decision, "Noted."), as fast or as slowly as a figure needs, and a wrapper that times another
model."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence

import anyio

from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatReply,
    JsonSchema,
    TextSink,
    TokenUsage,
    ToolCall,
    ToolSpec,
)

# What a call of the benchmarks' "model taking 50 ms" takes.
TIMED_MODEL_SECONDS = 0.05


def scripted_answer(messages: Sequence[ChatMessage]) -> str:
    """A memory of the conversation's note (each sentence with the words it rests on: the
    user's and the assistant's first lines, quoted whole as models quote them), a delete of
    the first memory shown, a merge of two memories of one space (the consolidation's
    question), or "Noted."."""
    prompt = messages[0].content
    if prompt.startswith("You are a memory creation assistant."):
        note = re.search(r"note (\d+)", prompt)
        number = note.group(1) if note else "0"
        said = re.search(r"^User: (.+)$", prompt, re.MULTILINE)
        answered = re.search(r"^Assistant: (.+)$", prompt, re.MULTILINE)
        asked = said.group(1) if said else f"Remember note {number} for me."
        return json.dumps({"sentences": [
            {"text": f"The user asked to remember note {number}.", "quote": asked},
            {"text": "It was kept.", "quote": answered.group(1) if answered else asked},
        ], "updates": []})
    if prompt.startswith("You keep a memory store tidy."):
        # The consolidation's question: two memories of one space merged whole (both texts,
        # so the merge keeps every fact), else kept.
        lines = re.findall(r"^\[id=\d+\] \(created [^)]*\) (.*)$", prompt, re.MULTILINE)
        if '"merge"' in prompt and len(lines) == 2:
            return json.dumps({"action": "merge", "newContent": " ".join(lines),
                               "reason": "they say the same"})
        return json.dumps({"action": "keep", "newContent": "", "reason": "different"})
    if prompt.startswith("You are a memory management assistant."):
        first = re.search(r"\[id=(\d+)\]", prompt)
        return json.dumps({"action": "delete", "targetMemoryId": int(first.group(1)) if first
                           else 0, "reason": "oldest note"})
    return "Noted."


class ScriptedModel(ChatModel):
    """Answers with `scripted_answer` after `seconds` (its token counts about one a four
    characters), streamed in `pieces` pieces `piece_seconds` apart. With `calls_tools`, it
    calls the first of a client's tools offered, unless it was sent that tool's result; a
    conversation of the app named `hangs_for` is never answered."""

    def __init__(
        self,
        name: str = "scripted",
        *,
        seconds: float = 0.0,
        pieces: int = 1,
        piece_seconds: float = 0.0,
        calls_tools: bool = False,
        hangs_for: str | None = None,
    ) -> None:
        self.name = name
        self._seconds = seconds
        self._pieces = pieces
        self._piece_seconds = piece_seconds
        self._calls_tools = calls_tools
        self._hangs_for = hangs_for
        # Seconds from each streamed answer's start to its first piece.
        self.first_piece_seconds: list[float] = []

    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = (),
                   json_schema: JsonSchema | None = None,
                   answer_tokens: int | None = None) -> ChatReply:
        if self._hangs_for and f'"{self._hangs_for}"' in messages[0].content:
            await anyio.sleep_forever()
        if self._seconds:
            await anyio.sleep(self._seconds)
        offered = [tool for tool in tools if tool.name != "end_conversation"]
        if self._calls_tools and offered and messages[-1].role != "tool":
            return ChatReply("", (ToolCall(offered[0].name, {"party": 2}),), TokenUsage(100, 10))
        text = scripted_answer(messages)
        prompt_tokens = sum(len(m.content) for m in messages) // 4
        return ChatReply(text, usage=TokenUsage(prompt_tokens, len(text) // 4))

    async def chat_streaming(self, messages: Sequence[ChatMessage], *, on_text: TextSink,
                             tools: Sequence[ToolSpec] = ()) -> ChatReply:
        if self._pieces == 1:
            return await super().chat_streaming(messages, on_text=on_text, tools=tools)
        started = time.perf_counter()
        for piece in range(self._pieces):
            await anyio.sleep(self._piece_seconds)
            if piece == 0:
                self.first_piece_seconds.append(time.perf_counter() - started)
            on_text(f"word{piece} ")
        text = " ".join(f"word{p}" for p in range(self._pieces))
        return ChatReply(text, usage=TokenUsage(100, self._pieces))


class Timed(ChatModel):
    """Another model, adding up the time its calls take and the tokens they write."""

    def __init__(self, inner: ChatModel) -> None:
        self.name = inner.name
        self._inner = inner
        self.seconds = 0.0
        self.completion_tokens = 0

    async def chat(self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = (),
                   json_schema: JsonSchema | None = None,
                   answer_tokens: int | None = None) -> ChatReply:
        started = time.perf_counter()
        reply = await self._inner.chat(
            messages, tools=tools, json_schema=json_schema, answer_tokens=answer_tokens
        )
        self.seconds += time.perf_counter() - started
        self.completion_tokens += reply.usage.completion_tokens
        return reply
