"""How a text writes its values, and the one form the checks read them in.

Characters: NFKC, invisible format characters removed (`normalise_text`), so that look-alike
and zero-width characters cannot hide a word from a check. Numbers: thousands grouped by
spaces are one number ("1 200 kr"). Times of day said in words are times ("kwart over zes",
"a las doce y cuarto", `language.Words.clock`). And back: where a value a memory holds is
written in a text (`written_in_digits`), so that an old value can be left out of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache, partial

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import normalise_text
from memory_agent.writers.extractive.words import language

# The checks read the same few texts again and again (each memory against each other one):
# they are pure functions of the text, so they are computed once and shared, as immutable
# values.
cached = lru_cache(maxsize=8192)


def _clock_patterns() -> tuple[tuple[re.Pattern, int, dict[str, int]], ...]:
    """Each language's times of day in words (`language.Words.clock`), with the minutes each
    adds to its hour and the language's hours in words."""
    found = []
    for words in language.LANGUAGES.values():
        hours = _hours_of(words)
        spelled = "|".join(sorted(map(re.escape, hours), key=len, reverse=True))
        for entry in words.clock.split():
            pattern, minutes = entry.rsplit("=", 1)
            bare_half = pattern.startswith(("half_{h}", "halb_{h}"))
            hour = spelled if bare_half else rf"{spelled}|[01]?\d|2[0-3]"
            regex = pattern.replace("{h}", f"(?P<h>{hour})")
            regex = re.sub(r"^<([^>]+)>", r"(?P<cue>\1)", regex).replace("_", r"\s+")
            found.append((re.compile(rf"(?<!\w){regex}(?!\w)", re.I), int(minutes), hours))
    return tuple(found)


def _hours_of(words: language.Words) -> dict[str, int]:
    spelled = {**language.numbered("numbers", 2, of=words), **language.numbered("one", 1, of=words)}
    return {word: n for word, n in spelled.items() if n <= 12}


_CLOCK_IN_WORDS = _clock_patterns()


@cached
def reading_form(text: str) -> str:
    """The text as the value rules read it: normalised, with a number grouped by spaces as one
    ("1 200 kr", "601 442 913") and each time of day said in words in digits ("kwart over
    zes", "las doce y cuarto", "quarter to eight": 6:15, 12:15, 7:45). A memory keeps the
    words as they were said."""
    text = _SPACED_NUMBER.sub(lambda match: re.sub(r"\s", "", match.group()), normalise_text(text))
    for pattern, minutes, hours in _CLOCK_IN_WORDS:
        text = pattern.sub(partial(_in_digits, minutes=minutes, hours=hours), text)
    return text


# Groups of three digits after the first, a space between: thousands in most of Europe.
# Not "214 215" (two rooms) nor "2 100-euro notes": a first group of one or two digits, or
# three groups or more ("601 442 913").
_SPACED_NUMBER = re.compile(
    r"(?<![\w.,:])(?:\d{1,2}(?:[ \u00a0\u202f]\d{3})+|\d{3}(?:[ \u00a0\u202f]\d{3}){2,})"
    r"(?![\w-]|[.,:]\d)"
)


def _clock_digits(match: re.Match[str], minutes: int, hours: Mapping[str, int]) -> str:
    """The time a match of a `_CLOCK_IN_WORDS` pattern says, as H:MM."""
    said = match.group("h").lower()
    hour = int(said) if said.isdigit() else hours[said]
    total = (hour * 60 + minutes) % (24 * 60)
    return f"{total // 60}:{total % 60:02d}"


def _in_digits(match: re.Match[str], minutes: int, hours: Mapping[str, int]) -> str:
    """The match as `reading_form` writes it: its "at" word kept, the time in digits."""
    cue = match.groupdict().get("cue")
    time = _clock_digits(match, minutes, hours)
    return f"{cue} {time}" if cue else time


@cached
def written_in_digits(value: str) -> re.Pattern:
    """Where a text writes the value (as `values.keyed_values` gives it) in digits: a number's
    thousands grouped or not ("601442913" as "601 442 913", "1250" as "$1,250.00"), its
    decimal point a comma ("12,50"), a time's leading zero left out ("7:10"), a code's hyphen
    left out ("NB0217"). Never inside another value: "930" is not "9:30", "15" not the day of
    "15/04/2024", "442" not part of "601 442 913"; so not a number joined to another by a
    hyphen or a slash either ("555-123-4567"). A value without digits matches nothing, nor one
    written in words, in thousands ("175k") or in a 12-hour clock ("7:10 pm")."""
    if not any(char.isdigit() for char in value):
        return re.compile(r"(?!)")
    parts = []
    for index, piece in enumerate(re.findall(r"\d+|[^\W\d_]+|.", value)):
        if piece.isdigit():
            parts.append(_digits_as_written(piece, leading_zero_optional=index == 0))
        elif piece.isalpha():
            parts.append(re.escape(piece))
        else:
            parts.append(_SEPARATOR_FORMS.get(piece, re.escape(piece)))
    whole = "".join(parts)
    if value.isdigit():
        whole += r"(?:[.,]00?)?"  # "$1,250.00"
    return re.compile(
        rf"(?<!\w)(?<!\d[\s.,:/-]){whole}(?!\w)(?![\s.,:/-]\d)", re.IGNORECASE
    )


_SEPARATOR_FORMS = {".": "[.,]", ":": "[:.h]", "-": "[-‐]?"}
_GROUP_SEPARATOR = "[\\s\u00a0.,'’]?"


def _digits_as_written(digits: str, *, leading_zero_optional: bool) -> str:
    """A run of digits, a thousands separator allowed between its groups of three."""
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[at : at + 3] for at in range(head, len(digits), 3)]
    written = _GROUP_SEPARATOR.join(groups)
    if leading_zero_optional and len(digits) == 2 and digits.startswith("0"):
        written = "0?" + written[1:]
    return written
