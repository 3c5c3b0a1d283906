from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from admin_api.auth import admin_only, admin_or_own_app
from admin_api.schemas import (
    MemoriesOut,
    MemoryId,
    PurgedOut,
    SuccessOut,
    memory_out,
    problems,
)
from loop.service import Services
from memory_agent.errors import MemoryNotFound
from memory_agent.search import MAX_QUERY_CHARS


class MemoriesController(Controller):
    path = "/apps/{app_id:str}/memories"
    tags = ["memories"]

    @get(
        "/",
        guards=[admin_or_own_app],
        summary="An app's memories, newest first; with `q`, those matching it, best first",
        responses=problems(400, 401, 403, 404),
    )
    async def list_memories(
        self,
        app_id: FromPath[str],
        services: NamedDependency[Services],
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
    ) -> MemoriesOut:
        if q is not None:
            await services.registry.require(app_id)
            memories = await services.agent.search_memories(app_id, q, limit=limit)
        else:
            memories = await services.agent.list_memories(app_id)
            if not memories:
                await services.registry.require(app_id)  # no memories: is there such an app?
        return MemoriesOut([memory_out(m) for m in memories])

    @delete(
        "/",
        status_code=200,
        guards=[admin_only],
        summary="Purge all of an app's memories",
        responses=problems(401, 403, 404),
    )
    async def purge(self, app_id: FromPath[str], services: NamedDependency[Services]) -> PurgedOut:
        return PurgedOut(True, await services.registry.purge_memories(app_id))

    @delete(
        "/{memory_id:int}",
        status_code=200,
        guards=[admin_only],
        summary="Delete one memory of this app",
        responses=problems(400, 401, 403, 404),
    )
    async def delete_one(
        self, app_id: FromPath[str], memory_id: MemoryId, services: NamedDependency[Services]
    ) -> SuccessOut:
        await services.registry.require(app_id)
        if not await services.agent.delete_memory(app_id, memory_id):
            raise MemoryNotFound(app_id, memory_id)
        return SuccessOut(True)
