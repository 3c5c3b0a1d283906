"""Whether a model's sentence rests on something, by checks that hold in any language and script.

Nothing here knows a word of any language. A text is folded to what it says: Unicode's
compatibility forms (full-width letters and digits become plain ones), lower case, the digits
of every script as 0-9, and nothing but letters, marks and digits (no spaces, no punctuation).
Two checks compare folded texts with each other, as LangExtract aligns an extraction with its
source:

- `quote_found`: the words a model quotes are in the transcript (each part of a quote cut by
  an ellipsis on its own), as written or near-verbatim (`alignment`: a contraction written
  out, a filler word left out, a word in five swapped; every number as given). This grounds a
  memory sentence, whatever words the sentence itself uses: a translation, "15:00" for
  "3 pm", a date for "last Friday".
- `shares_enough`: enough of a text's character trigrams are in another text. This grounds a
  merged memory (an EDIT) in the two memories it merges, where there is no transcript.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import folded, words
from memory_agent.writers.model.alignment import aligns_with

# A quote shorter than this (folded: letters and digits only) grounds nothing, unless it is a
# whole turn ("Yes", "OK"): four characters are a word in a Latin script and a phrase in Chinese.
MIN_QUOTE_CHARS = 4
# The share of a merged sentence's trigrams that must be in the memories it merges: a merge
# reuses their words, reordered; an invented sentence shares few.
MIN_TRIGRAM_SHARE = 0.4
_ELLIPSIS = re.compile(r"\[\.\.\.\]|\(\.\.\.\)|\.\.\.+|…")
# The transcript's own labels, which a model may copy with a quote.
_LABEL = re.compile(r"^\s*(?:User|Assistant|Tool)\s*:\s*")


class Transcript:
    """A conversation's turns as the checks read them, each folded once (and split into
    words once, when a quote must be aligned): a memory's quotes all read the same turns."""

    def __init__(self, turns: Sequence[str]) -> None:
        self.turns = tuple(turns)
        self.folded = [folded(turn) for turn in self.turns]

    @functools.cached_property
    def words(self) -> list[list[str]]:
        return [words(turn) for turn in self.turns]


def quote_found(quote: str, turns: Transcript | Sequence[str]) -> str | None:
    """None when every part of `quote` (cut at ellipses) is in one of the conversation's
    `turns`, as written or near-verbatim; else why not. A part shorter than
    `MIN_QUOTE_CHARS` grounds nothing unless it is a whole turn ("Yes", "OK"), and a
    transcript label before a part ("User: ") is no part of what was said."""
    transcript = turns if isinstance(turns, Transcript) else Transcript(turns)
    in_turns = transcript.folded
    parts = [_LABEL.sub("", part) for part in _ELLIPSIS.split(quote)]
    pieces = [(part, folded(part)) for part in parts if folded(part)]
    if not pieces:
        return "it quotes nothing"
    for part, piece in pieces:
        if not any(piece in turn for turn in in_turns):
            if aligns_with(part, transcript.words):
                continue
            return f'its quote "{_shown(part)}" is not in the conversation'
        if len(piece) < MIN_QUOTE_CHARS and piece not in in_turns:
            return f'its quote "{_shown(part)}" is too short to show what it rests on'
    return None


def shares_enough(text: str, source: str, share: float = MIN_TRIGRAM_SHARE) -> bool:
    """At least `share` of `text`'s character trigrams (folded) are in `source`'s; a text too
    short for a trigram must be in `source` whole."""
    whole = folded(text)
    mine = _trigrams(whole)
    if not mine:
        return bool(whole) and whole in folded(source)
    theirs = _trigrams(folded(source))
    return len(mine & theirs) >= share * len(mine)


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


def _shown(part: str) -> str:
    text = " ".join(part.split())
    return text if len(text) <= 80 else text[:79] + "…"
