"""The extractive writer: the floor for a model that cannot write memories (the bundled 135M
model), and for no model at all.

A memory is the conversation's key statements (`key_statements`: what the user stated,
decided or asked to be remembered, and what the assistant confirmed it did), each in the
speaker's own words (`The user said: "…"`), the best within four sentences and the length
limit. No model writes the text, so the same conversation gives the same memory, always.
Nothing worth keeping is a conversation with no key statement (small talk, a general
question): it spends no memory slot.

What the new memory updates is retired by the retention policy's rules, and a space over its
cap is brought back to it by the model's DELETE/EDIT, checked by the same policy
(`compaction.RetentionCompaction`). A date the user asked the memory be kept until
("remember this until Friday") is read by the same words (`words.expiry`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from memory_agent.core import patterns as re
from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.errors import InvalidMemoryText
from memory_agent.core.sentences import ends_as_a_sentence
from memory_agent.models import Memory
from memory_agent.writers.answers import MAX_SENTENCES
from memory_agent.writers.asking import MemoryLimits
from memory_agent.writers.extractive import consolidation
from memory_agent.writers.extractive.compaction import RetentionCompaction
from memory_agent.writers.extractive.statements import (
    Statement,
    about_the_person,
    is_chat,
    is_errand,
    key_statements,
    readable,
)
from memory_agent.writers.extractive.words import language, text
from memory_agent.writers.extractive.words.expiry import remembered_until
from memory_agent.writers.pairs import PairVerdict
from memory_agent.writers.writer import MemoryWriter
from memory_agent.writers.written import NothingToKeep, WrittenMemory


class ExtractiveWriter(MemoryWriter):
    kind = "extractive"
    reads_space = False

    def compaction(self, limits: MemoryLimits) -> RetentionCompaction:
        return RetentionCompaction(self._model, limits)

    async def judge_pair(
        self, older: Memory, newer: Memory, *, same_space: bool
    ) -> PairVerdict:
        """By the retention policy, no model call (`extractive.consolidation`)."""
        return consolidation.judge(older, newer, same_space=same_space)

    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory], now: datetime
    ) -> WrittenMemory | NothingToKeep:
        if not any(m.content.strip() for m in messages if m.role != "system"):
            raise InvalidMemoryText("the conversation has no messages to remember")
        # What the bundled model replied is never a confirmation of something done: it
        # often makes up what it says it did.
        # A tool's result is what the app did (a booking, with the reference it returned):
        # read as the assistant's confirmation.
        turns = [
            ("assistant", _tool_said(m)) if m.role == "tool"
            else (m.role, m.content if m.role == "user" else _without_imitations(m.content))
            for m in messages
            if m.role in ("user", "tool") or (m.role == "assistant" and not m.from_bundled_model)
        ]
        found = key_statements(turns)
        content = compose(found, self._limits.max_chars)
        if not content:
            users_text = " ".join(c for role, c in turns if role == "user")
            if not readable(users_text):
                return NothingToKeep(
                    "no language file covers the conversation's language, and no statement of"
                    " the user carries a value or is long enough to keep"
                )
            return NothingToKeep()
        personal = [s for s in found if about_the_person(s)]
        return WrittenMemory(
            content, "statements", asked_model=False,
            about_person=compose(personal, self._limits.max_chars) if personal else "",
            keep_until=remembered_until(messages, now),
            # The floor reads no kind from words: a memory of the person's own lasting facts
            # alone is of their profile, any other of the default kind.
            kind=self._kinds.of("profile" if len(personal) == len(found) else None),
        )


def _tool_said(message: ChatMessage) -> str:
    """A tool's result as a sentence: its JSON fields as "key value" pairs ("book_table
    returned: confirmation LUI-2231, status confirmed."), other text as it came."""
    try:
        result = json.loads(message.content)
    except ValueError:
        result = None
    said = ", ".join(_fields(result)) if isinstance(result, dict | list) else message.content
    return f"{message.tool_name or 'a tool'} returned: {said.strip()}"


