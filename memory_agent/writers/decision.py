"""The seed's compaction decision, asked of the memory model by both writers: its shape (as a
JSON schema and as the pydantic model that reads it), the question, and the one place a failed
or malformed answer becomes a `DecisionRefused` with its cause and reason (which the writer's
fallback records)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError

from memory_agent.core.errors import ChatModelError, InvalidCompactionDecision
from memory_agent.models import FallbackCause, Memory
from memory_agent.writers import prompts
from memory_agent.writers.answers import Strict, first_error, json_object
from memory_agent.writers.asking import MemoryModel
from memory_agent.writers.steps import NEW_MEMORY_ID


class CompactionDecision(Strict):
    """The seed's decision format."""

    action: Literal["delete", "edit"]
    target_memory_id: int = Field(alias="targetMemoryId")
    new_content: str | None = Field(default=None, alias="newContent")
    reason: str = ""


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


def parse_compaction_decision(raw: str) -> CompactionDecision:
    """Read the decision out of the model's answer, or raise `InvalidCompactionDecision`."""
    return _validated(json_object(raw, InvalidCompactionDecision))



def _validated(data: Any) -> CompactionDecision:
    try:
        return CompactionDecision.model_validate(data)
    except ValidationError as error:
        raise InvalidCompactionDecision(first_error(error)) from None


class DecisionRefused(Exception):
    """Why the model's decision is not applied: `cause` for the metrics, `reason` for the
    job's steps and the history."""

    def __init__(self, cause: FallbackCause, reason: str) -> None:
        super().__init__(reason)
        self.cause: FallbackCause = cause
        self.reason = reason


def invalid(reason: str) -> DecisionRefused:
    return DecisionRefused("invalid_decision", f"invalid decision: {reason}")


async def ask_for_decision(
    model: MemoryModel,
    shown: Sequence[Memory],
    new_content: str,
    created_date: str,
    *,
    room: int,
    max_chars: int,
) -> CompactionDecision:
    """The model's decision on `shown` and the new memory (id 0), naming one of them; raises
    `DecisionRefused` when the call fails or the answer is not such a decision."""
    new_line = prompts.candidate_line(NEW_MEMORY_ID, created_date, new_content)
    messages = prompts.compaction_messages(shown, new_line, limit=room, max_chars=max_chars)
    ids = [m.id for m in shown] + [NEW_MEMORY_ID]
    try:
        reply = await model.ask(messages, decision_schema(ids, max_chars=max_chars))
    except ChatModelError as error:
        raise DecisionRefused("llm_error", f"LLM error: {error}") from None
    if reply.truncated:
        raise invalid("cut off at the token limit")
    try:
        decision = parse_compaction_decision(reply.text)
    except InvalidCompactionDecision as error:
        raise invalid(error.reason) from None
    if decision.target_memory_id not in ids:
        raise invalid(f"memory {decision.target_memory_id} is not one of those shown")
    return decision


def reason_given(decision: CompactionDecision) -> str:
    """The model's reason on one line, at most 300 characters."""
    return " ".join(decision.reason.split())[:300] or "(no reason given)"
