"""Wrong tokens, counted by the address they come from.

A generated admin token is 32 random bytes and an app key as long, so neither can be guessed;
an operator's own `MNEMOLOOP_ADMIN_TOKEN` may be short. So an address that presents
`MAX_WRONG` wrong tokens (or sign-in attempts) within `WINDOW_SECONDS` is refused every
token-bearing request, the right token's too, until the oldest of them is a window old. The
refusal comes before the check, or trying on would still tell right from wrong.

Behind a reverse proxy every client has the proxy's address: there the proxy should limit.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

MAX_WRONG = 30
WINDOW_SECONDS = 60.0
# Addresses kept at most; past that, those with nothing in the window are forgotten first.
_MAX_ADDRESSES = 10_000


class WrongTokens:
    def __init__(
        self,
        *,
        max_wrong: int = MAX_WRONG,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = max_wrong
        self._window = window_seconds
        self._clock = clock
        self._by_address: dict[str, deque[float]] = {}

    def refused_for(self, address: str) -> int | None:
        """Whole seconds until `address` may try again; None when it may now."""
        recent = self._recent(address)
        if recent is None or len(recent) < self._max:
            return None
        return max(1, math.ceil(recent[0] + self._window - self._clock()))

    def record(self, address: str) -> None:
        recent = self._recent(address)
        if recent is None:
            if len(self._by_address) >= _MAX_ADDRESSES:
                self._forget_quiet_addresses()
            recent = self._by_address[address] = deque(maxlen=self._max)
        recent.append(self._clock())

    def _recent(self, address: str) -> deque[float] | None:
        recent = self._by_address.get(address)
        if recent is None:
            return None
        cutoff = self._clock() - self._window
        while recent and recent[0] <= cutoff:
            recent.popleft()
        if not recent:
            del self._by_address[address]
            return None
        return recent

    def _forget_quiet_addresses(self) -> None:
        cutoff = self._clock() - self._window
        for address in [a for a, recent in self._by_address.items() if recent[-1] <= cutoff]:
            del self._by_address[address]
        while len(self._by_address) >= _MAX_ADDRESSES:  # all busy: the oldest entries go
            del self._by_address[next(iter(self._by_address))]


def refusal_detail(seconds: int) -> str:
    return f"too many wrong tokens from this address; try again in {seconds} s"
