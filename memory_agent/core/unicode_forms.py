"""The one Unicode form every reader of a text here works on, and its words as any script
writes them; no language's word list."""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from memory_agent.core import patterns as re

# A word: what a script writes between spaces; each character of a script written without
# them (Chinese, Japanese, Thai and their neighbours) is a word of its own, and never part of
# another word (Japanese's long-vowel mark "ー" belongs to no script, and would otherwise
# start a run that swallows the characters after it).
_UNSPACED = (
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}\u30fc]"
)
_WORD = re.compile(rf"{_UNSPACED}|(?:(?!{_UNSPACED})[\p{{L}}\p{{M}}\p{{N}}])+")


# Read again and again (each memory against each other one): computed once per text.
@lru_cache(maxsize=8192)
def normalise_text(text: str) -> str:
    """NFKC, invisible format characters removed: what every check here reads."""
    if text.isascii():
        return text  # NFKC leaves ASCII alone, and every format character lies beyond it
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


# What `folded` drops from an ASCII text.
_NOT_KEPT_ASCII = re.compile(r"[^a-z0-9]+")


# Texts up to this long (a memory, a word, a sentence) are folded once and kept, the least
# recently used 8,192 of them (a few MB): the same memories are compared again and again (a
# pass's pairs, a turn's selection, a quote's grounding). A transcript is longer, and is not
# kept.
_KEPT_FOLDED_CHARS = 1000


def folded(text: str) -> str:
    """`text` as the checks compare it: NFKC, case-folded, every script's digits as 0-9, and
    only letters, marks and digits."""
    return _folded_kept(text) if len(text) <= _KEPT_FOLDED_CHARS else _fold(text)


@lru_cache(maxsize=8192)
def _folded_kept(text: str) -> str:
    return _fold(text)


def _fold(text: str) -> str:
    if text.isascii():
        # NFKC leaves ASCII alone, case-folding lowers it, and its letters and digits are
        # a-z and 0-9: one pass in C.
        return _NOT_KEPT_ASCII.sub("", text.lower())
    kept: list[str] = []
    # Case-folding writes "İ" as "i" and a combining dot above: the dot goes, so that
    # "İstanbul" and "istanbul" read alike. Each character's category is the interpreter's
    # own (`unicodedata`), whatever Unicode version the `regex` module knows.
    for char in unicodedata.normalize("NFKC", text).casefold().replace("\u0307", ""):
        category = unicodedata.category(char)
        if category == "Nd":
            kept.append(str(unicodedata.digit(char)))
        elif category[0] in "LMN":
            kept.append(char)
    return "".join(kept)


def words(text: str) -> list[str]:
    """`text`'s words, folded (case, compatibility forms and every script's digits aside); no
    language's word list is read."""
    return [word for word in (folded(w) for w in _WORD.findall(text)) if word]
