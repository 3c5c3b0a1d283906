"""The `recall` tool the loop offers the model beside `end_conversation` when the turn's memory
block shows a memory in part (its digest or a stub: `memory_agent.recall.decay`). The model
names the memory by the number its line gives; the tool's result is the memory whole, and the
model answers with it, told which memories of the block it is linked to. Only a memory the
block holds can be recalled or named: the tool reads nothing the conversation was not already
given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from loop.conversations.client_tools import with_ids
from memory_agent import (
    ChatMessage,
    Memory,
    ToolCall,
    ToolSpec,
    neutralise,
)

RECALL_TOOL = ToolSpec(
    "recall",
    "Read the whole of a memory that the memory block shows only in part (a digest or a"
    " stub that says to use recall).",
    {
        "type": "object",
        "properties": {
            "id": {
                "type": "integer",
                "description": "The memory's id, as its line says: use recall with id N.",
            },
        },
        "required": ["id"],
    },
)
# How many rounds of recall one answer may take before the model must answer without it, and
# how many memories one round may recall.
MAX_RECALL_ROUNDS = 2
MAX_RECALLS_PER_ROUND = 3
# Linked memories of the block a recalled memory names (`memory_agent.links`).
MAX_RELATED = 2
# The prompt's room kept for recalled memories (and the turns that carry them) when the block
# shows a memory in part: what they take beyond it is refused, so no prompt outgrows its budget.
RECALL_ROOM_TOKENS = 600


def recall_calls(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The model's calls of `recall` among its calls, each with an id."""
    return with_ids([call for call in calls if call.name == RECALL_TOOL.name])


def recall_turns(
    text: str, calls: Sequence[ToolCall], block: Sequence[Memory], room: int,
    tokens: Callable[[ChatMessage], int], related: Mapping[int, Sequence[int]] | None = None,
) -> tuple[list[ChatMessage], list[Memory], int]:
    """The turns that follow the model's `calls` of recall in its prompt: its own turn with the
    calls, then each call's result (the memory whole, with the ids of up to `MAX_RELATED`
    memories of the block it is linked to, from `related`; or why there is none); the
    memories recalled, of those the `block` holds; and what is left of the `room` (tokens)
    they may take (`tokens`: a message's, as the prompt budget counts it). Beyond
    `MAX_RECALLS_PER_ROUND` calls, or the room, a call is answered that it was not recalled."""
    held = {memory.id: memory for memory in block}
    own = ChatMessage("assistant", text, tool_calls=tuple(calls))
    room -= tokens(own)
    turns = [own]
    recalled: list[Memory] = []
    for number, call in enumerate(calls):
        memory = held.get(_number(call.arguments.get("id", call.arguments.get("memory"))) or -1)
        if memory is None:
            result = "No memory of that id is in the memory block."
        elif number >= MAX_RECALLS_PER_ROUND:
            result = f"Not recalled: at most {MAX_RECALLS_PER_ROUND} memories at once."
        else:
            result = (f"Memory {memory.id} (created {memory.created_date}):"
                      f" {neutralise(memory.content)}")
            linked = [i for i in (related or {}).get(memory.id, ()) if i in held][:MAX_RELATED]
            if linked:
                result += (" Related memories in the block: "
                           + ", ".join(str(i) for i in linked) + " (recall them by id).")
            if tokens(ChatMessage("tool", result)) > room:
                result = "Not recalled: this turn has no room left; answer from the block."
            else:
                recalled.append(memory)
        answer = ChatMessage("tool", result, tool_call_id=call.id, tool_name=call.name)
        room -= tokens(answer)
        turns.append(answer)
    return turns, recalled, room


def _number(value: object) -> int | None:
    """The memory's number as a model gives it: 12, 12.0, "12" or "#12"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None
