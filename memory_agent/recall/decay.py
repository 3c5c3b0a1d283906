"""How much of a memory a turn's block shows: in full, as its digest or as a stub (the seed's
decay table), by how often the conversation's turns were given it before.

| given before, in this conversation | shown as                                           |
|------------------------------------|----------------------------------------------------|
| 0 to 2 times (its 1st to 3rd)      | in full                                            |
| 3 to 9 times (its 4th to 10th)     | its digest, and that `recall` gives the rest       |
| 10 times or more                   | a stub: its title, and that `recall` gives it whole |

A memory that came to the conversation unseen for a week (given to no turn anywhere, nor
written, in 7 days) decays twice as fast: its count weighs double. Never collapsed: a pinned
memory (even one tagged irrelevant), and those the turn's recent messages are most about (a
relevance at least 0.8 of the turn's best: what the user asks after is shown whole). A memory
tagged irrelevant is a stub at once; tagging it relevant lifts that and starts its counts
again (`MemoryStore.restart_decay`).

A memory's digest is its first sentence (both writers put what a memory is about first), its
title the digest's first words. They are read from its text whenever it is shown, so an edit,
a merge or an import never leaves a stale one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from memory_agent.core.ports import format_timestamp, parse_timestamp
from memory_agent.core.sentences import sentences_of
from memory_agent.models import TAGGED, Memory

View = Literal["full", "digest", "stub"]

# Injections before this one that are still shown in full, and then as a digest.
FULL_BEFORE = 3
DIGEST_BEFORE = 10
# Unseen this long, a memory's count in a conversation weighs double.
STALE_AFTER = timedelta(days=7)
# A relevance this near the turn's best keeps a memory whole.
KEPT_WHOLE_RELEVANCE = 0.8
DIGEST_CHARS = 200
TITLE_WORDS = 6
TITLE_CHARS = 48


@dataclass(frozen=True)
class Given:
    """How often a conversation's turns were given a memory (since its count last started)
    and whether it came to the conversation unseen for a week."""

    times: int
    stale: bool = False


def stale_before(now: str) -> str:
    """The stored time before which a memory's last use makes it stale."""
    return format_timestamp(parse_timestamp(now) - STALE_AFTER)


def view_of(memory: Memory, given: Given | None, *, kept_whole: bool) -> View:
    """How the block shows `memory`, given before as `given` says (None: never)."""
    if memory.pinned:
        return "full"
    if memory.metadata.get(TAGGED) == "irrelevant":
        return "stub"
    if kept_whole or given is None:
        return "full"
    times = given.times * (2 if given.stale else 1)
    if times < FULL_BEFORE:
        return "full"
    return "digest" if times < DIGEST_BEFORE else "stub"


def views_of(
    memories: list[Memory], given: Mapping[int, Given], relevance: Mapping[int, float]
) -> dict[int, View]:
    """Each memory's view this turn (`relevance`: how much the turn's messages are about it)."""
    best = max(relevance.values(), default=0.0)
    return {
        memory.id: view_of(
            memory, given.get(memory.id),
            kept_whole=best > 0 and relevance.get(memory.id, 0.0) >= KEPT_WHOLE_RELEVANCE * best,
        )
        for memory in memories
    }


def digest_of(content: str) -> str:
    """The memory's first sentence, within `DIGEST_CHARS` (cut at a word, marked "…")."""
    sentences = sentences_of(" ".join(content.split()))
    first = sentences[0] if sentences else content.strip()
    return _within(first, DIGEST_CHARS)


def title_of(content: str) -> str:
    """The first words of the memory's digest, its end mark dropped."""
    digest = digest_of(content).rstrip(".!?。！？…")
    words = digest.split()
    title = " ".join(words[:TITLE_WORDS])
    if len(words) > TITLE_WORDS:
        title += "…"
    return _within(title, TITLE_CHARS)


def _within(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    cut = text[: most - 1]
    # At a word when there are words (a text of an unspaced script is cut where it must be).
    space = cut.rfind(" ")
    return (cut[:space] if space > most // 2 else cut).rstrip(" ,;:") + "…"
