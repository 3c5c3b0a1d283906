"""The links a memory is given when it is written, merged or consolidated: to the memories of
its space it shares the most with (`likeness`, weighed within the space), at least `MIN_LINK`,
at most `MAX_LINKS`, the strongest first; the strength is that share (0-1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_agent.links.likeness import Likeness
from memory_agent.storage.store import MemoryStore

# A memory linked to: every linked pair shares at least this much (two memories about one
# thing, "the user's partner Sam" and "Sam's birthday is 3 May", share about 0.3).
MIN_LINK = 0.3
MAX_LINKS = 3
RELATED = "related"


def links_for(memory_id: int, space: Mapping[int, str]) -> list[tuple[int, float]]:
    """The memories of `space` (id: text, `memory_id`'s among them) the memory links to, with
    each link's strength."""
    if memory_id not in space or len(space) < 2:
        return []
    likeness = Likeness(space)
    scored = [(round(likeness.share(memory_id, i), 4), i) for i in space if i != memory_id]
    scored.sort(reverse=True)
    return [(i, strength) for strength, i in scored[:MAX_LINKS] if strength >= MIN_LINK]


async def link_in_space(
    store: MemoryStore, memory_ids: Sequence[int], space: Mapping[int, str], at: str
) -> None:
    """Inside the write's transaction: link each of `memory_ids` to the memories of `space`
    (id: text, as the write leaves it) it shares most with."""
    for memory_id in dict.fromkeys(memory_ids):
        await store.link(memory_id, links_for(memory_id, space), RELATED, at)
