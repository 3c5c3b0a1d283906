"""The `recall` tool the loop offers the model beside `end_conversation` when the turn's memory
block shows a memory in part (its digest or a stub: `memory_agent.recall.decay`). The model
names the memory by the number its line gives; the tool's result is the memory whole, and the
model answers with it. Only a memory the block holds can be recalled: the tool reads nothing
the conversation was not already given.
"""

from __future__ import annotations

from collections.abc import Sequence

from loop.conversations.client_tools import with_ids
from memory_agent import ChatMessage, Memory, ToolCall, ToolSpec, neutralise

RECALL_TOOL = ToolSpec(
    "recall",
    "Read the whole of a memory that the memory block shows only in part (a digest or a"
    " stub that says to use recall).",
    {
        "type": "object",
        "properties": {
            "memory": {
                "type": "integer",
                "description": "The memory's number, as its line says: use recall with memory N.",
            },
        },
        "required": ["memory"],
    },
)
# How many rounds of recall one answer may take before the model must answer without it.
MAX_RECALL_ROUNDS = 2


def recall_calls(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The model's calls of `recall` among its calls, each with an id."""
    return with_ids([call for call in calls if call.name == RECALL_TOOL.name])


def recall_turns(
    text: str, calls: Sequence[ToolCall], block: Sequence[Memory]
) -> tuple[list[ChatMessage], list[Memory]]:
    """The turns that follow the model's `calls` of recall in its prompt: its own turn with the
    calls, then each call's result (the memory whole, or why there is none); and the memories
    recalled, of those the `block` holds."""
    held = {memory.id: memory for memory in block}
    turns = [ChatMessage("assistant", text, tool_calls=tuple(calls))]
    recalled: list[Memory] = []
    for call in calls:
        memory = held.get(_number(call.arguments.get("memory")) or -1)
        if memory is None:
            result = "No memory of that number is in the memory block."
        else:
            recalled.append(memory)
            result = (f"Memory {memory.id} (created {memory.created_date}):"
                      f" {neutralise(memory.content)}")
        turns.append(ChatMessage("tool", result, tool_call_id=call.id, tool_name=call.name))
    return turns, recalled


def _number(value: object) -> int | None:
    """The memory's number as a model gives it: 12, 12.0, "12" or "#12"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None
