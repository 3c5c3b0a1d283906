"""A claimed memory job's record, as the memory agent writes it inside the transaction that
writes the job's memory (`memory_agent.JobRecord`): the job done, if this claim still holds it,
and the energy its model calls used spent, in the same commit."""

from __future__ import annotations

from loop.jobs.store import MemoryJob, MemoryJobStore
from loop.operations.energy import EnergyBudget
from memory_agent import MemoryCreated, Row, SqlTransaction


class ClaimedJobRecord:
    def __init__(self, jobs: MemoryJobStore, energy: EnergyBudget, job: MemoryJob) -> None:
        self._jobs = jobs
        self._energy = energy
        self._job = job
        # The energy handed to the last transaction that marked the job done, and the
        # budget's state it left: this instance's view once that transaction commits.
        self.units = 0
        self._state: Row | None = None

    async def done(self, tx: SqlTransaction, result: MemoryCreated, energy_units: int) -> bool:
        self.units = energy_units
        held = await self._jobs.within(tx).mark_done(
            self._job,
            memory_id=result.memory.id if result.memory else None,
            note=result.note,
            steps=result.compactions,
        )
        if held:
            self._state = await self._energy.charge_within(tx, "memory", energy_units)
        return held

    async def copies_wanted(self, tx: SqlTransaction) -> bool:
        return await self._jobs.within(tx).done_in_installed_app(self._job)

    def committed(self) -> None:
        """The job's transaction committed: its spending counts in this instance's view."""
        self._energy.remember(self._state, "memory", self.units)
