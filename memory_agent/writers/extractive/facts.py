"""Facts in texts, compared without a model: how many a memory holds, whether a sentence says
only what a source supports, whether a memory carries a statement's facts, and whether two
texts give values of one thing.

- `is_grounded` tells whether a sentence says only what a source text supports: its numbers
  and names appear there, and most of its other words do (a third, when it carries values).
- `covers` tells whether a memory carries a statement's facts; `fact_value` how many facts a
  memory holds; `same_topic` whether two texts speak of the same thing (an English word group,
  or a word beside a value in both: `values`), which is how a newer value is found to
  supersede an older one.
"""
from __future__ import annotations

import itertools
from collections.abc import Set
from functools import lru_cache

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import normalise_text
from memory_agent.writers.extractive import values
from memory_agent.writers.extractive.words import language
from memory_agent.writers.extractive.words.text import (
    COUNT_WORDS,
    PERIOD_SLOT,
    STOPWORDS,
    THOUSANDS,
    TIME_UNITS,
    TIME_WORDS,
    WORD,
    content_words,
    names,
    number_slots,
    numbers,
    references,
    stem,
    vocabulary,
)

_GENERIC_WORDS = values.GENERIC_WORDS


# Words that mark a lasting personal fact (health, family, home, work, money, preferences)
# without a value, in the languages `language` covers. One of them in a first-person sentence
# makes it worth remembering; a value does so in any language.
def lasting_words(text: str) -> frozenset[str]:
    return language.found_in(language.LASTING_FOUND, text)


_CHANGE = language.CHANGE


# Kinds of personal fact in English, as small groups of words that name the same slot
# (synonyms a value's neighbours cannot match: "babysitter" and "nanny"); two texts that touch
# the same group speak of the same thing. Beside them, in any language, two values are of the
# same thing when the words beside them are (`value_keys`).
_TOPICS = language.TOPICS


# Measures by their symbols, which no language owns.
_MEASURES = frozenset(
    "kg g lb lbs km mi cm mm m ft l ml mg oz gb mb tb ms s sec min h".split()
)


# A host or an address (db-01.internal, a@b.org). A host starts where no word, dot or hyphen
# stands before it, so that a long run of them is read once, not from each of its positions;
# its parts are taken whole (`++`: a dot never follows a shorter part).
_DIGIT = re.compile(r"\d")

_HOST_OR_ADDRESS = r"(?<![\w.-])[\w-]++(?:\.[\w-]++)+\.[a-z]{2,}\b|\b\w++@[\w.-]+"

_SIGNIFICANT_NUMBER = re.compile(
    # money before the amount, a number (#4), a version (v2)
    r"\p{Sc}\s?\d|#\s?\d|\bv\d"
    # What follows a digit, read once at each digit (only these can start at one, and the
    # engine tries every branch at every position: one branch for them all is a quarter faster).
    r"|\d(?:"
    # money after the amount, and percentages
    r"\s?(?:\p{Sc}|%|"
    + language.longest_first(language.PERCENT | frozenset({"k\\b"}))
    + r")|\s?(?:"
    + language.longest_first(values.CURRENCY_CODES | language.CURRENCIES)
    + r")\b"
    # an amount in thousands (77 grand, 40 mille, 80 Tausend: `THOUSANDS`)
    rf"|\s?(?:{language.longest_first(THOUSANDS)})\b(?!\s+(?-i:[A-Z]))"
    # times of day and dates: 7pm, 16:00, 16h30, 15.04., 12/03, 2025-03-12, 3rd (`(?<!\w\d)`:
    # no word before the first digit)
    r"|\s?(?:am|pm)\b|:\d\d|(?<!\w\d)\d?h\d\d\b|(?<!\w\d)\d?[./]\d{1,2}(?:[./]\d{2,4})?\b"
    # three digits or more; an ordinal
    r"|\d{2,}|\d*(?:st|nd|rd|th|º|ª|er|e|ème)\b"
    # the counter or unit joined to a number in Chinese, Japanese and Korean (3時, 5万円, 2匹,
    # 3월, 15일), which says what it counts as a measure does
    r"|[\p{Han}\p{Katakana}\p{Hangul}]"
    # a measurement or a duration: a symbol, or a language's word (`language.UNITS`)
    r"|\s?(?:"
    + language.longest_first(_MEASURES | language.UNITS)
    + r")\b"
    # a decimal either way (99.95, 12,84)
    r"|[.,]\d)"
    r"|" + _HOST_OR_ADDRESS
    # a code or reference: letters and digits together (6b, B12, RX-20917, 4x8, eu-west-1)
    + r"|(?<![\w-])(?=[\w-]*\d)(?=\d*[^\W\d_])[^\W_]+(?:-[^\W_]+)+\b"
    r"|\b(?=[a-z]*\d)(?=\d*[a-z])[a-z\d]+\b",
    re.I,
)


