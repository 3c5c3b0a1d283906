"""An app's memories: list, search and query, export and import, delete one, purge them."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter

from admin_api.auth import admin_only, admin_or_own_app, key_app
from admin_api.dependencies import Provided
from admin_api.readers import kinds_allowed, readable
from admin_api.replies import (
    ExportOut,
    ImportedOut,
    MemoriesOut,
    PurgedOut,
    QueryOut,
    SuccessOut,
    export_out,
    memory_out,
    problems,
    query_cost,
    query_out,
)
from admin_api.schemas import (
    ImportMemories,
    MemoryId,
    QueryMemories,
    UserIdQuery,
    imported_memories,
    memory_query,
    strict_booleans,
)
from loop.service import Stores
from memory_agent import MAX_QUERY_CHARS, Clock, MemoryState, now_text

MAX_IMPORT_BYTES = 32 * 1024 * 1024


class MemoriesController(Controller):
    path = "/apps/{app_id:str}/memories"
    tags = ["memories"]

    @get(
        "/",
        before_request=admin_or_own_app,
        summary="A space's memories, newest first; with `q`, those matching it, best first",
        responses=problems(400, 401, 403, 404),
    )
    async def list_memories(
        self,
        app_id: FromPath[str],
        request: Request[Any, Any, Any],
        stores: Provided[Stores],
        clock: Provided[Clock],
        user_id: UserIdQuery = None,
        q: Annotated[
            str | None,
            QueryParameter(
                description="words to search for (any of them; the best matches first); "
                "quotes and operators are read as plain punctuation",
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                # At least one letter or digit: a query of punctuation alone has no words.
                pattern=r"[^\W_]",
            ),
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000, description="with `q`")] = 20,
        # `state` is a name Litestar keeps for itself.
        memory_state: Annotated[
            MemoryState,
            QueryParameter(
                name="state",
                description="live (default), retired (expired or deleted, restorable until"
                " erased), or all; a search looks at live ones only"
            ),
        ] = "live",
    ) -> MemoriesOut:
        space = user_id or ""
        app = await stores.registry.require(app_id)
        if q is not None:
            memories = await stores.agent.search_memories(app_id, q, limit=limit, user_id=space)
            held_back = []
        else:
            memories = await stores.agent.list_memories(app_id, user_id=space, state=memory_state)
            held_back = await stores.agent.held_back(app_id, user_id=space)
        now = now_text(clock)
        shown = readable(app, key_app(request), memories)
        return MemoriesOut([memory_out(m, now) for m in shown], held_back)

    @post(
        "/query",
        status_code=200,
        before_request=admin_or_own_app,
        summary="The memories that answer a query, scored 0-1, the best first, within a budget",
        description=(
            "For an agent: the memories of a user's conversation (their profile when the app"
            " shares it, their own, the app's shared; with no `filters.userId`, the app's"
            " shared ones) that hold the query's words, each scored 0-1 (the share of the"
            " query's words it holds, rarer words weighing more), at least `threshold`, the"
            " best first, at most `topK` and within `budgetTokens`. `return: bullets` gives each"
            " memory's text as a model is given it; `full` the memory with its metadata."
            " Private memories are never returned. An unknown filter, a category (memories"
            " carry no kind yet), or a value out of range is refused (400) naming the field."
        ),
        responses=problems(400, 401, 403, 404),
    )
    async def query(
        self,
        app_id: FromPath[str],
        request: Request[Any, Any, Any],
        data: JSONBody[QueryMemories],
        stores: Provided[Stores],
        clock: Provided[Clock],
    ) -> QueryOut:
        raw = await request.json()
        strict_booleans(raw.get("filters") if isinstance(raw, dict) else None, "pinned")
        app = await stores.registry.require(app_id)
        query = memory_query(data, stores.agent.kinds, kinds_allowed(app, key_app(request)))
        now = now_text(clock)
        found = await stores.agent.query_memories(
            app.memory_spaces(data.filters.user_id or ""), query, query_cost(query.shape, now)
        )
        return query_out(found, query.shape, now)

    @get(
        "/export",
        before_request=admin_or_own_app,
        summary="A space's memories as a document that `POST .../memories/import` takes back",
        responses=problems(400, 401, 403, 404),
    )
    async def export(
        self,
        app_id: FromPath[str],
        request: Request[Any, Any, Any],
        stores: Provided[Stores],
        clock: Provided[Clock],
        user_id: UserIdQuery = None,
    ) -> ExportOut:
        app = await stores.registry.require(app_id)
        memories = await stores.agent.list_memories(app_id, user_id=user_id or "")
        return export_out(app_id, now_text(clock), readable(app, key_app(request), memories))

    @post(
        "/import",
        status_code=201,
        # An export of an app at its largest settings (1000 memories of 10 000 characters).
        request_max_body_size=MAX_IMPORT_BYTES,
        before_request=admin_only,
        summary="Store memories from an export, all or none",
        description=(
            "Takes the document `GET .../memories/export` gives (of this app or another)."
            " Each memory keeps its content, times, source conversation and metadata, and"
            " gets a new id; the history records it as created by `import`. An import that"
            " would leave the app above its memory limit is refused (409) and nothing is"
            " stored; with `replace=true` the app's memories are deleted first (in the same"
            " transaction)."
        ),
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def import_memories(
        self,
        app_id: FromPath[str],
        data: JSONBody[ImportMemories],
        stores: Provided[Stores],
        replace: Annotated[
            bool, QueryParameter(description="delete the space's memories first")
        ] = False,
        user_id: UserIdQuery = None,
    ) -> ImportedOut:
        await stores.registry.require(app_id)
        memories = imported_memories(data, user_id or "")
        count = await stores.agent.import_memories(
            app_id, memories, replace=replace, user_id=user_id or ""
        )
        return ImportedOut(len(memories), count)

    @delete(
        "/",
        status_code=200,
        before_request=admin_only,
        summary="Purge all of an app's memories (every space), or one user's space",
        responses=problems(400, 401, 403, 404),
    )
    async def purge(
        self, app_id: FromPath[str], stores: Provided[Stores], user_id: UserIdQuery = None
    ) -> PurgedOut:
        return PurgedOut(True, await stores.registry.purge_memories(app_id, user_id=user_id))

    @delete(
        "/{memory_id:int}",
        status_code=200,
        before_request=admin_only,
        summary="Delete one memory of this app; restorable until the grace period ends",
        description=(
            "The memory is out of sight at once (not injected, not listed but with"
            " `state=retired`), and `POST .../restore` brings it back until the grace period"
            " (`MNEMOLOOP_MEMORY_GRACE_SECONDS`) has passed; then the worker erases it with the"
            " texts of its history. Purge, unlike this, erases at once."
        ),
        responses=problems(400, 401, 403, 404),
    )
    async def delete_one(
        self, app_id: FromPath[str], memory_id: MemoryId, stores: Provided[Stores]
    ) -> SuccessOut:
        await stores.registry.require(app_id)
        await stores.agent.delete_memory(app_id, memory_id)
        return SuccessOut(True)
