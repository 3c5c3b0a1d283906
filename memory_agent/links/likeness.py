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


class Likeness:
    """How alike the texts of a group are, two at a time: each text's trigrams, and their
    weights in the group, summed once for the whole group."""

    def __init__(self, texts: Mapping[int, str]) -> None:
        self._grams = {i: trigrams(text) for i, text in texts.items()}
        self._weight = weights(list(self._grams.values()))
        self._mass = {i: sum(self._weight[t] for t in g) for i, g in self._grams.items()}

    def share(self, one: int, other: int) -> float:
        """The weighted share of the lighter text's trigrams the other holds."""
        lighter = min(self._mass[one], self._mass[other])
        shared = self._grams[one] & self._grams[other]
        return sum(self._weight[t] for t in shared) / lighter if lighter else 0.0
