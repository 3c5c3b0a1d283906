"""Reading a model's JSON answer, for both writers: its reasoning and code fences left out, the
object found in it (prose around it aside), repaired where that takes no guess (a trailing
comma, single quotes, an unquoted key: `json-repair`), and the first thing wrong with it said
in one line. No language's words."""

from __future__ import annotations

import json
from typing import Any

import json_repair
import regex as re
from pydantic import BaseModel, ConfigDict, ValidationError

from memory_agent.core.errors import InvalidCompactionDecision, InvalidMemoryText

# The most sentences a memory holds (the seed's 2-4).
MAX_SENTENCES = 4
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINK = re.compile(r"<think>.*", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n?(.*?)```", re.DOTALL)


def strip_reasoning(text: str) -> str:
    """Drop `<think>` blocks (a block never closed swallows the rest) and unwrap code fences."""
    text = _THINK_BLOCK.sub("", text)
    text = _UNCLOSED_THINK.sub("", text)
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    return text.strip()


class Strict(BaseModel):
    # Types are strict: `"7"` is not an id.
    model_config = ConfigDict(strict=True, populate_by_name=True, extra="ignore")


def json_object(
    raw: str, error: type[InvalidCompactionDecision] | type[InvalidMemoryText]
) -> Any:
    text = strip_reasoning(raw)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise error("the answer holds no JSON object")
    candidate = text[start : end + 1]
    try:
        # strict=False: a raw line break inside a string is a small model's habit, not an error.
        return json.loads(candidate, strict=False)
    except json.JSONDecodeError as decode_error:
        repaired = _repaired(candidate)
        if repaired is None:
            raise error(f"the answer is not valid JSON: {decode_error.msg}") from None
        return repaired


def _repaired(text: str) -> dict[str, Any] | None:
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


def first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "answer"
    return f"{where}: {first['msg']}"
