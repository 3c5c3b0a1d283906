"""Writing one memory from a conversation: the model's summary, checked against the
conversation, completed from the conversation's own statements where it falls short.

1. `facts.key_statements` finds what is worth remembering. With none (small talk, a general
   question), nothing is written and no model is asked: such a conversation does not spend a
   memory slot. A trusted model (below) is asked all the same: it may see what the checks
   cannot ("runbooks live in the sre-handbook repo"), and answers `NOTHING` where nothing is;
   so is one on its way to trust (`MemoryWriter.promising`), whose words the checks' floor
   may miss in a language they do not cover ("Mam silny odruch wymiotny").
2. The model writes the memory with the seed's creation prompt, or answers `NOTHING` when
   the conversation holds nothing worth remembering: a model that can judge decides. A
   trusted model's prompt also shows what the space already remembers, so it can say whose
   value the conversation gives.
3. Each sentence of its answer is kept unless it can be shown wrong: it speaks in the first
   or second person, carries transcript labels, asks something, says what the conversation
   does not support (a number the conversation lacks, a name neither it nor, for a model
   that writes faithfully, the memories of its space hold, or words mostly its own when it
   holds no value), or is neither about the user nor carries a value of the conversation
   (an impersonal fact, "failover takes 4 minutes", is kept by its value; a trusted model's
   is kept when grounded, and a promising model's when grounded in what the user said or the
   assistant confirmed, not in the assistant's chatter).
4. A key statement whose values the kept sentences do not carry is added in the speaker's
   own words (`The user said: "…"`), so the fact is kept even when the model missed or garbled
   it; not beside a trusted model's answer that passed whole (`MemoryWriter.trusted`). Beside
   a model whose record shows it is not to be trusted, every statement is kept in the
   speaker's words, and the model's sentences only for what the statements do not say.
5. Within `max_chars` and four sentences; the model's sentences that hold facts outrank the
   statements where something must go, but for such a doubted model's, which go first. One
   sentence that holds a fact is a memory.

A model that is not trusted and nearly none of whose sentences add anything
(`MemoryWriter.adds_little`: they fail the checks, say only what the statements say, or rest
on values neither the user stated nor the assistant confirmed) is asked for one memory in
ten; the others are written from the statements alone, which is what its memories came to
anyway, at none of the cost.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence, Set
from dataclasses import dataclass, replace
from typing import Literal

from memory_agent import facts, language, prompts, text
from memory_agent.chat_model import ChatMessage, ChatReply
from memory_agent.errors import InvalidMemoryText
from memory_agent.track_record import TrackRecord
from memory_agent.validation import MAX_SENTENCES, clean_model_text, split_sentences

Ask = Callable[[list[ChatMessage]], Awaitable[ChatReply]]
MemorySource = Literal["model", "model+statements", "statements"]

_TRANSCRIPT_LABEL = re.compile(
    r"\b(user|assistant|tool|system)\s*:|\((user|assistant)\)", re.IGNORECASE
)
# A memory sentence speaks of the user (or goes on about them after one that does), or
# carries a value of the conversation; one that does neither is the model copying the chat.
_GOES_ON_ABOUT_THE_USER = re.compile(r"^(they|their|he|she|his|her)\b", re.I)
_MIN_SENTENCE_CHARS = 12
# The model's answer when the conversation holds nothing worth remembering.
_NOTHING = re.compile(r"^\W*nothing\b", re.I)


@dataclass(frozen=True)
class WrittenMemory:
    content: str
    source: MemorySource
    # False when the model was spared (`TrackRecord.adds_little`).
    asked_model: bool = True


# How many of the model's latest memory sentences tell whether it writes faithfully (at least
# `_TRACK_RECORD_MIN` of them), and the share of them the checks must have kept. A capable
# model passes most (its misses are details from general knowledge), a small one under a
# third; over 40 sentences a writer who passes 85 % on average dips below 80 % now and then,
# and its trust would flap, while 70 % holds it and still leaves small models far below.
_TRACK_RECORD = 40
_TRACK_RECORD_MIN = 10
# How many sentences tell that a model adds nothing to the statements, so that it may be
# spared: fewer than trust needs, since a model that adds anything shows it at once, and each
# memory asked of one that does not costs a full prompt for nothing.
_SPARING_MIN = 6
_TRUSTED_SHARE = 0.7
# A model that passes at least this share is on its way to trust, though its sentences only
# say what the statements say (a faithful writer's do): it is asked every time, so that its
# record can show it. A small model passes under a third.
_NEAR_TRUST_SHARE = 0.5
# How many of a model's first sentences may show it on its way to trust before its record
# is known (`MemoryWriter.promising`).
_FIRST_SIGNS = 3


class MemoryWriter:
    def __init__(self, ask: Ask, *, max_chars: int, max_transcript_chars: int) -> None:
        self._ask = ask
        self._max_chars = max_chars
        self._max_transcript_chars = max_transcript_chars
        # Whether each of the model's latest sentences passed the checks.
        self._kept = TrackRecord(size=_TRACK_RECORD, minimum=_TRACK_RECORD_MIN)
        # Whether each also added to the memory: passed, and said something the statements
        # did not, with values stated or confirmed (`_adds`; a trusted model's words replace
        # the statements, and so add).
        self._added = TrackRecord(size=_TRACK_RECORD, minimum=_SPARING_MIN)
        # Every sentence of the model's memories, and those the checks kept.
        self.sentences_written = 0
        self.sentences_kept = 0

    @property
    def adds_little(self) -> bool:
        """The model is not trusted, nor on its way to trust (`_NEAR_TRUST_SHARE`), and
        nearly none of its latest sentences (enough of them) passed the checks and said
        something the statements did not."""
        return self._may_be_spared and self._added.adds_little

    @property
    def _may_be_spared(self) -> bool:
        return not self._kept.so_far_kept_at_least(_NEAR_TRUST_SHARE, results=_SPARING_MIN)

    @property
    def trusted(self) -> bool:
        """The model's latest memory sentences (enough of them) nearly all passed the
        checks: a model that reads conversations faithfully, whose judgement the retention
        policy may follow where it cannot show it wrong. A small model that garbles or
        invents is never trusted, and the policy keeps what it cannot see to be lost."""
        return self._kept.kept_at_least(_TRUSTED_SHARE)

    @property
    def promising(self) -> bool:
        """The model is trusted, or its record is not yet known and what it shows so far (a
        few sentences) is on the way to trust (`_NEAR_TRUST_SHARE`). Such a model may name
        a name the space's memories hold, and is asked which memories a new one updates
        (each claim checked by `update_claims`): a faithful model need not wait for its
        record to keep the space current, nor fail its first sentences for want of a name
        the space holds. One whose first sentences fail gets neither: a small model recombines the
        names it is given into facts no one stated ("Ben lives in Quito")."""
        return self.trusted or (
            not self._kept.known
            and self._kept.so_far_kept_at_least(_NEAR_TRUST_SHARE, results=_FIRST_SIGNS)
        )

    @property
    def doubted(self) -> bool:
        """The model's record is known and shows it does not write faithfully."""
        return self._kept.known and not self.trusted

    async def write(
        self, messages: Sequence[ChatMessage], known: Sequence[str] = ()
    ) -> WrittenMemory | None:
        """The memory for the conversation, or None when it holds nothing worth keeping.

        `known` is what the app's space already remembers. A trusted model is shown it, to
        tell who and what the conversation speaks of ("him" on the scale is the dog Brando).
        Any other's prompt stays short: it costs a small model time, and such a model would
        only copy it. A `promising` model may name a name it holds (the user's own name,
        which a conversation seldom says, or the dog's): a name the app remembers is no
        invention of a faithful model's. Every value must still come from the conversation.

        Raises `ChatModelError` when the model fails, `InvalidMemoryText` when the
        conversation has no messages.
        """
        turns = [(m.role, m.content) for m in messages if m.role in ("user", "assistant")]
        if not any(content.strip() for _, content in turns):
            raise InvalidMemoryText("the conversation has no messages to remember")
        statements = facts.key_statements(turns)
        # Read before this answer's sentences join the record: they are judged by the record
        # as it stood when the model was asked.
        trusted, doubted, promising = self.trusted, self.doubted, self.promising
        if not statements and not promising:
            # Nothing the checks can see is worth keeping, and the model has not shown it
            # judges better: no call. A trusted model decides for itself (NOTHING or not), and
            # so does one on its way to trust: the checks' floor misses facts said in words
            # (a habit, an allergy) in a language its word classes do not cover.
            return None
        if statements and self._may_be_spared and self._added.spares_the_model():
            # Nearly none of its latest sentences added to the statements, which carry the
            # memory.
            written = replace(self._compose([], statements), asked_model=False)
            return written if written.content else None
        transcript = prompts.format_transcript(messages)
        if len(transcript) > self._max_transcript_chars:
            # The end of a conversation holds its outcome; keep that part.
            transcript = "[earlier turns omitted]\n" + transcript[-self._max_transcript_chars :]
        shown = _newest_within(known, self._max_transcript_chars // 2) if trusted else []
        reply = await self._ask(prompts.creation_messages(transcript, statements, shown))
        answer = clean_model_text(reply.text)
        if _NOTHING.match(answer) and len(answer) < 40:
            return None  # the model judged that nothing here is worth a memory
        said_all = " ".join(content for _, content in turns)
        source = _grounding_words(said_all)
        # The words of the user's turns and of what the assistant confirmed: a sentence with a
        # value among them is a record of the conversation, even when it does not name the
        # user (an assistant's general advice has values of its own).
        stated_text = (
            " ".join([content for role, content in turns if role == "user"])
            + " " + " ".join(s.text for s in statements)
        )
        stated = _grounding_words(stated_text)
        # Who and what the memories name, not when: a date must come from the conversation.
        known_names = frozenset(
            text.stem(name) for name in text.names(" ".join(known if promising else ()))
        ) - text.CALENDAR_NAMES
        sentences = split_sentences(answer)
        sources = _Sources(
            source,
            stated,
            known_names,
            text.names(stated_text),
            # Only a model not trusted is held to it (`_said_by_the_speakers`).
            asserted=frozenset() if trusted else _asserted(turns, statements),
        )
        kept, leaned_on = self._grounded_sentences(
            sentences,
            sources,
            trusted=trusted,
            promising=promising,
            statements_seen=bool(statements),
        )
        said = " ".join(statement.text for statement in statements)
        for sentence in sentences:
            self._added.add(sentence in kept and (trusted or _adds(sentence, said, stated)))
        # A trusted model whose whole answer passed the checks decided what was worth
        # keeping: the statements it left out are not added beside its words.
        # Not when a sentence passed only by the leniency trust earns: the speakers' words
        # then stand beside it.
        faithful = trusted and kept and len(kept) == len(sentences) and not leaned_on
        if doubted:
            # The speakers' own words outrank the paraphrase of a model whose record shows it
            # does not write faithfully: its sentence stays only for what they do not say.
            kept = [sentence for sentence in kept if not facts.covers(said, sentence)]
        written = self._compose(kept, () if faithful else statements, model_first=not doubted)
        return written if written.content else None

    def _grounded_sentences(
        self,
        sentences: Sequence[str],
        sources: _Sources,
        *,
        trusted: bool,
        promising: bool,
        statements_seen: bool,
    ) -> tuple[list[str], int]:
        """The sentences the checks keep, and how many of them passed only by the leniency
        a trusted model earns. A promising model is granted that leniency too, for a sentence
        whose words the user said or the assistant confirmed: else an app's first
        conversations, before any record is known, lose what a capable model wrote in its own
        words. Where the checks saw no statement, each sentence of a model not trusted must be
        such: its own chatter ("the capital of Australia is Canberra") is no memory. The track
        record counts every check, so that leniency cannot earn the trust it rests on."""
        kept: list[str] = []
        leaned_on = 0
        for sentence in sentences:
            rejection = _rejection(sentence, sources, follows_the_user=bool(kept))
            self._kept.add(rejection is None)
            lenient = rejection in _LENIENT_TO_TRUST
            if trusted:
                passed = rejection is None or lenient
            else:
                allowed = rejection is None or (promising and lenient)
                # The leniency, and any sentence where the checks saw no statement, rest on
                # what the speakers asserted.
                held_to_the_speakers = rejection is not None or not statements_seen
                passed = allowed and (
                    not held_to_the_speakers or _said_by_the_speakers(sentence, sources)
                )
            self.sentences_written += 1
            self.sentences_kept += passed
            if passed:
                kept.append(sentence)
                leaned_on += rejection == _PARAPHRASED
        return kept, leaned_on

    def _compose(
        self,
        kept: list[str],
        statements: Sequence[facts.Statement],
        *,
        model_first: bool = True,
    ) -> WrittenMemory:
        """The kept sentences and the statements they do not carry, cut to the limits. With
        `model_first`, the model's sentences that hold facts go last; else every statement is
        quoted, whatever the model's sentences carry, and those sentences go first."""
        pieces: list[tuple[int, str]] = []  # (priority: lower goes first when cutting, text)
        model_text = " ".join(kept)
        for sentence in kept:
            carries = facts.fact_value(sentence) or any(
                facts.covers(sentence, s.text) for s in statements
            )
            pieces.append((_MODEL_FACT if carries and model_first else 0, sentence))
        greetings: dict[int, frozenset[str]] = {}  # the assistant's quotes that greet: whom
        for statement in statements:
            if not model_first or not facts.covers(model_text, statement.text):
                piece = (min(1 + statement.score, _MODEL_FACT - 1), _quote(statement))
                pieces.append(piece)
                if statement.speaker == "assistant" and _greets(statement.text):
                    greetings[id(piece)] = text.names(statement.text)
        order = {id(piece): index for index, piece in enumerate(pieces)}

        def named_elsewhere(piece: tuple[int, str]) -> bool:
            """An assistant's quote that greets someone the other pieces name ("Hello
            Hannah, what a lovely trip" beside her own words): it goes first."""
            if id(piece) not in greetings:
                return False
            others = text.vocabulary(" ".join(o[1] for o in pieces if o is not piece))
            return all(text.stem(name) in others for name in greetings[id(piece)])

        while len(pieces) > 1 and (
            len(pieces) > MAX_SENTENCES or len(" ".join(t for _, t in pieces)) > self._max_chars
        ):
            pieces.remove(
                min(pieces, key=lambda p: (not named_elsewhere(p), p[0], -order[id(p)]))
            )
        content = " ".join(piece for _, piece in pieces).strip()
        if len(content) > self._max_chars:
            content = content[: self._max_chars - 1].rsplit(" ", 1)[0] + "…"
        quoted = sum(1 for _, piece in pieces if piece not in kept)
        source: MemorySource = (
            "statements" if quoted == len(pieces) else "model+statements" if quoted else "model"
        )
        return WrittenMemory(content, source)


def _greets(sentence: str) -> bool:
    """The sentence's one value is one name, and it says nothing was done: a greeting or a
    comment ("Hello Hannah, what a lovely trip"), in any language. Two names are a fact of
    who is with whom ("You and Hannah are at Chez Marcel")."""
    return (
        len(text.names(sentence)) == 1
        and not (text.numbers(sentence) or text.references(sentence))
        and not language.CONFIRMATION.search(sentence)
    )


# Why a sentence that names neither the user nor a value of theirs is set aside: a small
# model copying the chat writes such sentences, and so does a capable one recording an
# impersonal fact ("runbooks live in the sre-handbook repo"), so a trusted model's pass.
_IMPERSONAL = "neither about the user nor with a value they stated"

# Why a sentence with no value, 60 % of whose longer words the conversation holds (in some
# form) but not the share `facts.is_grounded` asks, is set aside: a capable model says a fact in
# its own words ("only on Saturdays" for "at the weekend, on Saturdays"), more so in a
# language that builds words of many parts, so a trusted model's pass.
_PARAPHRASED = "in words of its own beyond what the checks ask"
_PARAPHRASE = 0.6
_LENIENT_TO_TRUST = frozenset({_IMPERSONAL, _PARAPHRASED})

# The model's sentences that hold a fact go last when something must be cut.
_MODEL_FACT = 10


def _grounding_words(said: str) -> frozenset[str]:
    """What a sentence may rest on: the words and values of `said`, and the digits of the
    numbers and times it writes out."""
    return text.vocabulary(said) | text.spelled_numbers(said)


def _asserted(
    turns: Sequence[tuple[str, str]], statements: Sequence[facts.Statement]
) -> frozenset[str]:
    """What the user asserted (their sentences that ask nothing) and the assistant confirmed:
    a model's sentence resting on a question ("Is Canberra the capital?") records no fact of
    theirs."""
    asserted = [
        sentence
        for role, content in turns
        if role == "user"
        for sentence in text.sentences(content)
        if not sentence.rstrip().endswith("?")
    ]
    return _grounding_words(" ".join(asserted + [s.text for s in statements]))


def _said_by_the_speakers(sentence: str, sources: _Sources) -> bool:
    """The sentence is grounded (`facts.is_grounded`, words in any form) in what the user
    asserted or the assistant confirmed: not in the assistant's chatter, nor in a question
    the user asked ("Should I keep the starter in the fridge?" is no "keeps it in the
    fridge")."""
    return facts.is_grounded(
        sentence, sources.asserted, share=_PARAPHRASE, known_names=sources.known_names,
        in_any_form=True,
    )


def _adds(sentence: str, said: str, stated: Set[str]) -> bool:
    """A kept sentence adds to the statements `said` when it says what they do not, with
    values all of what the user said or the assistant confirmed (`stated`): a small model's
    sentence that passes on the assistant's chatter ("people who live in Peru") adds
    nothing worth asking it for."""
    return not facts.covers(said, sentence) and all(
        len(value) < 2 or _is_stated(value, stated) for value in text.values(sentence)
    )


def _is_stated(value: str, stated: Set[str]) -> bool:
    return value in stated or text.stem(value) in stated


def _newest_within(memories: Sequence[str], max_chars: int) -> list[str]:
    """The newest memories (the last) whose text fits within `max_chars`, oldest first: a
    space at its cap must not crowd the conversation out of the model's context."""
    kept: list[str] = []
    used = 0
    for memory in reversed(memories):
        used += len(memory) + 3
        if used > max_chars:
            break
        kept.append(memory)
    return kept[::-1]


@dataclass(frozen=True)
class _Sources:
    """What a memory sentence may rest on."""

    conversation: Set[str]  # every word and value of the conversation (`text.vocabulary`)
    stated: Set[str]  # those of the user's turns and of the statements worth keeping
    known_names: Set[str] = frozenset()  # names the app's memories hold
    # The names of what was stated: a sentence may start with one ("Esme has a peanut
    # allergy"), where `text.names` cannot tell it from any first word.
    stated_names: Set[str] = frozenset()
    # Those of the user's sentences that ask nothing, and of the statements worth keeping.
    asserted: Set[str] = frozenset()


def _rejection(sentence: str, sources: _Sources, *, follows_the_user: bool) -> str | None:
    if len(sentence) < _MIN_SENTENCE_CHARS:
        return "too short"
    if _TRANSCRIPT_LABEL.search(sentence):
        return "transcript label"
    if _LIST_ITEM.match(sentence):
        return "a list item: instructions, not a record"
    unquoted = _QUOTED.sub("", sentence)
    first_word = text.WORD.match(sentence.lstrip())
    about_the_user = (
        language.USER.search(sentence)
        or (follows_the_user and _GOES_ON_ABOUT_THE_USER.match(sentence))
        or any(
            len(value) > 1 and _is_stated(value, sources.stated)
            for value in text.values(sentence)
        )
        or (first_word is not None and text.stem(first_word.group()) in sources.stated_names)
    )
    if language.FIRST_PERSON_WRITTEN.search(unquoted):
        return "speaks in the first person"
    if language.addresses_someone(unquoted):
        return "addresses someone"
    if sentence.rstrip().endswith("?"):
        return "a question"
    if not facts.is_grounded(sentence, sources.conversation, known_names=sources.known_names):
        if not facts.is_grounded(
            sentence,
            sources.conversation,
            share=_PARAPHRASE,
            known_names=sources.known_names,
            in_any_form=True,
        ):
            return "not in the conversation"
        paraphrased = True
    else:
        paraphrased = False
    # Last, so that a trusted model's sentence passes on these alone, every other check met.
    if not about_the_user:
        return _IMPERSONAL
    return _PARAPHRASED if paraphrased else None


_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s")
_QUOTED = re.compile(r"[\"“«„][^\"”»“]*[\"”»“]")


def _quote(statement: facts.Statement) -> str:
    said = " ".join(statement.text.split()).replace('"', "'")
    if said[-1] not in ".!?":
        said += "."
    verb = "The user said" if statement.speaker == "user" else "The assistant confirmed"
    return f'{verb}: "{said}"'
