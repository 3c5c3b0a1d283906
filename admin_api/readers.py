"""What a caller may read of an app's memories: the admin token reads every kind; an app's
key reads the kinds its app allows (`allowedKinds`), as the app's conversations are given
them (`loop.conversations.turn_context`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from loop.operations import App
from memory_agent import Memory, MemoryEvent, MemoryNotFound, MemorySubAgent


def kinds_allowed(app: App, key_app: str | None) -> tuple[str, ...] | None:
    """The kinds the caller may read; None: every kind (the admin token, or an app that
    allows every kind)."""
    return None if key_app is None else app.allowed_kinds


def readable(app: App, key_app: str | None, memories: Sequence[Memory]) -> list[Memory]:
    """`memories`, those the caller may read."""
    return list(memories) if key_app is None else app.readable(memories)


async def require_readable(
    agent: MemorySubAgent, app: App, key_app: str | None, memory_id: int
) -> None:
    """`MemoryNotFound` when the memory is of a kind the caller may not read: a key neither
    reads it, nor changes it, nor learns that it is there."""
    allowed = kinds_allowed(app, key_app)
    if allowed is None:
        return
    kind = (await agent.kinds_of(app.app_id, [memory_id])).get(memory_id)
    if kind not in allowed:
        raise MemoryNotFound(app.app_id, memory_id)


async def readable_events(
    agent: MemorySubAgent, app: App, key_app: str | None, events: Sequence[MemoryEvent]
) -> list[MemoryEvent]:
    """`events`, without the texts of memories of a kind the caller may not read (nor of
    memories no longer kept, whose kind is not known)."""
    allowed = kinds_allowed(app, key_app)
    if allowed is None:
        return list(events)
    kinds = await agent.kinds_of(app.app_id, sorted({event.memory_id for event in events}))
    return [event if kinds.get(event.memory_id) in allowed
            else replace(event, content_before=None, content_after=None)
            for event in events]
