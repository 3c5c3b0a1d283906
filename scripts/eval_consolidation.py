"""`eval.py`'s consolidation figures: one pass over each app's space once its conversations
are written, as the service's worker runs it, and what it did to the memories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_agent import PAIRS_PER_SPACE, MemorySubAgent, PassFigures, SqlTransaction


async def consolidate(
    agent: MemorySubAgent, app_id: str, run: Any, passes: PassFigures
) -> None:
    """A consolidation pass over the app's spaces once its conversations are written, as
    the service's worker runs it; the memories after it in `run.consolidated`."""

    async def wanted(tx: SqlTransaction, spaces: object) -> bool:
        return True

    for group in await agent.consolidation_groups(app_id, None, lambda app: True):
        await agent.consolidate(group, passes, pairs_per_space=PAIRS_PER_SPACE, wanted=wanted)
    run.consolidated = [m.content for m in await agent.list_memories(app_id)]


def consolidation_figures(
    runs: Sequence[Any], passes: PassFigures, score: Any
) -> dict[str, Any]:
    """What one pass over each app's space did: pairs asked, changes, model calls (each per
    space too), recall after it beside before, and the key facts held by two memories of
    the same space (so given twice in one memory block) before and after; `score` is
    eval.py's, of the memories a run's function gives."""
    after = score(runs, lambda run: run.consolidated)
    spaces = max(passes.spaces, 1)
    return {
        "spaces": passes.spaces,
        "pairs_asked": passes.pairs_asked,
        "changes": passes.changes,
        "model_calls": passes.model_calls,
        "pairs_per_space": round(passes.pairs_asked / spaces, 2),
        "model_calls_per_space": round(passes.model_calls / spaces, 2),
        "memories_before": sum(len(run.final) for run in runs),
        "memories_after": sum(len(run.consolidated) for run in runs),
        "recall_after": after["recall"],
        "update_recall_after": after["update_recall"],
        "stale_rate_after": after["stale_rate"],
        "facts_twice_before": _held_twice(runs, lambda run: run.final),
        "facts_twice_after": _held_twice(runs, lambda run: run.consolidated),
    }


def _held_twice(runs: Sequence[Any], final_of: Any) -> int:
    """Key facts (not old values) that two or more memories of one space hold."""
    return sum(
        1
        for run in runs
        for fact in run.facts.values()
        if fact.kind != "superseded" and sum(fact.held_by(t) for t in final_of(run)) >= 2
    )
