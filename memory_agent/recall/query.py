"""One query for agents: the memories of a conversation's spaces that answer a question, each
scored from 0 to 1, the best first, within `top_k` and a token budget.

A memory's score is the share of the query's words it holds, each word weighing more the
fewer of the candidates hold it (a word every candidate holds, "user" or "the", weighs
little; a word no memory holds says nothing about any of them and is left out of the sum).
A word is held as written or inflected at its end ("meeting" and "meetings"): both have at
least four letters and differ by at most three at the end. A lone Latin letter ("s" of
"Ana's") is not a word here. No language's word list is read,
and a script written without spaces is compared character by character (`words`).

The candidates are every live, injectable memory of the spaces when they hold at most
`SCAN_LIMIT` (a space holds ten by default), else those the engine's full-text search finds
for the query's words, the `POOL` best. Private memories are never candidates: a query's
answer is for a model, as the memory block is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from memory_agent.core.errors import InvalidSearchQuery
from memory_agent.core.unicode_forms import words
from memory_agent.models import MAX_IMPORTANCE, MIN_IMPORTANCE, Memory
from memory_agent.storage.search import search_terms

# Spaces holding at most this many live memories are read whole and scored here; beyond it,
# the engine's full-text search picks the candidates.
SCAN_LIMIT = 500
# The engine's best matches scored here; more when an importance range must be applied to
# them (the importance lives in each memory's metadata).
POOL = 200
POOL_WITH_IMPORTANCE = 1000
MAX_TOP_K = 100
# The smallest budget that holds a short memory's bullet.
MIN_BUDGET_TOKENS = 16
MAX_BUDGET_TOKENS = 100_000
_MIN_STEM = 4
_MAX_ENDING = 3

Shape = Literal["bullets", "full"]


@dataclass(frozen=True)
class MemoryQuery:
    """What an agent asks for (`POST /apps/{id}/memories/query`, the MCP tool `query`)."""

    text: str
    top_k: int = 5
    threshold: float = 0.0
    budget_tokens: int = 2000
    shape: Shape = "bullets"
    pinned: bool | None = None
    importance_min: int = MIN_IMPORTANCE
    importance_max: int = MAX_IMPORTANCE
    # Stored times (`given_timestamp`), compared with each memory's `updated_at`.
    updated_after: str | None = None
    updated_before: str | None = None
    # The kinds it may return (the categories asked for, within what the reader may read);
    # None: every kind.
    kinds: frozenset[str] | None = None

    def __post_init__(self) -> None:
        search_terms(self.text)  # words to look for, within MAX_QUERY_CHARS
        for problem in _problems(self):
            raise InvalidSearchQuery(problem)

    @property
    def terms(self) -> list[str]:
        """The words the engine's full-text search looks for."""
        return search_terms(self.text)

    @property
    def importance_range(self) -> bool:
        """Whether the query narrows the importance scale."""
        return (self.importance_min, self.importance_max) != (MIN_IMPORTANCE, MAX_IMPORTANCE)


def _problems(query: MemoryQuery) -> list[str]:
    problems = []
    if not 1 <= query.top_k <= MAX_TOP_K:
        problems.append(f"topK: from 1 to {MAX_TOP_K}")
    if not 0.0 <= query.threshold <= 1.0:
        problems.append("threshold: from 0 to 1")
    if not MIN_BUDGET_TOKENS <= query.budget_tokens <= MAX_BUDGET_TOKENS:
        problems.append(
            f"budgetTokens: from {MIN_BUDGET_TOKENS} (a short memory's bullet) to"
            f" {MAX_BUDGET_TOKENS}"
        )
    for name, value in (("importanceMin", query.importance_min),
                        ("importanceMax", query.importance_max)):
        if not MIN_IMPORTANCE <= value <= MAX_IMPORTANCE:
            problems.append(f"filters.{name}: from {MIN_IMPORTANCE} to {MAX_IMPORTANCE}")
    if query.importance_min > query.importance_max:
        problems.append("filters.importanceMin: above importanceMax")
    if query.updated_after and query.updated_before and (
        query.updated_after >= query.updated_before
    ):
        problems.append("filters.updatedAfter: not before updatedBefore")
    return problems


