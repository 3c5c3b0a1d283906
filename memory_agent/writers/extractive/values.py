"""Values and what they are the values of, in any language.

A value is a number (an amount, a percentage, a time, a date, a count), a code (FC-20931,
eu-west-1, 3.11.9) or a name (Aldi, DHL, Quintana). What it is the value of is read from the
words that stand beside it: "the disk alert fires at 80%" and "the disk alert threshold is now
85%" give two values of one kind (a percentage) beside the same words (disk, alert), so the
newer retires the older, in whatever words or language the two are written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

from memory_agent.core import patterns as re
from memory_agent.writers.extractive.words import language
from memory_agent.writers.extractive.words.text import (
    CAPITALISED,
    FREQUENCY,
    IN_THOUSANDS_K,
    SPELLED_NUMBERS,
    STOPWORDS,
    THOUSANDS,
    TIME_UNITS,
    TIME_WORDS,
    WORD,
    in_thousands,
    is_calendar_word,
    names,
    number_value,
    stem,
)
from memory_agent.writers.extractive.words.written_forms import reading_form

# Words too common in memories to tie two of them to one slot.
GENERIC_WORDS = language.GENERIC
# Verbs a summary uses to report what was said; they need not appear in the conversation.
REPORTING_WORDS = frozenset(stem(word) for word in language.REPORTING)

# How many words either side of a value may say what it is the value of, and how far away
# (in words of any kind) they may stand.
_KEYS_A_SIDE = 3
_REACH = 7
# Words that say a number is an amount of money or a share, after it.
# Currencies by their codes and the signs written after an amount, which no language owns
# ("950 kr", "1450 zł", "350 TL", "200 Kč"); not a code that is also a word or a unit ("ft",
# "won", "lei", "cop"). With the currencies' names in the language files.
CURRENCY_CODES = frozenset(
    """eur usd gbp chf k kr sek nok dkk zł zl pln kč czk tl huf inr brl mxn clp aud cad nzd jpy
    cny rmb krw rub uah""".split()
)
_CURRENCY_WORDS = CURRENCY_CODES | language.CURRENCIES
_CURRENCY_SIGNS = ("$", "€", "£", "¥", "₺", "₹", "₽", "₩", "₪", "₴", "₫", "₱", "₦")
_PERCENT_WORDS = frozenset(word for word in language.PERCENT if " " not in word)
# A share said in two words after a number ("por ciento", "pour cent"), by its first word.
_PERCENT_PHRASES = frozenset(tuple(word.split()) for word in language.PERCENT if " " in word)
_CLOCK = re.compile(r"\d{1,2}(?::\d\d|h\d\d)")
_TIME_OF_DAY = re.compile(r"\d{1,2}(?::\d\d)?(?:am|pm)|\d{1,2}h\d\d", re.I)
_DATE = re.compile(r"\d{1,2}[./]\d{1,2}(?:[./]\d{2,4})?|\d{4}-\d\d-\d\d")
_ORDINAL_DATE = re.compile(r"\d{1,2}(?:st|nd|rd|th|º|er|e)$", re.I)


PEOPLE_KEYS = frozenset(stem(word)[:5] for word in language.PEOPLE)
TITLE_KEYS = frozenset(stem(word)[:5] for word in language.FORMS_OF_ADDRESS)


# A text's words, each with where it starts and ends, and the kind of value each is, if any.
_Tokens = Sequence[tuple[str, int, int]]
_Kinds = Sequence[str | None]


@dataclass(frozen=True)
class KeyedValue:
    """One value of a text: its kind, the value in one form, and what it is the value of."""

    kind: str  # percent, money, time, date, code, name, number
    value: str
    keys: frozenset[str]
    # For a number, the word right after it, when it is one ("75 microgrammi", "5 mg",
    # "3 Labradors"): what it counts. Lower case.
    unit: str = ""
    # For a name, which name it is a word of: names written next to each other, nothing but a
    # space between them, are one ("Marcus Chen"; not "Ana, Bruno"). -1 for other values.
    name_group: int = field(default=-1, compare=False)


@lru_cache(maxsize=8192)
def keyed_values(text: str) -> tuple[KeyedValue, ...]:
    """The text's values, each with the words near it (their first five letters, so that
    "shop" meets "shopping" and "alquiler" meets "alquilo"). Values next to each other, or
    with only function words between them ("May 14", "12 mars à 9h40"), share their keys."""
    tokens, kinds = _read(text)
    plain = reading_form(text)  # what the tokens' positions are in
    keyed = []
    for first, last in _runs(tokens, kinds):
        keys = frozenset(_keys_before(tokens, kinds, first) | _keys_after(tokens, kinds, last))
        for index in range(first, last + 1):
            kind = kinds[index]
            if kind is not None:
                unit = _unit(tokens, index) if kind == "number" else ""
                value = _value(tokens, index, kind)
                group = _name_group(plain, tokens, kinds, index) if kind == "name" else -1
                keyed.append(KeyedValue(kind, value, keys, unit, name_group=group))
    return tuple(keyed)


@lru_cache(maxsize=8192)
def owners(text: str) -> Mapping[str, frozenset[str]]:
    """For each kind of value, the names and codes that stand in one run with a value of
    that kind, nothing but function words between them: what those values are the values of
    ("a EC em 1,4": EC for the number; "Brando 12,8 kg"). A number of one or two digits is
    filed as `SMALL_COUNT`."""
    tokens, kinds = _read(text)
    owned: dict[str, set[str]] = {}
    for first, last in _runs(tokens, kinds):
        run = range(first, last + 1)
        named = {_value(tokens, i, kind) for i in run if (kind := kinds[i]) in _OWNERS}
        for index in run:
            kind = kinds[index]
            if kind is None or kind in _OWNERS or not named:
                continue
            if kind == "number" and small_count(_value(tokens, index, kind)):
                kind = SMALL_COUNT  # "Postgres 13", but also "Brando 2" (another thing)
            owned.setdefault(kind, set()).update(named)
    return MappingProxyType({kind: frozenset(found) for kind, found in owned.items()})


_OWNERS = frozenset({"name", "code"})
# How `owners` files a number of one or two digits: a version ("Postgres 13") as often as a
# count of another thing ("Brando 2"), which only some rules may take as a value of the name.
SMALL_COUNT = "small count"


@lru_cache(maxsize=8192)
def _read(text: str) -> tuple[_Tokens, _Kinds]:
    """The text's words (with where they start and end) and the kind of value each is, if
    any."""
    text = reading_form(text)
    found_names = names(text)
    tokens = tuple((m.group(), m.start(), m.end()) for m in WORD.finditer(text))
    return tokens, tuple(_kind(text, tokens, i, found_names) for i in range(len(tokens)))


def _unit(tokens: _Tokens, index: int) -> str:
    following = _following(tokens, index)
    return following if following.isalpha() and following not in STOPWORDS else ""


def _runs(
    tokens: _Tokens, kinds: _Kinds
) -> list[tuple[int, int]]:
    """Spans of values with nothing but function words between them."""
    runs: list[tuple[int, int]] = []
    start = last = None
    for index, (word, _, _) in enumerate(tokens):
        if kinds[index] is not None:
            if start is None:
                start = index
            last = index
        elif word.lower() not in STOPWORDS and start is not None and last is not None:
            runs.append((start, last))
            start = last = None
    if start is not None and last is not None:
        runs.append((start, last))
    return runs


def _keys_before(
    tokens: _Tokens, kinds: _Kinds, first: int
) -> set[str]:
    return _keys(tokens, kinds, range(first - 1, max(-1, first - 1 - _REACH), -1))


def _keys_after(
    tokens: _Tokens, kinds: _Kinds, last: int
) -> set[str]:
    return _keys(tokens, kinds, range(last + 1, min(len(tokens), last + 1 + _REACH)))


def _keys(
    tokens: _Tokens, kinds: _Kinds, indexes: range
) -> set[str]:
    """Up to `_KEYS_A_SIDE` words that may say what a value is, walking away from it and
    stopping at another value."""
    keys: set[str] = set()
    for index in indexes:
        if kinds[index] is not None or len(keys) == _KEYS_A_SIDE:
            break
        word = tokens[index][0]
        if _may_be_a_key(word):
            keys.add(stem(word.lower())[:5])
    return keys


def value_keys(text: str) -> frozenset[str]:
    """Every word that stands beside one of the text's values."""
    return frozenset(key for value in keyed_values(text) for key in value.keys)


