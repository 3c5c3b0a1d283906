"""What the OpenAI and Ollama dialects share: who calls, which thread and model, the posting
of a request's history (`loop.client_threads`) and the following of its reply. Each dialect
module only reads its request shape and writes its response shape.

Headers a client may send with either dialect:
- `X-Mnemoloop-App`: the app, when the bearer token is the admin token;
- `X-Mnemoloop-User`, `X-Mnemoloop-Conversation`: the caller's thread (the dialect's own
  `user` and `metadata.conversation` fields name them too); the user's memory space is the
  one the conversation reads and writes;
- `X-Mnemoloop-End-Conversation: true`: the conversation ends once this reply is written,
  and its memory job is queued.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, ValidationException

from admin_api.auth import checked_owner
from admin_api.errors import domain_status, validation_detail
from loop.client_threads import ClientRequest, thread_key
from loop.conversations import ReplyStatus
from loop.registry import validate_user_id
from loop.replies import Question
from loop.service import Models, Stores
from memory_agent import ChatMessage, ChatModel
from memory_agent.chat_model import JsonSchema
from memory_agent.errors import ChatModelError, MnemoloopError

log = logging.getLogger("mnemoloop.http")

APP_HEADER = "x-mnemoloop-app"
USER_HEADER = "x-mnemoloop-user"
CONVERSATION_HEADER = "x-mnemoloop-conversation"
END_HEADER = "x-mnemoloop-end-conversation"
# A dialect client resends the whole history: more room than the native routes' 64 KiB.
MAX_DIALECT_BODY_BYTES = 4 * 1024 * 1024
# How long a request waits for its reply, or a stream for its next piece, before answering
# 504 (the conversation stays open).
REPLY_WAIT_SECONDS = 300.0
CONVERSATION_ID_HEADER = "X-Mnemoloop-Conversation-Id"
# OpenAI's client tries a 5xx again by itself unless told not to: a failed answer was tried
# already, and a request that waited 300 s should not wait another 600.
_NO_RETRY = {"x-should-retry": "false"}
# Where `dialect_caller` leaves the app it found, in the request's state.
_APP = "dialect_app"


class DialectError(Exception):
    """Refused in the dialect's own error shape, with this status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


@dataclass(frozen=True)
class ClientTurns:
    """A request's history: its system prompt (system messages joined) and its turns."""

    system_prompt: str | None
    turns: list[ChatMessage]