@dataclass(frozen=True)
class QueryHit:
    memory: Memory
    score: float


@dataclass(frozen=True)
class QueryAnswer:
    hits: list[QueryHit]
    # The estimated tokens of the hits as given (`cost`).
    tokens: int
    # Memories at or above the threshold left out by `top_k` or the budget.
    omitted: int


def answer(
    candidates: Sequence[Memory], query: MemoryQuery, cost: Callable[[Memory], int]
) -> QueryAnswer:
    """The candidates at or above the query's threshold, the best first (then pinned, more
    important, newer), as many as `top_k` and the budget (`cost` of each) hold; of the kinds
    it may return only (the others weigh nothing in the scores either)."""
    if query.kinds is not None:
        candidates = [memory for memory in candidates if memory.kind in query.kinds]
    eligible = [
        (memory, score)
        for memory, score in scored(candidates, query.text)
        if score > 0 and score >= query.threshold
        and query.importance_min <= memory.importance <= query.importance_max
    ]
    hits: list[QueryHit] = []
    left, spent = query.budget_tokens, 0
    for memory, score in eligible:
        if len(hits) == query.top_k:
            break
        tokens = cost(memory)
        if tokens <= left:
            hits.append(QueryHit(memory, score))
            left -= tokens
            spent += tokens
    return QueryAnswer(hits, spent, len(eligible) - len(hits))


def scored(memories: Sequence[Memory], query: str) -> list[tuple[Memory, float]]:
    """Each memory with its score for `query` (0 to 1, rounded to three places), the best
    first, then pinned, more important, newer."""
    asked = _Asked(words(query))
    held = {memory.id: asked.held_in(memory.content) for memory in memories}
    holders = Counter(word for found in held.values() for word in found)
    total = len(memories)
    # A word no candidate holds tells none of them apart: left out of every memory's share.
    weight = {word: math.log(1 + total / holders[word]) for word in holders}
    whole = sum(weight.values())

    def score(memory: Memory) -> float:
        return round(sum(weight[word] for word in held[memory.id]) / whole, 3) if whole else 0.0

    newest_first = sorted(memories, key=lambda m: (m.updated_at, m.id), reverse=True)
    return sorted(
        ((memory, score(memory)) for memory in newest_first),
        key=lambda pair: (-pair[1], not pair[0].pinned, -pair[0].importance),
    )


class _Asked:
    """A query's words, and the shorter forms of each a memory may hold it by."""

    def __init__(self, asked: Sequence[str]) -> None:
        # A lone Latin letter ("s" of "Ana's", "a", "I") tells nothing; a digit does, and so
        # does a character of a script written without spaces, each of which is a word.
        self.words = {word for word in asked if len(word) > 1 or word.isdigit()
                      or not word.isascii()}
        # Each word and its forms cut by one to three letters at the end (never below four):
        # a memory word equal to one of them holds that word.
        self.forms: dict[str, set[str]] = {}
        for word in self.words:
            for form in (word, *_shorter_forms(word)):
                self.forms.setdefault(form, set()).add(word)

    def held_in(self, text: str) -> set[str]:
        """The asked words `text` holds, as written or inflected at the end ("meeting",
        "meetings"): the shorter has four letters or more, the longer at most three more."""
        found: set[str] = set()
        for word in set(words(text)):
            found |= self.forms.get(word, set())
            found.update(form for form in _shorter_forms(word) if form in self.words)
        return found


def _shorter_forms(word: str) -> list[str]:
    return [word[:end] for end in range(max(_MIN_STEM, len(word) - _MAX_ENDING), len(word))]