def _name_group(text: str, tokens: _Tokens, kinds: _Kinds, index: int) -> int:
    """The index of the first word of the name the word at `index` belongs to: the names
    before it with only white space between."""
    while (
        index > 0
        and kinds[index - 1] == "name"
        and not text[tokens[index - 1][2] : tokens[index][1]].strip()
    ):
        index -= 1
    return index


def _kind(
    text: str, tokens: _Tokens, index: int, found_names: frozenset[str]
) -> str | None:
    word, start, end = tokens[index]
    lowered = word.lower()
    if is_calendar_word(lowered) or (lowered == "may" and _next_to_a_number(tokens, index)):
        return "date"
    if not any(ch.isdigit() for ch in word):
        if lowered in SPELLED_NUMBERS and _share_follows(tokens, index):
            return "percent"  # a share written out: "elf procent", "quince por ciento"
        return "name" if stem(word) in found_names else None
    if _TIME_OF_DAY.fullmatch(word):
        return "time"
    if not word[0].isdigit():
        return "code"
    after = text[end : end + 2].lstrip()
    before = text[max(0, start - 2) : start].rstrip()
    following = _following(tokens, index)
    previous = tokens[index - 1][0].lower() if index else ""
    # The word a date's number stands beside may lie past a function word ("12 de marzo").
    following_word = next(
        (w.lower() for w, _, _ in tokens[index + 1 : index + 3] if w.lower() not in STOPWORDS),
        "",
    )
    if after.startswith("%") or _share_follows(tokens, index):
        return "percent"
    if before.endswith(_CURRENCY_SIGNS) or after[:1] in _CURRENCY_SIGNS:
        return "money"
    if following in _CURRENCY_WORDS:
        return "money"
    if IN_THOUSANDS_K.fullmatch(word):  # "175k", "10K": an amount, not a reference or a day
        return "money" if before.endswith(_CURRENCY_SIGNS) else "number"
    if _in_thousands(tokens, index):
        # "77 grand" is money; "40 mille euros" too, by the word after it.
        after_thousands = _following(tokens, index + 1)
        if following == "grand" or after_thousands in _CURRENCY_WORDS or before.endswith(
            _CURRENCY_SIGNS
        ):
            return "money"
        return "number"
    if _CLOCK.fullmatch(word) or (following in TIME_UNITS and following not in ("s", "sec")):
        return "time"
    if _DATE.fullmatch(word) or _ORDINAL_DATE.match(word):
        return "date"
    if is_calendar_word(following_word) or is_calendar_word(previous) or previous == "may":
        return "date"
    if any(ch.isalpha() for ch in word):
        return "code"
    return "number"


