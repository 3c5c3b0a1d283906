"""Wrong tokens, counted by the address they come from.

A generated admin token is 32 random bytes and an app key as long, so neither can be guessed;
an operator's own `MNEMOLOOP_ADMIN_TOKEN` may be short. So an address that presents
`MAX_WRONG` wrong tokens (or sign-in attempts) within `WINDOW_SECONDS` is refused every
token-bearing request, the right token's too, until the oldest of them is a window old. The
refusal comes before the check, or trying on would still tell right from wrong.

Checks in flight count too: an address has at most `MAX_WRONG` minus its wrong tokens checked
at once, and further requests wait their turn, first come first served. Otherwise a burst
sent at once would be checked in full before its first failure was counted (checking an
app's key reads the database). An IPv6 address counts by its /64, which one host usually
holds whole, and every loopback address as one.

The count is this process's: N instances on one database allow N times as many. The address
is the connecting peer's (the server does not read `X-Forwarded-For`), so behind a reverse
proxy every client shares the proxy's address: limit there instead.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

MAX_WRONG = 30
WINDOW_SECONDS = 60.0
# Addresses kept at most; past that, the least recently seen are forgotten.
_MAX_ADDRESSES = 10_000


class Refused(Exception):
    def __init__(self, seconds: int) -> None:
        super().__init__(refusal_detail(seconds))
        self.seconds = seconds  # until the address may try again


class TokenCheck:
    """One check of a presented token; `wrong()` when it did not match."""

    def __init__(self) -> None:
        self.was_wrong = False

    def wrong(self) -> None:
        self.was_wrong = True


@dataclass
class _Turn:
    """A request waiting for room to check its token: woken with a place (`granted`), or
    woken without one when its address is refused meanwhile."""

    woken: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


@dataclass
class _Address:
    wrong: deque[float] = field(default_factory=deque)  # when, oldest first
    checking: int = 0
    waiting: deque[_Turn] = field(default_factory=deque)  # first come, first served


class WrongTokens:
    def __init__(
        self,
        *,
        max_wrong: int = MAX_WRONG,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_wrong < 1:
            raise ValueError("max_wrong must be at least 1")
        self._max = max_wrong
        self._window = window_seconds
        self._clock = clock
        self._addresses: dict[str, _Address] = {}  # least recently seen first

    @asynccontextmanager
    async def checking(self, address: str) -> AsyncIterator[TokenCheck]:
        """Around one token check from `address`: raises `Refused` when the address has
        sent too many wrong tokens, waits its turn while too many of its checks are in
        flight, and counts the check as wrong if the body called `wrong()` (raising or not)."""
        key = address_key(address)
        while True:
            state = self._seen(key)
            if (seconds := self._refusal(state)) is not None:
                raise Refused(seconds)
            if not state.waiting and self._has_room(state):
                state.checking += 1
                break
            turn = _Turn()
            state.waiting.append(turn)
            try:
                await turn.woken.wait()
            except BaseException:
                if turn.granted:
                    self._end_check(key, state, wrong=False)
                elif turn in state.waiting:
                    state.waiting.remove(turn)
                raise
            if turn.granted:
                break
        check = TokenCheck()
        try:
            yield check
        finally:
            self._end_check(key, state, wrong=check.was_wrong)

    def refused_for(self, address: str) -> int | None:
        """Whole seconds until `address` may try again; None when it may now."""
        state = self._addresses.get(address_key(address))
        return None if state is None else self._refusal(state)

    def _end_check(self, key: str, state: _Address, *, wrong: bool) -> None:
        state.checking -= 1
        if wrong:
            state.wrong.append(self._clock())
        if self._refusal(state) is not None:
            while state.waiting:  # refused now: each waiter hears so
                state.waiting.popleft().woken.set()
        while state.waiting and self._has_room(state):
            turn = state.waiting.popleft()
            turn.granted = True
            state.checking += 1
            turn.woken.set()
        idle = not (state.wrong or state.checking or state.waiting)
        if idle and self._addresses.get(key) is state:
            del self._addresses[key]  # nothing to remember of right tokens

    def _has_room(self, state: _Address) -> bool:
        return len(state.wrong) + state.checking < self._max

    def _refusal(self, state: _Address) -> int | None:
        cutoff = self._clock() - self._window
        while state.wrong and state.wrong[0] <= cutoff:
            state.wrong.popleft()
        if len(state.wrong) < self._max:
            return None
        return max(1, math.ceil(state.wrong[0] + self._window - self._clock()))

    def _seen(self, key: str) -> _Address:
        state = self._addresses.pop(key, None)
        if state is None:
            state = _Address()
            if len(self._addresses) >= _MAX_ADDRESSES:
                self._forget_one()
        self._addresses[key] = state  # now the most recently seen
        return state

    def _forget_one(self) -> None:
        """The least recently seen address with no check in flight or waiting (forgetting
        one that has would lose what its checks find)."""
        idle = (key for key, state in self._addresses.items()
                if not (state.checking or state.waiting))
        del self._addresses[next(idle, next(iter(self._addresses)))]


@functools.lru_cache(maxsize=4096)  # parsed once per address, not once per request
def address_key(address: str) -> str:
    """The address counted: an IPv6 address's /64 (an IPv4 one mapped into IPv6 as itself),
    and every loopback address as one (a local client may connect from any of 127/8)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # not an IP address: a Unix socket's peer, say
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def refusal_detail(seconds: int) -> str:
    return f"too many wrong tokens from this address; try again in {seconds} s"
