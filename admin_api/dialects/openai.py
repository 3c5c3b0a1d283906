"""OpenAI's Chat Completions dialect: `POST /v1/chat/completions` (whole, or streamed as
server-sent chunks ending in `data: [DONE]`), `GET /v1/models` and `GET /v1/models/{id}`.
Errors are the dialect's error object. What is refused and what is ignored is listed in
`_REFUSED` and the README."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from litestar import Request, Response, Router, get, post, route
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from admin_api.dependencies import Provided
from admin_api.dialects.common import (
    MAX_DIALECT_BODY_BYTES,
    answered,
    caller_of,
    chosen_model,
    client_turns,
    dialect_caller,
    models_of,
    post_history,
    reply_pieces,
    served_names,
)
from admin_api.dialects.errors import DialectError, error_handlers, stream_failure
from admin_api.dialects.responses import create_response
from admin_api.dialects.tools import checked_schema, function_tools, offered_tools, tool_calls_of
from loop.conversations import AUTO, ClientTools, Question, ReplyStatus
from loop.service import Stores
from memory_agent import ChatMessage, JsonSchema, ToolCall

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "tool": "tool"}


def _refusal(body: dict[str, Any]) -> str | None:
    """Why a field the service cannot honour refuses the request (None: it is fine)."""
    if body.get("n") not in (None, 1):
        return "n: one choice is written per request"
    if body.get("functions") or body.get("function_call"):
        return "functions: the deprecated functions and function_call are not read; send tools"
    if body.get("logprobs") or body.get("top_logprobs"):
        return "logprobs: the model's token probabilities are not available"
    if body.get("audio") or "audio" in (body.get("modalities") or []):
        return "audio: only text answers are written"
    if body.get("prediction"):
        return "prediction: predicted outputs are not supported"
    if body.get("web_search_options") is not None:
        return "web_search_options: this endpoint does not search the web"
    return None


def _answer_schema(response_format: Any) -> JsonSchema | None:
    """The JSON schema `response_format` asks the answer to follow: any JSON object for
    `json_object`, the given schema for `json_schema`; None for text."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        described = response_format.get("json_schema")
        schema = described.get("schema") if isinstance(described, dict) else None
        if not isinstance(schema, dict):
            raise DialectError(400, "response_format.json_schema.schema: a JSON schema object")
        return checked_schema(schema, "response_format.json_schema.schema")
    raise DialectError(400, "response_format.type: text, json_object or json_schema")


