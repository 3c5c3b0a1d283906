"""How many tokens a text takes, estimated on the safe side for any model whose tokenizer is
not at hand.

The weights are a measured upper bound: every text of the three shipped story sets (3,661 of
them, in 22 languages and their scripts, with code, numbers and emoji), and ids, hex and
base64, takes no more tokens with SmolLM2's tokenizer, an English-centred vocabulary that cuts
other scripts finer than a multilingual model's does (Llama 3, Qwen), than this says. English
runs near a quarter token a character with a modern tokenizer and is counted at 0.45 here
(about twice what it takes); a digit or a sign is a token of its own; a Chinese character or a
Hangul syllable is up to three bytes of a byte-level vocabulary. Being generous costs prompt
room (a long conversation is read in more parts), never a prompt cut by the server.
"""

from __future__ import annotations

from functools import cache, lru_cache

import regex as re

# Each kind of character and the tokens it may take, counted by runs (a run is one match,
# which keeps counting a long text fast).
_WEIGHTS = (
    (re.compile(r"[0-9]+"), 1.0),
    (re.compile(r"[!-/:-@\[-`{-~]+"), 1.0),
    (re.compile(r"[A-Za-z\s]+"), 0.45),
    (re.compile(r"[\u0080-\u024f]+"), 1.25),  # Latin with accents
    (re.compile(r"[\u0370-\u052f]+"), 1.5),  # Greek, Cyrillic
    (re.compile(r"[\u0590-\u07ff]+"), 1.75),  # Hebrew, Arabic, Syriac, Thaana
    (re.compile(r"[\u0900-\u0dff]+"), 2.25),  # the Indic scripts
    (re.compile(r"[\u0e00-\u0eff]+"), 2.0),  # Thai, Lao
)
# Anything else (CJK, Hangul, other scripts, symbols); beyond the Basic Multilingual Plane
# (emoji, rare characters), four.
_OTHER = 3.0


@cache
def _kinds_of_characters() -> tuple[dict[int, str], tuple[str, ...], tuple[frozenset[int], ...]]:
    """A translation of every character `_WEIGHTS` knows (the Basic Multilingual Plane holds
    them all) to a letter standing for the patterns it matches; those letters; and each one's
    patterns. A character no pattern matches stays as it is (no letter stands for it: every
    ASCII character matches one)."""
    every = "".join(map(chr, range(0x10000)))
    held_by: dict[int, set[int]] = {}
    for index, (pattern, _) in enumerate(_WEIGHTS):
        for run in pattern.finditer(every):
            for point in range(run.start(), run.end()):
                held_by.setdefault(point, set()).add(index)
    table: dict[int, str] = {}
    letters: dict[frozenset[int], str] = {}
    for point, held in sorted(held_by.items()):
        table[point] = letters.setdefault(frozenset(held), chr(ord("A") + len(letters)))
    return table, tuple(letters.values()), tuple(letters)

_ASTRAL_EXTRA = 1.0
# Letters that are not a word's: among digits (hex, ids, base64) a token each; in a run too
# long for a word, or with a capital inside one, nearly so. What a vocabulary of words cannot
# merge, a tokenizer cuts into bytes.
# A run of ASCII letters and digits from a word's start; it counts when it holds both.
_ALNUM_RUN = re.compile(r"\b[A-Za-z0-9]+")
# A run of ASCII letters; it is no word when too long for one, or with a capital inside.
_LETTERS = re.compile(r"[A-Za-z]+")
_CAPITALS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
# A chat message's own framing (its role and the template's markers), besides its text.
TOKENS_PER_MESSAGE = 4


@lru_cache(maxsize=16384)
def estimate_tokens(text: str) -> int:
    """The tokens `text` may take, on the safe side (the estimate is never below what the
    reference tokenizer counts)."""
    if not text:
        return 0
    # Each character as the letter of its kinds (`_KINDS`), counted at C speed.
    kind_of, letters, held_by_kind = _kinds_of_characters()
    kinds = text.translate(kind_of)
    by_kind = [kinds.count(letter) for letter in letters]
    counted, total = 0, 0.0
    for index, (_, weight) in enumerate(_WEIGHTS):
        found = sum(n for n, held in zip(by_kind, held_by_kind, strict=True) if index in held)
        counted += found
        total += found * weight
    astral = len(text.encode("utf-16-le")) // 2 - len(text)
    total += (len(text) - counted) * _OTHER + astral * _ASTRAL_EXTRA
    total += _odd_letters(text)
    return int(total) + 4


def _mixed(run: str) -> bool:
    return not run.isdigit() and not run.isalpha()


def _odd_letters(text: str) -> float:
    """What letters that are not a word's take beyond a word's letters."""
    extra = 0.0
    mixed = [run for run in _ALNUM_RUN.findall(text) if _mixed(run)] if (
        _DIGIT.search(text)) else []
    if mixed:
        extra += sum(len(_LETTER.findall(run)) for run in mixed) * 0.55
        text = _ALNUM_RUN.sub(lambda found: " " if _mixed(found[0]) else found[0], text)
    for run in _LETTERS.findall(text):
        if len(run) >= 15 or _capital_inside(run):
            extra += len(run) * 0.45
    return extra


def _capital_inside(run: str) -> bool:
    """Whether a capital follows a small letter in `run` (ASCII letters): past its leading
    capitals, a word's letters are all small."""
    rest = run.lstrip(_CAPITALS)
    return bool(rest) and not rest.islower()
