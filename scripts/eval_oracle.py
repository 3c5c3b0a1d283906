"""The oracle for `eval.py --model oracle`: a scripted model that knows each story's facts.

It writes as a capable model writes. It answers the creation prompt with the descriptions of
the labelled facts that the transcript it is shown holds, each exactly as its story file gives
it (a French conversation may be described in English, with "15:00" for "3 pm"), each quoting
the turn in which the story's patterns find the fact; no sentences when the conversation
states none. It names as updated each memory shown that holds a fact the conversation gives
the update of, with that memory's other sentences as what still holds. It answers the
compaction prompt by deleting a memory that holds no labelled fact or only superseded values,
else by merging the new memory into the shortest memory it fits beside, else by deleting the
memory with the fewest facts. Asked about a pair (the consolidation), it updates the older
memory when the newer gives the update of its facts, merges two that hold the same facts,
and keeps the rest. It shows whether the pipeline lets a good model's work through:
what it loses, the checks cost.

A long conversation read in parts is answered part by part (the facts whose turns the part
shows), and the call that puts the parts together keeps every sentence it is given, each with
its quote. With `drift`, that share of the facts is quoted near-verbatim, as models quote
(`drifted`): a contraction written out or in, a short word left out, a filler word added, a
word swapped, about one edit in six words, numbers as given; the same way each time.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_agent import ChatMessage, ChatModel, ChatReply, JsonSchema, TokenUsage, ToolSpec
from memory_agent.core.unicode_forms import folded

_MEMORY_LINE = re.compile(r"^\[id=(\d+)\] \(created [^)]*\) (.*)$", re.M)
_LIMIT = re.compile(r"at most (\d+) characters")
# The prompts of a long conversation: one of its parts, and its parts put together.
_PART = "and this is part"
_COMBINING = "was read in"
_NOTE = re.compile(r'^\d+\. (.*) \(quote: "(.*)"\)( \(about the user\))?$', re.M)
_CONVERSATION = re.compile(r"<<<CONVERSATION\n(.*)\nCONVERSATION>>>", re.S)


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

    def __init__(self, *, drift: float = 0.0, seed: int = 0) -> None:
        self._drift = drift
        self._seed = seed
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
        answer_tokens: int | None = None,
    ) -> ChatReply:
        prompt = messages[0].content
        if json_schema is None:
            answer = "Sure."
        elif is_memory_answer(json_schema):
            answer = self._write(prompt)
        elif is_pair_question(json_schema):
            answer = self._judge(prompt)
        else:
            answer = self._decide(prompt)
        return ChatReply(answer, usage=TokenUsage(len(prompt) // 4, len(answer) // 4))

    def _write(self, prompt: str) -> str:
        stated = [self._facts[fact_id] for fact_id in self._stated]
        if _COMBINING in prompt:
            sentences = [{"text": text, "quote": quote, "aboutPerson": bool(person)}
                         for text, quote, person in _NOTE.findall(prompt)]
        else:
            # What it reads: the facts the transcript shows (a long conversation's part, or
            # what a prompt kept of it), each quoting a turn shown.
            shown = m.group(1) if (m := _CONVERSATION.search(prompt)) else ""
            stated = [fact for fact in stated if self._shows(fact, shown)]
            within = folded(shown)
            turns = [t for t in self._turns if folded(t) in within] or self._turns
            sentences = [
                {"text": _sentence(fact.description), "quote": self._quote_of(fact, turns)}
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

    def _shows(self, fact: OracleFact, shown: str) -> bool:
        """Whether a part of the conversation shows the fact: its patterns find there what
        they find in the turn stating it."""
        found = fact.matches_in(shown)
        return found > 0 and found >= fact.matches_in(self._turn_stating(fact))

    def _quote_of(self, fact: OracleFact, turns: Sequence[str]) -> str:
        turn = self._turn_stating(fact, turns)
        chance = random.Random(f"{self._seed}:{fact.id}")
        return drifted(turn, chance) if chance.random() < self._drift else turn

    def _turn_stating(self, fact: OracleFact, turns: Sequence[str] | None = None) -> str:
        """The turn in which the story's patterns find the fact (the one most of them match
        in, when no turn holds them all), of `turns` when given."""
        return max(
            self._turns if turns is None else turns,
            key=lambda turn: fact.matches_in(turn), default="",
        )

    def _judge(self, prompt: str) -> str:
        """The consolidation's question: the older memory's facts all updated by the newer
        one's (update: what else it says still holds), or one's facts all the other's (merge:
        the one that holds more, with the other's sentences it lacks), else keep."""
        (_, older), (_, newer) = sorted(_memories(prompt).items())[:2]
        old = {f.id for f in self._facts.values() if f.held_by(older)}
        new = {f.id for f in self._facts.values() if f.held_by(newer)}
        updated = {self._facts[f].supersedes for f in new} & old
        if old and updated:
            rest = [s for s in _sentences(older)
                    if not any(self._facts[f].held_by(s) for f in updated)]
            return _verdict("update", " ".join(rest), "the newer memory updates it")
        if "merge" in prompt and old and (old <= new or new <= old):
            wider, other = (newer, older) if old <= new else (older, newer)
            merged = " ".join([wider, *(s for s in _sentences(other) if s not in wider)])
            return _verdict("merge", merged, "both say the same facts")
        return _verdict("keep", "", "they say different things")

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


