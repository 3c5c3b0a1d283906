"""Conversations on the native routes: open one, post a message (answered at once, waited for,
or streamed), read it, retry a failed answer, end it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody, Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from admin_api.auth import admin_or_own_app
from admin_api.dependencies import Provided
from admin_api.errors import problem_body
from admin_api.replies import (
    AcceptedOut,
    ConversationCreatedOut,
    ConversationOut,
    MessageOut,
    PostedOut,
    ToolCallOut,
    problems,
)
from admin_api.schemas import EndConversation, OpenConversation, OptionalBodyOperation, PostMessage
from loop.conversations import Message, Question, ReplyStatus, Retrying, ask
from loop.service import Stores

MAX_WAIT_SECONDS = 300
EVENT_STREAM = "text/event-stream"


class ConversationsController(Controller):
    path = "/"
    tags = ["conversations"]
    before_request = staticmethod(admin_or_own_app)

    @post(
        "/apps/{app_id:str}/conversations",
        operation_class=OptionalBodyOperation,
        summary="Open a conversation (of one of the app's users, with `userId`)",
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def open_conversation(
        self,
        app_id: FromPath[str],
        stores: Provided[Stores],
        data: JSONBody[OpenConversation | None] = None,
    ) -> ConversationCreatedOut:
        user_id = data.user_id if data else None
        return ConversationCreatedOut(
            await stores.conversations.open(app_id, user_id=user_id or "")
        )

    @post(
        "/conversations/{conversation_id:str}/messages",
        status_code=202,
        summary="Post a user message; the reply is written in the background",
        description=(
            "Answers 202 with the message's id. With `?wait=<seconds>`, answers 200 with the"
            " reply if it is written in time (else 202, with the state: `failed` and the"
            " `error` when the answer failed for good). With `Accept: text/event-stream`, the"
            " reply is streamed as Server-Sent Events: `delta` events (`{\"text\"}`) as it"
            " is written, then `done` (`{\"messageId\", \"conversationEnded\"}`), or"
            " `error` (a problem object: 502 when the answer failed for good, 503 when it"
            " will be tried again)."
        ),
        responses={
            200: ResponseSpec(PostedOut, description="The reply came within `wait`."),
            **problems(400, 401, 403, 404, 409, 413),
        },
    )
    async def post_message(
        self,
        request: Request[Any, Any, Any],
        conversation_id: FromPath[str],
        data: JSONBody[PostMessage],
        stores: Provided[Stores],
        wait: Annotated[
            float | None,
            Parameter(
                ge=0,
                le=MAX_WAIT_SECONDS,
                # Litestar leaves a bound of 0 out of the schema.
                schema_extra={"minimum": 0},
                description="seconds to wait for the reply before answering 202",
            ),
        ] = None,
    ) -> Response[PostedOut] | ServerSentEvent:
        question = await ask(stores.conversations, conversation_id, data.content)
        if EVENT_STREAM in request.headers.get("accept", ""):
            # Closed after the response too: a client gone before the stream started never
            # runs the generator's own clean-up.
            return ServerSentEvent(
                _reply_events(question), status_code=200, background=BackgroundTask(question.close)
            )
        async with question:
            status = await (question.wait(wait) if wait else question.status())
        return Response(
            _posted(question.message_id, status),
            status_code=200 if wait and (status.reply is not None or status.ended) else 202,
        )

    @get(
        "/conversations/{conversation_id:str}",
        summary="A conversation with its messages",
        responses=problems(401, 403, 404),
    )
    async def get_conversation(
        self, conversation_id: FromPath[str], stores: Provided[Stores]
    ) -> ConversationOut:
        conversation = await stores.conversations.get(conversation_id)
        return ConversationOut(
            conversation.conversation_id,
            conversation.app_id,
            conversation.status,
            conversation.end_reason,
            [_message_out(m) for m in conversation.messages],
            conversation.state,
            conversation.answer_error,
        )

    @post(
        "/conversations/{conversation_id:str}/retry",
        status_code=202,
        summary="Try again to answer a conversation whose answer failed",
        responses=problems(401, 403, 404),
    )
    async def retry_answer(
        self, conversation_id: FromPath[str], stores: Provided[Stores]
    ) -> AcceptedOut:
        await stores.conversations.retry_answer(conversation_id)
        return AcceptedOut(True)

    @post(
        "/conversations/{conversation_id:str}/end",
        status_code=202,
        summary="End a conversation (idempotent); its memory is written in the background",
        operation_class=OptionalBodyOperation,
        responses=problems(400, 401, 403, 404, 413),
    )
    async def end_conversation(
        self,
        conversation_id: FromPath[str],
        stores: Provided[Stores],
        data: JSONBody[EndConversation | None] = None,
    ) -> AcceptedOut:
        await stores.conversations.end(conversation_id, (data or EndConversation()).reason)
        return AcceptedOut(True)


def _message_out(message: Message) -> MessageOut:
    calls = [ToolCallOut(c.id, c.name, c.arguments) for c in message.tool_calls]
    return MessageOut(
        message.id, message.role, message.content, message.created_at, calls or None,
        message.tool_call_id, message.tool_name,
    )


def _posted(message_id: int, status: ReplyStatus) -> PostedOut:
    return PostedOut(
        message_id,
        status.state,
        status.error,
        _message_out(status.reply) if status.reply else None,
        status.ended,
    )


async def _reply_events(question: Question) -> AsyncIterator[ServerSentEventMessage]:
    """The reply as Server-Sent Events: `delta`s, then `done` or `error`."""
    async for event in question.events():
        if isinstance(event, str):
            yield _event("delta", {"text": event})
        elif isinstance(event, Retrying):
            detail = f"the answer failed and will be tried again: {event.error}"
            yield _event("error", problem_body(503, detail))
        elif event.state == "failed":
            detail = f"the model could not answer: {event.error}"
            yield _event("error", problem_body(502, detail))
        else:
            reply_id = event.reply.id if event.reply else None
            yield _event("done", {"messageId": reply_id, "conversationEnded": event.ended})


def _event(name: str, data: object) -> ServerSentEventMessage:
    return ServerSentEventMessage(event=name, data=json.dumps(data))
