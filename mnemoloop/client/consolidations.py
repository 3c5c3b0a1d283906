"""The consolidation passes' routes (admin token): ask for one, follow it, list them."""

from __future__ import annotations

from typing import TypeVar

from admin_api.replies import ConsolidationOut, ConsolidationsOut
from admin_api.schemas import RequestConsolidation
from mnemoloop.client.calls import Call, Group, decoded_as, picked, query_params, route

S = TypeVar("S")
ConsolidationList = list[ConsolidationOut]


class Consolidations(Group[S]):
    """Passes that merge or update memories saying the same thing, run by the memory worker."""

    @route
    def request(
        self, app_id: str | None = None, user_id: str | None = None
    ) -> Call[ConsolidationOut]:
        """Ask for a pass over the app's spaces, the person's, both, or (neither) every space;
        answers the pass, pending (`get` follows it)."""
        body = RequestConsolidation(app_id=app_id, user_id=user_id)
        return Call("POST", "/consolidations", decoded_as(ConsolidationOut), body=body)

    @route
    def get(self, pass_id: int) -> Call[ConsolidationOut]:
        """One pass: pending, running, done, failed or cancelled, and what it did."""
        return Call("GET", f"/consolidations/{int(pass_id)}", decoded_as(ConsolidationOut))

    @route
    def list(self, limit: int | None = None) -> Call[ConsolidationList]:
        """The newest passes, asked for or scheduled."""
        return Call(
            "GET", "/consolidations",
            picked(ConsolidationsOut, lambda out: out.consolidations), query_params(limit=limit),
        )