_CONTRACTIONS = (("I'm", "I am"), ("I've", "I have"), ("I'll", "I will"), ("don't", "do not"),
                 ("it's", "it is"), ("can't", "cannot"), ("we're", "we are"))
_FILLERS = ("really", "actually", "just")


def drifted(quote: str, chance: random.Random) -> str:
    """`quote` as a model copies it near-verbatim: about one edit in six words (at least one),
    each a contraction written out or in, a short word left out, a filler word added, or a
    word swapped for a filler; no number changed."""
    words = quote.split()
    for _ in range(max(1, len(words) // 6)):
        edits = [_contraction, _left_out, _added, _swapped]
        chance.shuffle(edits)
        for edit in edits:
            changed = edit(words, chance)
            if changed is not None:
                words = changed
                break
    return " ".join(words)


def _contraction(words: list[str], chance: random.Random) -> list[str] | None:
    text = " ".join(words)
    for short, long in _CONTRACTIONS:
        for old, new in ((short, long), (long, short)):
            if re.search(rf"\b{re.escape(old)}\b", text):
                return re.sub(rf"\b{re.escape(old)}\b", new, text, count=1).split()
    return None


def _left_out(words: list[str], chance: random.Random) -> list[str] | None:
    short = [i for i, w in enumerate(words) if 0 < i and len(w) <= 3 and not _has_digit(w)]
    if not short or len(words) < 4:
        return None
    drop = chance.choice(short)
    return words[:drop] + words[drop + 1 :]


def _added(words: list[str], chance: random.Random) -> list[str] | None:
    if len(words) < 3:
        return None
    at = chance.randrange(1, len(words))
    return [*words[:at], chance.choice(_FILLERS), *words[at:]]


def _swapped(words: list[str], chance: random.Random) -> list[str] | None:
    plain = [i for i, w in enumerate(words) if not _has_digit(w)]
    if len(words) < 5 or not plain:
        return None
    at = chance.choice(plain)
    return [*words[:at], chance.choice(_FILLERS), *words[at + 1 :]]


def _has_digit(word: str) -> bool:
    return any(char.isdigit() for char in word)


def is_pair_question(json_schema: JsonSchema) -> bool:
    """The call is the consolidation's question about two memories (keep, merge, update)."""
    action = json_schema.get("properties", {}).get("action", {})
    return "keep" in action.get("enum", ())


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


def _verdict(action: str, content: str, reason: str) -> str:
    return json.dumps({"action": action, "newContent": content, "reason": reason})
