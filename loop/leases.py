"""Keeping a claim alive while its work runs."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from memory_agent.errors import MnemoloopError

log = logging.getLogger("mnemoloop.loop")
T = TypeVar("T")


async def while_renewing(
    work: Callable[[], Awaitable[T]],
    renew: Callable[[], Awaitable[bool]],
    *,
    every: float,
    what: str,
) -> T:
    """Run `work`, renewing its lease every `every` seconds until it returns. A lost lease
    or a failed renewal is logged and the work carries on: its final write checks the claim
    and stores nothing if another instance took the work over."""
    result: list[T] = []
    failure: list[Exception] = []

    async def run_work() -> None:
        try:
            result.append(await work())
        except Exception as error:  # raised below as itself, not inside an ExceptionGroup
            failure.append(error)
        group.cancel_scope.cancel()

    async def keep_renewing() -> None:
        while True:
            await anyio.sleep(every)
            try:
                if not await renew():
                    log.warning("%s: the claim was lost; its result will not be stored", what)
                    return
            except MnemoloopError as error:
                log.warning("%s: could not renew the claim: %s", what, error)

    async with anyio.create_task_group() as group:
        group.start_soon(run_work)
        group.start_soon(keep_renewing)
    if failure:
        raise failure[0]
    return result[0]
