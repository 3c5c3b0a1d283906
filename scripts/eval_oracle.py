"""The oracle for `eval.py --model oracle`: a scripted model that knows each story's facts.

It answers the creation prompt with the descriptions of the labelled facts of the conversation
it is shown (NOTHING when there are none), the update review with the memories that hold a fact
the new memory holds the update of, and the compaction prompt by deleting a memory that
holds no labelled fact or only superseded values, else by merging the new memory into the
shortest memory it fits beside, else by deleting the memory with the fewest facts. It shows
whether the pipeline lets a good model's work through: what it loses, the checks cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_agent import ChatMessage, ChatModel, ChatReply, TokenUsage, ToolSpec
from memory_agent.chat_model import JsonSchema

_MEMORY_LINE = re.compile(r"^\[id=(\d+)\] \(created [^)]*\) (.*)$", re.M)
_LIMIT = re.compile(r"at most (\d+) characters")


@dataclass(frozen=True)
class OracleFact:
    id: str
    kind: str
    description: str
    held_by: Callable[[str], bool]
    supersedes: str | None = None


class OracleModel(ChatModel):
    __test__ = False
    name = "oracle"

    def __init__(self) -> None:
        self._facts: dict[str, OracleFact] = {}
        self._stated: list[str] = []

    def showing(self, facts: dict[str, OracleFact], stated: Sequence[str]) -> None:
        """The story's facts, and the ids of those the conversation now shown states."""
        self._facts = facts
        self._stated = list(stated)

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
    ) -> ChatReply:
        prompt = messages[-1].content
        if json_schema is None:
            answer = self._write()
        elif is_update_review(json_schema):
            answer = self._updated(prompt)
        else:
            answer = self._decide(prompt)
        return ChatReply(answer, usage=TokenUsage(len(prompt) // 4, len(answer) // 4))

    def _write(self) -> str:
        sentences = [_sentence(self._facts[fact_id].description) for fact_id in self._stated]
        return " ".join(sentences) if sentences else "NOTHING"

    def _updated(self, prompt: str) -> str:
        """The shown memories that hold a fact of which the new memory (id 0) holds the
        update."""
        memories = _memories(prompt)
        new = memories.pop(0, "")
        replaced = {
            fact.supersedes
            for fact in self._facts.values()
            if fact.supersedes and fact.held_by(new)
        }
        updated = [
            memory_id
            for memory_id, content in memories.items()
            if any(self._facts[f].held_by(content) for f in replaced if f in self._facts)
        ]
        return json.dumps({"updatedMemoryIds": updated, "reason": "newer values of its facts"})

    def _decide(self, prompt: str) -> str:
        memories = _memories(prompt)
        limit = int(m.group(1)) if (m := _LIMIT.search(prompt)) else 400
        held = {i: [f for f in self._facts.values() if f.held_by(c)] for i, c in memories.items()}
        # Superseded: an old value whose update some memory holds.
        updated = {
            fact.supersedes
            for facts in held.values()
            for fact in facts
            if fact.supersedes is not None
        }
        for memory_id, facts in held.items():
            if not facts:
                return _decision("delete", memory_id, "it holds no labelled fact")
        for memory_id, facts in held.items():
            if all(f.id in updated for f in facts):
                return _decision("delete", memory_id, "it holds only superseded values")
        new = memories.get(0, "")
        for memory_id, content in sorted(memories.items(), key=lambda item: len(item[1])):
            merged = f"{content} {new}"
            if memory_id != 0 and len(merged) <= limit and _sentence_count(merged) <= 4:
                return _decision("edit", memory_id, "merged with the new memory", merged)
        poorest = min(held, key=lambda i: (len(held[i]), i))
        return _decision("delete", poorest, "nothing fits together; it holds the fewest facts")


def is_update_review(json_schema: JsonSchema) -> bool:
    """The call asks which memories a new one updates (not for a compaction decision)."""
    return "updatedMemoryIds" in json_schema.get("properties", {})


def _memories(prompt: str) -> dict[int, str]:
    """The prompt's memory lines by id (the new memory is 0)."""
    return {int(i): content for i, content in _MEMORY_LINE.findall(prompt)}


def oracle_facts(
    app: dict[str, Any], held_by: Callable[[str, str], bool]
) -> dict[str, OracleFact]:
    """The app's facts as the oracle knows them; `held_by(fact_id, text)` is eval's check."""
    facts: dict[str, OracleFact] = {}
    for fact in app["facts"]:
        facts[fact["id"]] = OracleFact(
            fact["id"],
            fact["kind"],
            fact.get("description", fact["id"]),
            lambda text, fact_id=fact["id"]: held_by(fact_id, text),
            fact.get("supersedes"),
        )
    return facts


def _sentence(description: str) -> str:
    text = " ".join(description.split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _sentence_count(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text)) or 1


def _decision(action: str, target: int, reason: str, content: str | None = None) -> str:
    decision: dict[str, object] = {"action": action, "targetMemoryId": target, "reason": reason}
    if content is not None:
        decision["newContent"] = content
    return json.dumps(decision)