async def dialect_caller(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """The app of the request: the bearer token's, or with the admin token the one
    `X-Mnemoloop-App` names."""
    owner = await checked_owner(connection)
    app_id = owner.app_id or connection.headers.get(APP_HEADER, "").strip()
    if not app_id:
        raise DialectError(
            400, "with the admin token, name the app with the X-Mnemoloop-App header"
        )
    connection.state[_APP] = app_id


def caller_app(request: Request[Any, Any, Any]) -> str:
    return str(request.state[_APP])


@dataclass(frozen=True)
class Caller:
    """Who a request speaks for within its app: the user (whose memory space the
    conversation reads and writes; "" for the app's shared one) and the thread."""

    user_id: str
    thread: str


def caller_of(
    request: Request[Any, Any, Any], user: Any = None, conversation: Any = None
) -> Caller:
    """The headers, else the dialect's fields."""
    headers = request.headers
    user_id = headers.get(USER_HEADER) or (str(user) if user else "")
    if user_id:
        validate_user_id(user_id)
    named = headers.get(CONVERSATION_HEADER) or (str(conversation) if conversation else None)
    return Caller(user_id, thread_key(user_id, named))


def wants_end(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get(END_HEADER, "").strip().lower() in ("1", "true", "yes")


def client_turns(messages: list[tuple[str, str]]) -> ClientTurns:
    """(role, text) pairs, already read from the dialect: system ones joined into the
    system prompt, the rest the turns, which must end with the user's message."""
    system = [text for role, text in messages if role == "system"]
    turns = [
        ChatMessage(role, text)  # type: ignore[arg-type]
        for role, text in messages
        if role in ("user", "assistant")
    ]
    if not turns or turns[-1].role != "user":
        raise DialectError(400, "the last message (besides system ones) must be the user's")
    if not turns[-1].content.strip():
        raise DialectError(400, "the user's last message is empty")
    return ClientTurns("\n\n".join(system) if system else None, turns)


@dataclass(frozen=True)
class ChosenModel:
    """The model that answers: `stored` for the conversation (None: the configured one) and
    `served` as the response names it."""

    stored: str | None
    served: str


async def chosen_model(chat: ChatModel, requested: Any) -> ChosenModel:
    """The model the client named when the backend has it, else the configured one."""
    default = chat.served_name
    if not isinstance(requested, str) or not requested or requested == default:
        return ChosenModel(None, default)
    served = await served_names(chat)
    for name in (requested, f"{requested}:latest"):
        if name in served and name != default:
            return ChosenModel(name, name)
    return ChosenModel(None, default)


async def post_history(
    request: Request[Any, Any, Any],
    stores: Stores,
    history: ClientTurns,
    model: ChosenModel,
    caller: Caller,
    answer_schema: JsonSchema | None = None,
) -> Question:
    posted = await stores.client_threads.post(
        ClientRequest(caller_app(request), caller.thread, history.turns, history.system_prompt,
                      model.stored, caller.user_id, answer_schema)
    )
    conversations = stores.conversations
    return Question(conversations, conversations.replies.subscribe(posted.conversation_id),
                    posted.message_id)


async def settled_reply(question: Question) -> ReplyStatus:
    """The reply, or `DialectError` when the answer failed for good or took too long."""
    async with question:
        status = await question.wait(REPLY_WAIT_SECONDS)
    return _checked(question, status)


async def reply_pieces(question: Question) -> AsyncIterator[str | ReplyStatus]:
    """The reply's text as it is written, then its status; `DialectError` when it fails or
    nothing comes for `REPLY_WAIT_SECONDS`. Closes the question."""
    events = question.events(until_retry=False)
    try:
        while True:
            event: str | ReplyStatus | None = None
            # The limit is on each wait, never around a yield.
            with anyio.move_on_after(REPLY_WAIT_SECONDS):
                event = await anext(events)  # type: ignore[arg-type]
            if event is None:
                raise _timed_out(question)
            if isinstance(event, ReplyStatus):
                yield _checked(question, event)
                return
            yield event
    finally:
        await events.aclose()  # type: ignore[attr-defined]
        question.close()


def _checked(question: Question, status: ReplyStatus) -> ReplyStatus:
    if status.reply is not None or status.ended:
        return status
    if status.state == "failed":
        raise DialectError(502, f"the model could not answer: {status.error}",
                           {**_NO_RETRY, **conversation_header(question)})
    raise _timed_out(question)


def _timed_out(question: Question) -> DialectError:
    return DialectError(
        504, f"no reply within {REPLY_WAIT_SECONDS:g} s; the conversation is open",
        {**_NO_RETRY, **conversation_header(question)},
    )


def conversation_header(question: Question) -> dict[str, str]:
    return {CONVERSATION_ID_HEADER: question.conversation_id}


async def closing(question: Question) -> None:
    """A response's last task: the question's subscription closed on the event loop."""
    question.close()


async def end_if_asked(
    request: Request[Any, Any, Any], stores: Stores, question: Question
) -> None:
    """After a reply was given: end the conversation when the client said so."""
    if wants_end(request):
        with anyio.CancelScope(shield=True):
            await stores.client_threads.end(question.conversation_id)


# A client's JSON schema becomes the backend's grammar (llama.cpp unrolls every length and
# repeat limit into it): bounded here, so no schema can exhaust memory or crash the backend.
MAX_SCHEMA_BYTES = 16 * 1024
MAX_SCHEMA_DEPTH = 16
MAX_SCHEMA_LIMIT = 1000
_LIMITS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def checked_schema(schema: JsonSchema, where: str) -> JsonSchema:
    """The client's answer schema, or a 400 when it is larger, deeper or asks for longer
    runs than a backend's grammar can hold."""
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise DialectError(400, f"{where}: at most {MAX_SCHEMA_BYTES} bytes of JSON schema")

    def walk(part: Any, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise DialectError(400, f"{where}: nested at most {MAX_SCHEMA_DEPTH} deep")
        if isinstance(part, dict):
            for key, value in part.items():
                if key in _LIMITS and isinstance(value, int | float) and value > MAX_SCHEMA_LIMIT:
                    raise DialectError(400, f"{where}: {key} at most {MAX_SCHEMA_LIMIT}")
                if key == "pattern" and isinstance(value, str) and any(
                    int(bound or 0) > MAX_SCHEMA_LIMIT for bound in
                    (n for match in _REPEAT.findall(value) for n in match)
                ):
                    raise DialectError(400, f"{where}: pattern repeats at most {MAX_SCHEMA_LIMIT}")
                walk(value, depth + 1)
        elif isinstance(part, list):
            for value in part:
                walk(value, depth + 1)

    walk(schema, 0)
    return schema


def stream_failure(error: Exception) -> tuple[int, str]:
    """The status and message of an error met while a reply streams (the response's status
    was sent already: the dialect's clients read an error event)."""
    if isinstance(error, DialectError):
        return error.status, str(error)
    if isinstance(error, MnemoloopError):
        log.error("a streamed reply failed: %s", error)
        return domain_status(error), str(error)
    log.exception("a streamed reply failed unexpectedly")
    return 500, "internal error; see the service log"


def models_of(request: Request[Any, Any, Any]) -> Models:
    models: Models = request.app.state.models
    return models


async def served_names(chat: ChatModel) -> list[str]:
    """The models a client may name; the configured one alone when the backend cannot list."""
    try:
        return await chat.served_names()
    except ChatModelError as error:
        log.warning("the model backend could not list its models: %s", error)
        return [chat.served_name]


Render = Callable[[int, str, "dict[str, str] | None"], Response[Any]]


def error_handlers(render: Render) -> dict[type[Exception], Callable[..., Response[Any]]]:
    """Every error of a dialect's routes in that dialect's shape, with the status the native
    routes would give."""

    def dialect(_: Request[Any, Any, Any], error: DialectError) -> Response[Any]:
        return render(error.status, str(error), error.headers)

    def domain(_: Request[Any, Any, Any], error: MnemoloopError) -> Response[Any]:
        status = domain_status(error)
        if status >= 500:
            log.error("request failed: %s", error)
        return render(status, str(error), None)

    def invalid(_: Request[Any, Any, Any], error: ValidationException) -> Response[Any]:
        return render(400, validation_detail(error), None)

    def http(_: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
        return render(error.status_code, str(error.detail), error.headers)

    def unexpected(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return render(500, "internal error; see the service log", None)

    return {
        DialectError: dialect,
        MnemoloopError: domain,
        ValidationException: invalid,
        HTTPException: http,
        Exception: unexpected,
    }
