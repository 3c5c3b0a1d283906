"""The model writer's answer: its sentences, each with the words of the conversation it rests
on, and the older memories it gives newer values for; as a JSON schema (Ollama's `format`,
llama.cpp's grammar) and as the pydantic models that read it."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from memory_agent.core.errors import InvalidMemoryText
from memory_agent.writers.answers import MAX_SENTENCES, Strict, first_error, json_object


class QuotedSentence(Strict):
    text: str
    quote: str = ""
    # A fact about the person that holds whatever the app (their profile keeps it).
    about_person: bool = Field(default=False, alias="aboutPerson")


class ClaimedUpdate(Strict):
    memory_id: int = Field(alias="memoryId")
    still_true: str = Field(default="", alias="stillTrue")


class KeepUntil(Strict):
    """The date the user asked the memory be kept until, and their words asking it."""

    date: str
    quote: str = ""


class MemoryAnswer(Strict):
    """The model writer's memory: its sentences, each with the words it rests on, and the
    older memories it gives newer values for. No sentences: nothing worth keeping. A claim
    that is not of the shape asked for is left out (`parse_memory_answer`), not the answer."""

    sentences: list[QuotedSentence]
    updates: list[ClaimedUpdate] = Field(default_factory=list)
    keep_until: KeepUntil | None = Field(default=None, alias="keepUntil")
    # What the memory holds, one of the kinds listed (`core.kinds`); any other is the default.
    kind: str | None = None


def memory_schema(
    memory_ids: list[int], *, max_chars: int, kinds: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The model writer's answer: at most four sentences with their quotes, updates of the
    memories shown (`memory_ids`; none shown, none allowed), and its kind, one of `kinds`."""
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
    keep_until = {
        "type": "object",
        "properties": {"date": {"type": "string", "maxLength": 10}, "quote": {"type": "string"}},
        "required": ["date", "quote"],
    }
    return {
        "type": "object",
        "properties": {
            "sentences": {"type": "array", "items": sentence, "maxItems": MAX_SENTENCES},
            "updates": updates,
            "keepUntil": keep_until,
            **({"kind": {"type": "string", "enum": list(kinds)}} if kinds else {}),
        },
        "required": ["sentences", "updates"],
    }


def parse_memory_answer(raw: str) -> MemoryAnswer:
    """Read the memory out of the model's answer, or raise `InvalidMemoryText`."""
    data = json_object(raw, InvalidMemoryText)
    if isinstance(data, dict) and isinstance(data.get("updates"), list):
        data["updates"] = [claim for claim in data["updates"] if _is_claim(claim)]
    if isinstance(data, dict) and not _is_keep_until(data.get("keepUntil")):
        data.pop("keepUntil", None)  # an end not of the shape asked for is no end
    if isinstance(data, dict) and not isinstance(data.get("kind"), str):
        data.pop("kind", None)  # no kind, or not a word: the default's
    try:
        return MemoryAnswer.model_validate(data)
    except ValidationError as error:
        raise InvalidMemoryText(first_error(error)) from None


def _is_claim(value: Any) -> bool:
    try:
        ClaimedUpdate.model_validate(value)
    except ValidationError:
        return False
    return True


def _is_keep_until(value: Any) -> bool:
    try:
        KeepUntil.model_validate(value)
    except ValidationError:
        return False
    return True
