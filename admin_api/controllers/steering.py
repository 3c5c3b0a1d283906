"""Steering one memory: read it, pin it, weigh it, make it private, set its expiry, tag its
relevance, restore it. The admin token, or the key of the memory's own app (its history
then names the app as the one who changed it)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, patch, post
from litestar.params import FromPath, JSONBody

from admin_api.auth import admin_or_own_app, key_app
from admin_api.dependencies import Provided
from admin_api.readers import readable, require_readable
from admin_api.replies import LinkOut, LinksOut, MemoryOut, memory_out, problems
from admin_api.schemas import (
    MemoryId,
    OptionalBodyOperation,
    RestoreMemory,
    SteerMemory,
    TagMemory,
    sensitivity_of,
    stored_time,
    strict_booleans,
)
from loop.errors import InvalidInput
from loop.service import Stores
from memory_agent import Clock, MemoryActor, MemoryChange, MemoryNotFound, now_text


class SteeringController(Controller):
    path = "/apps/{app_id:str}/memories/{memory_id:int}"
    tags = ["memories"]
    before_request = staticmethod(admin_or_own_app)

    @get(
        "/",
        summary="One memory, live, expired or deleted (until it is erased)",
        responses=problems(400, 401, 403, 404),
    )
    async def get_memory(
        self, app_id: FromPath[str], memory_id: MemoryId, request: Request[Any, Any, Any],
        stores: Provided[Stores], clock: Provided[Clock],
    ) -> MemoryOut:
        app = await stores.registry.require(app_id)
        memory = await stores.agent.get_memory(app_id, memory_id)
        # A kind the key may not read is no memory of its.
        if memory is None or not readable(app, key_app(request), [memory]):
            raise MemoryNotFound(app_id, memory_id)
        return memory_out(memory, now_text(clock))

    @get(
        "/links",
        summary="The memories this one is linked to, the strongest link first",
        description=(
            "Links are written when a memory is created, merged or consolidated, to the"
            " memories of its space it shares the most with (`strength`, 0-1: the share of"
            " its text they hold, rarer parts weighing more); at most three, each at least"
            " 0.3. A link goes with either memory. Only live memories the caller may read are"
            " given."
        ),
        responses=problems(400, 401, 403, 404),
    )
    async def get_links(
        self, app_id: FromPath[str], memory_id: MemoryId, request: Request[Any, Any, Any],
        stores: Provided[Stores],
    ) -> LinksOut:
        app = await stores.registry.require(app_id)
        memory = await stores.agent.get_memory(app_id, memory_id)
        if memory is None or not readable(app, key_app(request), [memory]):
            raise MemoryNotFound(app_id, memory_id)
        links = await stores.agent.links_of(app_id, memory_id)
        shown = {m.id for m in readable(app, key_app(request), [m for m, _, _ in links])}
        return LinksOut(memory_id, [
            LinkOut(m.id, kind, strength, m.content, m.user_id)
            for m, kind, strength in links if m.id in shown
        ])

    @patch(
        "/",
        summary="Pin, weigh, set the sensitivity (make private) or the expiry of a live memory",
        description=(
            "Only the fields present change, each with its event in the history (and"
            " `reason`, when given). `pinned`: compaction never deletes, merges or edits the"
            " memory; a space may pin at most its cap less one (409 beyond). `importance`"
            " (0-10, 5 when unset) weighs in which memory compaction gives up first."
            " `private`: listed and exported, never put into a conversation's prompt."
            " `sensitivity`: public, private or secret (private, and never shown to a model:"
            " no compaction prompt, no MCP tool); a memory of unknown sensitivity (an import"
            " may bring one) is released by giving it one of these, and no other change is"
            " taken until then (409). `private: true` makes a public memory private and"
            " leaves a secret one secret, `private: false` makes it public."
            " `expiresAt`: after it the memory is no longer injected or listed (see `state`),"
            " and the worker erases it once the grace period has passed; `null` removes the"
            " expiry. A deleted or expired memory must be restored first (409)."
        ),
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def steer(
        self,
        request: Request[Any, Any, Any],
        app_id: FromPath[str],
        memory_id: MemoryId,
        data: JSONBody[SteerMemory],
        stores: Provided[Stores],
        clock: Provided[Clock],
    ) -> MemoryOut:
        raw = await request.json()
        strict_booleans(raw, "pinned", "private")
        clear_expiry = isinstance(raw, dict) and "expiresAt" in raw and raw["expiresAt"] is None
        if data.private is not None and data.sensitivity is not None:
            sensitivity_of(data.private, data.sensitivity, "the change")  # they must agree
        change = MemoryChange(
            pinned=data.pinned,
            private=data.private,
            sensitivity=data.sensitivity,
            importance=data.importance,
            expires_at=stored_time(data.expires_at, "expiresAt"),
            clear_expiry=clear_expiry,
            reason=data.reason,
        )
        if change.changes_nothing:
            raise InvalidInput(
                "nothing to change: give pinned, private, sensitivity, importance or expiresAt"
            )
        app = await stores.registry.require(app_id)
        await require_readable(stores.agent, app, key_app(request), memory_id)
        memory = await stores.agent.steer_memory(
            app_id, memory_id, change, actor=_actor(request)
        )
        return memory_out(memory, now_text(clock))

    @post(
        "/relevance",
        status_code=200,
        summary="Tag a memory relevant or irrelevant (the seed's tag_memory_relevant and"
        " tag_memory_irrelevant)",
        description=(
            "Its importance goes up (relevant) or down (irrelevant) by 2, within 0-10, and"
            " the history keeps the reason. Irrelevant also makes it a stub in every"
            " conversation's memory block; relevant lifts that and starts its decay again."
        ),
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def tag(
        self,
        request: Request[Any, Any, Any],
        app_id: FromPath[str],
        memory_id: MemoryId,
        data: JSONBody[TagMemory],
        stores: Provided[Stores],
        clock: Provided[Clock],
    ) -> MemoryOut:
        strict_booleans(await request.json(), "relevant")
        app = await stores.registry.require(app_id)
        await require_readable(stores.agent, app, key_app(request), memory_id)
        memory = await stores.agent.tag_memory(
            app_id, memory_id, relevant=data.relevant, reason=data.reason,
            actor=_actor(request),
        )
        return memory_out(memory, now_text(clock))

    @post(
        "/restore",
        status_code=200,
        operation_class=OptionalBodyOperation,
        summary="Bring back a deleted or expired memory before the worker erases it",
        description=(
            "The memory is live again; an expiry that had passed is replaced by `expiresAt`"
            " (none when left out). Refused (409) when its space is at its cap. A live memory"
            " is answered as it is; one already erased is gone (404)."
        ),
        responses=problems(400, 401, 403, 404, 409, 413),
    )
    async def restore(
        self,
        request: Request[Any, Any, Any],
        app_id: FromPath[str],
        memory_id: MemoryId,
        stores: Provided[Stores],
        clock: Provided[Clock],
        data: JSONBody[RestoreMemory | None] = None,
    ) -> MemoryOut:
        expires_at = stored_time(data.expires_at if data else None, "expiresAt")
        app = await stores.registry.require(app_id)
        await require_readable(stores.agent, app, key_app(request), memory_id)
        memory = await stores.agent.restore_memory(
            app_id, memory_id, actor=_actor(request), expires_at=expires_at
        )
        return memory_out(memory, now_text(clock))


def _actor(request: Request[Any, Any, Any]) -> MemoryActor:
    """Who the history names: the app, when its own key made the change."""
    return "app" if key_app(request) else "admin"
