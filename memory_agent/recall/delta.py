"""The memory delta header: what changed in a conversation's memory spaces since the same
user's previous conversation in the app, at the top of the memory block, so the model can
tell which of the memories it is shown are new.

A space's revision is the newest of its history events (`memory_events.id`): every change
records one in its own transaction, so a revision moves exactly when the memories do. A
conversation keeps the revision its first memory block was built at (`conversations.
memory_revision`); the next one of that user in the app names the changes after it, newest
first, at most `MAX_CHANGES`:

    Memory updates since rev 41:
    - +created: "The user's partner is Sam."
    - ↑updated: "The user now lives in Porto."
    - ↔merged: "The user is vegetarian and allergic to nuts."
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.models import SpaceChange
from memory_agent.recall.context import neutralise

MAX_CHANGES = 3
# How much of a memory's text a bullet shows.
_SHOWN_CHARS = 100
HEADING = "Memory updates since rev {revision}:"


def _kind(change: SpaceChange) -> str:
    if change.event == "created":
        return "+created"
    if change.event == "edited":
        return "↔merged" if change.merged else "↑updated"
    if change.event == "deleted":
        return "−deleted"
    return "↺restored"


def delta_header(since: int, changes: Sequence[SpaceChange]) -> str:
    """The header; "" when nothing changed."""
    if not changes:
        return ""
    lines = [HEADING.format(revision=since)]
    for change in changes:
        text = neutralise(change.content)
        if len(text) > _SHOWN_CHARS:
            text = text[: _SHOWN_CHARS - 1].rstrip() + "…"
        line = f'- {_kind(change)}: "{text}"' if text else f"- {_kind(change)}"
        # One change told in two spaces (a fact the profile takes from an app's memory) is
        # named once; changes named without their text are each a change of their own.
        if not text or line not in lines:
            lines.append(line)
        if len(lines) > MAX_CHANGES:
            break
    return "\n".join(lines)
