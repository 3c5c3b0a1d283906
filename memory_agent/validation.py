"""Turning model output into something safe to store: memory text and compaction decisions."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_agent.errors import InvalidCompactionDecision, InvalidMemoryText
from memory_agent.text import TITLES, rejoined

MIN_SENTENCES = 1
MAX_SENTENCES = 4

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINK = re.compile(r"<think>.*", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n?(.*?)```", re.DOTALL)
_LABEL = re.compile(
    r"^\s*(?:[#*_\s]*)(?:memory(?:\s+record)?|created memory|summary|user|assistant)"
    r"\s*[:\-–]\s*(?:[*_]*)\s*",
    re.IGNORECASE,
)
# A sentence ends at . ! or ? (with closing quotes or brackets) followed by space and a new start.
# A title's or an initial's full stop ends none (`text.TITLES`).
_SENTENCE_END = re.compile(TITLES + r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def strip_reasoning(text: str) -> str:
    """Drop `<think>` blocks (a block never closed swallows the rest) and unwrap code fences."""
    text = _THINK_BLOCK.sub("", text)
    text = _UNCLOSED_THINK.sub("", text)
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    return text.strip()


def split_sentences(text: str) -> list[str]:
    return rejoined(_SENTENCE_END.split(text))


def clean_model_text(raw: str) -> str:
    """A model's answer as one paragraph: no reasoning block, code fence or leading label."""
    text = strip_reasoning(raw)
    text = _LABEL.sub("", text, count=1)
    return " ".join(text.split()).strip("*_ ")


def normalise_memory_text(raw: str, *, max_chars: int) -> str:
    """Make a text into one memory paragraph, or raise `InvalidMemoryText`.

    Cleans it (`clean_model_text`), keeps at most four sentences (fewer if that fits
    `max_chars`), and requires at least one sentence within `max_chars`. The seed asks the
    model for 2-4 sentences; one sentence that holds a fact is kept rather than lost.
    """
    text = clean_model_text(raw)
    if not text:
        raise InvalidMemoryText("the answer is empty")
    sentences = split_sentences(text)[:MAX_SENTENCES]
    # Trailing sentences are the least essential: drop them (down to one) to fit the limit,
    # rather than lose the whole memory.
    while len(sentences) > MIN_SENTENCES and len(" ".join(sentences)) > max_chars:
        sentences.pop()
    text = " ".join(sentences)
    if len(text) > max_chars:
        raise InvalidMemoryText(f"it is {len(text)} characters long, the limit is {max_chars}")
    return text


class CompactionDecision(BaseModel):
    """The seed's decision format. Types are strict: `"7"` is not an id."""

    model_config = ConfigDict(strict=True, populate_by_name=True, extra="ignore")

    action: Literal["delete", "edit"]
    target_memory_id: int = Field(alias="targetMemoryId")
    new_content: str | None = Field(default=None, alias="newContent")
    reason: str = ""


def decision_schema(memory_ids: list[int], *, max_chars: int) -> dict[str, Any]:
    """The decision's JSON schema, given to the model as its output format (Ollama `format`,
    llama.cpp grammar). A delete names one of `memory_ids`; an edit names an existing memory
    (not the new one, id 0) and carries its new text, because a merge into the new memory
    removes nothing. Kept to `anyOf`, `enum` and plain types, which every grammar engine
    accepts."""
    reason = {"type": "string", "maxLength": 200}
    delete = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["delete"]},
            "targetMemoryId": {"type": "integer", "enum": memory_ids},
            "reason": reason,
        },
        "required": ["action", "targetMemoryId", "reason"],
    }
    existing = [memory_id for memory_id in memory_ids if memory_id != 0] or memory_ids
    edit = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["edit"]},
            "targetMemoryId": {"type": "integer", "enum": existing},
            "newContent": {"type": "string", "maxLength": max_chars},
            "reason": reason,
        },
        "required": ["action", "targetMemoryId", "newContent", "reason"],
    }
    return {"anyOf": [delete, edit]}


def parse_compaction_decision(raw: str) -> CompactionDecision:
    """Read the decision out of the model's answer, or raise `InvalidCompactionDecision`."""
    return _validated(CompactionDecision, _json_object(raw))


class UpdateReview(BaseModel):
    """A model's answer to which earlier memories a new one gives newer values for."""

    model_config = ConfigDict(strict=True, populate_by_name=True, extra="ignore")

    updated_memory_ids: list[int] = Field(alias="updatedMemoryIds")
    reason: str = ""


def update_review_schema(memory_ids: list[int]) -> dict[str, Any]:
    """The update review's JSON schema: ids only among `memory_ids`."""
    return {
        "type": "object",
        "properties": {
            "updatedMemoryIds": {
                "type": "array",
                "items": {"type": "integer", "enum": memory_ids},
            },
            "reason": {"type": "string", "maxLength": 200},
        },
        "required": ["updatedMemoryIds", "reason"],
    }


def parse_update_review(raw: str) -> UpdateReview:
    """Read the review out of the model's answer, or raise `InvalidCompactionDecision`."""
    return _validated(UpdateReview, _json_object(raw))


Answer = TypeVar("Answer", bound=BaseModel)


def _json_object(raw: str) -> Any:
    text = strip_reasoning(raw)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidCompactionDecision("the answer holds no JSON object")
    try:
        # strict=False: a raw line break inside a string is a small model's habit, not an error.
        return json.loads(text[start : end + 1], strict=False)
    except json.JSONDecodeError as error:
        raise InvalidCompactionDecision(f"the answer is not valid JSON: {error.msg}") from None


def _validated(model: type[Answer], data: Any) -> Answer:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "decision"
        raise InvalidCompactionDecision(f"{where}: {first['msg']}") from None
