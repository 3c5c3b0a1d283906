"""A profile write that would change a sensitive fact, held as the person's proposal
(`consent`): what it reads and writes, the decision it was given, and that decision read back
when the person accepts it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, fields
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
    changed = changed_by(current, steps)
    writes = [written.content, *(decided.step.new_content for decided in steps)]
    touched = consent.touched([*writes, *(m.content for m in changed)])
    if not touched:
        return None
    return await consent.propose(
        store, user_id=request.user_id, app_id=request.from_app or request.app_id,
        origin="memory", fields=touched, content=written.content,
        before=[shown_as(m) for m in changed],
        change={
            "kind": kind, "source": written.source, "model": model,
            "steps": [asdict(decided) for decided in steps],
            "seen": _as_stored(decision_fingerprint(current)),
        },
        conversation_id=request.conversation_id, job_id=request.job_id,
    )


def shown_as(memory: Memory) -> str:
    """A changed memory as its proposal shows it: a memory no model may read is not shown
    to an app relaying the answer either."""
    return memory.content if memory.shown_to_models and not memory.private else (
        "(a private memory)"
    )


def changed_by(current: Sequence[Memory], steps: Sequence[DecidedStep]) -> list[Memory]:
    """The profile's memories the steps rewrite or remove."""
    ids = {memory_id for decided in steps
           for memory_id in (decided.step.target, decided.step.folded)
           if memory_id is not None and memory_id != NEW_MEMORY_ID}
    return [m for m in current if m.id in ids]


def decided_steps(change: dict[str, Any], current: Sequence[Memory]) -> list[DecidedStep] | None:
    """The proposal's decision, when the profile is still as it saw it; None when not."""
    if change.get("seen") != _as_stored(decision_fingerprint(current)):
        return None
    return [
        DecidedStep(**{**_known(DecidedStep, decided),
                       "step": Step(**_known(Step, decided["step"]))})
        for decided in change["steps"]
    ]


def _known(kind: type, stored: dict[str, Any]) -> dict[str, Any]:
    """The stored fields `kind` still has (a proposal may outlive a field)."""
    names = {f.name for f in fields(kind)}
    return {name: value for name, value in stored.items() if name in names}


def _as_stored(value: object) -> object:
    """`value` as it reads back from the proposal's JSON (tuples as lists)."""
    return json.loads(json.dumps(value))
