""""Remember this until …": the date a user gives their memory, read by the checks.

A user's sentence that asks to be remembered (a standing-instruction word: "remember", "keep
in mind", "recuerda", "merk dir"…) and names an end date right after a word of "until"
("until", "hasta", "jusqu'au", "bis", "até", "fino al") gives the memory of its conversation
an expiry: the end of that day (UTC). The date may be written as ISO (`2026-12-04`), day first
with dots or slashes (`4.12.2026`, `4/12`), as a day and a month name in either order
(`4 December`, `December 4th`, `4 de diciembre`), or as a weekday (the next one to come).
An "until" that closes a range ("Monday until Friday", "from March until May") is not an
instruction, and a date already past is ignored. Languages: those of `language.LANGUAGES`;
another is added there (its `until`, `months` and `weekdays`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from memory_agent.core import patterns as re
from memory_agent.core.chat_model import ChatMessage
from memory_agent.writers.extractive.words import language, text

_MONTHS = language.numbered("months", 1)
_WEEKDAYS = language.numbered("weekdays", 0)
_UNTIL = language.pattern_of("until")
_STANDING = language.STANDING
_ARTICLE = rf"(?:{language.longest_first(language.BEFORE_DATES)})\s+"
_MONTH = "|".join(sorted(map(re.escape, _MONTHS), key=len, reverse=True))
_WEEKDAY = "|".join(sorted(map(re.escape, _WEEKDAYS), key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th|º|°|er|\.)?"
_YEAR = r"(?:,?\s*(?:de\s+)?(\d{4}))?"
_DATE_FORMS = [
    ("iso", re.compile(r"(\d{4})-(\d{2})-(\d{2})\b")),
    ("numeric", re.compile(r"(\d{1,2})([./])(\d{1,2})(?:[./](\d{4}|\d{2}))?\b")),
    ("day_month", re.compile(rf"{_DAY}\s+(?:de\s+|of\s+)?({_MONTH})\b\.?{_YEAR}")),
    ("month_day", re.compile(rf"({_MONTH})\.?\s+{_DAY}(?!\d){_YEAR}")),
    ("weekday", re.compile(rf"({_WEEKDAY})\b")),
]
# The words just before an "until" that make it the end of a range.
_RANGE_START = re.compile(
    rf"(?:\b(?:{_MONTH}|{_WEEKDAY})|\d{{1,2}}[./]\d{{1,2}}|\d{{4}}-\d\d-\d\d)\W*$",
    re.IGNORECASE,
)


def remembered_until(messages: Sequence[ChatMessage], now: datetime) -> datetime | None:
    """The expiry the user asked for, as the end of that day in UTC; None when none was asked.
    With several, the last one said counts."""
    found = None
    for message in messages:
        if message.role != "user":
            continue
        for sentence in text.sentences(message.content):
            if not _STANDING.search(sentence):
                continue
            for until in _UNTIL.finditer(sentence):
                if _RANGE_START.search(sentence[: until.start()].rstrip()[-16:]):
                    continue
                day = _date_after(sentence[until.end():], now.date())
                if day is None or day < now.date():
                    continue
                try:
                    found = datetime.combine(day + timedelta(days=1), time(), UTC)
                except OverflowError:
                    continue  # the last day of the calendar: no end to give it
    return found


def _date_after(rest: str, today: date) -> date | None:
    """The date that `rest` starts with (after an optional article), if any."""
    rest = re.sub(rf"^\s*(?:{_ARTICLE})?", "", rest.lower())
    for form, pattern in _DATE_FORMS:
        match = pattern.match(rest)
        if match is None:
            continue
        try:
            return _read(form, match.groups(), today)
        except ValueError:
            return None  # "31.02": not a date
    return None


def _read(form: str, groups: Sequence[str | None], today: date) -> date | None:
    if form == "iso":
        return date(int(groups[0] or 0), int(groups[1] or 0), int(groups[2] or 0))
    if form == "weekday":
        ahead = (_WEEKDAYS[groups[0] or ""] - today.weekday() - 1) % 7 + 1
        return today + timedelta(days=ahead)
    if form == "numeric":
        first, mark, second, year = int(groups[0] or 0), groups[1], int(groups[2] or 0), groups[3]
        if mark == "." and year is None and second > 12:
            return None  # "10.30": a time of day
        # Day first, as most of the world writes it; "12/25" can only be month first.
        day, month = (second, first) if mark == "/" and second > 12 >= first else (first, second)
        return _in_year(day, month, year, today)
    if form == "day_month":
        return _in_year(int(groups[0] or 0), _MONTHS[groups[1] or ""], groups[2], today)
    return _in_year(int(groups[1] or 0), _MONTHS[groups[0] or ""], groups[2], today)


def _in_year(day: int, month: int, year: str | None, today: date) -> date:
    """The date in the year given (two digits: this century), else the next time it comes."""
    if year is not None:
        full = int(year) + (2000 if len(year) == 2 else 0)
        return date(full, month, day)
    moment = date(today.year, month, day)
    return moment if moment >= today else date(today.year + 1, month, day)
