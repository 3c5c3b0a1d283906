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

from memory_agent.core import patterns as re

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
# Runs that are no word's are found by what marks them (a digit beside a letter, a capital
# after a small letter, fifteen letters in a row) in the text's shape: each ASCII letter as
# "a" (small) or "A" (capital), each digit as "0", any other ASCII character as a space.
# Searching the shape for those marks runs at `str.find`'s speed; the runs they mark are few.
_SHAPE = {
    **{point: " " for point in range(128)},
    **{ord(letter): "a" for letter in "abcdefghijklmnopqrstuvwxyz"},
    **{ord(letter): "A" for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
    **{ord(digit): "0" for digit in "0123456789"},
}
_LONG_RUN = "a" * 15
_WORD_CHARACTER = re.compile(r"\w")
_DIGITS = "0123456789"
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


def _odd_letters(text: str) -> float:
    """What letters that are not a word's take beyond a word's letters: those of a run of
    ASCII letters and digits from a word's start that holds both (a token each, nearly), then
    those of a run of ASCII letters too long for a word or with a capital after a small
    letter (a run within the first kind is counted there only)."""
    shape = text.translate(_SHAPE)
    extra = 0.0
    mixed: list[tuple[int, int]] = []
    if "0" in shape:
        marks = sorted({*_found(shape, "a0"), *_found(shape, "A0"), *_found(shape, "0a"),
                        *_found(shape, "0A")})
        mixed = [run for run in _widened(shape, marks, "aA0") if _starts_a_word(text, run[0])]
        letters = sum(shape.count("a", start, end) + shape.count("A", start, end)
                      for start, end in mixed)
        extra += letters * 0.55
    cased = shape.replace("A", "a")
    odd = set(_widened(shape, _found(shape, "aA"), "aA"))
    odd.update(_widened(cased, _found(cased, _LONG_RUN), "a"))
    within = {start for run in mixed for start in range(*run)}
    for start, end in sorted(odd):
        if start not in within:
            extra += (end - start) * 0.45
    return extra


def _found(shape: str, mark: str) -> list[int]:
    """Where `mark` starts in `shape`, each place once."""
    places, at = [], shape.find(mark)
    while at != -1:
        places.append(at)
        at = shape.find(mark, at + 1)
    return places


def _widened(shape: str, marks: list[int], kinds: str) -> list[tuple[int, int]]:
    """The whole runs of characters of `kinds` in `shape` that hold the marks (in order, each
    run once)."""
    runs: list[tuple[int, int]] = []
    for mark in marks:
        if runs and mark < runs[-1][1]:
            continue  # within the run just found
        start, end = mark, mark + 1
        while start and shape[start - 1] in kinds:
            start -= 1
        while end < len(shape) and shape[end] in kinds:
            end += 1
        runs.append((start, end))
    return runs


@lru_cache(maxsize=4096)
def _is_word_character(character: str) -> bool:
    return _WORD_CHARACTER.fullmatch(character) is not None


def _starts_a_word(text: str, start: int) -> bool:
    """Whether a word starts at `start`, as `regex` reads a word (`\\b`)."""
    return start == 0 or not _is_word_character(text[start - 1])