def _fields(value: Any, key: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for name, inner in value.items():
            yield from _fields(inner, f"{key} {name}".strip().replace("_", " "))
    elif isinstance(value, list):
        for inner in value:
            yield from _fields(inner, key)
    elif value is not None and value != "":
        yield f"{key} {value}".strip()


# What an assistant writes when it imitates a memory, the memory block or a transcript ("The
# user said: …", "(memories for app: …)", "User: …"): read as its own confirmation, it would
# put words in the user's mouth. These are this service's own labels, whatever the language.
_IMITATION = re.compile(
    r"\b(?:the user said|the assistant confirmed)\s*:|\(memories for app:"
    r"|^\s*(?:user|assistant|tool)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def _without_imitations(reply: str) -> str:
    """The reply without its lines that imitate a memory, the memory block or a transcript:
    the model's words never become the user's."""
    return "\n".join(line for line in reply.splitlines() if not _IMITATION.search(line))


def compose(statements: Sequence[Statement], max_chars: int) -> str:
    """The statements quoted, the best within four sentences and `max_chars`: the lowest
    scored go first, and before them an assistant's quote that greets someone the others
    name ("Hello Hannah, what a lovely trip" beside her own words). A long sentence keeps only
    its clauses that hold a fact; the statements one speaker made in a row share one quote."""
    pieces: list[tuple[int, Statement]] = []  # (priority: lower goes first, statement)
    greetings: dict[int, frozenset[str]] = {}  # the assistant's quotes that greet: whom
    for statement in statements:
        # Scores over 8 weigh alike: among them the latest goes first.
        piece = (min(1 + statement.score, 9), _trimmed(statement))
        pieces.append(piece)
        if statement.speaker == "assistant" and _greets(statement.text):
            greetings[id(piece)] = text.names(statement.text)
    order = {id(piece): index for index, piece in enumerate(pieces)}

    def named_elsewhere(piece: tuple[int, Statement]) -> bool:
        if id(piece) not in greetings:
            return False
        others = text.vocabulary(" ".join(o[1].text for o in pieces if o is not piece))
        return all(text.stem(name) in others for name in greetings[id(piece)])

    while len(pieces) > 1 and (
        len(pieces) > MAX_SENTENCES or len(_quoted(p for _, p in pieces)) > max_chars
    ):
        pieces.remove(min(pieces, key=lambda p: (not named_elsewhere(p), p[0], -order[id(p)])))
    content = _quoted(p for _, p in pieces)
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


# A sentence longer than this keeps only its clauses that hold a fact.
_LONG_SENTENCE = 90


def _trimmed(statement: Statement) -> Statement:
    """The statement without its clauses of chat: a greeting or a thanks, a question to the
    other speaker, an errand for today, words that say nothing ("Hi! Thanks for the help last
    time, so my daughter Mia turns 7 on May 3, can you plan it?" keeps "my daughter Mia turns
    7 on May 3"), "…" where they were. A clause of content is never cut: whether it holds a
    fact cannot be told from its words alone ("critical should go to opsgenie")."""
    if len(statement.text) <= _LONG_SENTENCE:
        return statement
    parts = text.clauses(statement.text)
    kept = [part for part in parts if not _chat_clause(part)]
    if not kept or len(kept) == len(parts):
        return statement
    trimmed = " … ".join(part.rstrip(",;: ") for part in kept)
    if parts[0] is not kept[0]:
        trimmed = "… " + trimmed
    return replace(statement, text=trimmed)


def _chat_clause(clause: str) -> bool:
    return (
        is_chat(clause)
        or is_errand(clause)
        or clause.rstrip().endswith("?")
        or not (text.content_words(clause) or text.numbers(clause))
    )


def _quoted(statements: Iterable[Statement]) -> str:
    """The statements in quotes, those one speaker made in a row in one:
    `The user said: "…" The assistant confirmed: "…"`."""
    runs: list[tuple[str, list[str]]] = []
    for statement in statements:
        said = ends_as_a_sentence(statement.text.replace('"', "'"))
        if runs and runs[-1][0] == statement.speaker:
            runs[-1][1].append(said)
        else:
            runs.append((statement.speaker, [said]))
    return " ".join(
        f'{"The user said" if speaker == "user" else "The assistant confirmed"}: "{" ".join(said)}"'
        for speaker, said in runs
    )