# Conditions named by their ending (dyslexia, arthritis, scoliosis, anemia, autism), when the
# sentence says someone has one; an inflammation in the Greek form that English, Spanish and
# German share ("gastritis", "Arthritis", "tendinitis") wherever it stands ("-osis" is as
# often a diagnosis or a hypnosis as a disorder).
_CONDITION = re.compile(
    rf"\b({language.longest_first(language.HAVING)})\b.*\b\w+(ia|itis|osis|emia|ism)\b"
    r"|\b\w{3,}itis\b",
    re.I,
)


# Something counted that someone has: "I've got five raised beds", "we have 2 kids".
_COUNTED_POSSESSION = re.compile(
    rf"\b({language.longest_first(language.OWNING)})\b\s+(?:\w+\s+){{0,2}}?"
    rf"(\d+|{language.longest_first(frozenset(COUNT_WORDS))})\s+[a-z]",
    re.I,
)


def significant_numbers(text: str) -> int:
    """Values that carry meaning on their own: money, percentages, times, dates, measures,
    codes, anything of three digits or more, something counted that someone has ("6" or
    "95 degrees" in passing do not count)."""
    return (
        len(_SIGNIFICANT_NUMBER.findall(text))
        + len(references(text))
        + (1 if _CONDITION.search(text) else 0)
        + (1 if _COUNTED_POSSESSION.search(text) else 0)
        + _labelled_numbers(text)
    )


def _labelled_numbers(text: str) -> int:
    """Small numbers that name something by the word before them, in any language ("plot 14",
    "airbook 14", "Postgres 13", "aula 12"); not a count ("need 2 eggs") or a time."""
    if _DIGIT.search(text) is None:  # most sentences: no number, nothing to read
        return 0
    words = WORD.findall(text)
    return sum(
        1
        for before, word in itertools.pairwise(words)
        if len(word) <= 2 and word.isdecimal()  # one or two digits, of any script
        and len(before) > 2
        and not before[0].isdigit()
        and before.lower() not in STOPWORDS
        and before.lower() not in _GENERIC_WORDS
        and before.lower() not in TIME_UNITS
        and not language.FIRST_PERSON.fullmatch(before)
    )


def record_references(text: str) -> frozenset[str]:
    """The references of `issued_codes` but a number joined to what it measures ("180-day",
    "30-minute"): those general advice gives as often as anyone a record."""
    return _references(text, measures_too=False)


def _measures(code: str) -> bool:
    """A number and what it measures, joined: "180-day", "30-minute" (not "123-ABC")."""
    match = _NUMBER_AND_WORD.fullmatch(code)
    return match is not None and match.group(1).islower()


_NUMBER_AND_WORD = re.compile(r"\d+-([^\W\d_]+)")


# A reference: digits and two letters or more, with a capital letter or three digits
# (FC-20931, HERBST15, RNV-2025-18734, #482), not a word like "mid-70s" or a range "100-240V";
# or a prefix in capitals and a number, as flights and trains are named ("EZY 6417", "ICE 578"),
# not a currency and its amount ("EUR 950").
_CODE = re.compile(
    r"\b(?=[\w-]*\d)(?=[\w-]*[^\W\d_][\w-]*[^\W\d_])(?=[\w-]*(?:[A-Z]|\d{3}))"
    r"(?:[^\W_]{1,12}(?:[-/][^\W_]{1,12})+|[^\W_]{4,})\b|#\s?\d{3,}"
    r"|\b(?!(?:EUR|USD|GBP|CHF|CAD|AUD|JPY|SEK|NOK|DKK|PLN|BRL|MXN)\b)[A-Z]{2,4} \d{3,6}\b"
)


def issued_codes(text: str) -> frozenset[str]:
    """References of letters and digits (FC-20931, RMA-4471, #58213): what an assistant gives
    when it has done something, in any language. Lower case, as `vocabulary` has words."""
    return _references(text, measures_too=True)


def _references(text: str, *, measures_too: bool) -> frozenset[str]:
    """The codes `_CODE` finds, lower case as `vocabulary` has words; a measure ("180-day")
    is told by its case, so before it is lowered."""
    return frozenset(
        stem(code.lstrip("# "))
        for code in _CODE.findall(normalise_text(text))
        if measures_too or not _measures(code)
    )


_REPORTING = values.REPORTING_WORDS


