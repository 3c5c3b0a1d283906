"""Asking the memory model for the seed's compaction decision, for both writers: the prompt,
the decision's JSON schema, and the one place a failed or malformed answer becomes a
`DecisionRefused` with its cause and reason (which the writer's fallback records)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from memory_agent import prompts
from memory_agent.answers import CompactionDecision, decision_schema, parse_compaction_decision
from memory_agent.chat_model import ChatMessage, ChatReply, JsonSchema
from memory_agent.errors import ChatModelError, InvalidCompactionDecision
from memory_agent.models import FallbackCause, Memory
from memory_agent.steps import NEW_MEMORY_ID

# The sub-agent's way to ask its model: the messages, and the JSON schema of the answer (None:
# text). It applies the timeout and counts the energy.
AskJson = Callable[[list[ChatMessage], JsonSchema | None], Awaitable[ChatReply]]


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
    ask_json: AskJson,
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
        reply = await ask_json(messages, decision_schema(ids, max_chars=max_chars))
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
