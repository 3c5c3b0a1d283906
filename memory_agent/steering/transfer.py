"""Importing memories from an export: checked whole before anything is written, then written
in one transaction, each with its `created` event (actor `import`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memory_agent.core.errors import InvalidImport, MemoryImportRefused
from memory_agent.core.kinds import BUNDLED_KINDS, KEPT_BEFORE, Kinds
from memory_agent.core.ports import given_timestamp
from memory_agent.core.redaction import redact_text
from memory_agent.models import ImportedMemory
from memory_agent.storage.store import EventSource, MemoryStore


def checked(
    memories: Sequence[ImportedMemory], *, max_chars: int, kinds: Kinds = BUNDLED_KINDS
) -> list[ImportedMemory]:
    """The memories, oldest first, with their times in the stored form and each its kind (the
    default when none is given); `InvalidImport` naming the first one that cannot be stored
    (by its place in the list, from 0)."""
    normalised = []
    for index, memory in enumerate(memories):
        if memory.kind is not None and memory.kind not in kinds.names:
            raise InvalidImport(
                f"memories[{index}].kind: {memory.kind!r} is no kind of memory here; the kinds"
                f" are {', '.join(kinds.names)}"
            )
        content = memory.content.strip()
        if not content:
            raise InvalidImport(f"memories[{index}]: the content is empty")
        if len(content) > max_chars:
            raise InvalidImport(
                f"memories[{index}]: the content is {len(content)} characters, above the"
                f" limit of {max_chars}"
            )
        created_at = _stored_time(memory.created_at, f"memories[{index}].createdAt")
        updated_at = _stored_time(memory.updated_at or memory.created_at,
                                  f"memories[{index}].updatedAt")
        expires_at = (
            _stored_time(memory.expires_at, f"memories[{index}].expiresAt")
            if memory.expires_at else None
        )
        normalised.append(replace(memory, content=content, created_at=created_at,
                                  updated_at=updated_at, expires_at=expires_at,
                                  kind=kinds.of(memory.kind)))
    return sorted(normalised, key=lambda m: m.created_at)


def check_pins(app_id: str, importing: int, kept: int, limit: int) -> None:
    """Refuse an import that would leave the space with more pinned memories than the cap
    less one."""
    if importing and kept + importing > limit - 1:
        raise MemoryImportRefused(
            f"importing {importing} pinned memories would give app {app_id!r}"
            f" {kept + importing} pinned, above the cap less one ({limit - 1})"
        )


def check_room(app_id: str, importing: int, kept: int, limit: int) -> None:
    """Refuse an import that would leave the app above its memory limit."""
    if kept + importing <= limit:
        return
    if importing > limit:
        raise MemoryImportRefused(
            f"{importing} memories are more than app {app_id!r} may hold ({limit})"
        )
    raise MemoryImportRefused(
        f"importing {importing} memories would give app {app_id!r} {kept + importing}, above"
        f" its limit of {limit}: import at most {limit - kept}, or replace its memories"
    )


async def import_into(
    store: MemoryStore,
    app_id: str,
    prepared: Sequence[ImportedMemory],
    *,
    replacing: bool,
    limit: int,
    source: EventSource,
    user_id: str = "",
) -> int:
    """Inside the caller's transaction: the space held, checked for room and pins (refused
    whole, `MemoryImportRefused`), and `prepared` (`checked`) written; how many memories the
    space holds after."""
    await store.lock_space(app_id, user_id)
    kept = 0 if replacing else await store.count(app_id, user_id=user_id)
    check_room(app_id, len(prepared), kept, limit)
    pins = 0 if replacing else await store.count_pinned(app_id, user_id)
    check_pins(app_id, sum(m.pinned for m in prepared), pins, limit)
    await write_imported(
        store, app_id, prepared, replacing=replacing, source=source, user_id=user_id
    )
    return await store.count(app_id, user_id=user_id)


async def write_imported(
    store: MemoryStore,
    app_id: str,
    memories: Sequence[ImportedMemory],
    *,
    replacing: bool,
    source: EventSource,
    user_id: str = "",
) -> None:
    """Inside the caller's transaction: delete the space's memories (when `replacing`), then
    store the imported ones in it."""
    if replacing:
        # A memory no model may read (secret, or of unknown sensitivity) leaves no text in
        # the history: nothing filters its events by its level once it is gone.
        unshown = []
        for old in await store.list_oldest_first(app_id, user_id=user_id):
            if not old.shown_to_models:
                unshown.append(old.id)
            await store.record_event(
                app_id, old.id, "deleted", "import", source, reason="replaced by an import",
                before=old.content if old.shown_to_models else None, user_id=user_id,
            )
        replaced = await store.delete_all(app_id, user_id=user_id)
        # Deleted and expired memories kept for restoring go too, with their history's text
        # (the worker would no longer find them to erase it).
        await store.erase_history_of(
            app_id, [memory_id for memory_id, _, retired in replaced if retired] + unshown
        )
    for memory in memories:
        stored = await store.insert(
            app_id,
            redact_text(memory.content),
            created_at=memory.created_at,
            updated_at=memory.updated_at,
            source_conversation_id=memory.source_conversation_id,
            metadata=memory.metadata,
            user_id=user_id,
            pinned=memory.pinned,
            sensitivity=memory.sensitivity,
            expires_at=memory.expires_at,
            kind=memory.kind or KEPT_BEFORE,
        )
        await store.record_event(
            app_id, stored.id, "created", "import", source, reason="imported",
            after=stored.content, user_id=user_id,
        )


def _stored_time(text: str, field: str) -> str:
    try:
        return given_timestamp(text, field)
    except ValueError as error:
        raise InvalidImport(str(error)) from None