def is_grounded(
    sentence: str,
    source_vocabulary: Set[str],
    *,
    share: float = 0.7,
    known_names: Set[str] = frozenset(),
    in_any_form: bool = False,
) -> bool:
    """The sentence says only what the source supports: its values (numbers, names and
    references such as paths and channels) all appear there, and so do `share` of its other
    words (words that report what was said, such as "prefers", aside). A sentence that
    carries values the source holds may use its own words for the rest (a third of them from
    the source is enough): a capable model paraphrases, and the values are what can be
    checked in any language. A name may also be one of `known_names` (stemmed: who or what
    the app already knows of), but only the source's own words count towards that third.
    With `in_any_form`, a word of a sentence without values counts in another form of it too
    ("gelebiliyor" for "gelebiliyorum")."""
    text = normalise_text(sentence)
    sentence_numbers = numbers(text)
    if not (sentence_numbers | references(text)) <= source_vocabulary:
        return False
    sentence_names = names(text)
    if any(
        stem(name) not in source_vocabulary and stem(name) not in known_names
        for name in sentence_names
    ):
        return False
    words = content_words(text) - _REPORTING
    if not words:
        return bool(sentence_numbers or sentence_names)
    if not (sentence_numbers or sentence_names):
        if in_any_form:
            # Only words of four letters or more, against the source's own such words: "not"
            # and "the" start "notified" and "therapy".
            long_words = {w for w in source_vocabulary if len(w) >= 4} - STOPWORDS
            weighed = [word for word in words if len(word) >= 4]
            found = sum(1 for word in weighed if _in_source(word, long_words))
            return bool(weighed) and found >= share * len(weighed)
        return len(words & source_vocabulary) >= share * len(words)
    found = sum(1 for word in words if _in_source(word, source_vocabulary))
    return found >= min(_PARAPHRASE_SHARE * len(words), 1)


_PARAPHRASE_SHARE = 0.34


def _in_source(word: str, source_vocabulary: Set[str]) -> bool:
    """The word, or one it shortens or that shortens it ("doc" and "doctor", "calorie" and
    "calories"): the same word in another form, in most languages."""
    if word in source_vocabulary:
        return True
    prefix = word[:5]
    return any(
        len(other) >= 3 and (other.startswith(prefix) or word.startswith(other))
        for other in source_vocabulary
        if other[:1] == word[:1]
    )


def covers(memory: str, statement: str) -> bool:
    """The memory carries the statement's facts: all its values (numbers, names and
    references), in whatever words; a statement without values, by half of its words."""
    memory_vocabulary = vocabulary(memory)
    statement_numbers = numbers(statement)
    if not (statement_numbers | references(statement)) <= memory_vocabulary:
        return False
    statement_names = names(statement)
    if any(stem(name) not in memory_vocabulary for name in statement_names):
        return False
    if statement_numbers or statement_names:
        return True
    words = content_words(statement)
    return not words or len(words & memory_vocabulary) >= 0.5 * len(words)


@lru_cache(maxsize=8192)
def fact_value(text: str) -> int:
    """How many facts a memory holds, by the statement markers in it (0: no fact): values,
    names, words of a lasting kind, and numbers that count something ("plot 14")."""
    text = normalise_text(text)
    counted = 1 if number_slots(text) else 0
    return significant_numbers(text) + len(names(text)) + len(lasting_words(text)) + counted


# Whose fact it is, when not the user's own: "my sister now lives in Denver" says nothing
# of where the user lives.
@lru_cache(maxsize=8192)
def subjects(text: str) -> frozenset[str]:
    """The people and animals other than the user that a text speaks of."""
    return frozenset(
        stem(word) for word in language.found_in(language.PEOPLE_FOUND, normalise_text(text))
    )


# Kinds of fact a person has several of at once (pets, doctors): a change announced on one
# of these topics says nothing about the others, so it never supersedes by topic alone.
_MANY_VALUED = language.MANY_VALUED


def single_valued_topics(text: str) -> frozenset[str]:
    """The text's topics of which a person has one at a time (a home, an employer, a
    babysitter, a calorie target): a new value on one replaces the old."""
    return topics(text) - _MANY_VALUED


def shared_topics(older: str, newer: str) -> frozenset[str]:
    """The single-valued topics both texts touch, each by a word other than one announcing a
    change: "the aliquots were moved" and "the meeting has been moved" share no home, nor do
    "lives at 42 Elm Street" and "the appointment moved to the 14th"."""
    both = single_valued_topics(older) & single_valued_topics(newer)
    return both & topics(older, beyond_change=True) & topics(newer, beyond_change=True)


@lru_cache(maxsize=8192)
def topics(text: str, *, beyond_change: bool = False) -> frozenset[str]:
    """The word groups the text touches; with `beyond_change`, by a word other than one that
    announces a change ("moved" is one, and a word of the home group)."""
    words = {word.lower() for word in WORD.findall(normalise_text(text))}
    if beyond_change:
        words = {word for word in words if not language.CHANGE.fullmatch(word)}
    stems = {stem(word) for word in words}
    return frozenset(
        name for name, members in _TOPICS.items() if words & members or stems & members
    )


def same_thing(older: str, newer: str) -> bool:
    """The two texts give values of one thing: an English word group both touch, or a word
    that stands beside a value in both (any language)."""
    return bool(topics(older) & topics(newer)) or bool(
        values.value_keys(older) & values.value_keys(newer)
    )


def same_topic(older: str, newer: str) -> bool:
    """Both texts speak of the same slot: a word group both touch, a word beside a value in
    both, or a shared word that is neither common nor about time."""
    if same_thing(older, newer):
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
