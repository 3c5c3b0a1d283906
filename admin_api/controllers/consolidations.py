"""Consolidation passes: asked for on demand (the schedule asks for its own), and followed."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.params import FromPath, JSONBody, QueryParameter

from admin_api.auth import admin_only
from admin_api.dependencies import Provided
from admin_api.replies import ConsolidationOut, ConsolidationsOut, consolidation_out, problems
from admin_api.schemas import OptionalBodyOperation, RequestConsolidation
from loop.errors import ConsolidationNotFound
from loop.service import Stores


class ConsolidationsController(Controller):
    path = "/consolidations"
    tags = ["memories"]
    before_request = staticmethod(admin_only)

    @post(
        "/",
        status_code=202,
        operation_class=OptionalBodyOperation,
        summary="Ask for a consolidation pass now; it runs in the background",
        description=(
            "Answers 202 with the pass (`status` pending). The memory worker runs it when no"
            " memory job waits, at low priority under the energy budget: pairs of memories"
            " that say the same thing, or the same thing's two values, are found without a"
            " model and the writer decides to merge, update or keep each, at most"
            " `MNEMOLOOP_CONSOLIDATION_PAIRS_PER_SPACE` per space. With `appId`, the app's"
            " spaces (and its users' profiles); with `userId`, that person's spaces (in the"
            " app, when both are given); with neither, every space. Follow it with"
            " `GET /consolidations/{id}`."
        ),
        responses=problems(400, 401, 404),
    )
    async def request_consolidation(
        self, stores: Provided[Stores], data: JSONBody[RequestConsolidation | None] = None,
    ) -> ConsolidationOut:
        app_id = data.app_id if data else None
        user_id = data.user_id if data else None
        if app_id is not None:
            await stores.registry.require(app_id)
        return consolidation_out(await stores.consolidations.request(app_id, user_id))

    @get(
        "/",
        summary="The newest consolidation passes, asked for or scheduled",
        responses=problems(400, 401),
    )
    async def list_consolidations(
        self, stores: Provided[Stores],
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 20,
    ) -> ConsolidationsOut:
        return ConsolidationsOut(
            [consolidation_out(p) for p in await stores.consolidations.recent(limit)]
        )

    @get(
        "/{pass_id:int}",
        summary="One consolidation pass: where it is and what it did",
        responses=problems(401, 404),
    )
    async def get_consolidation(
        self, stores: Provided[Stores], pass_id: FromPath[int]
    ) -> ConsolidationOut:
        found = await stores.consolidations.get(pass_id)
        if found is None:
            raise ConsolidationNotFound(pass_id)
        return consolidation_out(found)
