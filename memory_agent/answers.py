"""The shapes a model answers in, as JSON schemas (Ollama's `format`, llama.cpp's grammar) and
as the pydantic models that read them. No language's words: both writers read these."""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

import regex as re
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_agent.errors import InvalidCompactionDecision, InvalidMemoryText

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


class _Strict(BaseModel):
    # Types are strict: `"7"` is not an id.
    model_config = ConfigDict(strict=True, populate_by_name=True, extra="ignore")


class CompactionDecision(_Strict):
    """The seed's decision format."""

    action: Literal["delete", "edit"]
    target_memory_id: int = Field(alias="targetMemoryId")
    new_content: str | None = Field(default=None, alias="newContent")
    reason: str = ""


class QuotedSentence(_Strict):
    text: str
    quote: str = ""
    # A fact about the person that holds whatever the app (their profile keeps it).
    about_person: bool = Field(default=False, alias="aboutPerson")


class ClaimedUpdate(_Strict):
    memory_id: int = Field(alias="memoryId")
    still_true: str = Field(default="", alias="stillTrue")


class MemoryAnswer(_Strict):
    """The model writer's memory: its sentences, each with the words it rests on, and the
    older memories it gives newer values for. No sentences: nothing worth keeping. A claim
    that is not of the shape asked for is left out (`parse_memory_answer`), not the answer."""

    sentences: list[QuotedSentence]
    updates: list[ClaimedUpdate] = Field(default_factory=list)


def decision_schema(memory_ids: list[int], *, max_chars: int) -> dict[str, Any]:
    """The decision's JSON schema. A delete names one of `memory_ids`; an edit names an
    existing memory (not the new one, id 0) and carries its new text, because a merge into
    the new memory removes nothing. Kept to `anyOf`, `enum` and plain types, which every
    grammar engine accepts."""
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


def memory_schema(memory_ids: list[int], *, max_chars: int) -> dict[str, Any]:
    """The model writer's answer: at most four sentences with their quotes, and updates of
    the memories shown (`memory_ids`; none shown, none allowed)."""
    # The quote comes first: a model copies the conversation's words, then writes what they
    # tell (a grammar holds it to this order).
    sentence = {
        "type": "object",
        "properties": {
            "quote": {"type": "string", "maxLength": max_chars},
            "text": {"type": "string", "maxLength": max_chars},
            "aboutPerson": {"type": "boolean"},
        },
        "required": ["quote", "text"],
    }
    update = {
        "type": "object",
        "properties": {
            "memoryId": {"type": "integer", "enum": memory_ids},
            "stillTrue": {"type": "string", "maxLength": max_chars},
        },
        "required": ["memoryId", "stillTrue"],
    }
    updates: dict[str, Any] = (
        {"type": "array", "items": update} if memory_ids else {"type": "array", "maxItems": 0}
    )
    return {
        "type": "object",
        "properties": {
            "sentences": {"type": "array", "items": sentence, "maxItems": MAX_SENTENCES},
            "updates": updates,
        },
        "required": ["sentences", "updates"],
    }


def parse_compaction_decision(raw: str) -> CompactionDecision:
    """Read the decision out of the model's answer, or raise `InvalidCompactionDecision`."""
    return _validated(CompactionDecision, _json_object(raw, InvalidCompactionDecision))


def parse_memory_answer(raw: str) -> MemoryAnswer:
    """Read the memory out of the model's answer, or raise `InvalidMemoryText`."""
    data = _json_object(raw, InvalidMemoryText)
    if isinstance(data, dict) and isinstance(data.get("updates"), list):
        data["updates"] = [claim for claim in data["updates"] if _is_claim(claim)]
    try:
        return MemoryAnswer.model_validate(data)
    except ValidationError as error:
        raise InvalidMemoryText(_first_error(error)) from None


def _is_claim(value: Any) -> bool:
    try:
        ClaimedUpdate.model_validate(value)
    except ValidationError:
        return False
    return True


Answer = TypeVar("Answer", bound=BaseModel)


def _json_object(
    raw: str, error: type[InvalidCompactionDecision] | type[InvalidMemoryText]
) -> Any:
    text = strip_reasoning(raw)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise error("the answer holds no JSON object")
    try:
        # strict=False: a raw line break inside a string is a small model's habit, not an error.
        return json.loads(text[start : end + 1], strict=False)
    except json.JSONDecodeError as decode_error:
        raise error(f"the answer is not valid JSON: {decode_error.msg}") from None


def _validated(model: type[Answer], data: Any) -> Answer:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidCompactionDecision(_first_error(error)) from None


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "answer"
    return f"{where}: {first['msg']}"
