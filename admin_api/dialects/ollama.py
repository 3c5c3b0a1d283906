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
from litestar.background_tasks import BackgroundTask
from litestar.params import JSONBody
from litestar.response import Stream

from admin_api.dependencies import Provided
from admin_api.dialects.common import (
    MAX_DIALECT_BODY_BYTES,
    DialectError,
    caller_of,
    checked_schema,
    chosen_model,
    client_turns,
    closing,
    conversation_header,
    dialect_caller,
    end_if_asked,
    error_handlers,
    models_of,
    post_history,
    reply_pieces,
    served_names,
    settled_reply,
    stream_failure,
)
from loop.conversations import ReplyStatus
from loop.replies import Question
from loop.service import Stores
from memory_agent.chat_model import JsonSchema

NDJSON = "application/x-ndjson"


def _refusal(body: dict[str, Any]) -> str | None:
    if body.get("tools"):
        return "tools: this endpoint does not call tools"
    return None


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


def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise DialectError(400, "messages: a list of messages is required")
    read = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DialectError(400, f"messages[{index}]: a message object is required")
        role = message.get("role")
        if role not in ("system", "user", "assistant"):
            raise DialectError(
                400, f"messages[{index}].role: {role!r} is not supported (system, user or"
                " assistant)"
            )
        if message.get("images"):
            raise DialectError(400, f"messages[{index}].images: only text is read")
        if message.get("tool_calls"):
            raise DialectError(400, f"messages[{index}]: tool calls are not supported")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise DialectError(400, f"messages[{index}].content: a string is required")
        read.append((role, content or ""))
    return read


@post("/chat", status_code=200)
async def chat(
    request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]], stores: Provided[Stores]
) -> Response[Any] | Stream:
    started = time.perf_counter_ns()
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise DialectError(400, "model is required")
    if refusal := _refusal(data):
        raise DialectError(400, refusal)
    messages = _messages(data)
    model = await chosen_model(models_of(request).chat, data["model"])
    if not messages:
        # Ollama's way to load a model: nothing to answer, nothing opened.
        return Response(_done(model.served, "", None, "load", 0))
    history = client_turns(messages)
    question = await post_history(
        request, stores, history, model, caller_of(request), _answer_schema(data.get("format"))
    )
    headers = conversation_header(question)
    if data.get("stream", True) is not False:
        ending = lambda: end_if_asked(request, stores, question)  # noqa: E731
        return Stream(
            _lines(model.served, question, started, ending),
            media_type=NDJSON,
            headers=headers,
            background=BackgroundTask(closing, question),
        )
    status = await settled_reply(question)
    await end_if_asked(request, stores, question)
    text = status.reply.content if status.reply else ""
    return Response(
        _done(model.served, text, status, "stop", time.perf_counter_ns() - started),
        headers=headers,
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _done(
    model: str, text: str, status: ReplyStatus | None, reason: str, total_ns: int
) -> dict[str, Any]:
    reply = status.reply if status else None
    return {
        "model": model,
        "created_at": _now(),
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": reason,
        "total_duration": total_ns,
        "load_duration": 0,
        "prompt_eval_count": (reply.prompt_tokens if reply else None) or 0,
        "prompt_eval_duration": 0,
        "eval_count": (reply.completion_tokens if reply else None) or 0,
        "eval_duration": 0,
    }


def _line(payload: object) -> bytes:
    return (json.dumps(payload) + "\n").encode()


async def _lines(
    model: str, question: Question, started: int, ending: Callable[[], Awaitable[None]]
) -> AsyncIterator[bytes]:
    try:
        async for piece in reply_pieces(question):
            if isinstance(piece, str):
                yield _line({"model": model, "created_at": _now(),
                             "message": {"role": "assistant", "content": piece}, "done": False})
            else:
                await ending()
                yield _line(_done(model, "", piece, "stop", time.perf_counter_ns() - started))
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
