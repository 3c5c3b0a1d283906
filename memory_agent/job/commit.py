"""Applying one memory job's writes inside its transaction: the new memory, the compaction
steps, a history event for every change, and the links of the memories written or merged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_agent.core.kinds import KEPT_BEFORE
from memory_agent.core.redaction import redact_text
from memory_agent.links.linking import link_in_space
from memory_agent.models import (
    DEFAULT_IMPORTANCE,
    MERGED,
    CompactionOutcome,
    DecidedBy,
    Memory,
)
from memory_agent.storage.store import EventSource, MemoryStore
from memory_agent.writers.steps import NEW_MEMORY_ID, DecidedStep


@dataclass
class _Write:
    """One job's write in progress: where it goes, on whose behalf, and the app's memories as
    the steps change them (content and metadata by id)."""

    store: MemoryStore
    app_id: str
    source: EventSource
    conversation_id: str
    content: dict[int, str]
    metadata: dict[int, dict[str, Any]] = field(default_factory=dict)
    new_id: int = NEW_MEMORY_ID
    user_id: str = ""
    # Memories whose texts no model may read (secret, or of unknown sensitivity): their
    # history, which reads filter by their level while they exist, goes with them.
    unshown: frozenset[int] = frozenset()


async def apply_write(
    store: MemoryStore,
    *,
    app_id: str,
    content: str,
    source_conversation_id: str,
    written_by: str,
    current: Sequence[Memory],
    steps: Sequence[DecidedStep],
    source: EventSource,
    user_id: str = "",
    expires_at: str | None = None,
    kind: str = KEPT_BEFORE,
) -> tuple[Memory | None, list[CompactionOutcome]]:
    """Insert the new memory (unless a step deletes or folds it) and apply `steps` to
    `current`, through `store` (bound to the job's transaction); returns the memory inserted
    and the steps as applied."""
    write = _Write(
        store,
        app_id,
        source,
        source_conversation_id,
        {m.id: m.content for m in current},
        {m.id: m.metadata for m in current},
        user_id=user_id,
        unshown=frozenset(m.id for m in current if not m.shown_to_models),
    )
    memory: Memory | None = None
    if NEW_MEMORY_ID not in {decided.step.removed for decided in steps}:
        memory = await store.insert(
            app_id,
            content,
            created_at=source.at,
            source_conversation_id=source_conversation_id,
            metadata={"relatedConversations": [source_conversation_id]},
            user_id=user_id,
            expires_at=expires_at,
            kind=kind,
        )
        await store.record_event(
            app_id, memory.id, "created", "job", source,
            reason=f"written from the conversation ({written_by})"
            + (f"; expires {expires_at}" if expires_at else ""),
            after=content,
            user_id=user_id,
        )
        write.new_id = memory.id
        write.content[memory.id] = content
    outcomes = []
    for decided in steps:
        apply = _delete if decided.step.action == "delete" else _edit
        outcomes.append(await apply(write, decided))
    # The new memory, and each memory a step merged another into, linked to the memories of
    # the space it shares most with.
    merged = [o.target_memory_id for o in outcomes if o.folded_memory_id is not None]
    await link_in_space(
        store, [*([memory.id] if memory is not None else []), *merged],
        {i: text for i, text in write.content.items() if i not in write.unshown}, source.at,
    )
    return memory, outcomes


async def _delete(write: _Write, decided: DecidedStep) -> CompactionOutcome:
    target = write.new_id if decided.step.target == NEW_MEMORY_ID else decided.step.target
    if target != NEW_MEMORY_ID:  # the new memory, deleted before it was ever written
        await write.store.delete(write.app_id, target)
        await _record_gone(write, target, decided.decided_by, _reason(decided))
    return _outcome(write.app_id, decided, target)


async def _edit(write: _Write, decided: DecidedStep) -> CompactionOutcome:
    step = decided.step
    target, folded, content = step.target, step.folded, redact_text(step.new_content or "")
    related = list(write.metadata[target].get("relatedConversations", []))
    if folded is not None:
        folded_from = (
            [write.conversation_id]
            if folded == NEW_MEMORY_ID
            else write.metadata[folded].get("relatedConversations", [])
        )
        related += [c for c in folded_from if c not in related]
    metadata = {**write.metadata[target], "relatedConversations": related}
    if folded is not None and "importance" in write.metadata.get(folded, {}):
        # What is folded in keeps its weight: the merged memory is as important as either.
        metadata["importance"] = max(
            write.metadata[folded]["importance"],
            metadata.get("importance", DEFAULT_IMPORTANCE),
        )
    await write.store.update_content(
        write.app_id, target, content, updated_at=write.source.at, metadata=metadata
    )
    await write.store.record_event(
        write.app_id, target, "edited", decided.decided_by, write.source,
        reason=(MERGED + _reason(decided)) if folded is not None else _reason(decided),
        before=write.content[target], after=content,
        user_id=write.user_id,
    )
    write.content[target], write.metadata[target] = content, metadata
    if folded is not None and folded != NEW_MEMORY_ID:
        await write.store.delete(write.app_id, folded)
        await _record_gone(write, folded, decided.decided_by,
                           f"folded into memory {target}: {step.reason}")
    return _outcome(write.app_id, decided, target)


async def _record_gone(write: _Write, memory_id: int, actor: DecidedBy, reason: str) -> None:
    """The deleted event of a memory the step removed, with its text; of one no model may
    read, without it, its earlier history's texts erased too (nothing filters them once the
    memory is gone)."""
    before = write.content.pop(memory_id)
    if memory_id in write.unshown:
        await write.store.erase_history_of(write.app_id, [memory_id])
    await write.store.record_event(
        write.app_id, memory_id, "deleted", actor, write.source, reason=reason,
        before=None if memory_id in write.unshown else before, user_id=write.user_id,
    )


def _reason(decided: DecidedStep) -> str:
    """The step's reason for the history, without any secret the model may have written."""
    if decided.fallback_reason is None:
        return redact_text(decided.step.reason)
    why = decided.fallback_reason
    return redact_text(f"{decided.step.reason} (the model's decision was not applied: {why})")


def _outcome(app_id: str, decided: DecidedStep, target: int) -> CompactionOutcome:
    step = decided.step
    return CompactionOutcome(
        app_id,
        step.action,
        target,
        redact_text(step.reason),
        decided.decided_by,
        decided.fallback_reason,
        step.folded,
        decided.update,
        decided.fallback_cause,
        step.fifo,
    )
