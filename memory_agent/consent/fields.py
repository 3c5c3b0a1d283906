"""Which sensitive fields of a person's profile a text speaks of: the operator's list (by
default name, pronouns, city, language, health, contact), each found by the words the
language files give it (their `[sensitive]` table) and, for contact, by an address's or a
phone number's shape in any script.

It fails closed: a text that no language with such a table reads is taken to speak of every
field (`UNREAD`), so that a change in a language the service cannot read waits for the
person too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from memory_agent.core import patterns as re
from memory_agent.writers.extractive.words.classes import WordClass
from memory_agent.writers.extractive.words.language import LANGUAGES, class_of
from memory_agent.writers.extractive.words.reading import (
    some_language_reads,
    unspaced_characters,
)

DEFAULT_FIELDS = ("name", "pronouns", "city", "language", "health", "contact")
# What a text no language with a `[sensitive]` table reads is said to speak of.
UNREAD = "unread language"
# Share of a text's words such a language must read for its words to be trusted.
_READ_SHARE = 0.25

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Seven digits or more, grouped as phone numbers are written ("+351 912 345 678").
_PHONE = re.compile(r"(?<!\w)\+?\d(?:[\d\s().-]{5,}\d)(?!\w)")
# Pronouns as people give theirs ("she/her", "they/them", "elle/la", "iel/ellui").
_PRONOUNS = re.compile(
    r"(?<!\w)(?:he|she|they|xe|ze|ey|fae|it|il|elle|iel|él|ella|elle|elu|er|sie|hen|hän)"
    r"/\p{L}{1,8}(?!\w)", re.IGNORECASE,
)
_WORD = re.compile(r"[\w'’-]+")


def known_fields() -> frozenset[str]:
    """The fields some language file names (and contact, found by shape too)."""
    return frozenset(
        field for words in LANGUAGES.values() for field in words.sensitive
    ) | {"contact"}


def checked_fields(names: Iterable[str]) -> tuple[str, ...]:
    """`names` when each is a known field; else `ValueError` naming the unknown."""
    given = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    unknown = [name for name in given if name not in known_fields()]
    if unknown:
        raise ValueError(
            f"{', '.join(map(repr, unknown))} is no sensitive field the language files name;"
            f" the fields are {', '.join(sorted(known_fields()))}"
        )
    return given


@dataclass(frozen=True)
class SensitiveFields:
    """The operator's sensitive fields; none: a profile changes without asking."""

    fields: tuple[str, ...] = DEFAULT_FIELDS

    @cached_property
    def _classes(self) -> dict[str, WordClass]:
        return {
            field: class_of(f"sensitive.{field}", [
                (words, words.sensitive[field]) for words in LANGUAGES.values()
                if field in words.sensitive
            ])
            for field in self.fields
        }

    @cached_property
    def _readers(self) -> frozenset[str]:
        """The languages that can tell: those whose files have the table."""
        return frozenset(code for code, words in LANGUAGES.items() if words.sensitive)

    def found_in(self, text: str) -> frozenset[str]:
        """The fields `text` speaks of; `UNREAD` too when no language that can tell reads
        it (and it holds words at all)."""
        if not self.fields or not text.strip():
            return frozenset()
        found = {field for field, words in self._classes.items() if words.search(text)}
        if "contact" in self.fields and (_EMAIL.search(text) or _phone_in(text)):
            found.add("contact")
        if "pronouns" in self.fields and _PRONOUNS.search(text):
            found.add("pronouns")
        if not found and not self._read(text):
            found.add(UNREAD)
        return frozenset(found)

    def _read(self, text: str) -> bool:
        """A language that can tell reads the text's words of three letters or more (the
        short ones, "na", "i", "da", are another language's words as often as not)."""
        unspaced = unspaced_characters(text)
        if unspaced:
            return some_language_reads(text, words=0, unspaced=unspaced, share=_READ_SHARE,
                                       codes=self._readers)
        long = [w for w in _WORD.findall(text) if len(w) >= 3 and not w.isdigit()]
        if not long:
            return True  # nothing but short words, digits and signs: no field but by shape
        return some_language_reads(" ".join(long), words=len(long), unspaced=0,
                                   share=_READ_SHARE, codes=self._readers)


_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")


def _phone_in(text: str) -> bool:
    """A run of seven digits or more written as a phone number is (a date is not)."""
    return any(
        sum(c.isdigit() for c in match.group()) >= 7 and not _DATE.fullmatch(match.group().strip())
        for match in _PHONE.finditer(text)
    )
