"""What a caller may read of an app's memories: the admin token reads every kind; an app's
key reads the kinds its app allows (`allowedKinds`), as the app's conversations are given
them (`loop.conversations.turn_context`)."""

from __future__ import annotations

from collections.abc import Sequence

from loop.operations import App
from memory_agent import Memory


def kinds_allowed(app: App, key_app: str | None) -> tuple[str, ...] | None:
    """The kinds the caller may read; None: every kind (the admin token, or an app that
    allows every kind)."""
    return None if key_app is None else app.allowed_kinds


def readable(app: App, key_app: str | None, memories: Sequence[Memory]) -> list[Memory]:
    """`memories`, those the caller may read."""
    return list(memories) if key_app is None else app.readable(memories)
