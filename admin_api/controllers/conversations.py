from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from admin_api.auth import admin_or_own_app
from admin_api.schemas import (
    AcceptedOut,
    ConversationCreatedOut,
    ConversationOut,
    EndConversation,
    MessageOut,
    PostMessage,
    problems,
)
from loop.service import Services


class ConversationsController(Controller):
    path = "/"
    tags = ["conversations"]
    guards = [admin_or_own_app]

    @post(
        "/apps/{app_id:str}/conversations",
        summary="Open a conversation",
        responses=problems(401, 403, 404, 409),
    )
    async def open_conversation(
        self, app_id: FromPath[str], services: NamedDependency[Services]
    ) -> ConversationCreatedOut:
        return ConversationCreatedOut(await services.conversations.open(app_id))

    @post(
        "/conversations/{conversation_id:str}/messages",
        status_code=202,
        summary="Post a user message; the loop answers it in the background",
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def post_message(
        self,
        conversation_id: FromPath[str],
        data: JSONBody[PostMessage],
        services: NamedDependency[Services],
    ) -> AcceptedOut:
        await services.conversations.add_message(conversation_id, "user", data.content)
        return AcceptedOut(True)

    @get(
        "/conversations/{conversation_id:str}",
        summary="A conversation with its messages",
        responses=problems(401, 403, 404),
    )
    async def get_conversation(
        self, conversation_id: FromPath[str], services: NamedDependency[Services]
    ) -> ConversationOut:
        conversation = await services.conversations.get(conversation_id)
        return ConversationOut(
            conversation.conversation_id,
            conversation.app_id,
            conversation.status,
            conversation.end_reason,
            [MessageOut(m.role, m.content, m.created_at) for m in conversation.messages],
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
        self, conversation_id: FromPath[str], services: NamedDependency[Services]
    ) -> AcceptedOut:
        await services.conversations.retry_answer(conversation_id)
        return AcceptedOut(True)

    @post(
        "/conversations/{conversation_id:str}/end",
        status_code=202,
        summary="End a conversation (idempotent); its memory is written in the background",
        responses=problems(400, 401, 403, 404, 413),
    )
    async def end_conversation(
        self,
        conversation_id: FromPath[str],
        services: NamedDependency[Services],
        data: JSONBody[EndConversation | None] = None,
    ) -> AcceptedOut:
        await services.conversations.end(conversation_id, (data or EndConversation()).reason)
        return AcceptedOut(True)
