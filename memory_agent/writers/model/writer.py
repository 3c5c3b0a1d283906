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
from datetime import UTC, date, datetime, time, timedelta

from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.errors import ChatModelError, InvalidMemoryText
from memory_agent.core.unicode_forms import folded
from memory_agent.models import Memory
from memory_agent.writers.answers import MAX_SENTENCES
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.model import grounding, prompts
from memory_agent.writers.model.answers import MemoryAnswer, memory_schema, parse_memory_answer
from memory_agent.writers.model.compaction import ModelCompaction
from memory_agent.writers.sentences import ends_as_a_sentence, joined_as_clauses
from memory_agent.writers.writer import MemoryWriter
from memory_agent.writers.written import (
    GroundingRecord,
    NothingToKeep,
    UpdateClaim,
    WrittenMemory,
)

log = logging.getLogger("mnemoloop.memory")


@dataclass(frozen=True)
class _Checked:
    kept: list[str]
    failures: list[tuple[str, str]]  # (sentence, why)
    # The kept sentences the model says are about the person (their profile's).
    about_person: list[str] = field(default_factory=list)


class ModelWriter(MemoryWriter):
    kind = "model"
    reads_space = True

    def __init__(self, model: MemoryModel, limits: MemoryLimits) -> None:
        super().__init__(model, limits)
        self._record = GroundingRecord()
        self.record = self._record

    def compaction(self, limits: MemoryLimits) -> ModelCompaction:
        return ModelCompaction(self._model, limits)

    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory], now: datetime
    ) -> WrittenMemory | NothingToKeep:
        turns = tuple(m.content for m in messages if m.role != "system" and m.content.strip())
        if not turns:
            raise InvalidMemoryText("the conversation has no messages to remember")
        # Private memories are never shown to a model (nor pinned ones, which nothing may
        # change); the newest that fit a third of the room, the transcript the rest.
        shown = _newest_within(
            [m for m in space if not m.private and not m.pinned][-self._limits.memories :],
            self._limits.transcript_chars // 3,
        )
        room = self._limits.transcript_chars - sum(len(m.content) + 40 for m in shown)
        transcript = prompts.format_transcript(messages)
        if len(transcript) > room:
            # The end of a conversation holds its outcome; keep that part.
            transcript = "[earlier turns omitted]\n" + transcript[-room:]
        asked = prompts.creation_messages(
            transcript, shown, max_chars=self._limits.max_chars, today=now.date().isoformat()
        )
        schema = memory_schema([m.id for m in shown], max_chars=self._limits.max_chars)
        reply = await self._model.ask(asked, schema)
        try:
            answer = parse_memory_answer(reply.text)
        except InvalidMemoryText as error:
            # Asked again once with the reason; a second miss ends the job with it.
            log.info("📝 The model's memory was not the JSON asked for (%s); asked again", error)
            reply = await self._model.ask(
                prompts.json_retry_messages(asked, reply.text, error.reason), schema
            )
            answer = parse_memory_answer(reply.text)
        checked = self._checked(answer, turns)
        kept, failed = checked.kept, checked.failures
        recovered: list[str] = []
        if failed:
            recovered = await self._asked_again(asked, reply.text, failed, kept, turns)
        dropped = len(failed) - len(recovered)
        self._record.written += len(kept) + len(failed)
        self._record.grounded += len(kept)
        self._record.recovered += len(recovered)
        self._record.dropped += dropped
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
            keep_until=_kept_until(answer, messages, now),
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
        schema = memory_schema([], max_chars=self._limits.max_chars)
        try:
            reply = await self._model.ask(prompts.retry_messages(asked, answer, failures), schema)
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
            sentence = ends_as_a_sentence(given.text)
            if not folded(sentence):
                continue  # no letter nor digit: nothing to keep
            why = grounding.quote_found(given.quote, turns)
            if why is None and len(sentence) > self._limits.max_chars:
                why = f"it is longer than the {self._limits.max_chars}-character limit"
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
                *units[:last], joined_as_clauses(units[last:])
            ]
            content = " ".join(kept)
            if len(content) <= self._limits.max_chars:
                return content
            units.pop()
        return ""

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


def _kept_until(
    answer: MemoryAnswer, messages: Sequence[ChatMessage], now: datetime
) -> datetime | None:
    """The end of the day the user asked the memory be kept until, in UTC: when the model
    gave a date that is not past and quoted the user's words asking it; else None."""
    asked = answer.keep_until
    if asked is None:
        return None
    try:
        day = date.fromisoformat(asked.date)
    except ValueError:
        return None
    users = tuple(m.content for m in messages if m.role == "user")
    if day < now.date() or grounding.quote_found(asked.quote, users) is not None:
        return None
    try:
        return datetime.combine(day + timedelta(days=1), time(), UTC)
    except OverflowError:
        return None  # the last day of the calendar: no end to give it
