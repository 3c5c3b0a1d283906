"""The routes of the people apps serve (`Users`): erasing one, a person's profile, and the
changes proposed to its sensitive facts."""

from __future__ import annotations

from typing import TypeVar

from admin_api.replies import (
    ErasedUserOut,
    ExportOut,
    HistoryOut,
    ImportedOut,
    MemoriesOut,
    MemoryOut,
    ProfileErasedOut,
    ProposalOut,
    ProposalsOut,
)
from admin_api.schemas import AnswerProposal, ImportMemories
from mnemoloop.client.calls import Call, Group, decoded_as, picked, query_params, route, segment

S = TypeVar("S")
MemoryList = list[MemoryOut]
ProposalList = list[ProposalOut]


class Users(Group[S]):
    """The people apps serve: erasing one from every app (an app's key: from its own)."""

    @route
    def erase(self, user_id: str) -> Call[ErasedUserOut]:
        """Erase the user's memory spaces, conversations and their history; answers what
        went, per app."""
        return Call("DELETE", f"/users/{segment(user_id)}/memories", decoded_as(ErasedUserOut))

    @route
    def profile(self, user_id: str, query: str | None = None) -> Call[MemoryList]:
        """A person's profile memories, newest first (with `query`, those matching it, best
        first): the facts about them every app sharing profiles reads (admin token)."""
        return Call(
            "GET", f"/users/{segment(user_id)}/profile",
            picked(MemoriesOut, lambda out: out.memories), query_params(q=query),
        )

    @route
    def profile_history(
        self, user_id: str, *, since: int | None = None, limit: int | None = None
    ) -> Call[HistoryOut]:
        """Every change to a person's profile, oldest first: which app's conversation wrote
        each memory, and every merge and delete."""
        return Call(
            "GET", f"/users/{segment(user_id)}/profile/history", decoded_as(HistoryOut),
            query_params(since=since, limit=limit),
        )

    @route
    def export_profile(self, user_id: str) -> Call[ExportOut]:
        """A person's profile as a document `import_profile` takes back."""
        return Call("GET", f"/users/{segment(user_id)}/profile/export", decoded_as(ExportOut))

    @route
    def import_profile(
        self, user_id: str, document: ExportOut | ImportMemories, *, replace: bool = False
    ) -> Call[ImportedOut]:
        """Store the memories of an export in a person's profile, all or none; refused
        (`Conflict`) past the profile's cap; `replace` deletes its memories first."""
        params = query_params(replace="true" if replace else None)
        path = f"/users/{segment(user_id)}/profile/import"
        return Call("POST", path, decoded_as(ImportedOut), params, body=document)

    @route
    def erase_profile(self, user_id: str) -> Call[ProfileErasedOut]:
        """Erase a person's profile in every app (their apps' own memories stay)."""
        return Call(
            "DELETE", f"/users/{segment(user_id)}/profile", decoded_as(ProfileErasedOut)
        )

    @route
    def proposals(self, user_id: str, status: str | None = None) -> Call[ProposalList]:
        """The changes proposed to a person's sensitive profile facts, newest first (those
        of `status` only: pending, accepted, declined, lapsed, superseded)."""
        return Call(
            "GET", f"/users/{segment(user_id)}/profile/proposals",
            picked(ProposalsOut, lambda out: out.proposals), query_params(status=status),
        )

    @route
    def answer_proposal(self, user_id: str, proposal_id: int, *, accept: bool) -> Call[ProposalOut]:
        """The person's answer to a pending proposal: accepted (written into the profile
        now) or declined; `Conflict` when it is no longer pending."""
        body = AnswerProposal(
            id=int(proposal_id), decision="accept" if accept else "decline", through="client"
        )
        return Call(
            "POST", f"/users/{segment(user_id)}/profile/proposals", decoded_as(ProposalOut),
            body=body,
        )
