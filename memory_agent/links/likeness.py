"""How much two memories' texts share, without a model and in any language or script: their
character trigrams (folded: case, compatibility forms, digits of every script and punctuation
aside), spaces between words or none; bigrams where most characters are wide (Unicode's East
Asian width: Chinese, Japanese and Korean, where a word is often two characters). Within a
group of memories, a trigram weighs less the more of them hold it ("the user" is in most of
them)."""

from __future__ import annotations

import functools
import math
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence

from memory_agent.core.unicode_forms import folded


@functools.lru_cache(maxsize=4096)
def trigrams(text: str) -> frozenset[str]:
    """The text's folded trigrams, or bigrams where most characters are wide (cached: a
    space's memories are read again at each write)."""
    flat = folded(text)
    wide = sum(unicodedata.east_asian_width(char) in "WF" for char in flat)
    size = 2 if wide * 2 > len(flat) else 3
    return frozenset(flat[i : i + size] for i in range(max(len(flat) - size + 1, 1)))


def weights(grams: Sequence[frozenset[str]]) -> dict[str, float]:
    """Each trigram's weight in a group of texts: log(1 + texts / texts holding it)."""
    held = Counter(t for one in grams for t in one)
    return {t: math.log(1 + len(grams) / n) for t, n in held.items()}


def share(
    one: frozenset[str], other: frozenset[str], weight: Mapping[str, float] | None = None
) -> float:
    """The weighted share of the lighter text's trigrams the other holds (each weighs 1 when
    no `weight` is given)."""
    if weight is None:
        shorter = min(len(one), len(other))
        return len(one & other) / shorter if shorter else 0.0
    lighter = min(sum(weight[t] for t in one), sum(weight[t] for t in other))
    return sum(weight[t] for t in one & other) / lighter if lighter else 0.0
