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
5. A conversation too long for one prompt is read in parts (`parts`), each part's sentences
   grounded in its own turns; one more call writes the memory of the whole from them (and says
   what it updates), its sentences grounded in the whole conversation.

No word of any language is read here; compaction is `model_compaction`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.errors import ChatModelError, InvalidMemoryText
from memory_agent.core.kinds import BUNDLED_KINDS, Kinds
from memory_agent.core.sentences import ends_as_a_sentence, joined_as_clauses
from memory_agent.core.unicode_forms import folded
from memory_agent.models import Memory
from memory_agent.writers.answers import MAX_SENTENCES
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.model import consolidation, grounding, prompts
from memory_agent.writers.model.answers import MemoryAnswer, memory_schema, parse_memory_answer
from memory_agent.writers.model.compaction import ModelCompaction
from memory_agent.writers.model.parts import MAX_PARTS, TranscriptPart, transcript_parts
from memory_agent.writers.pairs import PairVerdict
from memory_agent.writers.prompts import memory_line
from memory_agent.writers.writer import MemoryWriter
from memory_agent.writers.written import (
    GroundingRecord,
    NothingToKeep,
    UpdateClaim,
    WrittenMemory,
)

log = logging.getLogger("mnemoloop.memory")


@dataclass(frozen=True)
class _Grounded:
    sentence: str
    quote: str
    # The model says it is about the person (their profile's).
    about_person: bool


@dataclass(frozen=True)
class _Reading:
    """What one memory prompt gave: its answer, the sentences grounded (first given or when
    asked again), and how many were dropped."""

    answer: MemoryAnswer
    grounded: list[_Grounded]
    dropped: int


