"""Which memories a turn's memory block shows when not all of them fit its budget.

Every memory of the conversation's spaces is shown while they fit (ten memories of ordinary
length do). Beyond the block's tokens or its count, the memories that share the most with the
turn's recent messages go first: words, names and values, each weighing more the fewer of the
candidates hold it (a word every memory holds, "user" or "the", weighs nothing, whatever the
language); then pinned ones, then the more important, then the more used (`usage`), then
the newer. Right after the memories the turn shares something with come up to
`RELATED_IN_BLOCK` memories they are linked to (`memory_agent.links`: the same space, the
strongest link first), before the rest: what goes with a memory the turn is about is likelier
to matter than a memory it shares nothing with. The block keeps its order (profile, the user's
own, the app's shared; each newest first), so a turn changes what is shown, not how it reads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memory_agent.core.unicode_forms import words
from memory_agent.models import Memory

# Linked memories the block adds after those the turn shares something with.
RELATED_IN_BLOCK = 2


@dataclass(frozen=True)
class BlockBudget:
    """What a memory block may take: tokens (as the model counts them), and at most `count`
    memories when given."""

    tokens: int
    count: int | None = None


def relevances(memories: Sequence[Memory], recent: str) -> dict[int, float]:
    """How much `recent` is about each memory: the words they share, each weighing more the
    fewer of the memories hold it."""
    asked = set(words(recent))
    held = {memory.id: set(words(memory.content)) & asked for memory in memories}
    holders = Counter(word for shared in held.values() for word in shared)
    total = len(memories)
    return {
        memory_id: round(sum(math.log(total / holders[word]) for word in shared), 6)
        for memory_id, shared in held.items()
    }


def ranked(
    memories: Sequence[Memory], recent: str, relevance: dict[int, float] | None = None
) -> list[Memory]:
    """`memories`, those that share the most with `recent` first (`relevance`, when the
    caller has it), then pinned, more important, more used (cited by more replies, then given
    to more turns), newer."""
    scores = relevance if relevance is not None else relevances(memories, recent)
    newest_first = sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True)
    return sorted(newest_first, key=lambda m: (
        -scores[m.id], not m.pinned, -m.importance, -m.citation_count, -m.access_count,
    ))


def chosen(
    sections: Sequence[Sequence[Memory]],
    recent: str,
    budget: BlockBudget,
    line_tokens: Callable[[Memory], int],
    frame_tokens: int,
    relevance: dict[int, float] | None = None,
    related: Mapping[int, Sequence[int]] | None = None,
) -> list[list[Memory]]:
    """The memories of each section the block shows, in the section's order: all of them
    when they fit `budget` (`frame_tokens` for the block's own text, `line_tokens` for each
    memory's line), else the best ranked for `recent` that do, with the memories `related`
    names (each memory's links, strongest first) to those `recent` shares something with."""
    every = [memory for section in sections for memory in section]
    left = budget.tokens - frame_tokens
    costs = {memory.id: line_tokens(memory) for memory in every}
    if (budget.count is None or len(every) <= budget.count) and sum(costs.values()) <= left:
        return [list(section) for section in sections]
    kept: set[int] = set()
    scores = relevance if relevance is not None else relevances(every, recent)
    for memory in _with_related(ranked(every, recent, scores), scores, related or {}):
        if budget.count is not None and len(kept) >= budget.count:
            break
        if costs[memory.id] <= left:
            kept.add(memory.id)
            left -= costs[memory.id]
    return [[memory for memory in section if memory.id in kept] for section in sections]


def _with_related(
    order: list[Memory], scores: Mapping[int, float], related: Mapping[int, Sequence[int]]
) -> list[Memory]:
    """`order` with up to `RELATED_IN_BLOCK` memories linked to its relevant ones (score
    above 0) moved to follow them, those of the most relevant first."""
    relevant = [memory for memory in order if scores[memory.id] > 0]
    by_id = {memory.id: memory for memory in order}
    placed = {memory.id for memory in relevant}
    linked: list[Memory] = []
    for memory in relevant:
        for other in related.get(memory.id, ()):
            if len(linked) == RELATED_IN_BLOCK:
                break
            if other in by_id and other not in placed:
                linked.append(by_id[other])
                placed.add(other)
    return [*relevant, *linked, *(memory for memory in order if memory.id not in placed)]
