"""The extractive writer's answer to the consolidation question (`writers.pairs`), by its
retention policy's rules and no model call: a memory whose facts the other repeats goes into
it (a merge, in one space); what the newer memory gives newer values of is retired from the
older (an update, `retention.refresh`); anything else is kept."""

from __future__ import annotations

from memory_agent.models import Memory
from memory_agent.writers.extractive import retention
from memory_agent.writers.pairs import PairVerdict, keep
from memory_agent.writers.steps import Candidate


def judge(older: Memory, newer: Memory, *, same_space: bool) -> PairVerdict:
    if same_space and older.kind == newer.kind and older.expires_at == newer.expires_at:
        # The one that holds the other's every fact stays, as the older memory's text.
        if retention.repeats(older.content, newer.content):
            return PairVerdict("merge", f"memory {newer.id} repeats every fact of it",
                               "policy", newer.content)
        if retention.repeats(newer.content, older.content):
            return PairVerdict("merge", f"it repeats every fact of memory {newer.id}",
                               "policy", older.content)
    steps = retention.refresh([_candidate(older), _candidate(newer)])
    for step in steps:
        if step.target == older.id:
            return PairVerdict("update", step.reason, "policy",
                               step.new_content if step.action == "edit" else None)
    return keep("neither repeats nor updates the other", "policy")


def _candidate(memory: Memory) -> Candidate:
    return Candidate(memory.id, memory.content, memory.importance, memory.private,
                     memory.created_at, memory.citation_count, memory.access_count,
                     memory.sensitivity, memory.kind)
