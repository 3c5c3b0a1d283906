"""What the OpenAI and Ollama dialects share: who calls, which thread and model, the posting
of a request's history (`loop.conversations.client_threads`) and the following of its reply.
Each dialect module only reads its request shape and writes its response shape.

Headers a client may send with either dialect:
- `X-Mnemoloop-App`: the app, when the bearer token is the admin token;
- `X-Mnemoloop-User`, `X-Mnemoloop-Conversation`: the caller's thread (the dialect's own
  `user` and `metadata.conversation` fields name them too); the user's memory space is the
  one the conversation reads and writes;
- `X-Mnemoloop-End-Conversation: true`: the conversation ends once this reply is written,
  and its memory job is queued.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio
from litestar import Request, Response
from litestar.background_tasks import BackgroundTask
from litestar.connection import ASGIConnection
from litestar.response import Stream

from admin_api.auth import checked_owner
from admin_api.dialects.errors import DialectError
from loop.conversations import (
    ASKING_ROLES,
    ClientRequest,
    ClientTools,
    Question,
    ReplyStatus,
    thread_key,
)
from loop.operations import validate_user_id
from loop.service import Models, Stores
from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatModelError,
    JsonSchema,
)

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


def client_turns(messages: list[ChatMessage]) -> ClientTurns:
    """The messages, already read from the dialect: system ones joined into the system
    prompt, the rest the turns, which must end with the user's message or a tool's result.
    A tool result that names no tool is given the name of the call it answers."""
    system = [m.content for m in messages if m.role == "system"]
    turns = _named_results([m for m in messages if m.role != "system"])
    if not turns or turns[-1].role not in ASKING_ROLES:
        raise DialectError(
            400, "the last message (besides system ones) must be the user's or a tool's result"
        )
    if turns[-1].role == "user" and not turns[-1].content.strip():
        raise DialectError(400, "the user's last message is empty")
    return ClientTurns("\n\n".join(system) if system else None, turns)


def _named_results(turns: list[ChatMessage]) -> list[ChatMessage]:
    """Each tool result with the name of its tool: the one its call id names, else (Ollama's
    calls have no ids) the next call of the assistant turn before it not yet answered."""
    named: list[ChatMessage] = []
    by_id: dict[str, str] = {}
    pending: list[str] = []
    for turn in turns:
        if turn.tool_calls:
            by_id.update({call.id: call.name for call in turn.tool_calls if call.id})
            pending = [call.name for call in turn.tool_calls]
        if turn.role == "tool":
            name = turn.tool_name or by_id.get(turn.tool_call_id or "") or (
                pending[0] if pending else None
            )
            if name in pending:
                pending.remove(name)
            turn = replace(turn, tool_name=name)
        named.append(turn)
    return named


def check_tools_callable(
    chat: ChatModel, model: ChosenModel, history: ClientTurns, tools: ClientTools | None
) -> None:
    """A 400 naming the model when tools are offered, or tool turns sent, to a backend that
    cannot pass them to its model (the embedded one)."""
    uses_tools = tools is not None or any(
        turn.role == "tool" or turn.tool_calls for turn in history.turns
    )
    answering = chat.named(model.stored) if model.stored else chat
    if uses_tools and not answering.calls_tools:
        raise DialectError(
            400, f"tools: the model {answering.name} cannot call tools; run mnemoloop with a"
            " model that can (MNEMOLOOP_LLM=ollama and a model with tool support)"
        )


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
    tools: ClientTools | None = None,
) -> Question:
    check_tools_callable(models_of(request).chat, model, history, tools)
    posted = await stores.client_threads.post(
        ClientRequest(caller_app(request), caller.thread, history.turns, history.system_prompt,
                      model.stored, caller.user_id, answer_schema, tools)
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
    """The reply, or the dialect's error: never an empty success."""
    if status.reply is not None:
        if status.reply.content or status.reply.tool_calls:
            return status
        raise DialectError(502, "the model's answer was empty",
                           {**_NO_RETRY, **conversation_header(question)})
    if status.ended:
        # Ended (by the app, the model, or an operator) before its question was answered:
        # sent again, the question starts a new conversation.
        raise DialectError(409, "the conversation ended before its question was answered;"
                           " send the request again", conversation_header(question))
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


Ending = Callable[[], Awaitable[None]]


async def answered(
    request: Request[Any, Any, Any],
    stores: Stores,
    question: Question,
    *,
    stream: bool,
    pieces: Callable[[Ending], AsyncIterator[bytes]],
    media_type: str,
    whole: Callable[[ReplyStatus], dict[str, Any]],
    stream_headers: dict[str, str] | None = None,
) -> Response[Any] | Stream:
    """The reply as the client asked for it: streamed in the dialect's `pieces` (which end
    the conversation, when asked, once the reply is given), or `whole` once it is settled;
    either way naming its conversation."""
    headers = conversation_header(question)
    ending: Ending = lambda: end_if_asked(request, stores, question)  # noqa: E731
    if stream:
        return Stream(
            pieces(ending),
            media_type=media_type,
            headers={**headers, **(stream_headers or {})},
            background=BackgroundTask(closing, question),
        )
    status = await settled_reply(question)
    await ending()
    return Response(whole(status), headers=headers)


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


