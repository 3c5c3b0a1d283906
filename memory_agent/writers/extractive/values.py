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

import regex as re

from memory_agent.writers.extractive.words import language
from memory_agent.writers.extractive.words.text import (
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
GENERIC_WORDS = frozenset(
    """said confirmed want need make take going think know help plan tell give look feel
    love new old big small little good bad best better sure right""".split()
)

# Verbs a summary uses to report what was said; they need not appear in the conversation.
REPORTING_WORDS = frozenset(
    stem(word)
    for word in """prefer prefers like likes enjoy enjoys want need needs plan plans mention
    discuss discussed request requested share express expressed confirm decide decided
    remember talk talked ask mentioned described describe""".split()
)

# How many words either side of a value may say what it is the value of, and how far away
# (in words of any kind) they may stand.
_KEYS_A_SIDE = 3
_REACH = 7
# Words that say a number is an amount of money or a share, after it.
# Currencies by their codes and the names and signs written after an amount, in any
# language ("950 kr", "1450 zł", "350 TL", "200 Kč"); not a code that is also a word or a
# unit ("ft", "won", "lei", "cop").
_CURRENCY_WORDS = frozenset(
    """eur euro euros usd dollar dollars gbp pound pounds chf yen k kr sek nok dkk krona
    kronor krone kroner zł zl pln złotych zlotys kč czk korun tl lira liras lire huf
    forint inr rupees brl reais mxn pesos clp aud cad nzd jpy cny yuan rmb krw rub ruble
    rubles uah hryvnia franken francs""".split()
)
_CURRENCY_SIGNS = ("$", "€", "£", "¥", "₺", "₹", "₽", "₩", "₪", "₴", "₫", "₱", "₦")
_PERCENT_WORDS = frozenset("percent prozent procent pct".split())
_CLOCK = re.compile(r"\d{1,2}(?::\d\d|h\d\d)")
_TIME_OF_DAY = re.compile(r"\d{1,2}(?::\d\d)?(?:am|pm)|\d{1,2}h\d\d", re.I)
_DATE = re.compile(r"\d{1,2}[./]\d{1,2}(?:[./]\d{2,4})?|\d{4}-\d\d-\d\d")
_ORDINAL_DATE = re.compile(r"\d{1,2}(?:st|nd|rd|th|º|er|e)$", re.I)


_PEOPLE_KEYS = frozenset(stem(word)[:5] for word in language.PEOPLE)
_TITLE_KEYS = frozenset(
    stem(word)[:5]
    for word in """mr mrs ms miss dr doctor prof sir madam signor signora signore dottor
    dottoressa señor señora sr sra don doña dona seu monsieur madame mme herr frau""".split()
)


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
            if kind == "number" and _small_count(_value(tokens, index, kind)):
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


def gives_new_value(older: str, newer: str, *, changed: bool) -> bool:
    """`newer` gives another value of the same kind for the same thing as `older`: the words
    beside the two values share two keys, or one when `newer` announces a change. When the old
    value stands beside other values (who or what it belongs to: "Bruno lives in Porto",
    "Postgres 13"), the newer text must name one of them too ("Chloe lives in Quito" and
    "Redis 7" are other things)."""
    old_values = keyed_values(older)
    new_values = keyed_values(newer)
    new_identities = _identities(new_values)
    new_numbers = _identities(new_values, kinds=("number", "code"))
    for old in old_values:
        # The other words of its own name ("Chen" of "Marcus Chen") say nothing of whose the
        # name is.
        own_name = _own_name(old, old_values)
        others = _identities(old_values) - {old.value} - own_name
        if others and new_identities and not others & new_identities:
            continue  # each names something else: "Bruno lives in Porto", "Chloe in Quito"
        numbered = _identities(old_values, kinds=("number", "code")) - {old.value}
        if numbered and new_numbers and not numbered & new_numbers:
            continue  # another numbered thing: "code 0001 for locker 1", "locker 2"
        # Evidence that the two values are of one thing: shared keys, a change announced, and
        # another value both name (the same release, the same store); not a count of one or
        # two digits, which two texts share by chance ("2 adultes", a list's "2/").
        named_by_both = {v for v in others & new_identities if not _small_count(v)}
        evidence = (1 if changed else 0) + (1 if named_by_both else 0)
        for new in new_values:
            if new.kind != old.kind or new.value == old.value:
                continue
            if old.kind == "date" and not _date_forms(old.value) & _date_forms(new.value):
                continue  # a month is no new value of a weekday: "el domingo", "noviembre"
            if old.unit and new.unit and old.unit != new.unit:
                continue  # another thing counted: "75 microgrammi" of one drug, "5 mg" of another
            shared = len(_shared_keys(old, new))
            if shared == 0 or shared + evidence < 2:
                continue
            if old.kind == "name" and not (changed and shared >= 2):
                # Another name beside the same words is as often another thing ("Priya owns
                # the payments service", "Tomasz owns the auth service"): only a change
                # announced makes it a new value.
                continue
            if new.keys & _PEOPLE_KEYS and not old.keys & _PEOPLE_KEYS:
                continue  # a value of someone else's: "my sister now lives in Denver"
            if old.value in new_identities and not changed:
                continue  # the old value is said again beside the new one: not replaced
            return True
    return False


def _own_name(value: KeyedValue, found: tuple[KeyedValue, ...]) -> frozenset[str]:
    """The words of the name `value` is one word of."""
    if value.name_group < 0:
        return frozenset()
    return frozenset(v.value for v in found if v.name_group == value.name_group)


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


def _shared_keys(one: KeyedValue, other: KeyedValue) -> frozenset[str]:
    """The words beside both values that may say what they are of. Words for people and
    titles say whose a value is, not what it is: two customers beside "signora" and "figlio"
    are two people, not one updated."""
    return (one.keys & other.keys) - _PEOPLE_KEYS - _TITLE_KEYS


def _date_forms(value: str) -> frozenset[str]:
    """What a date value names: a weekday, a month (both, for "mar": martes and March), or a
    day by its number, which may stand for either."""
    forms = {form for form, names in _DATE_NAMES.items() if value in names}
    return frozenset(forms or _DATE_NAMES)


# Weekdays and months as a date value gives them (their first three letters).
_DATE_NAMES = {
    field: frozenset(name[:3] for name in language.numbered(field, 0))
    for field in ("weekdays", "months")
}


def _small_count(value: str) -> bool:
    return value.isdigit() and len(value) < 3


def _identities(
    found: tuple[KeyedValue, ...],
    kinds: tuple[str, ...] = ("name", "code", "number", "percent", "money"),
) -> frozenset[str]:
    """The values that can say whose or what a value is (not dates and times: they say
    when)."""
    return frozenset(value.value for value in found if value.kind in kinds)


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
    if following in ("por", "pour", "per"):
        return _following(tokens, index + 1) in ("ciento", "cento", "cent")
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
    if word != word.lower() and word != "Tausend":
        return False  # "the 2025 Grand Prix", "Room 12 Grand Hotel"
    after = _following(tokens, index + 1)
    return word.lower() != "grand" or not after or after in STOPWORDS or after in _AMOUNT_FOLLOWERS


# What follows "grand" when it is an amount: "77 grand total", "50 grand a year", "10 grand cash".
_AMOUNT_FOLLOWERS = frozenset("total cash down each per now".split()) | TIME_WORDS


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


def replaced_values(older: str, newer: str, *, as_history: bool = False) -> frozenset[str]:
    """The values of `older` that `newer` may give a newer value for: those of a kind of which
    `newer` holds another value, and that `newer` does not repeat ("80 guests" beside "104
    guests", "Cabot Circus" beside "St David's"). Empty when `newer` cannot replace anything of
    `older`: a model's claim that it does is then shown wrong.

    With `as_history`, also a value `newer` repeats when it gives another of its kind, which
    `older` lacks, beside two of the same words ("van 8,5 naar elf procent", the fuel
    surcharge now 11%, after the fuel surcharge of 8,5%): a model may judge it the old value,
    said again as history; or a reference said again beside a new one of its series
    ("NB-0217 nicht überlebt … Ersatzgerät NB-0262"). Not a name: a name said again is as
    often whom both speak of."""
    old_values = keyed_values(older)
    new_values = keyed_values(newer)
    repeated = {value.value for value in new_values}
    new_kinds = {value.kind for value in new_values}
    old_said = {value.value for value in old_values}

    def history(old: KeyedValue) -> bool:
        return old.kind != "name" and any(
            new.kind == old.kind
            and new.value not in old_said
            and (len(new.keys & old.keys) >= 2 or _same_series(old, new))
            for new in new_values
        )

    # Not repeated, so any new value of its kind is another one.
    return frozenset(
        old.value
        for old in old_values
        if old.kind in new_kinds and (old.value not in repeated or (as_history and history(old)))
    )


# Digits enough that the same value twice is one thing: a phone number, an IP address, an
# ID ("NB-0217"); not "B12", "T2" or room "A204", nor 900 € of rent and 900 books.
_DISTINCTIVE_DIGITS = 5
_DISTINCTIVE_CODE_DIGITS = 4


def distinctive(value: KeyedValue) -> bool:
    """A value that, said twice, is one thing said twice."""
    digits = sum(char.isdigit() for char in value.value)
    if value.kind == "code":
        return digits >= _DISTINCTIVE_CODE_DIGITS
    return value.kind != "name" and digits >= _DISTINCTIVE_DIGITS


def code_series(code: str) -> str:
    """The letters a reference starts with ("nb" of "nb-0217", "ezy" of "ezy 6417"): who issued
    it, or what it numbers. Empty for one that starts with a digit."""
    match = _LETTERS.match(code)
    return match.group() if match else ""


_LETTERS = re.compile(r"[^\W\d_]+")


def _same_series(old: KeyedValue, new: KeyedValue) -> bool:
    return old.kind == new.kind == "code" and code_series(old.value) == code_series(new.value) != ""


def reissued(older: str, newer: str) -> bool:
    """`newer` names a reference of `older` again and gives another of its series ("NB-0217
    nicht überlebt … Ersatzgerät NB-0262"): it speaks of that record and of its successor."""
    old_codes = [v for v in keyed_values(older) if v.kind == "code"]
    new_codes = [v for v in keyed_values(newer) if v.kind == "code"]
    said_again = {v.value for v in new_codes} & {v.value for v in old_codes}
    return any(
        _same_series(old, new) and new.value not in said_again
        for old in old_codes
        if old.value in said_again
        for new in new_codes
    )
