"""A person's say over their profile's sensitive facts: the changes proposed to them, and
the person's answer (through the admin, or relayed by an app that shares the profile)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.params import JSONBody, QueryParameter

from admin_api.auth import admin_or_any_app, key_app
from admin_api.controllers.users import UserIdPath
from admin_api.dependencies import Provided
from admin_api.replies import ProposalOut, ProposalsOut, problems, proposal_out
from admin_api.schemas import AnswerProposal
from loop.service import Stores
from memory_agent import ProposalStatus


class ProposalsController(Controller):
    path = "/users/{user_id:str}/profile/proposals"
    tags = ["memories"]
    before_request = staticmethod(admin_or_any_app)

    @get(
        "/",
        summary="The changes proposed to a person's sensitive profile facts, newest first",
        description=(
            "A change a memory job or a consolidation pass would make to a fact of the"
            " profile that speaks of a sensitive field (`MNEMOLOOP_SENSITIVE_FIELDS`: by"
            " default name, pronouns, city, language, health, contact) waits here until the"
            " person answers; it is never injected meanwhile, and lapses after 7 days."
            " The admin token, or the key of an app that shares people's profiles and serves"
            " this person (to show them what waits for their answer)."
        ),
        responses=problems(400, 401, 403),
    )
    async def proposals(
        self,
        request: Request[Any, Any, Any],
        user_id: UserIdPath,
        stores: Provided[Stores],
        status: Annotated[
            ProposalStatus | None,
            QueryParameter(description="only the proposals of this status (pending, ...)"),
        ] = None,
    ) -> ProposalsOut:
        await _may_relay(request, stores, user_id)
        found = await stores.agent.proposals.proposals(user_id, status)
        return ProposalsOut([proposal_out(p) for p in found])

    @post(
        "/",
        status_code=200,
        summary="Accept or decline a pending proposal for a person's profile",
        description=(
            "`accept` writes the change into the profile now (as the memory job or the pass"
            " would have, the profile kept at its cap); `decline` writes nothing. Either is"
            " recorded with the proposal (`decidedAt`, `decidedThrough`). A proposal that is"
            " not pending (answered, lapsed, or superseded because what it changes changed"
            " meanwhile) is 409 and nothing changes."
        ),
        responses=problems(400, 401, 403, 404, 409),
    )
    async def answer(
        self,
        request: Request[Any, Any, Any],
        user_id: UserIdPath,
        data: JSONBody[AnswerProposal],
        stores: Provided[Stores],
    ) -> ProposalOut:
        app_id = await _may_relay(request, stores, user_id)
        answered = await stores.agent.proposals.answer(
            user_id, data.id, accept=data.decision == "accept",
            through=f"app:{app_id}" if app_id else data.through,
        )
        return proposal_out(answered)


async def _may_relay(
    request: Request[Any, Any, Any], stores: Stores, user_id: str
) -> str | None:
    """The app whose key calls (None: the admin); only an app that shares people's
    profiles, and serves this person, may show or answer their proposals (403)."""
    app_id = key_app(request)
    if app_id is not None:
        await stores.registry.relays_for(app_id, user_id)
    return app_id
