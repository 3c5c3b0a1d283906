"""A person's answers to the changes proposed to their profile's sensitive facts
(`consent`): listed (a proposal past its time lapses as it is read), accepted (written into
the profile then, as the job or the pass would have) or declined (nothing written), each in
one transaction with the proposal's new status, so that it is answered once."""

from __future__ import annotations

from typing import Any

from memory_agent.consolidation.consolidator import Consolidator
from memory_agent.core.errors import ProposalNotFound, ProposalNotPending
from memory_agent.core.ports import Clock, Database, SqlTransaction, now_text
from memory_agent.job.creation import MemoryCreation
from memory_agent.models import ProfileProposal, ProposalStatus
from memory_agent.storage.store import PROFILE_APP, MemoryStore


class ProposalDesk:
    def __init__(
        self, database: Database, store: MemoryStore, creation: MemoryCreation,
        consolidator: Consolidator, clock: Clock,
    ) -> None:
        self._db = database
        self._store = store
        self._creation = creation
        self._consolidator = consolidator
        self._clock = clock

    async def proposals(
        self, user_id: str, status: ProposalStatus | None = None, limit: int = 100
    ) -> list[ProfileProposal]:
        """The person's proposals, the newest first (those past their time lapsed first)."""
        await self.lapse(user_id)
        return await self._store.proposals_of(user_id, status, limit)

    async def lapse(self, user_id: str | None = None) -> int:
        """Every pending proposal past its time lapses (the person's, when given)."""
        async with self._db.transaction() as tx:
            return await self._store.within(tx).lapse_due(now_text(self._clock), user_id)

    async def answer(
        self, user_id: str, proposal_id: int, *, accept: bool, through: str
    ) -> ProfileProposal:
        """Accept or decline a pending proposal; `ProposalNotPending` (nothing changed) when
        it is no longer pending, or when what it would change changed meanwhile (it is
        superseded then). `through` says who answered (api, cli, console, mcp, app:<id>)."""
        await self.lapse(user_id)
        superseded = await self._db.run_transaction(
            lambda tx: self._answer(tx, user_id, proposal_id, accept=accept, through=through)
        )
        found = await self._store.proposal(user_id, proposal_id)
        if found is None:  # the person was erased meanwhile
            raise ProposalNotFound(user_id, proposal_id)
        if superseded:
            raise ProposalNotPending(
                f"proposal {proposal_id} is superseded: what it would change changed since it"
                " was proposed; nothing was changed"
                + (f" (it waits again as proposal {superseded})" if superseded > 0 else "")
            )
        return found[0]

    async def _answer(
        self, tx: SqlTransaction, user_id: str, proposal_id: int, *, accept: bool, through: str
    ) -> int:
        """Inside one transaction: 0 when answered; when it turned out superseded, the
        proposal that asks again (-1: none)."""
        store = self._store.within(tx)
        found = await store.proposal(user_id, proposal_id)
        if found is None:
            raise ProposalNotFound(user_id, proposal_id)
        # The rows in the order an erasure takes them: the apps', the proposal's, then the
        # person's profile (which the change's writes take).
        for space in spaces_of(found[1]):
            await store.lock_space(*space, create=False)
        found = await store.proposal(user_id, proposal_id, lock=True)
        if found is None:
            raise ProposalNotFound(user_id, proposal_id)
        proposal, change = found
        if proposal.status != "pending":
            raise ProposalNotPending(
                f"proposal {proposal_id} is {proposal.status}, not pending; nothing was changed"
            )
        status: ProposalStatus = "declined"
        memory_id, asks_again = None, 0
        if accept:
            if proposal.origin == "memory":
                memory_id, asks_again = await self._creation.apply_proposal(
                    tx, proposal, change, through
                )
            else:
                memory_id = await self._consolidator.apply_accepted(
                    tx, change, f"proposal {proposal.id}, accepted through {through}"
                )
                asks_again = 0 if memory_id is not None else -1
            status = "superseded" if asks_again else "accepted"
        if not await store.decide(proposal_id, status, now_text(self._clock), through,
                                  memory_id):
            # Answered by someone else meanwhile, or lapsed: this transaction's writes roll
            # back.
            raise ProposalNotPending(
                f"proposal {proposal_id} was answered meanwhile, or lapsed; nothing was changed"
            )
        return asks_again


def spaces_of(change: dict[str, Any]) -> list[tuple[str, str]]:
    """The app spaces a consolidation's change touches (none for a memory job's, which
    writes the profile only), apps before the profile."""
    sides = [change[side] for side in ("older", "newer") if side in change]
    return sorted({(s["app"], s["user"]) for s in sides if s["app"] != PROFILE_APP})