def _share_follows(tokens: _Tokens, index: int) -> bool:
    """A word for a share follows the number: "procent", "Prozent", or "por ciento", "pour
    cent", "per cento" whole ("tres por familia", "2 pour une chambre" are no share)."""
    following = _following(tokens, index)
    if any(first == following for first, _ in _PERCENT_PHRASES):
        return (following, _following(tokens, index + 1)) in _PERCENT_PHRASES
    return following in _PERCENT_WORDS


def _following(tokens: _Tokens, index: int) -> str:
    return tokens[index + 1][0].lower() if index + 1 < len(tokens) else ""


def _in_thousands(tokens: _Tokens, index: int) -> bool:
    """The word after the number is one of `THOUSANDS` and multiplies it: written in lower
    case (German's "Tausend" aside), and not an adjective of a noun after it ("2 grand
    pianos"): nothing, a function word or a word about time follows."""
    word = tokens[index + 1][0] if index + 1 < len(tokens) else ""
    if word.lower() not in THOUSANDS:
        return False
    if word != word.lower() and word not in CAPITALISED:
        return False  # "the 2025 Grand Prix", "Room 12 Grand Hotel"
    after = _following(tokens, index + 1)
    return word.lower() != "grand" or not after or after in STOPWORDS or after in _AMOUNT_FOLLOWERS


# What follows "grand" when it is an amount: "77 grand total", "50 grand a year", "10 grand cash".
_AMOUNT_FOLLOWERS = language.AFTER_AMOUNTS | TIME_WORDS


def _next_to_a_number(tokens: _Tokens, index: int) -> bool:
    return any(
        0 <= near < len(tokens) and tokens[near][0][0].isdigit() for near in (index - 1, index + 1)
    )


def _value(tokens: _Tokens, index: int, kind: str) -> str:
    word = tokens[index][0]
    if kind == "date" and not word[0].isdigit():
        return word.lower()[:3]
    if kind in ("code", "name"):
        return stem(word)
    if not word[0].isdigit():
        return SPELLED_NUMBERS.get(word.lower(), word.lower())
    following = _following(tokens, index)
    if kind == "time":
        return _clock_time(word, following)
    if re.fullmatch(r"\d+(?:[.,]\d+)?", word) and _in_thousands(tokens, index):
        return in_thousands(word)
    if IN_THOUSANDS_K.fullmatch(word):
        return in_thousands(word[:-1])
    return number_value(word)


def _clock_time(word: str, following: str) -> str:
    """A time of day as HH:MM: 7pm, 7 pm, 19:00 and 19h00 are one time."""
    match = re.fullmatch(r"(\d{1,2})(?:[:h.](\d\d))?\s*(am|pm|h|uhr)?", word.lower())
    if match is None:
        return word.lower()
    hours, minutes = int(match.group(1)), int(match.group(2) or 0)
    half = match.group(3) or (following if following in ("am", "pm") else "")
    if half == "pm" and hours < 12:
        hours += 12
    if half == "am" and hours == 12:
        hours = 0
    return f"{hours:02d}:{minutes:02d}"


def _may_be_a_key(word: str) -> bool:
    word = word.lower()
    return (
        len(word) > 2
        and word not in STOPWORDS
        and stem(word) not in STOPWORDS
        and stem(word) not in TIME_WORDS
        and word not in FREQUENCY
        and word not in TIME_UNITS
        and word not in _CURRENCY_WORDS  # a unit, not what the amount is of
        and word not in THOUSANDS
        and word not in _PERCENT_WORDS
        and not language.CHANGE.fullmatch(word)
        and not language.FIRST_PERSON.fullmatch(word)
        and word not in GENERIC_WORDS
        and stem(word) not in REPORTING_WORDS
    )


def small_count(value: str) -> bool:
    return value.isdigit() and len(value) < 3
