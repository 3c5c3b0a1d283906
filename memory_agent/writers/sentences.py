"""Sentences as both writers cut and join them, in any script: by their end marks alone."""

from __future__ import annotations

import unicodedata

import regex as re

from memory_agent.core.unicode_forms import folded

# Where a sentence ends in any script: after . ! ? and their full-width, Devanagari, Arabic
# and Ethiopic forms, before a space or the end; after 。！？ even without one.
_SENTENCE_END = re.compile(r"(?<=[.!?।॥؟።])\s+|(?<=[。！？])[」』）\"”]*\s*")


def sentences_of(text: str) -> list[str]:
    """`text` cut into sentences by their end marks alone (no abbreviation is known here: "Dr."
    ends one, which only makes the pieces a check reads smaller)."""
    return [piece for piece in (p.strip() for p in _SENTENCE_END.split(text)) if piece]


def ends_as_a_sentence(text: str) -> str:
    """`text` on one line, with a full stop added when it ends in no punctuation."""
    text = " ".join(text.split())
    if text and not unicodedata.category(text[-1]).startswith("P"):
        text += "."
    return text


def joined_as_clauses(sentences: list[str]) -> str:
    """The sentences as one, each but the last without its end mark, joined by "; "."""
    clauses = [s.rstrip(".!?。！？।॥؟።… ") for s in sentences[:-1]]
    return "; ".join([c for c in clauses if folded(c)] + [sentences[-1]])
