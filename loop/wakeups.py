"""Coordination between tasks: wake-up calls and a set of work in flight."""

from __future__ import annotations

import anyio

# What instances sharing a database tell each other (PostgreSQL LISTEN/NOTIFY): a user
# message waits for an answer; a memory job was queued.
MESSAGES_CHANNEL = "mnemoloop_messages"
JOBS_CHANNEL = "mnemoloop_jobs"


class Wakeup:
    """Set by a producer, awaited by a consumer that also looks on its own now and then."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, at_most: float) -> None:
        """Return when set (and re-arm), or after `at_most` seconds."""
        with anyio.move_on_after(at_most):
            await self._event.wait()
        if self._event.is_set():
            self._event = anyio.Event()


class InFlight:
    """Keys of work under way (conversation or app ids); `wait_empty` returns once none is left."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._empty = anyio.Event()
        self._empty.set()

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def keys(self) -> frozenset[str]:
        return frozenset(self._keys)

    def add(self, key: str) -> None:
        if not self._keys:
            self._empty = anyio.Event()
        self._keys.add(key)

    def discard(self, key: str) -> None:
        self._keys.discard(key)
        if not self._keys:
            self._empty.set()

    async def wait_empty(self) -> None:
        await self._empty.wait()
