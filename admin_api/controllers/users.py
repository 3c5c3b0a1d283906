"""Memory spaces: an app's, with their counts, and erasing one person from every app."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, delete, get
from litestar.params import FromPath, PathParameter

from admin_api.auth import admin_or_any_app, admin_or_own_app, key_app
from admin_api.dependencies import Provided
from admin_api.schemas import (
    ErasedAppOut,
    ErasedUserOut,
    SpaceOut,
    SpacesOut,
    problems,
)
from loop.registry import MAX_USER_ID, USER_ID_PATTERN
from loop.service import Stores

UserIdPath = Annotated[
    str,
    PathParameter(
        pattern=USER_ID_PATTERN, max_length=MAX_USER_ID, description="the user, as apps name them"
    ),
]


class SpacesController(Controller):
    path = "/"
    tags = ["memories"]

    @get(
        "/apps/{app_id:str}/spaces",
        before_request=admin_or_own_app,
        summary="An app's memory spaces that hold memories: its shared one, then its users'",
        responses=problems(401, 403, 404),
    )
    async def spaces(self, app_id: FromPath[str], stores: Provided[Stores]) -> SpacesOut:
        await stores.registry.require(app_id)
        spaces = await stores.agent.spaces(app_id)
        return SpacesOut([SpaceOut(user_id, count) for user_id, count in spaces])

    @delete(
        "/users/{user_id:str}/memories",
        status_code=200,
        before_request=admin_or_any_app,
        summary="Erase one person from every app (an app key: from its own app)",
        description=(
            "Deletes the user's memory spaces, their conversations with every message, their"
            " memory jobs (cancelled first, so none in flight writes) and the history of their"
            " spaces, in one transaction; the search index and the database files are cleaned"
            " as a purge does. Answers what went, per app. Memories an app wrote to its shared"
            " space from the user's conversations (`usersWriteShared`) are the app's, and stay."
        ),
        responses=problems(400, 401, 403),
    )
    async def erase_user(
        self, request: Request[Any, Any, Any], user_id: UserIdPath, stores: Provided[Stores]
    ) -> ErasedUserOut:
        erased = await stores.registry.erase_user(user_id, app_id=key_app(request))
        return ErasedUserOut(
            user_id,
            [ErasedAppOut(e.app_id, e.memories, e.conversations, e.jobs_cancelled)
             for e in erased],
        )
