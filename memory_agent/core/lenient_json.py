"""JSON as servers give it, read where that takes no guess: a trailing comma, single quotes, an
unquoted key (`json-repair` reads those), but never an answer cut short (its brackets must close
as they open) nor anything the repair would make up (every string read is in the text as
written). Both writers' answers and a tool call's arguments are read so."""

from __future__ import annotations

from typing import Any

import json_repair


def repaired_object(text: str) -> dict[str, Any] | None:
    """`text` read by json-repair, when that takes no guess: its brackets close as they open
    (an answer cut short is not finished for the model), and every string of what is read is
    in the text as written."""
    if not _balanced(text):
        return None
    value = json_repair.loads(text)
    if not isinstance(value, dict) or not value:
        return None
    if not all(_written(piece, text) for piece in _strings(value)):
        return None
    return value


def _written(piece: str, text: str) -> bool:
    """Whether `piece` is in `text` as written (an empty string as a pair of quotes)."""
    return piece in text if piece else ('""' in text or "''" in text)


def _balanced(text: str) -> bool:
    """Whether the brackets outside strings (quoted either way) close as they open."""
    closing = {"{": "}", "[": "]"}
    open_brackets: list[str] = []
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in closing:
            open_brackets.append(closing[char])
        elif char in "}]":
            if not open_brackets or open_brackets.pop() != char:
                return False
    return not open_brackets and not quote


def _strings(value: Any) -> list[str]:
    """Every key and string value in `value`."""
    if isinstance(value, dict):
        return [*value.keys(), *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
