"""The OpenAI-compatible backend, through the official `openai.AsyncOpenAI`: vLLM, llama.cpp's
`llama-server`, LM Studio, LocalAI, Ollama's own `/v1`, and the hosted APIs.

Configured as the `openai` package is: `OPENAI_BASE_URL` and `OPENAI_API_KEY`. A structured
answer asks for `response_format: json_schema`; a server that refuses it is asked for a JSON
object held to the schema, then for a JSON object, the schema in the prompt (`_FORMATS`), from
then on, and the answer is validated as any is. 429 and 503 are tried again after the
server's `Retry-After`; 401, 403 and an unknown model are permanent, and said at start and by
the health check.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import openai
from tenacity import RetryCallState

from loop.llm import guard
from loop.llm.served import ServedModel, backoff
from memory_agent import (
    ChatMessage,
    ChatModelEmptyAnswer,
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
    repaired_object,
)

# What a server that names no key is given: the package refuses to start without one, and a
# local server asks for none.
_NO_KEY = "no-key"
# The longest wait a server's Retry-After is taken for; beyond it, the usual back-off.
_LONGEST_RETRY_AFTER = 30.0
# How long the server's list of models is taken as it was.
_MODELS_SECONDS = 5.0


# The ways a structured answer is asked for, the first a server takes: OpenAI's json_schema
# (vLLM, llama-server, LM Studio, Ollama's /v1, the hosted APIs); a JSON object held to the
# schema (llama-cpp-python's server, Together, Anyscale); a JSON object. The last two also
# carry the schema in the prompt.
_FORMATS: tuple[Callable[[JsonSchema], dict[str, Any]], ...] = (
    lambda schema: {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    lambda schema: {"type": "json_object", "schema": schema},
    lambda schema: {"type": "json_object"},
)


class _NotAnswered(ChatModelEmptyAnswer):
    """A server that answered 200 with nothing in it (no choices, a stream that stopped, a
    body that is not the API's)."""


@contextmanager
def translated_openai_errors(model: str) -> Iterator[None]:
    """The one place where the `openai` package's errors become the project's."""
    try:
        yield
    except openai.APIStatusError as error:
        raise ChatModelResponseError(
            f"the server answered {error.status_code}: {_said(error)}",
            status_code=error.status_code,
            model=model,
        ) from error
    except openai.APITimeoutError:
        raise ChatModelTimeout("the server did not answer in time", model=model) from None
    except openai.APIConnectionError as error:
        raise ChatModelUnavailable(f"cannot reach the server: {error}", model=model) from None
    except (openai.APIResponseValidationError, json.JSONDecodeError) as error:
        raise _NotAnswered(f"the server's answer is not the API's JSON: {error}",
                           model=model) from None


def _said(error: openai.APIStatusError) -> str:
    """What a server's error says, in one line: its `error.message`, or the start of a page
    that is not the API's (a proxy's HTML)."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    text = " ".join(error.response.text.split()) if error.response is not None else ""
    return text[:200] or error.message


def _retry_after(error: BaseException) -> float | None:
    """The seconds a 429 or 503 asks to wait (`Retry-After`, in seconds), within reason."""
    cause = error.__cause__
    if not isinstance(cause, openai.APIStatusError) or cause.response is None:
        return None
    value = cause.response.headers.get("retry-after", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds <= _LONGEST_RETRY_AFTER else None


class OpenAIChatModel(ServedModel):
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        attempts: int = 3,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY,
            timeout=timeout,
            # Retried here, as every backend is, after the server's Retry-After.
            max_retries=0,
            # The httpx every other backend speaks through (the package takes it as well
            # as its own httpx2): one HTTP stack, with its limits, its proxies, its tests.
            http_client=httpx.AsyncClient(timeout=timeout),  # type: ignore[arg-type]
        )
        self.host = str(self._client.base_url).rstrip("/")
        super().__init__()
        self._attempts = attempts
        # How a structured answer is asked for (`_FORMATS`): the first the server takes.
        self._structured = 0
        # Whether the server takes `stream_options` (some refuse a field they do not know).
        self._stream_usage = True
        self._listed: tuple[float, list[dict[str, Any]]] = (-_MODELS_SECONDS - 1, [])

    # -- answering --------------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gives one, else the usual back-off."""
        error = state.outcome.exception() if state.outcome else None
        asked = _retry_after(error) if error is not None else None
        return asked if asked is not None else backoff(state)

    async def _chat_once(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: JsonSchema | None,
        answer_tokens: int | None,
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        while True:
            request = self._request(messages, tools, json_schema, answer_tokens)
            try:
                with translated_openai_errors(self.name):
                    response = await self._client.chat.completions.create(**request)
                break
            except ChatModelResponseError as error:
                refused = json_schema is not None and self._refuses_the_format(error)
                if not refused or self._structured == len(_FORMATS) - 1:
                    raise
                # The server has not this way of asking for JSON: the next, from now on.
                self._structured += 1
        if isinstance(response, str):  # a body that is not JSON, given as text
            raise _NotAnswered(
                f"the server's answer is not the API's JSON: {' '.join(response.split())[:120]}",
                model=self.name,
            )
        if not response.choices:
            raise _NotAnswered("the server answered with no choices", model=self.name)
        choice = response.choices[0]
        text = choice.message.content or ""
        usage = response.usage
        return ChatReply(
            text=text,
            tool_calls=_calls(choice.message.tool_calls or (), self.name,
                              cut=choice.finish_reason == "length"),
            usage=TokenUsage(usage.prompt_tokens, usage.completion_tokens) if usage
            else self._estimated_usage(request, text),
            truncated=choice.finish_reason == "length",
            cut=self._was_cut(
                usage.prompt_tokens if usage else None,
                self.room_for(answer_tokens, json=json_schema is not None),
            ),
        )

    async def _stream_once(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        request = self._request(messages, tools, None, None)
        pieces: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: TokenUsage | None = None
        with translated_openai_errors(self.name):
            async for chunk in await self._stream(request):
                if chunk.usage is not None:
                    usage = TokenUsage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    if choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_text(choice.delta.content)
                    for call in choice.delta.tool_calls or ():
                        held = calls.setdefault(call.index, {"id": "", "name": "", "args": ""})
                        held["id"] = call.id or held["id"]
                        if call.function is not None:
                            held["name"] += call.function.name or ""
                            held["args"] += call.function.arguments or ""
                    finish = choice.finish_reason or finish
        if finish is None:
            raise _NotAnswered("the server's stream stopped before it ended", model=self.name)
        if finish == "length" and calls:
            raise ChatModelError("the answer was cut at its token limit inside a tool call",
                                 model=self.name)
        text = "".join(pieces)
        return ChatReply(
            text=text,
            tool_calls=tuple(
                ToolCall(held["name"], _arguments(held["args"], self.name), held["id"])
                for _, held in sorted(calls.items())
            ),
            usage=usage or self._estimated_usage(request, text),
            truncated=finish == "length",
            cut=self._was_cut(
                usage.prompt_tokens if usage else None, self.room_for(None, json=False)
            ),
        )

    async def _stream(self, request: dict[str, Any]) -> AsyncIterator[Any]:
        """The streamed answer, with its usage where the server takes `stream_options`."""
        if self._stream_usage:
            try:
                return await self._client.chat.completions.create(  # type: ignore[no-any-return]
                    **request, stream=True, stream_options={"include_usage": True}
                )
            except openai.BadRequestError as error:
                if "stream_options" not in _said(error):
                    raise
                self._stream_usage = False
        return await self._client.chat.completions.create(  # type: ignore[no-any-return]
            **request, stream=True
        )

    def _request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        json_schema: JsonSchema | None,
        answer_tokens: int | None,
    ) -> dict[str, Any]:
        payload = _messages_payload(messages)
        request: dict[str, Any] = {"model": self.model, "messages": payload}
        if tools:
            request["tools"] = [_tool_payload(tool) for tool in tools]
        room = self.room_for(answer_tokens, json=json_schema is not None)
        if room is not None:
            request["max_tokens"] = room
        if json_schema is not None:
            # Structured answers are decisions: make them repeatable.
            request["temperature"] = 0
            request["response_format"] = _FORMATS[self._structured](json_schema)
            if self._structured:
                request["messages"] = [*payload, {
                    "role": "system",
                    "content": "Answer with one JSON object that follows this JSON schema: "
                    + json.dumps(json_schema),
                }]
        return request

    @staticmethod
    def _refuses_the_format(error: ChatModelResponseError) -> bool:
        """An answer that names the response format as what it does not take (400 or 422;
        llama-cpp-python's server says so with a 500)."""
        said = str(error).lower()
        return error.status_code in (400, 422, 500) and (
            "response_format" in said or "json_schema" in said
        )

    def _estimated_usage(self, request: dict[str, Any], text: str) -> TokenUsage:
        """The tokens a call took when the server says nothing of them."""
        prompt = sum(self.count_tokens(str(m.get("content") or "")) for m in request["messages"])
        return TokenUsage(prompt, self.count_tokens(text))

    # -- the server -------------------------------------------------------------------------

    async def _models(self) -> list[dict[str, Any]]:
        """The server's models (`GET /models`), as it lists them, asked again after a few
        seconds."""
        listed_at, found = self._listed
        if time.monotonic() - listed_at > _MODELS_SECONDS:
            with translated_openai_errors(self.name):
                page = await self._client.models.list()
            found = [model.model_dump() for model in page.data]
            self._listed = (time.monotonic(), found)
        return found

    async def served_names(self) -> list[str]:
        try:
            names = [str(model["id"]) for model in await self._models()]
        except ChatModelError:
            names = []
        return [self.model, *(name for name in names if name != self.model)]

    def _sibling(self, served_name: str) -> OpenAIChatModel:
        return OpenAIChatModel(served_name, attempts=self._attempts, client=self._client)

    async def context_window(self) -> ContextWindow | None:
        """What the server says the model holds: vLLM's `max_model_len` (or another server's
        `context_length`) in `/models`, else `llama-server`'s `/props` (`n_ctx`)."""
        try:
            for model in await self._models():
                if model.get("id") != self.model:
                    continue
                for key in ("max_model_len", "context_length", "max_context_length"):
                    if isinstance(model.get(key), int) and model[key] > 0:
                        return ContextWindow(model[key], f"{self.host}/models: {key}")
        except ChatModelError:
            pass
        return await self._props_window()

    async def _props_window(self) -> ContextWindow | None:
        root = self.host.removesuffix("/v1")
        try:
            async with httpx.AsyncClient(timeout=5.0) as http:
                answer = await http.get(
                    f"{root}/props",
                    headers={"Authorization": f"Bearer {self._client.api_key}"},
                )
            settings = answer.json().get("default_generation_settings", {})
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(n_ctx, int) and n_ctx > 0:
            return ContextWindow(n_ctx, f"{root}/props: n_ctx")
        return None

    async def unready_reason(self) -> str | None:
        try:
            models = await self._models()
        except ChatModelResponseError as error:
            if error.status_code in (401, 403):
                return (f"{self.host} refused the API key ({error.status_code}): set "
                        "OPENAI_API_KEY to a key it takes")
            if error.status_code == 404:
                return None  # the server lists no models; the first answer tells
            return f"{self.host} answered {error.status_code} for its models"
        except ChatModelError as error:
            return f"cannot reach {self.host}: {error}"
        names = [str(model.get("id")) for model in models]
        if names and self.model not in names:
            return (f"{self.host} has no model {self.model} (it serves: "
                    f"{', '.join(names[:10])})")
        return None

    async def aclose(self) -> None:
        await self._client.close()


def _messages_payload(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Each message in OpenAI's shape: an assistant turn with its tool calls (each with an
    id), a tool result with the id of the call it answers (by order where it names none)."""
    payload: list[dict[str, Any]] = []
    unanswered: list[str] = []
    for index, message in enumerate(messages):
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            ids = [call.id or f"call_{index}_{n}" for n, call in enumerate(message.tool_calls)]
            item["content"] = message.content or None
            item["tool_calls"] = [
                {"id": call_id, "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                for call_id, call in zip(ids, message.tool_calls, strict=True)
            ]
            unanswered = ids
        if message.role == "tool":
            answered = message.tool_call_id or (unanswered[0] if unanswered else "call_0")
            item["tool_call_id"] = answered
            unanswered = [call_id for call_id in unanswered if call_id != answered]
        payload.append(item)
    return payload


def _tool_payload(tool: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.parameters,
    }}


def _calls(calls: Sequence[Any], model: str, *, cut: bool = False) -> tuple[ToolCall, ...]:
    """The answer's tool calls; none of an answer cut at its token limit (`cut`), whose last
    call's arguments may have lost their end."""
    found = [call for call in calls if getattr(call, "function", None) is not None]
    if cut and found:
        raise ChatModelError("the answer was cut at its token limit inside a tool call",
                             model=model)
    return tuple(
        ToolCall(call.function.name, _arguments(call.function.arguments or "", model), call.id)
        for call in found
    )


def _arguments(text: str, model: str) -> dict[str, Any]:
    """A call's arguments, JSON text as the server gives it; repaired only where that takes no
    guess (`repaired_object`: a trailing comma, single quotes)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = repaired_object(text)
    if not isinstance(value, dict):
        raise ChatModelError(f"a tool call's arguments are not a JSON object: {text[:80]}",
                             model=model)
    return value
