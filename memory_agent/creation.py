"""Writing one memory from a conversation: the model's summary, checked against the
conversation, completed from the conversation's own statements where it falls short.

1. `facts.key_statements` finds what is worth remembering. With none (small talk, a general
   question), nothing is written and no model is asked: such a conversation does not spend a
   memory slot.
2. The model writes the memory with the seed's creation prompt.
3. Each sentence of its answer is kept only if it is about the user in the third person,
   does not carry transcript labels, and is grounded in the conversation (its names and
   numbers appear there, and most of its words).
4. A key statement the kept sentences do not carry is added in the speaker's own words
   (`The user said: "…"`), so the fact is kept even when the model missed or garbled it.
5. Within `max_chars` and four sentences; the user's own words outrank the model's where
   something must go. One sentence that holds a fact is a memory.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence, Set
from dataclasses import dataclass
from typing import Literal

from memory_agent import facts, prompts, text
from memory_agent.chat_model import ChatMessage, ChatReply
from memory_agent.errors import InvalidMemoryText
from memory_agent.validation import MAX_SENTENCES, clean_model_text, split_sentences

Ask = Callable[[list[ChatMessage]], Awaitable[ChatReply]]
MemorySource = Literal["model", "model+statements", "statements"]

_TRANSCRIPT_LABEL = re.compile(r"\b(user|assistant|tool|system)\s*:", re.IGNORECASE)
_FIRST_PERSON_SUBJECT = re.compile(r"(^|[^\"“'])\b(I|I'm|I've|I'd|my|me|we|our)\b")
# A memory sentence speaks of the user (or goes on about them after one that does); one that
# does not is the model copying the chat.
_NAMES_THE_USER = re.compile(r"\buser\b", re.I)
_GOES_ON_ABOUT_THE_USER = re.compile(r"^(they|their|he|she|his|her)\b", re.I)
# A memory records; a sentence that speaks to "you" is advice or chat, not a record.
_SECOND_PERSON = re.compile(r"(^|[^\"“'])\b(you|your|you're|you've|yours)\b", re.I)
_MIN_SENTENCE_CHARS = 12


@dataclass(frozen=True)
class WrittenMemory:
    content: str
    source: MemorySource


class MemoryWriter:
    def __init__(self, ask: Ask, *, max_chars: int, max_transcript_chars: int) -> None:
        self._ask = ask
        self._max_chars = max_chars
        self._max_transcript_chars = max_transcript_chars

    async def write(self, messages: Sequence[ChatMessage]) -> WrittenMemory | None:
        """The memory for the conversation, or None when it holds nothing worth keeping.

        Raises `ChatModelError` when the model fails, `InvalidMemoryText` when the
        conversation has no messages.
        """
        turns = [(m.role, m.content) for m in messages if m.role in ("user", "assistant")]
        if not any(content.strip() for _, content in turns):
            raise InvalidMemoryText("the conversation has no messages to remember")
        statements = facts.key_statements(turns)
        if not statements:
            return None
        transcript = prompts.format_transcript(messages)
        if len(transcript) > self._max_transcript_chars:
            # The end of a conversation holds its outcome; keep that part.
            transcript = "[earlier turns omitted]\n" + transcript[-self._max_transcript_chars :]
        reply = await self._ask(prompts.creation_messages(transcript, statements))
        source = text.vocabulary(" ".join(content for _, content in turns))
        written = self._compose(self._grounded_sentences(reply.text, source), statements)
        return written if written.content else None

    def _grounded_sentences(self, answer: str, source: Set[str]) -> list[str]:
        kept: list[str] = []
        for sentence in split_sentences(clean_model_text(answer)):
            if _rejection(sentence, source, follows_the_user=bool(kept)) is None:
                kept.append(sentence)
        return kept

    def _compose(
        self, kept: list[str], statements: Sequence[facts.Statement]
    ) -> WrittenMemory:
        pieces: list[tuple[int, str]] = []  # (priority: lower goes first when cutting, text)
        model_text = " ".join(kept)
        for sentence in kept:
            carries = any(facts.covers(sentence, s.text) for s in statements)
            pieces.append((2 if carries else 0, sentence))
        for statement in statements:
            if not facts.covers(model_text, statement.text):
                pieces.append((1 + statement.score, _quote(statement)))
        order = {id(piece): index for index, piece in enumerate(pieces)}
        while len(pieces) > 1 and (
            len(pieces) > MAX_SENTENCES or len(" ".join(t for _, t in pieces)) > self._max_chars
        ):
            pieces.remove(min(pieces, key=lambda p: (p[0], -order[id(p)])))
        content = " ".join(piece for _, piece in pieces).strip()
        if len(content) > self._max_chars:
            content = content[: self._max_chars - 1].rsplit(" ", 1)[0] + "…"
        quoted = sum(1 for _, piece in pieces if piece not in kept)
        source: MemorySource = (
            "statements" if quoted == len(pieces) else "model+statements" if quoted else "model"
        )
        return WrittenMemory(content, source)


def _rejection(sentence: str, source: Set[str], *, follows_the_user: bool) -> str | None:
    if len(sentence) < _MIN_SENTENCE_CHARS:
        return "too short"
    if _TRANSCRIPT_LABEL.search(sentence):
        return "transcript label"
    about_the_user = _NAMES_THE_USER.search(sentence) or (
        follows_the_user and _GOES_ON_ABOUT_THE_USER.match(sentence)
    )
    if _FIRST_PERSON_SUBJECT.search(sentence) or not about_the_user:
        return "not about the user in the third person"
    if _SECOND_PERSON.search(sentence):
        return "addresses someone"
    if sentence.rstrip().endswith("?"):
        return "a question"
    if not facts.is_grounded(sentence, source):
        return "not in the conversation"
    return None


def _quote(statement: facts.Statement) -> str:
    said = " ".join(statement.text.split()).replace('"', "'")
    if said[-1] not in ".!?":
        said += "."
    verb = "The user said" if statement.speaker == "user" else "The assistant confirmed"
    return f'{verb}: "{said}"'
