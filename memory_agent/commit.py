"""Applying one memory job's writes inside its transaction: the new memory, the compaction
steps, and a history event for every change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_agent.compaction import DecidedStep
from memory_agent.models import CompactionOutcome, Memory
from memory_agent.ports import SqlTransaction
from memory_agent.retention import NEW_MEMORY_ID
from memory_agent.store import EventSource, MemoryStore


@dataclass
class _AppState:
    """The app's memories as the steps change them, by id."""

    content: dict[int, str]
    metadata: dict[int, dict[str, Any]] = field(default_factory=dict)


async def apply_write(
    store: MemoryStore,
    tx: SqlTransaction,
    *,
    app_id: str,
    content: str,
    source_conversation_id: str,
    written_by: str,
    current: Sequence[Memory],
    steps: Sequence[DecidedStep],
    source: EventSource,
) -> tuple[Memory | None, list[CompactionOutcome]]:
    """Insert the new memory (unless a step deletes or folds it) and apply `steps` to
    `current`; returns the memory inserted and the steps as applied."""
    state = _AppState({m.id: m.content for m in current}, {m.id: m.metadata for m in current})
    memory: Memory | None = None
    if NEW_MEMORY_ID not in {decided.step.removed for decided in steps}:
        memory = await store.insert(
            app_id,
            content,
            created_at=source.at,
            source_conversation_id=source_conversation_id,
            metadata={"relatedConversations": [source_conversation_id]},
            tx=tx,
        )
        await store.record_event(
            tx, app_id, memory.id, "created", "job", source,
            reason=f"written from the conversation ({written_by})", after=content,
        )
    new_id = memory.id if memory else NEW_MEMORY_ID
    outcomes = []
    for decided in steps:
        apply = _delete if decided.step.action == "delete" else _edit
        outcomes.append(
            await apply(store, tx, app_id, decided, state, source, new_id, source_conversation_id)
        )
    return memory, outcomes


async def _delete(
    store: MemoryStore,
    tx: SqlTransaction,
    app_id: str,
    decided: DecidedStep,
    state: _AppState,
    source: EventSource,
    new_id: int,
    conversation_id: str,
) -> CompactionOutcome:
    target = new_id if decided.step.target == NEW_MEMORY_ID else decided.step.target
    if target != NEW_MEMORY_ID:  # the new memory, deleted before it was ever written
        await store.delete(app_id, target, tx=tx)
        await store.record_event(
            tx, app_id, target, "deleted", decided.decided_by, source,
            reason=_reason(decided), before=state.content.pop(target),
        )
    return _outcome(app_id, decided, target)


async def _edit(
    store: MemoryStore,
    tx: SqlTransaction,
    app_id: str,
    decided: DecidedStep,
    state: _AppState,
    source: EventSource,
    new_id: int,
    conversation_id: str,
) -> CompactionOutcome:
    step = decided.step
    target, folded, content = step.target, step.folded, step.new_content or ""
    related = list(state.metadata[target].get("relatedConversations", []))
    if folded is not None:
        folded_from = (
            [conversation_id]
            if folded == NEW_MEMORY_ID
            else state.metadata[folded].get("relatedConversations", [])
        )
        related += [c for c in folded_from if c not in related]
    metadata = {**state.metadata[target], "relatedConversations": related}
    await store.update_content(
        app_id, target, content, updated_at=source.at, metadata=metadata, tx=tx
    )
    await store.record_event(
        tx, app_id, target, "edited", decided.decided_by, source,
        reason=_reason(decided), before=state.content[target], after=content,
    )
    state.content[target], state.metadata[target] = content, metadata
    if folded is not None and folded != NEW_MEMORY_ID:
        await store.delete(app_id, folded, tx=tx)
        await store.record_event(
            tx, app_id, folded, "deleted", decided.decided_by, source,
            reason=f"folded into memory {target}: {step.reason}",
            before=state.content.pop(folded),
        )
    return _outcome(app_id, decided, target)


def _reason(decided: DecidedStep) -> str:
    if decided.fallback_reason is None:
        return decided.step.reason
    why = decided.fallback_reason
    return f"{decided.step.reason} (the model's decision was not applied: {why})"


def _outcome(app_id: str, decided: DecidedStep, target: int) -> CompactionOutcome:
    step = decided.step
    return CompactionOutcome(
        app_id,
        step.action,
        target,
        step.reason,
        decided.decided_by,
        decided.fallback_reason,
        step.folded,
        decided.update,
    )
