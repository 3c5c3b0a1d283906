"""The memory history: every change to an app's memories, oldest first, cursor-paged."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.params import FromPath, QueryParameter

from admin_api.auth import admin_or_own_app, key_app
from admin_api.dependencies import Provided
from admin_api.readers import readable_events, require_readable
from admin_api.replies import HistoryOut, memory_event_out, problems
from admin_api.schemas import MAX_ID, MemoryId, UserIdQuery
from loop.service import Stores
from memory_agent import MemoryEvent, MemoryNotFound

Since = Annotated[
    int,
    QueryParameter(
        ge=0,
        le=MAX_ID,
        description="the cursor: events after this id",
        # Litestar leaves a bound of 0 out of the schema.
        schema_extra={"minimum": 0},
    ),
]
Limit = Annotated[int, QueryParameter(ge=1, le=1000)]


class HistoryController(Controller):
    path = "/apps/{app_id:str}"
    tags = ["memories"]
    # An app's key reads its own app's history too.
    before_request = staticmethod(admin_or_own_app)

    @get(
        "/history",
        summary="Every change to the app's memories (or to one user's space), oldest first",
        responses=problems(400, 401, 403, 404),
    )
    async def app_history(
        self,
        app_id: FromPath[str],
        request: Request[Any, Any, Any],
        stores: Provided[Stores],
        since: Since = 0,
        limit: Limit = 100,
        user_id: UserIdQuery = None,
    ) -> HistoryOut:
        app = await stores.registry.require(app_id)
        events = await stores.agent.history(
            app_id, after_id=since, limit=limit, user_id=user_id
        )
        return page(await readable_events(stores.agent, app, key_app(request), events), limit)

    @get(
        "/memories/{memory_id:int}/history",
        summary="Every change to one memory, oldest first",
        responses=problems(400, 401, 403, 404),
    )
    async def memory_history(
        self,
        app_id: FromPath[str],
        memory_id: MemoryId,
        request: Request[Any, Any, Any],
        stores: Provided[Stores],
        since: Since = 0,
        limit: Limit = 100,
    ) -> HistoryOut:
        app = await stores.registry.require(app_id)
        await require_readable(stores.agent, app, key_app(request), memory_id)
        events = await stores.agent.history(
            app_id, memory_id=memory_id, after_id=since, limit=limit
        )
        if not events and since == 0 and not await stores.agent.has_memory(app_id, memory_id):
            raise MemoryNotFound(app_id, memory_id)
        return page(events, limit)


def page(events: list[MemoryEvent], limit: int) -> HistoryOut:
    return HistoryOut(
        [memory_event_out(e) for e in events],
        events[-1].id if len(events) == limit else None,
    )
