"""The kinds of memory the service gives (its kinds file), and the agents it names with the
kinds each may read."""

from __future__ import annotations

from litestar import get

from admin_api.auth import admin_or_any_app
from admin_api.dependencies import Provided
from admin_api.replies import KindOut, KindsOut, problems
from loop.service import Stores


@get(
    "/kinds",
    before_request=admin_or_any_app,
    summary="The kinds of memory, the default one, and each agent's allow-list",
    description=(
        "What `kind` a memory may have (the writers give one when they write it), what each"
        " holds, the kind of one no other fits (and of every memory kept before kinds), and"
        " the agents a read may name (`agent`) with the kinds each may read. An app's"
        " `allowedKinds` bounds what its key and its conversations read, agents included."
    ),
    responses=problems(401),
    tags=["memories"],
)
async def list_kinds(stores: Provided[Stores]) -> KindsOut:
    kinds = stores.agent.kinds
    return KindsOut(
        [KindOut(name, holds) for name, holds in kinds.described.items()],
        kinds.default,
        {agent: list(allowed) for agent, allowed in kinds.allowlists.items()},
    )