def _text(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind != "text" or not isinstance(part.get("text"), str):
                raise DialectError(
                    400, f"messages[{index}].content: only text parts are read, not {kind!r}"
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise DialectError(400, f"messages[{index}].content: a string or a list of text parts")


def _messages(body: dict[str, Any]) -> list[ChatMessage]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise DialectError(400, "messages: a non-empty list of messages is required")
    read = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DialectError(400, f"messages[{index}]: a message object is required")
        role = message.get("role")
        if role not in _ROLES:
            raise DialectError(
                400, f"messages[{index}].role: {role!r} is not supported (system, developer,"
                " user, assistant or tool)"
            )
        if message.get("function_call"):
            raise DialectError(400, f"messages[{index}].function_call: send tool_calls")
        text = _text(message.get("content"), index)
        calls = tool_calls_of(message.get("tool_calls"), index) if role == "assistant" else ()
        call_id = message.get("tool_call_id")
        if role == "tool" and not isinstance(call_id, str):
            raise DialectError(400, f"messages[{index}].tool_call_id: the id of the call answered")
        read.append(ChatMessage(_ROLES[role], text, tool_calls=calls,  # type: ignore[arg-type]
                                tool_call_id=call_id if role == "tool" else None))
    return read


def _tools(body: dict[str, Any]) -> ClientTools | None:
    """`tools` (function tools) and `tool_choice`."""
    specs = function_tools(body.get("tools"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        function = choice.get("function")
        choice = function.get("name") if isinstance(function, dict) else None
    if choice is None:
        choice = AUTO
    if not isinstance(choice, str):
        raise DialectError(400, "tool_choice: auto, none, required or a function to call")
    return offered_tools(specs, choice)


@post("/chat/completions", status_code=200)
async def chat_completions(
    request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]], stores: Provided[Stores]
) -> Response[Any] | Stream:
    started = time.time()
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise DialectError(400, "model: the name of a model is required")
    if refusal := _refusal(data):
        raise DialectError(400, refusal)
    history = client_turns(_messages(data))
    answer_schema = _answer_schema(data.get("response_format"))
    tools = _tools(data)
    model = await chosen_model(models_of(request).chat, data["model"])
    metadata = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
    caller = caller_of(request, data.get("user"), metadata.get("conversation"))
    question = await post_history(request, stores, history, model, caller, answer_schema, tools)
    completion_id = f"chatcmpl-{question.conversation_id}-{question.message_id}"
    shape = _Shape(completion_id, int(started), model.served)
    options = data.get("stream_options")
    with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return await answered(
        request, stores, question, stream=bool(data.get("stream")),
        pieces=lambda ending: _chunks(shape, question, with_usage, ending),
        media_type="text/event-stream", whole=shape.completion,
        stream_headers={"Cache-Control": "no-cache"},
    )


class _Shape:
    """The fields every object of one completion shares."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self.id, self.created, self.model = completion_id, created, model

    def completion(self, status: ReplyStatus) -> dict[str, Any]:
        text = status.reply.content if status.reply else ""
        calls = status.reply.tool_calls if status.reply else ()
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["content"] = text or None
            message["tool_calls"] = [_call(call) for call in calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }],
            "usage": _usage(status),
            "system_fingerprint": None,
        }

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _event({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}],
        })

    def usage_chunk(self, status: ReplyStatus) -> bytes:
        return _event({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": _usage(status),
        })


def _call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}


def _usage(status: ReplyStatus) -> dict[str, int]:
    reply = status.reply
    prompt = (reply.prompt_tokens if reply else None) or 0
    completion = (reply.completion_tokens if reply else None) or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _event(payload: object) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def _chunks(
    shape: _Shape,
    question: Question,
    with_usage: bool,
    ending: Callable[[], Awaitable[None]],
) -> AsyncIterator[bytes]:
    try:
        yield shape.chunk({"role": "assistant", "content": ""})
        async for piece in reply_pieces(question):
            if isinstance(piece, str):
                yield shape.chunk({"content": piece})
                continue
            calls = piece.reply.tool_calls if piece.reply else ()
            if calls:
                # Each call whole, in one delta: a client joins the deltas of each index.
                yield shape.chunk({"tool_calls": [
                    {"index": index, **_call(call)} for index, call in enumerate(calls)
                ]})
            yield shape.chunk({}, "tool_calls" if calls else "stop")
            if with_usage:
                yield shape.usage_chunk(piece)
        await ending()
        yield b"data: [DONE]\n\n"
    except Exception as error:  # said in the stream, as the dialect does
        yield _event(_error_body(*stream_failure(error)))


@get("/models")
async def list_models(request: Request[Any, Any, Any]) -> dict[str, Any]:
    chat = models_of(request).chat
    return {"object": "list", "data": [_model(name) for name in await served_names(chat)]}


@get("/models/{model_id:path}")
async def get_model(request: Request[Any, Any, Any], model_id: FromPath[str]) -> dict[str, Any]:
    name = model_id.lstrip("/")
    if name not in await served_names(models_of(request).chat):
        raise DialectError(404, f"the model {name!r} does not exist")
    return _model(name)


@route("/{rest:path}", http_method=["GET", "POST", "PUT", "PATCH", "DELETE"])
async def unknown_route(request: Request[Any, Any, Any], rest: FromPath[str]) -> None:
    """Any other route under /v1 answers in OpenAI's error shape, so a client shows why."""
    raise DialectError(
        404, f"{request.method} /v1{rest} is not served here: mnemoloop answers"
        " /v1/chat/completions, /v1/responses and /v1/models"
    )


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "mnemoloop"}


_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
          429: "rate_limit_error"}


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _render(status: int, message: str, headers: dict[str, str] | None) -> Response[Any]:
    return Response(_error_body(status, message), status_code=status, headers=headers)


def openai_router() -> Router:
    return Router(
        path="/v1",
        route_handlers=[chat_completions, create_response, list_models, get_model,
                        unknown_route],
        before_request=dialect_caller,
        exception_handlers=error_handlers(_render),  # type: ignore[arg-type]
        request_max_body_size=MAX_DIALECT_BODY_BYTES,
        include_in_schema=False,
    )
