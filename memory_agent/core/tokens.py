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

from functools import lru_cache

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
_ASTRAL = re.compile(r"[\U00010000-\U0010ffff]")
_ASTRAL_EXTRA = 1.0
# Letters that are not a word's: among digits (hex, ids, base64) a token each; in a run too
# long for a word, or with a capital inside one, nearly so. What a vocabulary of words cannot
# merge, a tokenizer cuts into bytes.
_WITH_DIGITS = re.compile(r"\b(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]+")
_NOT_A_WORD = re.compile(r"[A-Za-z]{15,}|[A-Za-z]*[a-z][A-Z][A-Za-z]*")
# What every such run holds: checked first, since most texts have none.
_NOT_A_WORD_SIGN = re.compile(r"[A-Za-z]{15}|[a-z][A-Z]")
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
    counted, total = 0, 0.0
    for pattern, weight in _WEIGHTS:
        found = sum(map(len, pattern.findall(text)))
        counted += found
        total += found * weight
    total += (len(text) - counted) * _OTHER + len(_ASTRAL.findall(text)) * _ASTRAL_EXTRA
    total += _odd_letters(text)
    return int(total) + 4


def _odd_letters(text: str) -> float:
    """What letters that are not a word's take beyond a word's letters."""
    extra = 0.0
    if _DIGIT.search(text):
        for run in _WITH_DIGITS.findall(text):
            extra += len(_LETTER.findall(run)) * 0.55
        text = _WITH_DIGITS.sub(" ", text)
    if _NOT_A_WORD_SIGN.search(text):
        for run in _NOT_A_WORD.findall(text):
            extra += len(run) * 0.45
    return extra
