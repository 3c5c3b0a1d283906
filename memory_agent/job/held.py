"""A profile write that would change a sensitive fact, held as the person's proposal
(`consent`): what it reads and writes, the decision it was given, and that decision read back
when the person accepts it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from memory_agent.consent.holding import Consent
from memory_agent.job.outcome import decision_fingerprint
from memory_agent.models import Memory
from memory_agent.storage.store import MemoryStore
from memory_agent.writers.steps import NEW_MEMORY_ID, DecidedStep, Step
from memory_agent.writers.written import WrittenMemory

if TYPE_CHECKING:
    from memory_agent.job.creation import MemoryCreationRequest


async def held_as_proposal(
    consent: Consent, store: MemoryStore, request: MemoryCreationRequest,
    written: WrittenMemory, current: Sequence[Memory], steps: Sequence[DecidedStep], *,
    kind: str, model: str | None,
) -> int | None:
    """The proposal filed for the profile write (the new fact and the steps that make room
    for it), when any text it writes, rewrites or removes speaks of a sensitive field; None
    when it needs no consent."""
    texts = {m.id: m.content for m in current}
    changed: list[str] = []
    writes: list[str | None] = [written.content]
    for decided in steps:
        step = decided.step
        for memory_id in (step.target, step.folded):
            if memory_id is not None and memory_id != NEW_MEMORY_ID and memory_id in texts:
                changed.append(texts[memory_id])
        writes.append(step.new_content)
    fields = consent.touched([*writes, *changed])
    if not fields:
        return None
    return await consent.propose(
        store, user_id=request.user_id, app_id=request.from_app or request.app_id,
        origin="memory", fields=fields, content=written.content, before=changed,
        change={
            "kind": kind, "source": written.source, "model": model,
            "steps": [asdict(decided) for decided in steps],
            "seen": _as_stored(decision_fingerprint(current)),
        },
        conversation_id=request.conversation_id, job_id=request.job_id,
    )


def decided_steps(change: dict[str, Any], current: Sequence[Memory]) -> list[DecidedStep] | None:
    """The proposal's decision, when the profile is still as it saw it; None when not."""
    if change.get("seen") != _as_stored(decision_fingerprint(current)):
        return None
    return [
        DecidedStep(**{**decided, "step": Step(**decided["step"])})
        for decided in change["steps"]
    ]


def _as_stored(value: object) -> object:
    """`value` as it reads back from the proposal's JSON (tuples as lists)."""
    return json.loads(json.dumps(value))
