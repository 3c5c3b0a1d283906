"""The one Unicode form every reader of a text here works on; no language's words."""

from __future__ import annotations

import unicodedata
from functools import lru_cache


# Read again and again (each memory against each other one): computed once per text.
@lru_cache(maxsize=8192)
def normalise_text(text: str) -> str:
    """NFKC, invisible format characters removed: what every check here reads."""
    if text.isascii():
        return text  # NFKC leaves ASCII alone, and every format character lies beyond it
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
