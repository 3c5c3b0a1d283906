"""The seam to an LLM: one async method, messages in, text, tool calls and token usage out.

Each backend (Ollama, embedded llama.cpp) is a small module in `loop/llm/` behind this class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memory_agent.core.tokens import estimate_tokens

Role = Literal["system", "user", "assistant", "tool"]
JsonSchema = dict[str, Any]
# Takes the text of an answer piece by piece, as the model writes it.
TextSink = Callable[[str], None]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: JsonSchema = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    # The call's id, which its result names (OpenAI's `tool_call_id`); "" when the backend
    # gives none (Ollama), until the reply is stored.
    id: str = ""


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    # An assistant reply the bundled 135M model wrote: the memory writers never take it for
    # a confirmation of something done (it is often made up).
    from_bundled_model: bool = False
    # An assistant turn's calls of the client's tools.
    tool_calls: tuple[ToolCall, ...] = ()
    # A `tool` turn: the result of the call with this id, of the tool with this name.
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ChatReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: TokenUsage = TokenUsage()
    # True when the model stopped at its token limit (Ollama's done_reason "length").
    truncated: bool = False
    # True when the server says it read as many prompt tokens as the window holds less the
    # answer's room, which no request is sent with: it cut the prompt.
    cut: bool = False


@dataclass(frozen=True)
class ContextWindow:
    """How many tokens a model takes in one call (prompt and answer), and where that was
    learned ("Ollama /api/show: llama.context_length", "MNEMOLOOP_MODEL_CONTEXT")."""

    tokens: int
    source: str


class ChatModel(ABC):
    """A chat-capable language model."""

    name: str
    # The window every request keeps to (prompt and answer), once the host knows it
    # (`use_window`); None: not known, and nothing is sent about it.
    context_tokens: int | None = None
    # Tokens an answer may take, and a JSON answer (a memory of four sentences, each with
    # its quote).
    answer_tokens: int = 512

    @property
    def json_answer_tokens(self) -> int:
        return 2 * self.answer_tokens

    # What the window leaves an answer beyond its prompt's budget, once the host knows the
    # window (`loop.llm.windows`): a chat answer's room and a JSON answer's. None: nothing is
    # sent about it, and the server's own limit holds.
    chat_room: int | None = None
    json_room: int | None = None

    def room_for(self, answer_tokens: int | None, *, json: bool) -> int | None:
        """The tokens an answer may take: those asked for, else the window's room."""
        if answer_tokens is not None:
            return answer_tokens
        return self.json_room if json else self.chat_room
    # The small model that ships with mnemoloop: too small to write memories, so `auto` gives
    # it the extractive writer (`memory_writer_for`).
    bundled: bool = False
    # Whether the backend passes a client's tools (with their arguments) to the model and
    # reads its calls back; a client offering tools to one that cannot is refused.
    calls_tools: bool = True
    # Whether the backend tells the server the window with every request (Ollama's
    # `num_ctx`), so that the host may ask for less than the model holds.
    sets_window: bool = False

    @abstractmethod
    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        """Answer the conversation. With `json_schema`, the text is JSON matching it; with
        `answer_tokens`, the answer may take that many tokens (else the backend's own room).

        Raises `errors.ChatModelError` (or a subclass) when no answer can be had.
        """

    async def chat_streaming(
        self,
        messages: Sequence[ChatMessage],
        *,
        on_text: TextSink,
        tools: Sequence[ToolSpec] = (),
    ) -> ChatReply:
        """Answer as `chat` does, handing the answer's text to `on_text` as it is written.

        The pieces joined are the reply's text. A backend that cannot stream hands the
        whole text over at once, which is this default.
        """
        reply = await self.chat(messages, tools=tools)
        if reply.text:
            on_text(reply.text)
        return reply

    async def served_names(self) -> list[str]:
        """The names a client may ask for a model by (the OpenAI and Ollama dialects' model
        lists), this one's first."""
        return [self.served_name]

    @property
    def served_name(self) -> str:
        """This model's name as a client sees it."""
        return self.name

    def named(self, served_name: str) -> ChatModel:
        """The same backend answering with the model `served_name` (one of `served_names`);
        this one when the backend holds only itself."""
        return self

    async def unready_reason(self) -> str | None:
        """None when the model can answer; else why it cannot (a server that does not
        answer, a model not pulled). Asked at start and by the health check."""
        return None

    def count_tokens(self, text: str) -> int:
        """The tokens `text` takes: the model's own tokenizer where the backend has it, else a
        safe estimate (`core.tokens`)."""
        return estimate_tokens(text)

    async def context_window(self) -> ContextWindow | None:
        """What the model itself says it holds in one call (a server's model card, the
        model file); None when it says nothing."""
        return None

    def use_window(self, tokens: int) -> None:
        """Keep every request within `tokens` (the host chose it from what the model holds
        and the settings); a backend that can be told its window (Ollama's `num_ctx`) sends
        it with every request."""
        self.context_tokens = tokens

    async def aclose(self) -> None:
        """Release what the backend holds (connections, model weights)."""
        return None
