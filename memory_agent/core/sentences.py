"""Sentences as the writers cut and join them and recall digests them, in any script: by their
end marks alone."""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import folded

# Where a sentence ends: after . ! or ? and the quotes or brackets that close with it, before
# white space; at a line break. `kept_together` (a writer's lookbehinds: titles, initials) goes
# before it, and a full stop it names ends nothing.
_END = r"(?<=[.!?])([\"'”’)\]»]*)\s+|\n+"
# Other scripts' sentence ends, which no space need follow: the CJK full stop, the Devanagari
# danda, the Arabic question mark, the Urdu full stop, the Ethiopic and Myanmar full stops; and
# "!" or "?" (NFKC makes "！？" of them) right before a CJK character. The mark and its closers
# are captured, and stay with the sentence they end.
_OTHER_SCRIPT_END = re.compile(
    r"([。।॥؟۔።။]+[」』）\"”’)]*|[!?]+[」』）]*(?=[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]))\s*"
)


@lru_cache(maxsize=8)
def _ends(kept_together: str) -> re.Pattern:
    return re.compile(kept_together + _END)


def sentences_of(text: str, *, kept_together: str = "") -> list[str]:
    """`text` (in NFKC: full-width marks as plain ones) cut into sentences, each with the mark
    and the closers that end it, in any script. No abbreviation is known here unless a writer
    names them in `kept_together` ("Dr." ends one otherwise, which only makes the pieces a
    check reads smaller)."""
    parts = _ends(kept_together).split(text)
    # split() interleaves each sentence with the closers it captured (None after a newline).
    joined = [parts[i] + (parts[i + 1] or "") for i in range(0, len(parts) - 1, 2)]
    joined.append(parts[-1])
    return [piece.strip() for part in joined for piece in _ended(part) if piece.strip()]


def _ended(part: str) -> list[str]:
    """A part cut at other scripts' sentence ends, each end kept with its sentence."""
    pieces = _OTHER_SCRIPT_END.split(part)
    return [pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "")
            for i in range(0, len(pieces), 2)]


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
