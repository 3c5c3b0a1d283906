"""Steering one memory: pin, importance, sensitivity (privacy), expiry; soft delete, restore,
and the erasure of what the grace period no longer keeps.

Every function runs inside the caller's transaction (the store is bound to it), holds the
app's row first (as a memory job does, so a change and a compaction never interleave), and
records one history event per change, with the reason given.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from memory_agent.core.errors import InvalidExpiry, MemoryNotFound, MemorySteeringRefused
from memory_agent.core.ports import format_timestamp, parse_timestamp
from memory_agent.core.redaction import redact_text
from memory_agent.models import (
    MAX_IMPORTANCE,
    MIN_IMPORTANCE,
    TAGGED,
    Memory,
    MemoryActor,
    Sensitivity,
)
from memory_agent.storage.store import PROFILE_APP, EventSource, MemoryStore

# How far one relevance tag moves a memory's importance (a memory without one is at 5).
RELEVANCE_STEP = 2


@dataclass(frozen=True)
class MemoryChange:
    """What to change; None leaves a field as it is. `clear_expiry` removes the expiry."""

    pinned: bool | None = None
    # `private` alone: True makes a public memory private (a secret one stays secret), False
    # makes it public; `sensitivity` names the level (the caller checks the two agree).
    private: bool | None = None
    sensitivity: Sensitivity | None = None
    importance: int | None = None
    expires_at: str | None = None
    clear_expiry: bool = False
    reason: str | None = None

    @property
    def changes_nothing(self) -> bool:
        """No field to change is given (a reason alone changes nothing)."""
        return self == MemoryChange(reason=self.reason)


def _level(memory: Memory, change: MemoryChange) -> Sensitivity | None:
    """The sensitivity `change` gives the memory (None: as it is)."""
    if change.sensitivity is not None:
        return change.sensitivity
    if change.private is None:
        return None
    if not change.private:
        return "public"
    return "private" if memory.sensitivity == "public" else memory.sensitivity


async def steer(
    store: MemoryStore,
    app_id: str,
    memory_id: int,
    change: MemoryChange,
    *,
    actor: MemoryActor,
    source: EventSource,
    limit: int,
) -> Memory:
    """Apply `change` to a live memory; returns it as it now is. `MemoryNotFound` when there
    is no such memory, `MemorySteeringRefused` when it is retired or a pin has no room."""
    _check_future(change.expires_at, source.at)
    memory = await _live_memory(store, app_id, memory_id, source.at)
    level = _level(memory, change)
    if level == "unknown" or (change.sensitivity is None and not memory.returned):
        # What a change answers is the memory itself, which a memory of unknown sensitivity
        # never is: it is given a level first (an import may bring one in unknown).
        raise MemorySteeringRefused(
            f"memory {memory_id} is of unknown sensitivity: give it a level (public, private"
            " or secret) first" if level != "unknown" else
            "unknown is the level of a memory no one has classified; give public, private or"
            " secret"
        )
    why = _reason(change.reason)
    events: list[tuple[str, str]] = []
    columns: dict[str, object] = {}
    if change.pinned is not None and change.pinned != memory.pinned:
        if change.pinned:
            await _check_pin_room(store, memory, limit)
        columns["pinned"] = change.pinned
        events.append(("pinned" if change.pinned else "unpinned", why or ""))
    if level is not None and level != memory.sensitivity:
        columns["sensitivity"] = level
        columns["private"] = level != "public"
        said = "" if {level, memory.sensitivity} == {"public", "private"} else (
            f"sensitivity {memory.sensitivity} → {level}" + (": " if why else ""))
        events.append(("private" if level != "public" else "public", said + (why or "")))
    if change.importance is not None:
        importance = max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, change.importance))
        if importance != memory.importance or "importance" not in memory.metadata:
            columns["metadata"] = {**memory.metadata, "importance": importance}
            events.append(
                ("importance", f"importance {memory.importance} → {importance}"
                 + (f": {why}" if why else ""))
            )
    expiry = None if change.clear_expiry else change.expires_at
    if (change.clear_expiry or change.expires_at is not None) and expiry != memory.expires_at:
        columns["expires_at"] = expiry
        said = f"expires {expiry}" if expiry else "no longer expires"
        events.append(("expiry", said + (f": {why}" if why else "")))
    if columns:
        await store.steer(app_id, memory_id, **columns)
    for event, reason in events:
        await store.record_event(
            app_id, memory_id, event, actor, source,  # type: ignore[arg-type]
            reason=reason or None, user_id=memory.user_id,
        )
    return await _get(store, app_id, memory_id)


async def tag_relevance(
    store: MemoryStore,
    app_id: str,
    memory_id: int,
    *,
    relevant: bool,
    reason: str,
    actor: MemoryActor,
    source: EventSource,
    limit: int,
) -> Memory:
    """The seed's `tag_memory_relevant` / `tag_memory_irrelevant`: the memory's importance
    goes up (or down) by `RELEVANCE_STEP`, with the reason in the history."""
    memory = await _live_memory(store, app_id, memory_id, source.at)
    if not memory.returned:
        raise MemorySteeringRefused(
            f"memory {memory_id} is of unknown sensitivity: give it a level first"
        )
    step = RELEVANCE_STEP if relevant else -RELEVANCE_STEP
    tag = "relevant" if relevant else "irrelevant"
    why = f"tagged {tag}: {_reason(reason)}"
    importance = max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, memory.importance + step))
    if importance == memory.importance and "importance" in memory.metadata:
        # At the end of the scale: nothing changes, but the tag and its reason are kept.
        await store.record_event(
            app_id, memory_id, "importance", actor, source,
            reason=f"importance stays {importance}: {why}", user_id=memory.user_id,
        )
    else:
        change = MemoryChange(importance=importance, reason=why)
        memory = await steer(
            store, app_id, memory_id, change, actor=actor, source=source, limit=limit
        )
    # The tag weighs in the memory's decay: irrelevant makes it a stub in every block, relevant
    # lifts that and starts its counts in every conversation again (`recall.decay`).
    await store.steer(app_id, memory_id, metadata={**memory.metadata, TAGGED: tag})
    if relevant:
        await store.restart_decay(memory_id)
    return await _get(store, app_id, memory_id)


async def soft_delete(
    store: MemoryStore,
    app_id: str,
    memory_id: int,
    *,
    actor: MemoryActor,
    source: EventSource,
    grace_seconds: float,
    reason: str | None = None,
) -> Memory:
    """Delete a memory softly: out of sight at once, restorable until the grace period ends,
    then erased by the worker. A memory already deleted is not found (as in a listing)."""
    await store.lock_app(app_id)
    memory = await _get(store, app_id, memory_id)
    if memory.deleted_at is not None:
        raise MemoryNotFound(app_id, memory_id)
    await store.steer(app_id, memory_id, deleted_at=source.at)
    until = _plus(source.at, grace_seconds)
    why = _reason(reason) or f"deleted by {'an admin' if actor == 'admin' else 'the app'}"
    await store.record_event(
        app_id, memory_id, "deleted", actor, source,
        reason=f"{why}; restorable until {until}", before=memory.content,
        user_id=memory.user_id,
    )
    return await _get(store, app_id, memory_id)


async def restore(
    store: MemoryStore,
    app_id: str,
    memory_id: int,
    *,
    actor: MemoryActor,
    source: EventSource,
    limit: int,
    grace_seconds: float,
    expires_at: str | None = None,
) -> Memory:
    """Bring back a deleted or expired memory within its grace period: it is live again,
    with `expires_at` (or none) in place of an expiry that had passed. Refused when its space
    is at its cap, or its grace period is over (the worker is about to erase it). A live
    memory is returned as it is."""
    _check_future(expires_at, source.at)
    await store.lock_app(app_id)
    memory = await _get(store, app_id, memory_id)
    if not memory.returned:
        raise MemorySteeringRefused(
            f"memory {memory_id} is of unknown sensitivity: give it a level first"
        )
    if memory.state(source.at) == "live":
        return memory
    retired_at = memory.deleted_at or memory.expires_at or source.at
    if retired_at <= _plus(source.at, -grace_seconds):
        raise MemorySteeringRefused(
            f"memory {memory_id} cannot be restored: its grace period ended"
            f" {_plus(retired_at, grace_seconds)}, and it is being erased"
        )
    if await store.count(app_id, user_id=memory.user_id) >= limit:
        raise MemorySteeringRefused(
            f"memory {memory_id} cannot be restored: its space holds {limit} memories, its"
            " cap; delete one first"
        )
    if memory.pinned:
        await _check_pin_room(store, memory, limit)
    columns: dict[str, object] = {"deleted_at": None}
    expired = memory.expires_at is not None and memory.expires_at <= source.at
    if expired or expires_at is not None:
        columns["expires_at"] = expires_at
    await store.steer(app_id, memory_id, **columns)
    was = "deleted" if memory.deleted_at is not None else f"expired at {memory.expires_at}"
    await store.record_event(
        app_id, memory_id, "restored", actor, source,
        reason=f"restored (it was {was})" + (f"; expires {expires_at}" if expires_at else ""),
        after=memory.content, user_id=memory.user_id,
    )
    return await _get(store, app_id, memory_id)


async def erase_retired(
    store: MemoryStore, *, source: EventSource, grace_seconds: float, limit: int
) -> int:
    """Erase up to `limit` memories whose grace period is over (deleted or expired at least
    `grace_seconds` ago): the row and its history's texts go, an `erased` event stays.
    Returns how many went."""
    cutoff = _plus(source.at, -grace_seconds)
    erased = 0
    locked: tuple[str, str] | None = None
    # In app order, each app's row taken once, and the profiles' (each person's row) last,
    # as an erasure of a person takes them: never the other way round.
    retired = sorted(await store.retired_before(cutoff, limit),
                     key=lambda m: (m.app_id == PROFILE_APP, m.app_id, m.user_id, m.id))
    for memory in retired:
        space = (memory.app_id, memory.user_id if memory.app_id == PROFILE_APP else "")
        if space != locked:
            await store.lock_space(*space)
            locked = space
        if not await store.erase_retired(memory.app_id, memory.id, cutoff):
            continue  # restored meanwhile
        why = (
            f"deleted at {memory.deleted_at}" if memory.deleted_at
            else f"expired at {memory.expires_at}"
        )
        await store.record_event(
            memory.app_id, memory.id, "erased", "worker", source,
            reason=f"{why}; its grace period is over", user_id=memory.user_id,
        )
        erased += 1
    if erased:
        await store.compact_search_index()
    return erased


async def _get(store: MemoryStore, app_id: str, memory_id: int) -> Memory:
    memory = await store.get(app_id, memory_id)
    if memory is None:
        raise MemoryNotFound(app_id, memory_id)
    return memory


async def _live_memory(store: MemoryStore, app_id: str, memory_id: int, now: str) -> Memory:
    await store.lock_app(app_id)
    memory = await _get(store, app_id, memory_id)
    state = memory.state(now)
    if state != "live":
        raise MemorySteeringRefused(f"memory {memory_id} is {state}: restore it first")
    return memory


async def _check_pin_room(store: MemoryStore, memory: Memory, limit: int) -> None:
    """An app pins at most the cap less one per space: compaction always has room for the
    next memory."""
    pinned = await store.count_pinned(memory.app_id, memory.user_id)
    if pinned >= limit - 1:
        raise MemorySteeringRefused(
            f"memory {memory.id} cannot be pinned: its space already has {pinned} pinned, and"
            f" at most {max(limit - 1, 0)} (the cap less one) may be; unpin one first"
        )


def _check_future(expires_at: str | None, now: str) -> None:
    if expires_at is not None and expires_at <= now:
        raise InvalidExpiry(
            f"expiresAt {expires_at} is not in the future: to retire the memory now, delete it"
        )


def _reason(reason: str | None) -> str | None:
    """A reason as the history keeps it: one line, at most 300 characters, no secret."""
    if reason is None:
        return None
    return redact_text(" ".join(reason.split())[:300]) or None


def _plus(at: str, seconds: float) -> str:
    return format_timestamp(parse_timestamp(at) + timedelta(seconds=seconds))
