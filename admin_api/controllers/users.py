"""Memory spaces: an app's, with their counts; erasing one person from every app; a person's
profile (the facts about them the apps that share it read and write)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, JSONBody, PathParameter, QueryParameter

from admin_api.auth import admin_only, admin_or_any_app, admin_or_own_app, key_app
from admin_api.controllers.history import page
from admin_api.controllers.memories import MAX_IMPORT_BYTES
from admin_api.dependencies import Provided
from admin_api.replies import (
    ErasedAppOut,
    ErasedUserOut,
    ExportOut,
    HistoryOut,
    ImportedOut,
    MemoriesOut,
    ProfileErasedOut,
    SpaceOut,
    SpacesOut,
    export_out,
    memory_out,
    problems,
)
from admin_api.schemas import ImportMemories, imported_memories
from loop.errors import InvalidInput
from loop.operations import MAX_USER_ID, USER_ID_PATTERN
from loop.service import Stores
from memory_agent import MAX_QUERY_CHARS, PROFILE_APP, Clock, now_text

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
            " With the admin token, the person's profile (`sharesProfile`) goes too"
            " (`profileMemories`); an app key leaves it, as other apps share it."
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
             for e in erased if not e.is_profile],
            sum(e.memories for e in erased if e.is_profile),
        )


class ProfilesController(Controller):
    """A person's profile, for an operator (admin token): the facts about them that hold
    whatever the app, written and read by the apps that share it (`sharesProfile`)."""

    path = "/users/{user_id:str}/profile"
    tags = ["memories"]
    before_request = staticmethod(admin_only)

    @get(
        "/",
        summary="A person's profile: its memories, newest first (with q, those matching it)",
        responses=problems(400, 401, 403),
    )
    async def profile(
        self,
        user_id: UserIdPath,
        stores: Provided[Stores],
        words: Annotated[
            str | None,
            QueryParameter(
                name="q", description="words to search for (any of them; the best first)",
                min_length=1, max_length=MAX_QUERY_CHARS,
                # At least one letter or digit: a query of punctuation alone has no words.
                pattern=r"[^\W_]",
            ),
        ] = None,
    ) -> MemoriesOut:
        agent = stores.agent
        if words is not None:
            found = await agent.search_memories(PROFILE_APP, words, user_id=user_id)
        else:
            found = await agent.list_memories(PROFILE_APP, user_id=user_id)
        return MemoriesOut([memory_out(m, agent.now()) for m in found])

    @get(
        "/history",
        summary="Every change to a person's profile, oldest first: which app's conversation"
        " wrote each memory, and every merge and delete",
        responses=problems(400, 401, 403),
    )
    async def profile_history(
        self,
        user_id: UserIdPath,
        stores: Provided[Stores],
        since: Annotated[int, QueryParameter(ge=0)] = 0,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> HistoryOut:
        events = await stores.agent.history(
            PROFILE_APP, after_id=since, limit=limit, user_id=user_id
        )
        return page(events, limit)

    @get(
        "/export",
        summary="A person's profile memories, newest first, as `POST .../profile/import`"
        " takes them back (`appId` is \"\": the profile is no app's)",
        responses=problems(400, 401, 403),
    )
    async def export_profile(
        self, user_id: UserIdPath, stores: Provided[Stores], clock: Provided[Clock]
    ) -> ExportOut:
        memories = await stores.agent.list_memories(PROFILE_APP, user_id=user_id)
        return export_out(PROFILE_APP, now_text(clock), memories)

    @post(
        "/import",
        status_code=201,
        request_max_body_size=MAX_IMPORT_BYTES,
        summary="Store memories from an export in a person's profile, all or none",
        description=(
            "Takes the document an export gives (of a profile, or of an app's space). An"
            " import that would leave the profile above `MNEMOLOOP_PROFILE_LIMIT` is refused"
            " (409) and nothing is stored; with `replace=true` the profile's memories are"
            " deleted first."
        ),
        responses=problems(400, 401, 403, 409, 413),
    )
    async def import_profile(
        self,
        user_id: UserIdPath,
        data: JSONBody[ImportMemories],
        stores: Provided[Stores],
        replace: Annotated[
            bool, QueryParameter(description="delete the profile's memories first")
        ] = False,
    ) -> ImportedOut:
        memories = imported_memories(data, user_id)
        for index, memory in enumerate(memories):
            if memory.sensitivity == "unknown":
                # No route steers a profile memory by id: one held back could not be released.
                raise InvalidInput(
                    f"memories[{index}].sensitivity: a profile memory is public, private or"
                    " secret, not unknown"
                )
        count = await stores.agent.import_memories(
            PROFILE_APP, memories, replace=replace, user_id=user_id
        )
        return ImportedOut(len(memories), count)

    @delete(
        "/",
        status_code=200,
        summary="Erase a person's profile (its memories and their history), in every app",
        responses=problems(400, 401, 403),
    )
    async def erase_profile(
        self, user_id: UserIdPath, stores: Provided[Stores]
    ) -> ProfileErasedOut:
        return ProfileErasedOut(user_id, await stores.registry.erase_profile(user_id))
