"""Ollama's dialect: `POST /api/chat` (streamed as NDJSON by default, one object with
`"stream": false`), `GET /api/tags` and `GET /api/version`. Errors are `{"error": …}`. What
is refused and what is ignored is listed in `_refusal` and the README."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import Request, Response, Router, get, post
from litestar.params import JSONBody
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
from admin_api.dialects.tools import checked_schema, function_tools, offered_tools, tool_calls_of
from loop.conversations import ClientTools, Message, Question, ReplyStatus
from loop.service import Stores
from memory_agent import ChatMessage, JsonSchema

NDJSON = "application/x-ndjson"


def _tools(body: dict[str, Any]) -> ClientTools | None:
    """`tools`, in the shape OpenAI's API gives them (Ollama has no tool_choice)."""
    specs = function_tools(body.get("tools"))
    return offered_tools(specs)


def _answer_schema(answer_format: Any) -> JsonSchema | None:
    """The JSON schema Ollama's `format` asks the answer to follow: "json" for any JSON
    object, or a schema; None for text."""
    if answer_format in (None, ""):
        return None
    if answer_format == "json":
        return {"type": "object"}
    if isinstance(answer_format, dict):
        return checked_schema(answer_format, "format")
    raise DialectError(400, 'format: "json" or a JSON schema object')


def _messages(body: dict[str, Any]) -> list[ChatMessage]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise DialectError(400, "messages: a list of messages is required")
    read = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DialectError(400, f"messages[{index}]: a message object is required")
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise DialectError(
                400, f"messages[{index}].role: {role!r} is not supported (system, user,"
                " assistant or tool)"
            )
        if message.get("images"):
            raise DialectError(400, f"messages[{index}].images: only text is read")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise DialectError(400, f"messages[{index}].content: a string is required")
        calls = tool_calls_of(message.get("tool_calls"), index) if role == "assistant" else ()
        tool_name = message.get("tool_name") or message.get("name")
        read.append(ChatMessage(
            role, content or "", tool_calls=calls,
            tool_name=tool_name if role == "tool" and isinstance(tool_name, str) else None,
        ))
    return read


@post("/chat", status_code=200)
async def chat(
    request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]], stores: Provided[Stores]
) -> Response[Any] | Stream:
    started = time.perf_counter_ns()
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise DialectError(400, "model is required")
    messages = _messages(data)
    tools = _tools(data)
    model = await chosen_model(models_of(request).chat, data["model"])
    if not messages:
        # Ollama's way to load a model: nothing to answer, nothing opened.
        return Response(_done(model.served, None, "load", 0))
    history = client_turns(messages)
    question = await post_history(
        request, stores, history, model, caller_of(request), _answer_schema(data.get("format")),
        tools,
    )
    return await answered(
        request, stores, question, stream=data.get("stream", True) is not False,
        pieces=lambda ending: _lines(model.served, question, started, ending),
        media_type=NDJSON,
        whole=lambda status: _done(
            model.served, status, "stop", time.perf_counter_ns() - started
        ),
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _done(
    model: str, status: ReplyStatus | None, reason: str, total_ns: int, *, streamed: bool = False
) -> dict[str, Any]:
    """The last object: the whole reply, or (`streamed`) none, its pieces sent before."""
    reply = status.reply if status else None
    return {
        "model": model,
        "created_at": _now(),
        "message": _message(reply) if reply and not streamed else _message(None),
        "done": True,
        "done_reason": reason,
        "total_duration": total_ns,
        "load_duration": 0,
        "prompt_eval_count": (reply.prompt_tokens if reply else None) or 0,
        "prompt_eval_duration": 0,
        "eval_count": (reply.completion_tokens if reply else None) or 0,
        "eval_duration": 0,
    }


def _message(reply: Message | None, text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant", "content": text if text is not None else reply.content if reply else ""
    }
    if reply and reply.tool_calls and text is None:
        message["tool_calls"] = [
            {"function": {"name": call.name, "arguments": call.arguments}}
            for call in reply.tool_calls
        ]
    return message


def _line(payload: object) -> bytes:
    return (json.dumps(payload) + "\n").encode()


async def _lines(
    model: str, question: Question, started: int, ending: Callable[[], Awaitable[None]]
) -> AsyncIterator[bytes]:
    try:
        async for piece in reply_pieces(question):
            if isinstance(piece, str):
                yield _line({"model": model, "created_at": _now(),
                             "message": _message(None, piece), "done": False})
                continue
            if piece.reply and piece.reply.tool_calls:
                # As Ollama streams them: the calls in a message of their own before the end.
                yield _line({"model": model, "created_at": _now(),
                             "message": {**_message(piece.reply), "content": ""},
                             "done": False})
            await ending()
            yield _line(_done(model, piece, "stop", time.perf_counter_ns() - started,
                              streamed=True))
    except Exception as error:  # said in the stream, as the dialect does
        yield _line({"error": stream_failure(error)[1]})


@get("/tags")
async def tags(request: Request[Any, Any, Any]) -> dict[str, Any]:
    names = await served_names(models_of(request).chat)
    return {"models": [
        {"name": name, "model": name, "modified_at": "1970-01-01T00:00:00Z", "size": 0,
         "digest": "", "details": {}}
        for name in names
    ]}


@get("/version")
async def api_version() -> dict[str, str]:
    try:
        return {"version": version("mnemoloop")}
    except PackageNotFoundError:
        return {"version": "0.1.0"}


def _render(status: int, message: str, headers: dict[str, str] | None) -> Response[Any]:
    return Response({"error": message}, status_code=status, headers=headers)


def ollama_router() -> Router:
    return Router(
        path="/api",
        route_handlers=[chat, tags, api_version],
        before_request=dialect_caller,
        exception_handlers=error_handlers(_render),  # type: ignore[arg-type]
        request_max_body_size=MAX_DIALECT_BODY_BYTES,
        include_in_schema=False,
    )
