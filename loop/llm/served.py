"""What a model behind a server shares, whatever the server's API (Ollama's, OpenAI's): each
answer tried again when it fails transiently, a streamed one only while nothing of it has been
handed on (a new try would repeat it); a prompt the server cut, told by the tokens it read;
and the server's other models by name, sharing this one's client and window."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Self

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatModelError,
    ChatReply,
    JsonSchema,
    TextSink,
    ToolSpec,
)


def backoff(state: RetryCallState) -> float:
    """0.2 s before the second try, doubling to at most 2 s."""
    return float(min(0.2 * 2 ** (state.attempt_number - 1), 2.0))


class ServedModel(ChatModel):
    # The model's name on its server, and how many times an answer is tried.
    model: str
    _attempts: int

    def __init__(self) -> None:
        self._siblings: dict[str, Self] = {}

    @abstractmethod
    async def _chat_once(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: JsonSchema | None,
        answer_tokens: int | None,
    ) -> ChatReply: ...

    @abstractmethod
    async def _stream_once(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ChatReply: ...

    @abstractmethod
    def _sibling(self, served_name: str) -> Self:
        """Another model of the same server, through this one's client."""

    def _wait(self, state: RetryCallState) -> float:
        """How long before trying again."""
        return backoff(state)

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        async for attempt in self._retrying():
            with attempt:
                return await self._chat_once(messages, tools, json_schema, answer_tokens)
        raise AssertionError("unreachable")

    async def chat_streaming(
        self,
        messages: Sequence[ChatMessage],
        *,
        on_text: TextSink,
        tools: Sequence[ToolSpec] = (),
    ) -> ChatReply:
        handed_on = False

        def forward(piece: str) -> None:
            nonlocal handed_on
            handed_on = True
            on_text(piece)

        async for attempt in self._retrying(lambda: not handed_on):
            with attempt:
                return await self._stream_once(messages, tools, forward)
        raise AssertionError("unreachable")

    def _retrying(self, may_retry: Callable[[], bool] = lambda: True) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda error: _is_transient(error) and may_retry()),
            reraise=True,
        )

    def _was_cut(self, prompt_tokens: int | None, room: int | None) -> bool:
        """The server read as many prompt tokens as the window holds less the answer's room:
        no request is sent that large, so it cut the prompt (Ollama does so without an
        error)."""
        if not self.context_tokens or not prompt_tokens:
            return False
        return prompt_tokens >= self.context_tokens - (room or self.answer_tokens)

    @property
    def served_name(self) -> str:
        return self.model

    def named(self, served_name: str) -> Self:
        if served_name == self.model:
            return self
        if served_name not in self._siblings:
            sibling = self._sibling(served_name)
            # The same window as this model's (with Ollama, one steady num_ctx for a client's
            # model too).
            sibling.context_tokens = self.context_tokens
            sibling.chat_room, sibling.json_room = self.chat_room, self.json_room
            self._siblings[served_name] = sibling
        return self._siblings[served_name]


def _is_transient(error: BaseException) -> bool:
    return isinstance(error, ChatModelError) and error.transient
