"""Claims under a lease: the stores of work an instance claims for a while (`LeasedStore`), and
keeping a claim alive while its work runs (`while_renewing`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Self, TypeVar

import anyio

from memory_agent import Clock, MnemoloopError, SqlSession, format_timestamp

log = logging.getLogger("mnemoloop.loop")
T = TypeVar("T")


class LeasedStore:
    """A store of work that an instance (`owner`) claims under a lease of `lease_seconds`,
    renewed while the work runs; a claim whose lease ran out may be taken by another."""

    def __init__(
        self, session: SqlSession, clock: Clock, *, owner: str = "", lease_seconds: float = 30.0
    ) -> None:
        self._db = session
        self._clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds

    def within(self, tx: SqlSession) -> Self:
        """The same store, its statements inside `tx`."""
        return type(self)(tx, self._clock, owner=self.owner, lease_seconds=self.lease_seconds)

    def _lease_end(self) -> str:
        return format_timestamp(self._clock.now() + timedelta(seconds=self.lease_seconds))


async def while_renewing(
    work: Callable[[], Awaitable[T]],
    renew: Callable[[], Awaitable[bool]],
    *,
    every: float,
    what: str,
) -> T:
    """Run `work`, renewing its lease every `every` seconds until it returns. A failed renewal
    is logged (warning) and tried again; a claim no longer held stops the renewals (info). The
    work carries on either way: its final write checks the claim and stores nothing if another
    instance took the work over."""
    # The work runs in the caller's task and the renewals in one child task, told to stop by
    # an event rather than by cancelling it: most work ends before its first renewal, and a
    # cancellation costs more than the rest of this function (the cancel scope formats the
    # current task's repr for its reason).
    finished = anyio.Event()
    renewing = False

    async def keep_renewing() -> None:
        nonlocal renewing
        while True:
            with anyio.move_on_after(every):
                await finished.wait()
                return
            try:
                renewing = True
                held = await renew()
            except MnemoloopError as error:
                if not finished.is_set():
                    log.warning("%s: could not renew the claim: %s", what, error)
                continue
            finally:
                renewing = False
            if not held:
                # Taken over, or released by the work's own final write a moment ago (on
                # PostgreSQL the renewal may wait for that write's row lock). Which of the two
                # it was, the final write says: it stores nothing, and logs so, if taken over.
                if not finished.is_set():
                    log.info("%s: the claim is no longer held here; renewals stop", what)
                return

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(keep_renewing)
        try:
            result = await work()
        except Exception as error:  # raised below as itself, not inside an ExceptionGroup
            failure = error
        finished.set()
        if renewing:  # rare (once a renewal period): cut it short rather than wait
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result
