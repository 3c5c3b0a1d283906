"""The extractive writer: the floor for a model that cannot write memories (the bundled 135M
model), and for no model at all.

A memory is the conversation's key statements (`facts.key_statements`: what the user stated,
decided or asked to be remembered, and what the assistant confirmed it did), each in the
speaker's own words (`The user said: "…"`), the best within four sentences and the length
limit. No model writes the text, so the same conversation gives the same memory, always.
Nothing worth keeping is a conversation with no key statement (small talk, a general
question): it spends no memory slot.

What the new memory updates is retired by the retention policy's rules, and a space over its
cap is brought back to it by the model's DELETE/EDIT, checked by the same policy
(`compaction.Compactor`).
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent import facts, language, text
from memory_agent.answers import MAX_SENTENCES
from memory_agent.asking import AskJson
from memory_agent.chat_model import ChatMessage
from memory_agent.compaction import Compactor
from memory_agent.errors import InvalidMemoryText
from memory_agent.models import Memory
from memory_agent.steps import DecidedStep
from memory_agent.writing import MemoryWriter, NothingToKeep, WrittenMemory


class ExtractiveWriter(MemoryWriter):
    kind = "extractive"

    def __init__(self, ask_json: AskJson, *, limit: int, max_chars: int) -> None:
        self._max_chars = max_chars
        self._compactor = Compactor(ask_json, limit=limit, max_chars=max_chars)

    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory]
    ) -> WrittenMemory | NothingToKeep:
        turns = [(m.role, m.content) for m in messages if m.role in ("user", "assistant")]
        if not any(content.strip() for _, content in turns):
            raise InvalidMemoryText("the conversation has no messages to remember")
        content = compose(facts.key_statements(turns), self._max_chars)
        if not content:
            return NothingToKeep()
        return WrittenMemory(content, "statements", asked_model=False)

    def steps_if_they_fit(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> list[DecidedStep] | None:
        return self._compactor.steps_if_they_fit(current, written.content)

    async def decide(
        self, current: Sequence[Memory], written: WrittenMemory, today: str
    ) -> list[DecidedStep]:
        return await self._compactor.decide(current, written.content, today)

    def fallback(
        self, current: Sequence[Memory], written: WrittenMemory, reason: str
    ) -> list[DecidedStep]:
        return self._compactor.policy_only(current, written.content, reason)


def compose(statements: Sequence[facts.Statement], max_chars: int) -> str:
    """The statements quoted, the best within four sentences and `max_chars`: the lowest
    scored go first, and before them an assistant's quote that greets someone the others
    name ("Hello Hannah, what a lovely trip" beside her own words)."""
    pieces: list[tuple[int, str]] = []  # (priority: lower goes first when cutting, text)
    greetings: dict[int, frozenset[str]] = {}  # the assistant's quotes that greet: whom
    for statement in statements:
        # Scores over 8 weigh alike: among them the latest goes first.
        piece = (min(1 + statement.score, 9), _quote(statement))
        pieces.append(piece)
        if statement.speaker == "assistant" and _greets(statement.text):
            greetings[id(piece)] = text.names(statement.text)
    order = {id(piece): index for index, piece in enumerate(pieces)}

    def named_elsewhere(piece: tuple[int, str]) -> bool:
        if id(piece) not in greetings:
            return False
        others = text.vocabulary(" ".join(o[1] for o in pieces if o is not piece))
        return all(text.stem(name) in others for name in greetings[id(piece)])

    while len(pieces) > 1 and (
        len(pieces) > MAX_SENTENCES or len(" ".join(t for _, t in pieces)) > max_chars
    ):
        pieces.remove(min(pieces, key=lambda p: (not named_elsewhere(p), p[0], -order[id(p)])))
    content = " ".join(piece for _, piece in pieces).strip()
    if len(content) > max_chars:
        content = content[: max_chars - 1].rsplit(" ", 1)[0] + "…"
    return content


def _greets(sentence: str) -> bool:
    """The sentence's one value is one name, and it says nothing was done: a greeting or a
    comment ("Hello Hannah, what a lovely trip"), in any language. Two names are a fact of
    who is with whom ("You and Hannah are at Chez Marcel")."""
    return (
        len(text.names(sentence)) == 1
        and not (text.numbers(sentence) or text.references(sentence))
        and not language.CONFIRMATION.search(sentence)
    )


def _quote(statement: facts.Statement) -> str:
    said = " ".join(statement.text.split()).replace('"', "'")
    if said[-1] not in ".!?":
        said += "."
    verb = "The user said" if statement.speaker == "user" else "The assistant confirmed"
    return f'{verb}: "{said}"'