class ModelWriter(MemoryWriter):
    kind = "model"
    reads_space = True

    def __init__(
        self, model: MemoryModel, limits: MemoryLimits, kinds: Kinds = BUNDLED_KINDS
    ) -> None:
        super().__init__(model, limits, kinds)
        self._record = GroundingRecord()
        self.record = self._record

    def compaction(self, limits: MemoryLimits) -> ModelCompaction:
        return ModelCompaction(self._model, limits)

    async def judge_pair(
        self, older: Memory, newer: Memory, *, same_space: bool
    ) -> PairVerdict:
        """The model's verdict, under its EDIT's rules (`model.consolidation`)."""
        return await consolidation.judge(
            self._model, self._limits, older, newer, same_space=same_space
        )

    async def write(
        self, messages: Sequence[ChatMessage], space: Sequence[Memory], now: datetime
    ) -> WrittenMemory | NothingToKeep:
        turns = tuple(m.content for m in messages if m.role != "system")
        if not any(turn.strip() for turn in turns):
            raise InvalidMemoryText("the conversation has no messages to remember")
        count = self._model.count_tokens
        today = now.date().isoformat()
        # Private memories are never shown to a model (nor pinned ones, which nothing may
        # change); the newest that fit a third of the prompt.
        shown = _newest_within(
            [m for m in space if not m.private and not m.pinned][-self._limits.memories :],
            self._limits.prompt_tokens // 3,
            count,
        )
        ids = [m.id for m in shown]
        lines = prompts.transcript_lines(messages)
        transcript = "\n".join(lines)
        asked = prompts.creation_messages(
            transcript, shown, max_chars=self._limits.max_chars, today=today,
            kinds=self._kinds,
        )
        if count(asked[0].content) <= self._first_prompt_tokens:
            reading = await self._read(asked, self._schema(ids), turns)
            return self._written(reading, reading.dropped, "", shown, messages, now)
        # Too long for one prompt: in parts, each prompt the part's own (no memories shown).
        frame = prompts.creation_messages(
            "", max_chars=self._limits.max_chars, today=today, part=(MAX_PARTS, MAX_PARTS),
            kinds=None,
        )
        parts = transcript_parts(lines, self._first_prompt_tokens - count(frame[0].content), count)
        reading, dropped = await self._read_in_parts(parts, shown, turns, today)
        note = f"read in {len(parts)} parts of {len(lines)} turns"
        return self._written(reading, dropped, note, shown, messages, now)

    async def _read_in_parts(
        self,
        parts: Sequence[TranscriptPart],
        shown: Sequence[Memory],
        turns: tuple[str, ...],
        today: str,
    ) -> tuple[_Reading, int]:
        """A long conversation's memory: each part read on its own (its sentences grounded in
        its own turns), then one memory of all of them (grounded in the whole conversation),
        which also says what it updates; and the sentences dropped on the way. A part whose
        answer is not the JSON is passed over, the others stand; when the last call fails,
        the parts' sentences stand rather than be lost."""
        notes: list[_Grounded] = []
        ends: list[MemoryAnswer] = []
        dropped = 0
        for number, part in enumerate(parts, 1):
            asked = prompts.creation_messages(
                part.text, max_chars=self._limits.max_chars, today=today,
                part=(number, len(parts)), kinds=None,
            )
            own_turns = tuple(turns[i] for i in part.turns)
            try:
                reading = await self._read(asked, self._schema([]), own_turns)
            except InvalidMemoryText as error:
                log.warning("📝 Part %d of %d of a long conversation gave no memory: %s",
                            number, len(parts), error)
                continue
            notes.extend(reading.grounded)
            dropped += reading.dropped
            if reading.answer.keep_until is not None:
                ends.append(reading.answer)
        unique = list({note.sentence: note for note in notes}.values())
        empty = MemoryAnswer(sentences=[])
        if not unique:
            return _Reading(empty, [], 0), dropped
        try:
            unique = await self._within_one_prompt(unique, len(parts), today, turns)
            known = list(shown)
            while True:  # the memories shown that fit beside the parts' sentences, newest kept
                asked = self._combining(unique, len(parts), known, today)
                if self._fits(asked) or not known:
                    break
                known.pop(0)
            combined = await self._read(asked, self._schema([m.id for m in known]), turns)
        except (ChatModelError, InvalidMemoryText) as error:
            # The parts' sentences stand, the first ones first, rather than be lost.
            log.warning("📝 The model's memory of a long conversation's parts failed: %s", error)
            return _Reading(ends[0] if ends else empty, unique, 0), dropped
        if not combined.grounded:
            log.warning("📝 The model kept none of a long conversation's parts; they stand")
            return _Reading(combined.answer, unique, 0), dropped
        answer = combined.answer
        if answer.keep_until is None and ends:
            answer = answer.model_copy(update={"keep_until": ends[0].keep_until})
        return _Reading(answer, combined.grounded, 0), dropped + combined.dropped

    async def _within_one_prompt(
        self, notes: list[_Grounded], parts: int, today: str, turns: tuple[str, ...]
    ) -> list[_Grounded]:
        """The parts' sentences, few enough for one combining prompt: while they are too
        many, each half is first made one memory's sentences of its own (the model chooses
        there too), a call a half."""
        if self._fits(self._combining(notes, parts, [], today)) or len(notes) < 2:
            return notes
        half = len(notes) // 2
        staged: list[_Grounded] = []
        for group in (notes[:half], notes[half:]):
            group = await self._within_one_prompt(group, parts, today, turns)
            reading = await self._read(self._combining(group, parts, [], today),
                                       self._schema([]), turns)
            staged.extend(reading.grounded or group[:1])
        # Fewer each round, until they fit.
        return await self._within_one_prompt(staged[: len(notes) - 1], parts, today, turns)

    def _combining(
        self, notes: Sequence[_Grounded], parts: int, known: Sequence[Memory], today: str
    ) -> list[ChatMessage]:
        return prompts.combining_messages(
            [(n.sentence, n.quote, n.about_person) for n in notes], parts, known,
            max_chars=self._limits.max_chars, today=today, kinds=self._kinds,
        )

    def _fits(self, asked: Sequence[ChatMessage]) -> bool:
        return self._model.count_tokens(asked[0].content) <= self._first_prompt_tokens

    @property
    def _first_prompt_tokens(self) -> int:
        """A prompt's budget, less the room asking again adds to it."""
        return max(self._limits.prompt_tokens - prompts.RETRY_TOKENS,
                   self._limits.prompt_tokens // 2)

    def _schema(self, memory_ids: list[int]) -> dict[str, object]:
        return memory_schema(memory_ids, max_chars=self._limits.max_chars,
                             kinds=self._kinds.names)

    async def _read(
        self, asked: list[ChatMessage], schema: dict[str, object], turns: tuple[str, ...]
    ) -> _Reading:
        """The model's answer to `asked`, its sentences grounded in `turns`: a reply that is
        not the JSON is asked for again once (a second miss raises `InvalidMemoryText`), and
        the sentences that fail are asked for again once."""
        reply = await self._model.ask(asked, schema)
        try:
            answer = parse_memory_answer(reply.text)
        except InvalidMemoryText as error:
            log.info("📝 The model's memory was not the JSON asked for (%s); asked again", error)
            reply = await self._model.ask(
                prompts.json_retry_messages(asked, error.reason), schema
            )
            answer = parse_memory_answer(reply.text)
        transcript = grounding.Transcript(turns)
        grounded, failures = self._checked(answer, transcript)
        recovered: list[_Grounded] = []
        if failures:
            recovered = await self._asked_again(asked, failures, grounded, transcript)
        dropped = len(failures) - len(recovered)
        self._record.written += len(grounded) + len(failures)
        self._record.grounded += len(grounded)
        self._record.recovered += len(recovered)
        self._record.dropped += dropped
        if dropped:
            for sentence, why in failures:
                log.warning("📝 A sentence of the model's memory failed (%s): %s", why, sentence)
            log.warning("📝 Dropped %d of them after asking again", dropped)
        return _Reading(answer, grounded + recovered, dropped)

    def _written(
        self,
        reading: _Reading,
        dropped: int,
        note: str,
        shown: Sequence[Memory],
        messages: Sequence[ChatMessage],
        now: datetime,
    ) -> WrittenMemory | NothingToKeep:
        """The memory the reading gives, within the limits, with the updates it claims."""
        notes = [note] if note else []
        if dropped:
            notes.append(f"{dropped} sentence(s) not grounded, dropped")
        note = "; ".join(notes)
        content = self._within_limits([g.sentence for g in reading.grounded])
        if not content:
            return NothingToKeep(note or "the model found nothing worth keeping")
        shown_at = {m.id: m.updated_at for m in shown}
        claims: dict[int, UpdateClaim] = {}
        if not dropped:
            # A claim rests on the memory's sentences: with one dropped, none is applied.
            for claim in reading.answer.updates:
                if claim.memory_id in shown_at:  # the first claim of an id stands
                    claims.setdefault(claim.memory_id, UpdateClaim(
                        claim.memory_id, " ".join(claim.still_true.split()),
                        shown_at[claim.memory_id],
                    ))
        personal = [g.sentence for g in reading.grounded
                    if g.about_person and g.sentence in content]
        return WrittenMemory(
            content, "model", updates=tuple(claims.values()), note=note,
            about_person=self._within_limits(personal) if personal else "",
            keep_until=_kept_until(reading.answer, messages, now),
            kind=self._kinds.of(reading.answer.kind),
        )

    async def _asked_again(
        self,
        asked: list[ChatMessage],
        failures: list[tuple[str, str]],
        grounded: list[_Grounded],
        transcript: grounding.Transcript,
    ) -> list[_Grounded]:
        """The sentences grounded when the failed ones are asked for again once (at most as
        many as failed, none already kept): a failed call or an answer that is not the JSON
        recovers nothing, and the sentences kept so far stand."""
        schema = self._schema([])
        try:
            reply = await self._model.ask(prompts.retry_messages(asked, failures), schema)
            again = parse_memory_answer(reply.text)
        except (ChatModelError, InvalidMemoryText) as error:
            log.warning("📝 Asking again for the model's failed sentences failed: %s", error)
            return []
        kept = {g.sentence for g in grounded}
        new = {g.sentence: g for g in self._checked(again, transcript)[0]
               if g.sentence not in kept}
        return list(new.values())[: len(failures)]

    def _checked(
        self, answer: MemoryAnswer, transcript: grounding.Transcript
    ) -> tuple[list[_Grounded], list[tuple[str, str]]]:
        """The answer's sentences whose quotes are found in the transcript, and the others
        with why (`(sentence, why)`)."""
        grounded: list[_Grounded] = []
        failures: list[tuple[str, str]] = []
        for given in answer.sentences:
            sentence = ends_as_a_sentence(given.text)
            if not folded(sentence):
                continue  # no letter nor digit: nothing to keep
            why = grounding.quote_found(given.quote, transcript)
            if why is None and len(sentence) > self._limits.max_chars:
                why = f"it is longer than the {self._limits.max_chars}-character limit"
            if why is None:
                grounded.append(_Grounded(sentence, given.quote, given.about_person))
            else:
                failures.append((sentence, why))
        return grounded, failures

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

def _newest_within(
    memories: Sequence[Memory], tokens: int, count: Callable[[str], int]
) -> list[Memory]:
    """The newest of `memories` (oldest first) whose lines fit within `tokens`, oldest
    first: a full space must not crowd the conversation out of the model's context."""
    kept: list[Memory] = []
    used = 0
    for memory in reversed(memories):
        used += count(memory_line(memory)) + 1
        if used > tokens:
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
