"""The Ollama backend, through the official `ollama.AsyncClient`."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import ollama
import pydantic

from loop.llm import guard
from loop.llm.served import ServedModel
from memory_agent import (
    ChatMessage,
    ChatModelError,
    ChatModelResponseError,
    ChatModelTimeout,
    ChatModelUnavailable,
    ChatReply,
    ContextWindow,
    JsonSchema,
    TextSink,
    TokenUsage,
    ToolCall,
    ToolSpec,
)


@contextmanager
def translated_ollama_errors(model: str) -> Iterator[None]:
    """The one place where the Ollama client's errors become the project's."""
    try:
        yield
    except ollama.ResponseError as error:
        raise ChatModelResponseError(
            f"Ollama answered {error.status_code}: {error.error}",
            status_code=error.status_code,
            model=model,
        ) from None
    except httpx.TimeoutException:
        raise ChatModelTimeout("Ollama did not answer in time", model=model) from None
    except (ConnectionError, httpx.TransportError) as error:
        raise ChatModelUnavailable(f"cannot reach Ollama: {error}", model=model) from None
    except pydantic.ValidationError as error:
        raise ChatModelError(f"Ollama sent a malformed answer: {error}", model=model) from None


# How long the server's list of models is taken as it was.
_TAGS_SECONDS = 5.0


class OllamaChatModel(ServedModel):
    sets_window = True

    def __init__(
        self,
        model: str,
        *,
        host: str | None = None,
        timeout: float = 30.0,
        attempts: int = 3,
        client: ollama.AsyncClient | None = None,
    ) -> None:
        self.name = f"ollama:{model}"
        self.model = model
        self._client = client or ollama.AsyncClient(host=host, timeout=timeout)
        self.host = str(self._client._client.base_url).rstrip("/")
        super().__init__()
        self._attempts = attempts
        self._listed: tuple[float, list[str]] = (-_TAGS_SECONDS - 1, [])

    async def _chat_once(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: JsonSchema | None,
        answer_tokens: int | None,
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        room = self.room_for(answer_tokens, json=json_schema is not None)
        options = self._options(room)
        if json_schema:
            options["temperature"] = 0  # structured answers are decisions: make them repeatable
        with translated_ollama_errors(self.name):
            response = await self._client.chat(
                model=self.model,
                messages=_messages_payload(messages),
                tools=[_tool_payload(tool) for tool in tools] or None,
                format=json_schema,
                options=options or None,
            )
        return ChatReply(
            text=response.message.content or "",
            tool_calls=_tool_calls(response.message),
            usage=TokenUsage(response.prompt_eval_count or 0, response.eval_count or 0),
            truncated=response.done_reason == "length",
            cut=self._was_cut(response.prompt_eval_count, room),
        )

    def _options(self, room: int | None) -> dict[str, Any]:
        """Every request's options: the window it keeps to (`num_ctx`: one steady value, as
        Ollama reloads a model whose window changes) and the answer's room (`num_predict`)."""
        options: dict[str, Any] = {}
        if self.context_tokens:
            options["num_ctx"] = self.context_tokens
        if room is not None:
            options["num_predict"] = room
        return options

    async def _stream_once(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        pieces: list[str] = []
        calls: list[ToolCall] = []
        last: ollama.ChatResponse | None = None
        with translated_ollama_errors(self.name):
            chunks = await self._client.chat(
                model=self.model,
                messages=_messages_payload(messages),
                tools=[_tool_payload(tool) for tool in tools] or None,
                stream=True,
                options=self._options(self.room_for(None, json=False)) or None,
            )
            async for chunk in chunks:
                if chunk.message.content:
                    pieces.append(chunk.message.content)
                    on_text(chunk.message.content)
                calls.extend(_tool_calls(chunk.message))
                last = chunk
        if last is None or not last.done:
            raise ChatModelError("Ollama's answer stopped before it was done", model=self.name)
        return ChatReply(
            text="".join(pieces),
            tool_calls=tuple(calls),
            usage=TokenUsage(last.prompt_eval_count or 0, last.eval_count or 0),
            truncated=last.done_reason == "length",
            cut=self._was_cut(last.prompt_eval_count, self.room_for(None, json=False)),
        )

    async def context_window(self) -> ContextWindow | None:
        """What Ollama says the model holds (`/api/show`): the Modelfile's `num_ctx` when it
        sets one, else the model's own `<architecture>.context_length`."""
        with translated_ollama_errors(self.name):
            shown = await self._client.show(self.model)
        for line in (shown.parameters or "").splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx" and value.strip().isdigit():
                return ContextWindow(int(value), "Ollama /api/show: the Modelfile's num_ctx")
        info = dict(shown.modelinfo or {})
        architecture = info.get("general.architecture")
        length = info.get(f"{architecture}.context_length")
        if isinstance(length, int) and length > 0:
            return ContextWindow(length, f"Ollama /api/show: {architecture}.context_length")
        return None

    async def served_names(self) -> list[str]:
        """The models the server has pulled (`/api/tags`), this one first; asked again after
        `_TAGS_SECONDS` (a client naming a model on every request would ask every time)."""
        listed_at, names = self._listed
        if time.monotonic() - listed_at > _TAGS_SECONDS:
            with translated_ollama_errors(self.name):
                listed = await self._client.list()
            names = [entry.model for entry in listed.models if entry.model]
            self._listed = (time.monotonic(), names)
        return [self.model, *(name for name in names if name != self.model)]

    def _sibling(self, served_name: str) -> OllamaChatModel:
        return OllamaChatModel(served_name, attempts=self._attempts, client=self._client)

    async def has_model(self) -> bool:
        """True when the server answers and has this model pulled (`/api/tags`)."""
        with translated_ollama_errors(self.name):
            listed = await self._client.list()
        wanted = self.model if ":" in self.model else f"{self.model}:latest"
        return any(wanted in (entry.model, getattr(entry, "name", None)) for entry in listed.models)

    async def unready_reason(self) -> str | None:
        try:
            if await self.has_model():
                return None
        except ChatModelError as error:
            return f"cannot reach Ollama at {self.host}: {error}"
        return f"Ollama at {self.host} does not have {self.model}: run `ollama pull {self.model}`"

    async def aclose(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]


def _tool_payload(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _messages_payload(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Each message in Ollama's shape: an assistant turn with its tool calls, a tool result
    with the name of its tool (Ollama's calls have no ids)."""
    payload: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"function": {"name": call.name, "arguments": call.arguments}}
                for call in message.tool_calls
            ]
        if message.tool_name:
            item["tool_name"] = message.tool_name
        payload.append(item)
    return payload


def _tool_calls(message: ollama.Message) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(call.function.name, dict(call.function.arguments or {}))
        for call in message.tool_calls or ()
    )
