"""A quote aligned with a turn near-verbatim, as models copy the words they rest on.

Asked to copy a conversation's words exactly, models still write them near-verbatim: a
contraction written out or in ("I am" for "I'm"), a filler word or an article added or left
out, now and then a word swapped ("named" for "called"). A quote stands when its words are
found in one turn in order (most of them, within a stretch of the turn that is mostly them),
and every number and every name (a word written with a capital past the quote's first) it
gives is in that stretch as given. Nothing here knows a word of any
language: words are what a script writes between spaces, and each character of a script
written without spaces (Chinese, Japanese, Thai) is a word of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import words

# A run of letters, marks and digits, as written (its case kept).
_RUN = re.compile(r"[\p{L}\p{M}\p{N}]+")

# A quote of fewer words is found as written or not at all: three words near-verbatim are a
# phrase; two are anyone's.
MIN_WORDS = 3
# The share of the quote's words found in the turn, in order (one in five swapped, and a
# contraction written out, still hold).
MIN_SHARE = 0.7
# The share of the turn's stretch that is the quote's words (a filler word or two between
# them, not a sentence).
MIN_DENSITY = 0.6


def aligns_with(quote: str, turns: Sequence[list[str]]) -> bool:
    """Whether `quote` aligns near-verbatim with one of `turns`, each given as its `words`."""
    mine = words(quote)
    if len(mine) < MIN_WORDS:
        return False
    values = {word for word in mine if _is_number(word)} | _names(quote)
    return any(_aligns(mine, turn, values) for turn in turns)


def _names(quote: str) -> set[str]:
    """The words a quote writes with a capital letter past its first word (names, as scripts
    with capitals write them): a name swapped is another fact, never a small difference."""
    raw = _RUN.findall(quote)
    return {word for token in raw[1:] if any(char.isupper() for char in token)
            for word in words(token)}


def _aligns(quote: list[str], turn: list[str], values: set[str]) -> bool:
    if not turn:
        return False
    matcher = SequenceMatcher(None, quote, turn, autojunk=False)
    blocks = [block for block in matcher.get_matching_blocks() if block.size]
    best: tuple[int, int, int] | None = None  # words matched, the stretch's start and end
    for first in range(len(blocks)):
        matched = 0
        for last in range(first, len(blocks)):
            matched += blocks[last].size
            start, end = blocks[first].b, blocks[last].b + blocks[last].size
            if matched >= MIN_DENSITY * (end - start) and (best is None or matched > best[0]):
                best = (matched, start, end)
    if best is None:
        return False
    matched, start, end = best
    if matched < MIN_WORDS or matched < MIN_SHARE * len(quote):
        return False
    # Every number and name of the quote is in the stretch as given.
    return values <= set(turn[start:end])


def _is_number(word: str) -> bool:
    return any(char.isdigit() for char in word)
