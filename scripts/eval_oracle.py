"""The oracle for `eval.py --model oracle`: a scripted model that knows each story's facts.

It writes as a capable model writes. It answers the creation prompt with the descriptions of
the labelled facts of the conversation it is shown, each exactly as its story file gives it
(a French conversation may be described in English, with "15:00" for "3 pm"), each quoting
the turn in which the story's patterns find the fact; no sentences when the conversation
states none. It names as updated each memory shown that holds a fact the conversation gives
the update of, with that memory's other sentences as what still holds. It answers the
compaction prompt by deleting a memory that holds no labelled fact or only superseded values,
else by merging the new memory into the shortest memory it fits beside, else by deleting the
memory with the fewest facts. It shows whether the pipeline lets a good model's work through:
what it loses, the checks cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_agent import ChatMessage, ChatModel, ChatReply, JsonSchema, TokenUsage, ToolSpec

_MEMORY_LINE = re.compile(r"^\[id=(\d+)\] \(created [^)]*\) (.*)$", re.M)
_LIMIT = re.compile(r"at most (\d+) characters")


@dataclass(frozen=True)
class OracleFact:
    id: str
    kind: str
    description: str
    held_by: Callable[[str], bool]
    supersedes: str | None = None
    # How many of the fact's patterns a text matches.
    matches_in: Callable[[str], int] = lambda text: 0


class OracleModel(ChatModel):
    __test__ = False
    name = "oracle"

    def __init__(self) -> None:
        self._facts: dict[str, OracleFact] = {}
        self._stated: list[str] = []
        self._turns: list[str] = []

    def showing(
        self, facts: dict[str, OracleFact], stated: Sequence[str], turns: Sequence[str]
    ) -> None:
        """The story's facts, the ids of those the conversation now shown states, and the
        conversation's turns."""
        self._facts = facts
        self._stated = list(stated)
        self._turns = list(turns)

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
    ) -> ChatReply:
        prompt = messages[0].content
        if json_schema is None:
            answer = "Sure."
        elif is_memory_answer(json_schema):
            answer = self._write(prompt)
        else:
            answer = self._decide(prompt)
        return ChatReply(answer, usage=TokenUsage(len(prompt) // 4, len(answer) // 4))

    def _write(self, prompt: str) -> str:
        stated = [self._facts[fact_id] for fact_id in self._stated]
        sentences = [
            {"text": _sentence(fact.description), "quote": self._turn_stating(fact)}
            for fact in stated
        ]
        replaced = {fact.supersedes for fact in stated if fact.supersedes in self._facts}
        updates = []
        for memory_id, content in _memories(prompt).items():
            old = [self._facts[f] for f in replaced if self._facts[f].held_by(content)]
            if old:
                rest = [s for s in _sentences(content) if not any(f.held_by(s) for f in old)]
                updates.append({"memoryId": memory_id, "stillTrue": " ".join(rest)})
        return json.dumps({"sentences": sentences, "updates": updates})

    def _turn_stating(self, fact: OracleFact) -> str:
        """The turn in which the story's patterns find the fact (the one most of them match
        in, when no turn holds them all)."""
        return max(self._turns, key=lambda turn: fact.matches_in(turn), default="")

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


def is_memory_answer(json_schema: JsonSchema) -> bool:
    """The call asks for a memory (the model writer's creation prompt), not a decision."""
    return "sentences" in json_schema.get("properties", {})


def _memories(prompt: str) -> dict[int, str]:
    """The prompt's memory lines by id (the new memory is 0)."""
    return {int(i): content for i, content in _MEMORY_LINE.findall(prompt)}


def oracle_facts(
    app: dict[str, Any],
    held_by: Callable[[str, str], bool],
    matches_in: Callable[[str, str], int],
) -> dict[str, OracleFact]:
    """The app's facts as the oracle knows them; `held_by(fact_id, text)` is eval's check,
    `matches_in(fact_id, text)` how many of the fact's patterns `text` matches."""
    facts: dict[str, OracleFact] = {}
    for fact in app["facts"]:
        facts[fact["id"]] = OracleFact(
            fact["id"],
            fact["kind"],
            fact.get("description", fact["id"]),
            lambda text, fact_id=fact["id"]: held_by(fact_id, text),
            fact.get("supersedes"),
            lambda text, fact_id=fact["id"]: matches_in(fact_id, text),
        )
    return facts


def _sentence(description: str) -> str:
    text = " ".join(description.split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _sentence_count(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text)) or 1


def _decision(action: str, target: int, reason: str, content: str | None = None) -> str:
    decision: dict[str, object] = {"action": action, "targetMemoryId": target, "reason": reason}
    if content is not None:
        decision["newContent"] = content
    return json.dumps(decision)
