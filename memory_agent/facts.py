"""Reading conversations and memories for facts, without a model.

A small model summarises badly: it continues the transcript, invents details and drops the
one sentence that mattered. These checks keep memory grounded whatever the model does:

- `key_statements` finds what is worth remembering: the user's own statements about
  themselves (a first-person sentence with a name, a number or a word of a lasting kind:
  allergic, budget, daughter, prefer, ...), and what the assistant confirmed it did (booked,
  scheduled, ...). A conversation with none holds nothing worth a memory slot.
- `is_grounded` tells whether a sentence says only what a source text supports: its numbers
  and names appear there, and most of its other words do.
- `covers` tells whether a memory carries a statement's facts; `fact_value` how many facts a
  memory holds; `same_topic` whether two texts speak of the same thing (a budget, a home, a
  pet), which is how a newer value is found to supersede an older one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from dataclasses import dataclass
from functools import lru_cache

from memory_agent.text import (
    FREQUENCY,
    PERIOD_SLOT,
    TIME_WORDS,
    WORD,
    content_words,
    names,
    normalise_text,
    number_slots,
    numbers,
    sentences,
    stem,
    vocabulary,
)

_FIRST_PERSON = re.compile(
    r"\b(i|i'm|im|i've|ive|i'd|i'll|my|mine|me|myself|we|we're|we've|our|ours|us)\b", re.I
)


_QUESTION_ONLY = re.compile(
    r"^\s*(what|whats|what's|how|why|when|where|who|which|can|could|do|does|is|are|should)\b",
    re.I,
)


# What the assistant says when it did something that the user will want remembered. Every
# sentence with a value in such a message counts: a confirmation often runs over several.
_CONFIRMATION = re.compile(
    r"\b(booked|reserved|scheduled|confirmed|registered|ordered|added|set up|signed you up|"
    r"created|saved|arranged|cancelled|canceled|moved your|rescheduled|subscribed|enrolled|"
    r"paid|transferred|sent|noted|switched you|changed your|upgraded|renewed|you're all set|"
    r"you are all set|you're booked|you have (?:a|an|two|three|\d+) \w+|"
    r"you've got|you have got|submitted|placed|requested|"
    r"confirmation (?:number|code)|reference (?:number|code)|order (?:number|code))\b",
    re.I,
)


# How people state a standing preference or instruction, beside the words below.
_STANDING = re.compile(
    r"\b(remember|don't forget|note that|keep in mind|from now on|going forward|"
    r"you should know|just so you know|fyi|for the record|"
    r"no \w+ ever|never (?:eat|drink|want|book|schedule)|can't stand|tastes like)\b",
    re.I,
)


# Words too common in memories to tie two of them to one slot.
_GENERIC_WORDS = frozenset(
    """said confirmed want need make take going think know help plan tell give look feel
    love new old big small little good bad best better sure right""".split()
)


# Words that mark a lasting personal fact: health, diet, family, home, work, money, dates,
# standing preferences. A first-person sentence with one of them is worth remembering.
_LASTING = frozenset(
    """allergic allergy allergies intolerant intolerance vegetarian vegan gluten lactose
    dairy diabetic diabetes celiac kosher halal pregnant medication medicine condition
    asthma injury knee back surgery doctor diagnosed
    name named called son daughter kid kids child children baby wife husband partner
    boyfriend girlfriend mom mum mother dad father sister brother grandma grandmother
    grandpa family twins dog cat pet puppy kitten
    live lives living moved moving home house apartment flat address city town neighborhood
    work works job office employer company boss manager team role career hired promoted
    startup school university college studying student teacher nurse engineer
    budget salary income rent mortgage savings debt loan afford spend limit max maximum
    price cost
    birthday anniversary wedding born deadline due exam appointment goal goals
    babysitter babysitting nanny sitter tutor therapist dentist vet church
    bank account credit card insurance pension
    sick seasick carsick migraine migraines nausea disease chronic disorder syndrome
    diagnosis illness cancer
    prefer prefers preferred favorite favourite hate hates dislike always never usually
    every weekly daily routine remember forget avoid allergic
    plan planning goal goals training marathon diet""".split()
)


_CHANGE = re.compile(
    r"\b(now|moved|changed|switch(?:ed)?|no longer|any ?more|instead|new|updated?|raised|"
    r"increased|decreased|lowered|cut|bumped|upped|dropped|went up|went down|from now on|"
    r"these days|started|stopped|quit)\b",
    re.I,
)


# Kinds of personal fact, as small groups of words that name the same slot; two texts that
# touch the same group speak of the same thing.
_TOPICS: dict[str, frozenset[str]] = {
    name: frozenset(words.split())
    for name, words in {
        "home": "live lives living moved moving relocated home house apartment flat address "
        "city town neighborhood",
        "employer": "work works job employer company hired office",
        "boss": "boss manager supervisor",
        "budget": "budget spend spending afford limit",
        "income": "salary income pay paid",
        "housing cost": "rent mortgage landlord",
        "diet": "vegetarian vegan pescatarian keto diet",
        "calories": "calorie calories kcal",
        "medication": "medication medicine meds dose prescription",
        "pet": "dog cat pet puppy kitten",
        "childcare": "babysitter babysitting nanny sitter daycare childminder",
        "school": "school pickup dropoff class classes teacher",
        "trip": "trip vacation holiday destination",
        "goal": "goal target aim aiming",
        "shopping": "shop shopping store grocery groceries supermarket membership",
        "weight": "weight weigh weighs kg lbs pounds",
        "doctor": "doctor dentist vet therapist physio",
        "phone": "phone plan carrier mobile",
        "car": "car vehicle drive",
    }.items()
}


@dataclass(frozen=True)
class Statement:
    """A sentence from the conversation worth remembering, and who said it."""

    speaker: str  # "user" or "assistant"
    text: str
    score: int


_SIGNIFICANT_NUMBER = re.compile(
    r"[$€£]\s?\d|\d\s?(%|percent|per cent|k\b|am\b|pm\b)|\d:\d\d|\d{3,}|#\s?\d"
    r"|\d+(st|nd|rd|th)\b"
    # a measurement
    r"|\d\s?(kg|g|lbs?|pounds?|km|miles?|mi|cm|mm|m|ft|feet|inch(?:es)?|l|ml|mg|oz)\b"
    # a code or reference: letters and digits together (6b, B12, RX-20917, 4x8)
    r"|\b(?=[a-z-]*\d)(?=\d*[a-z])[a-z\d]+(?:-[a-z\d]+)*\b",
    re.I,
)


# Conditions named by their ending (dyslexia, arthritis, scoliosis, anemia, autism), when the
# sentence says someone has one.
_CONDITION = re.compile(
    r"\b(have|has|had|with|diagnosed|suffers?|suffering)\b.*\b\w+(ia|itis|osis|emia|ism)\b", re.I
)


# Something counted that someone has: "I've got five raised beds", "we have 2 kids".
_COUNTED_POSSESSION = re.compile(
    r"\b(have|has|had|got|own|owns)\b\s+(?:\w+\s+){0,2}?"
    r"(\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+[a-z]",
    re.I,
)


def significant_numbers(text: str) -> int:
    """Values that carry meaning on their own: money, percentages, times, dates, measures,
    codes, anything of three digits or more, something counted that someone has ("6" or
    "95 degrees" in passing do not count)."""
    return (
        len(_SIGNIFICANT_NUMBER.findall(text))
        + (1 if _CONDITION.search(text) else 0)
        + (1 if _COUNTED_POSSESSION.search(text) else 0)
    )


def statement_score(sentence: str, speaker: str, *, confirming: bool = False) -> int:
    """How much a sentence is worth remembering; 0 means nothing lasting.

    The user's sentence counts when it speaks of themselves (first person) and holds a
    marker, or when it states a strong one (a value, a lasting word) even tersely ("rent
    1650."); a question about the world does not. The assistant's counts when it holds a
    value and `confirming` (its message confirms something done) or says so itself.
    """
    text = normalise_text(sentence)
    words = {word.lower() for word in WORD.findall(text)}
    lasting = words & _LASTING
    strong = significant_numbers(text) + len(names(text)) + len(lasting - FREQUENCY)
    if speaker == "assistant":
        return strong + 1 if strong and (confirming or _CONFIRMATION.search(text)) else 0
    if text.endswith("?") and _QUESTION_ONLY.match(text) and not (lasting - FREQUENCY):
        return 0  # a question about the world, not a statement about the user
    standing = 2 if _STANDING.search(text) else 0
    if not _FIRST_PERSON.search(text):
        return strong + standing if strong and not text.endswith("?") else 0
    markers = strong + standing
    weak = (lasting & FREQUENCY) | {m.lower() for m in _LIKING.findall(text)}
    # A habit or a liking counts in a short statement that says what it is about.
    about = content_words(text) - {stem(w) for w in weak}
    markers += len(weak) if weak and about and (markers or len(words) < 25) else 0
    return markers


def key_statements(turns: Sequence[tuple[str, str]], limit: int = 6) -> list[Statement]:
    """The conversation's statements worth remembering, best first, at most `limit`."""
    found: list[Statement] = []
    seen: set[str] = set()
    for speaker, content in turns:
        if speaker not in ("user", "assistant"):
            continue
        confirming = speaker == "assistant" and _CONFIRMATION.search(content) is not None
        for sentence in sentences(content):
            score = statement_score(sentence, speaker, confirming=confirming)
            if score and sentence.lower() not in seen:
                seen.add(sentence.lower())
                found.append(Statement(speaker, sentence, score))
    ranked = sorted(enumerate(found), key=lambda pair: (-pair[1].score, pair[0]))
    # Keep the conversation's order among the best ones: it reads better.
    return [statement for _, statement in sorted(ranked[:limit], key=lambda pair: pair[0])]


# Verbs a summary uses to report what was said; they need not appear in the conversation.
_REPORTING = frozenset(
    stem(word)
    for word in """prefer prefers like likes enjoy enjoys want need needs plan plans mention
    discuss discussed request requested share express expressed confirm decide decided
    remember talk talked ask mentioned described describe""".split()
)


def is_grounded(sentence: str, source_vocabulary: Set[str], *, share: float = 0.7) -> bool:
    """The sentence's numbers and names appear in the source, and `share` of its other words
    (words that report what was said, such as "prefers", aside)."""
    text = normalise_text(sentence)
    if not numbers(text) <= source_vocabulary:
        return False
    if any(stem(name) not in source_vocabulary for name in names(text)):
        return False
    words = content_words(text) - _REPORTING
    if not words:
        return False
    return len(words & source_vocabulary) >= share * len(words)


def covers(memory: str, statement: str) -> bool:
    """The memory carries the statement's numbers and names and half of its other words."""
    memory_vocabulary = vocabulary(memory)
    if not numbers(statement) <= memory_vocabulary:
        return False
    if any(stem(name) not in memory_vocabulary for name in names(statement)):
        return False
    words = content_words(statement)
    return not words or len(words & memory_vocabulary) >= 0.5 * len(words)


@lru_cache(maxsize=8192)
def fact_value(text: str) -> int:
    """How many facts a memory holds, by the statement markers in it (0: no fact): values,
    names, words of a lasting kind, and numbers that count something ("plot 14")."""
    text = normalise_text(text)
    words = {word.lower() for word in WORD.findall(text)}
    counted = 1 if number_slots(text) else 0
    return significant_numbers(text) + len(names(text)) + len(words & _LASTING) + counted


# Likes and pastimes, said of oneself: "I love jazz", "we really enjoy hiking".
_LIKING = re.compile(r"\b(?:i|we)\s+(?:\w+\s+)?(love|enjoy|like|play|prefer)\b", re.I)
# Whose fact it is, when not the user's own: "my sister now lives in Denver" says nothing
# of where the user lives.
_SUBJECTS = frozenset(
    """son daughter kid kids child children baby wife husband partner boyfriend girlfriend
    mom mum mother dad father sister brother grandma grandmother grandpa grandfather aunt
    uncle cousin niece nephew friend friends neighbor neighbour colleague coworker boss
    roommate dog cat pet puppy kitten""".split()
)


@lru_cache(maxsize=8192)
def subjects(text: str) -> frozenset[str]:
    """The people and animals other than the user that a text speaks of."""
    return frozenset(stem(word.lower()) for word in WORD.findall(normalise_text(text))) & {
        stem(word) for word in _SUBJECTS
    }


# Kinds of fact a person has several of at once (pets, doctors): a change announced on one
# of these topics says nothing about the others, so it never supersedes by topic alone.
_MANY_VALUED = frozenset({"pet", "doctor"})


def single_valued_topics(text: str) -> frozenset[str]:
    """The text's topics of which a person has one at a time (a home, an employer, a
    babysitter, a calorie target): a new value on one replaces the old."""
    return topics(text) - _MANY_VALUED


@lru_cache(maxsize=8192)
def topics(text: str) -> frozenset[str]:
    words = {word.lower() for word in WORD.findall(normalise_text(text))}
    stems = {stem(word) for word in words}
    return frozenset(
        name for name, members in _TOPICS.items() if words & members or stems & members
    )


def same_topic(older: str, newer: str) -> bool:
    """Both texts speak of the same slot: a word group both touch, or a shared word that is
    neither common nor about time."""
    if topics(older) & topics(newer):
        return True
    shared = (content_words(older) & content_words(newer)) - TIME_WORDS - _GENERIC_WORDS
    return bool(shared)


def restates_a_number(older: str, newer: str, *, by_period: bool = False) -> bool:
    """The newer text gives another number for the same thing ("1600 calories" after "1800
    calories", "30% of each invoice" after "25% of every invoice"). With `by_period`, slots
    known only by their period count too ("$275 a day" after "$200 a day")."""
    old, new = number_slots(older), number_slots(newer)
    return any(
        slot in old and old[slot] != found
        for slot, found in new.items()
        if by_period or not slot.startswith(PERIOD_SLOT)
    )


def announces_change(text: str) -> bool:
    return _CHANGE.search(normalise_text(text)) is not None
