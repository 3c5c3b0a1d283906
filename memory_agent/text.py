"""Text as the memory checks read it: sentences, words and their stems, numbers, names.

Every function reads NFKC-normalised text with invisible format characters removed, so that
look-alike and zero-width characters cannot hide a word from a check.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

# A word may hold digits (B12, 6b, Alice2): only a token of digits alone is a number.
WORD = re.compile(r"[A-Za-z0-9]*[A-Za-z][A-Za-z0-9'’\-]*|\d[\d,.:]*\d|\d")


# A sentence ends at . ! or ? and the quotes or brackets that close with it.
# A title's full stop ends no sentence ("Dr. Hollis").
_TITLES = r"(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bvs\.)(?<!\be\.g\.)"


_SENTENCE_END = re.compile(_TITLES + r"(?<=[.!?])([\"'”’)\]]*)\s+|\n+")


# Names that need no capital letter: the word after a title or after "name is", days and
# months.
_GIVEN_NAME = re.compile(r"\b(?:name is|named|called)\s+([a-z][a-z'-]+)", re.I)
_TITLED_NAME = re.compile(r"\b(?:mr|mrs|ms|miss|dr|prof)\.?\s+([a-z][a-z'-]+)", re.I)


_CALENDAR_WORD = re.compile(
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|mondays|tuesdays|"
    r"wednesdays|thursdays|fridays|saturdays|sundays|jan|january|feb|february|mar|march|apr|"
    r"april|may(?=\s+\d)|jun|june|jul|july|aug|august|sep|sept|september|oct|october|nov|"
    r"november|dec|december)\b",
    re.I,
)


STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    few for from further get got had has have having he her here hers herself him himself his
    how i i'd i'll i'm i've if in into is it it's its itself just let's like me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that that's the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves im ive id
    ill dont don't can't cant won't wont isn't wasn't let really please thanks thank ok okay
    yes yeah hi hello hey sure well oh great good nice cool lol one also maybe just still
    much many lot lots something anything thing things way bit kind sort us we're we've
    they're there's what's
    user users assistant conversation mentioned mentions said says asked asks told stated
    states noted memory record wants wanted shared would""".split()
)


# Words about when, not what: two texts sharing them do not speak of the same thing.
TIME_WORDS = frozenset(
    """year day week month today tomorrow yesterday tonight last next ago time morning
    evening night weekend later soon earlier""".split()
)


# How often: they make a stated habit lasting, but a question with them asks about the world.
FREQUENCY = frozenset("always never usually every weekly daily".split())


# The checks read the same few texts again and again (each memory against each other one):
# they are pure functions of the text, so they are computed once and shared, as immutable
# values.
_cached = lru_cache(maxsize=8192)


@_cached
def normalise_text(text: str) -> str:
    """NFKC, invisible format characters removed: what every check here reads."""
    if text.isascii():
        return text  # NFKC leaves ASCII alone, and every format character lies beyond it
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


@_cached
def sentences(text: str) -> tuple[str, ...]:
    parts = _SENTENCE_END.split(normalise_text(text))
    # split() interleaves each sentence with the closers it captured (None after a newline).
    joined = [parts[i] + (parts[i + 1] or "") for i in range(0, len(parts) - 1, 2)]
    joined.append(parts[-1])
    return tuple(part.strip() for part in joined if part.strip())


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    word = word.lower().replace("’", "'")
    for suffix in ("'s", "'"):
        word = word.removesuffix(suffix)
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}


@_cached
def numbers(text: str) -> frozenset[str]:
    found = re.findall(r"\d[\d,.:]*", text)
    return frozenset({re.sub(r"[,.:](?=\d{3}\b)", "", n).rstrip(".,:") for n in found})


@_cached
def names(text: str) -> frozenset[str]:
    """Capitalised words that do not start a sentence (and are not "I"): names and places;
    and, whatever their case, a word after a title (Mrs, Dr), days and months."""
    found = {match.lower() for match in _TITLED_NAME.findall(text)}
    found |= {match.lower() for match in _GIVEN_NAME.findall(text)}
    found |= {match.lower()[:3] for match in _CALENDAR_WORD.findall(text)}
    for sentence in sentences(text):
        words = WORD.findall(sentence)
        for word in words[1:]:
            if word[0].isupper() and word.lower() not in STOPWORDS and word not in ("I", "I'm"):
                found.add(word.lower().rstrip("'’s"))
    return frozenset(found)


@_cached
def content_words(text: str) -> frozenset[str]:
    return frozenset(
        stem(word)
        for word in WORD.findall(normalise_text(text))
        if not word[0].isdigit() and word.lower() not in STOPWORDS and len(word) > 2
    )


@_cached
def vocabulary(text: str) -> frozenset[str]:
    """Every stemmed word and number of a text: what a grounded sentence may use."""
    text = normalise_text(text)
    return frozenset(stem(word) for word in WORD.findall(text)) | numbers(text)


TIME_UNITS = frozenset(
    "am pm minute minutes min mins hour hours hr hrs second seconds o'clock".split()
)


# Marks a slot known only by its period ("$200 a day"): weaker than one named by a noun.
PERIOD_SLOT = "per "


@_cached
def number_slots(text: str) -> Mapping[str, frozenset[str]]:
    """Each number with the nouns it belongs to: the word before it ("plot 14" -> plot), and
    the first word after it that is neither common nor a unit of the clock ("25% of every
    invoice" -> invoice); a word of time only when nothing else follows ("$200 a day" ->
    day)."""
    words = WORD.findall(normalise_text(text))
    slots: dict[str, set[str]] = {}
    for index, word in enumerate(words):
        if word.lower() in NUMBER_WORDS and word.lower() not in ("one", "zero"):
            number = NUMBER_WORDS[word.lower()]
        elif word[0].isdigit() and not word[-1].isalpha():  # "15th" is a date, not a count
            number = re.sub(r"[,.:](?=\d{3}\b)", "", word)
        else:
            continue
        before = words[index - 1].lower() if index else ""
        if before and before not in STOPWORDS and not before[0].isdigit() and len(before) > 2:
            if before not in TIME_UNITS and not before.endswith(("ing", "ed")):
                slots.setdefault(stem(before), set()).add(number)  # "plot 14", "rent 1650"
        period = None
        for following in words[index + 1 : index + 4]:
            lowered = following.lower()
            if following[0].isdigit() or lowered in TIME_UNITS:
                break
            if stem(lowered) in TIME_WORDS:
                period = period or stem(lowered)
                continue
            if lowered in STOPWORDS or lowered in FREQUENCY:
                continue
            if lowered.endswith(("ing", "ed")) or len(lowered) < 3:
                continue  # a verb or an ordinal's ending, not what the number counts
            slots.setdefault(stem(lowered), set()).add(number)
            break
        else:
            # "$200 a day": an amount of money per period; "7 years old" is no such slot.
            if period and re.search(r"[$€£]\s?" + re.escape(word) + r"\b", text):
                slots.setdefault(PERIOD_SLOT + period, set()).add(number)
    return MappingProxyType({slot: frozenset(found) for slot, found in slots.items()})


def values(text: str) -> frozenset[str]:
    """The specific values a text gives: its numbers and names."""
    return numbers(text) | names(text)
