"""The model writer: the configured model writes the memory and decides what it updates.

1. The model is shown the seed's creation prompt, the transcript and the space's memories
   (each with its id), and answers in `answers.memory_schema`: sentences in its own words,
   each with the words of the conversation it rests on (its quote), and the memories the
   conversation gives newer values for. No sentences: nothing worth keeping.
2. A sentence is kept when its quote is found in the transcript (`grounding.quote_found`:
   case, spacing, punctuation and every script's digits aside). What the sentence itself says
   is not compared with the transcript: it may be a translation, "15:00" for "3 pm".
3. The sentences that fail are asked for again once, with the reason (pydantic-ai's
   `ModelRetry`); those that fail again are dropped, counted and logged. Nothing is put in
   their place.
4. At most four sentences within the length limit, the first ones first.

No word of any language is read here; compaction is `model_compaction`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_agent import grounding, prompts
from memory_agent.answers import (
    MAX_SENTENCES,
    MemoryAnswer,
    memory_schema,
    parse_memory_answer,
)
from memory_agent.asking import AskJson
from memory_agent.chat_model import ChatMessage
from memory_agent.errors import ChatModelError, InvalidMemoryText
from memory_agent.model_compaction import ModelCompactor
from memory_agent.models import Memory
from memory_agent.steps import DecidedStep
from memory_agent.writing import (
    MemoryWriter,
    NothingToKeep,
    UpdateClaim,
    WrittenMemory,
)

log = logging.getLogger("mnemoloop.memory")

# The model's record warns (never switches anything) when at least this share of at least
# this many sentences was dropped.
_WARN_SHARE = 0.2
_WARN_AFTER = 20


@dataclass
class GroundingRecord:
    """The model's sentences since start: written, grounded as first given, grounded when
    asked again, and dropped. A metric and a health warning, never a switch."""

    written: int = 0
    grounded: int = 0
    recovered: int = 0
    dropped: int = 0

    @property
    def ungrounded_share(self) -> float | None:
        return self.dropped / self.written if self.written else None

    def warning(self) -> str | None:
        """What an operator should know when many of the model's sentences were dropped
        (at least a fifth of 20 or more)."""
        share = self.ungrounded_share
        if share is None or self.written < _WARN_AFTER or share < _WARN_SHARE:
            return None
        return (
            f"{share:.0%} of the memory model's sentences were not grounded in their "
            "conversations and were dropped: a model that quotes the conversation keeps "
            "more, and MNEMOLOOP_MEMORY_WRITER=extractive keeps the speakers' own words"
        )


@dataclass(frozen=True)
class _Checked:
    kept: list[str]
    failures: list[tuple[str, str]]  # (sentence, why)
    # The kept sentences the model says are about the person (their profile's).
    about_person: list[str] = field(default_factory=list)


class ModelWriter(MemoryWriter):
    kind = "model"

    def __init__(
        self, ask_json: AskJson, *, limit: int, max_chars: int, max_transcript_chars: int
    ) -> None:
        self._ask_json = ask_json
        self._limit = limit
        self._max_chars = max_chars
        self._max_transcript_chars = max_transcript_chars
        self._compactor = ModelCompactor(ask_json, limit=limit, max_chars=max_chars)
        self.record = GroundingRecord()

    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory]
    ) -> WrittenMemory | NothingToKeep:
        turns = tuple(m.content for m in messages if m.role != "system" and m.content.strip())
        if not turns:
            raise InvalidMemoryText("the conversation has no messages to remember")
        # Private memories are never shown to a model (nor pinned ones, which nothing may
        # change); the newest that fit a third of the room, the transcript the rest.
        shown = _newest_within(
            [m for m in space if not m.private and not m.pinned][-self._limit :],
            self._max_transcript_chars // 3,
        )
        room = self._max_transcript_chars - sum(len(m.content) + 40 for m in shown)
        transcript = prompts.format_transcript(messages)
        if len(transcript) > room:
            # The end of a conversation holds its outcome; keep that part.
            transcript = "[earlier turns omitted]\n" + transcript[-room:]
        asked = prompts.creation_messages(transcript, shown, max_chars=self._max_chars)
        schema = memory_schema([m.id for m in shown], max_chars=self._max_chars)
        reply = await self._ask_json(asked, schema)
        try:
            answer = parse_memory_answer(reply.text)
        except InvalidMemoryText as error:
            # Asked again once with the reason; a second miss ends the job with it.
            log.info("📝 The model's memory was not the JSON asked for (%s); asked again", error)
            reply = await self._ask_json(
                prompts.json_retry_messages(asked, reply.text, error.reason), schema
            )
            answer = parse_memory_answer(reply.text)
        checked = self._checked(answer, turns)
        kept, failed = checked.kept, checked.failures
        recovered: list[str] = []
        if failed:
            recovered = await self._asked_again(asked, reply.text, failed, kept, turns)
        dropped = len(failed) - len(recovered)
        self.record.written += len(kept) + len(failed)
        self.record.grounded += len(kept)
        self.record.recovered += len(recovered)
        self.record.dropped += dropped
        if dropped:
            for sentence, why in failed:
                log.warning("📝 A sentence of the model's memory failed (%s): %s", why, sentence)
            log.warning("📝 Dropped %d of them after asking again", dropped)
        content = self._within_limits(kept + recovered)
        note = f"{dropped} sentence(s) not grounded, dropped" if dropped else ""
        if not content:
            return NothingToKeep(note or "the model found nothing worth keeping")
        shown_at = {m.id: m.updated_at for m in shown}
        claims: dict[int, UpdateClaim] = {}
        if not dropped:
            # A claim rests on the memory's sentences: with one dropped, none is applied.
            for claim in answer.updates:
                if claim.memory_id in shown_at:  # the first claim of an id stands
                    claims.setdefault(claim.memory_id, UpdateClaim(
                        claim.memory_id, " ".join(claim.still_true.split()),
                        shown_at[claim.memory_id],
                    ))
        personal = [s for s in checked.about_person if s in content]
        return WrittenMemory(
            content, "model", updates=tuple(claims.values()), note=note,
            about_person=self._within_limits(personal) if personal else "",
        )

    async def _asked_again(
        self,
        asked: list[ChatMessage],
        answer: str,
        failures: list[tuple[str, str]],
        kept: list[str],
        turns: tuple[str, ...],
    ) -> list[str]:
        """The sentences grounded when the failed ones are asked for again once (at most as
        many as failed, none already kept): a failed call or an answer that is not the JSON
        recovers nothing, and the sentences kept so far stand."""
        schema = memory_schema([], max_chars=self._max_chars)
        try:
            reply = await self._ask_json(prompts.retry_messages(asked, answer, failures), schema)
            again = parse_memory_answer(reply.text)
        except (ChatModelError, InvalidMemoryText) as error:
            log.warning("📝 Asking again for the model's failed sentences failed: %s", error)
            return []
        new = [s for s in self._checked(again, turns).kept if s not in kept]
        return list(dict.fromkeys(new))[: len(failures)]

    def _checked(self, answer: MemoryAnswer, turns: tuple[str, ...]) -> _Checked:
        kept: list[str] = []
        failures: list[tuple[str, str]] = []
        about_person: list[str] = []
        for given in answer.sentences:
            sentence = grounding.ends_as_a_sentence(given.text)
            if not grounding.folded(sentence):
                continue  # no letter nor digit: nothing to keep
            why = grounding.quote_found(given.quote, turns)
            if why is None and len(sentence) > self._max_chars:
                why = f"it is longer than the {self._max_chars}-character limit"
            if why is None:
                kept.append(sentence)
                if given.about_person:
                    about_person.append(sentence)
            else:
                failures.append((sentence, why))
        return _Checked(kept, failures, about_person)

    def _within_limits(self, sentences: list[str]) -> str:
        """Four sentences at most, within the length limit. A model that gave more (a
        grammar-bound one cannot) has them joined into the fourth, one clause each, rather
        than lose their facts; the last ones go first while the whole is too long."""
        units = list(dict.fromkeys(sentences))
        while units:
            last = MAX_SENTENCES - 1
            kept = units if len(units) <= MAX_SENTENCES else [
                *units[:last], grounding.joined_as_clauses(units[last:])
            ]
            content = " ".join(kept)
            if len(content) <= self._max_chars:
                return content
            units.pop()
        return ""

    def steps_if_they_fit(
        self, current: Sequence[Memory], written: WrittenMemory
    ) -> list[DecidedStep] | None:
        return self._compactor.steps_if_they_fit(current, written)

    async def decide(
        self, current: Sequence[Memory], written: WrittenMemory, today: str
    ) -> list[DecidedStep]:
        return await self._compactor.decide(current, written, today)

    def fallback(
        self, current: Sequence[Memory], written: WrittenMemory, reason: str
    ) -> list[DecidedStep]:
        return self._compactor.fallback(current, written, reason)


def _newest_within(memories: Sequence[Memory], max_chars: int) -> list[Memory]:
    """The newest of `memories` (oldest first) whose text fits within `max_chars`, oldest
    first: a full space must not crowd the conversation out of the model's context."""
    kept: list[Memory] = []
    used = 0
    for memory in reversed(memories):
        used += len(memory.content) + 40
        if used > max_chars:
            break
        kept.append(memory)
    return kept[::-1]
