"""Reading a model's JSON answer, for both writers: its reasoning and code fences left out, the
object found in it (prose around it aside), repaired where that takes no guess (a trailing
comma, single quotes, an unquoted key: `json-repair`), and the first thing wrong with it said
in one line. No language's words."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from memory_agent.core import patterns as re
from memory_agent.core.errors import InvalidCompactionDecision, InvalidMemoryText
from memory_agent.core.lenient_json import repaired_object

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
        repaired = repaired_object(candidate)
        if repaired is None:
            raise error(f"the answer is not valid JSON: {decode_error.msg}") from None
        return repaired


def first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "answer"
    return f"{where}: {first['msg']}"
