"""Keeping a claim alive while its work runs (`loop.leases.while_renewing`)."""

from __future__ import annotations

import logging

import anyio
import pytest

from loop.leases import while_renewing
from memory_agent.core.errors import StorageError

pytestmark = pytest.mark.anyio

EVERY = 0.02


class Renewals:
    """The renew callback: answers in turn (then True), and `reached` fires at `target` calls,
    so that the work under test can end at a known count, however late the timers run."""

    def __init__(self, target: int, answers: list[bool | Exception] | None = None) -> None:
        self.count = 0
        self.reached = anyio.Event()
        self._target = target
        self._answers = answers or []

    async def __call__(self) -> bool:
        self.count += 1
        if self.count == self._target:
            self.reached.set()
        answer = self._answers.pop(0) if self._answers else True
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_renews_while_the_work_runs_and_stops_when_it_ends() -> None:
    renewals = Renewals(target=3)

    async def work() -> str:
        await renewals.reached.wait()
        return "written"

    assert await while_renewing(work, renewals, every=EVERY, what="job 1") == "written"
    await anyio.sleep(EVERY * 3)
    assert renewals.count == 3, "renewed after the work ended"


async def test_work_that_ends_at_once_is_never_renewed() -> None:
    renewals = Renewals(target=1)

    async def work() -> int:
        return 7

    assert await while_renewing(work, renewals, every=EVERY, what="job 2") == 7
    await anyio.sleep(EVERY * 3)
    assert renewals.count == 0


async def test_the_works_failure_is_raised_as_itself() -> None:
    renewals = Renewals(target=1)

    async def work() -> None:
        await renewals.reached.wait()
        raise ValueError("model gave up")

    with pytest.raises(ValueError, match="model gave up"):
        await while_renewing(work, renewals, every=EVERY, what="job 3")
    await anyio.sleep(EVERY * 3)
    assert renewals.count == 1


async def test_a_failed_renewal_is_tried_again_and_a_lost_claim_stops_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    renewals = Renewals(target=2, answers=[StorageError("database is busy"), False])

    async def work() -> str:
        await renewals.reached.wait()
        await anyio.sleep(EVERY * 3)  # time enough for renewals that should not happen
        return "done"

    with caplog.at_level(logging.INFO, logger="mnemoloop.loop"):
        assert await while_renewing(work, renewals, every=EVERY, what="job 4") == "done"
    assert renewals.count == 2
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("WARNING", "job 4: could not renew the claim: database is busy"),
        ("INFO", "job 4: the claim is no longer held here; renewals stop"),
    ]


async def test_cancelling_the_caller_stops_the_work_and_the_renewals() -> None:
    renewals = Renewals(target=2)
    stopped = anyio.Event()

    async def work() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()

    async def renewing() -> None:
        await while_renewing(work, renewals, every=EVERY, what="job 5")

    async with anyio.create_task_group() as group:
        group.start_soon(renewing)
        await renewals.reached.wait()
        group.cancel_scope.cancel()
    assert stopped.is_set()
    await anyio.sleep(EVERY * 3)
    assert renewals.count == 2


async def test_a_renewal_running_when_the_work_ends_is_not_waited_for_nor_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The work's final write releases the claim while a renewal is on its way: that renewal
    # would find the claim gone, which is no loss, and the work need not wait for it.
    renewal_started = anyio.Event()

    async def slow_renewal() -> bool:
        renewal_started.set()
        await anyio.sleep(5)
        return False

    async def work() -> str:
        await renewal_started.wait()
        return "stored"

    with caplog.at_level(logging.INFO, logger="mnemoloop.loop"), anyio.fail_after(2):
        assert await while_renewing(work, slow_renewal, every=EVERY, what="job 6") == "stored"
    assert caplog.records == []
