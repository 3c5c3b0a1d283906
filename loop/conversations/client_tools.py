"""A dialect client's tools, passed through to the model: what a conversation stores of them
(the tools offered and the client's `tool_choice`) and of the calls and results in its turns.

The model is offered the client's tools in place of the service's own `end_conversation`; its
calls go back to the client, which runs them and sends their results as `tool` turns.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_agent import ToolCall, ToolSpec

# tool_choice: the model chooses ("auto"), is offered no tool ("none"), or should call one
# ("required"); any other value is the name of the one tool it should call. No backend can be
# made to call: "required" and a named tool narrow what is offered, the model decides.
AUTO, NONE, REQUIRED = "auto", "none", "required"


@dataclass(frozen=True)
class ClientTools:
    tools: tuple[ToolSpec, ...]
    choice: str = AUTO

    def offered(self) -> list[ToolSpec]:
        """The tools the model is offered for its next answer."""
        if self.choice == NONE:
            return []
        if self.choice in (AUTO, REQUIRED):
            return list(self.tools)
        return [tool for tool in self.tools if tool.name == self.choice]

    def to_json(self) -> str:
        return json.dumps({
            "tools": [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in self.tools
            ],
            "choice": self.choice,
        })

    @classmethod
    def from_json(cls, text: str | None) -> ClientTools | None:
        if not text:
            return None
        stored = json.loads(text)
        return cls(
            tuple(ToolSpec(t["name"], t["description"], t["parameters"]) for t in stored["tools"]),
            stored["choice"],
        )


def with_ids(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls, each with an id (backends such as Ollama give none): a client names the
    call its result answers by it."""
    return tuple(
        call if call.id else ToolCall(call.name, call.arguments, f"call_{uuid.uuid4().hex[:24]}")
        for call in calls
    )


def calls_to_json(calls: Sequence[ToolCall]) -> str | None:
    if not calls:
        return None
    return json.dumps([{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls])


def calls_from_json(text: str | None) -> tuple[ToolCall, ...]:
    if not text:
        return ()
    stored: list[dict[str, Any]] = json.loads(text)
    return tuple(ToolCall(c["name"], c["arguments"], c["id"]) for c in stored)
