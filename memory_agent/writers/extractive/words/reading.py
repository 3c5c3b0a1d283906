"""Whether a language's file can read a text: its entries of every class found whole in
the text, counted by word (or, in a language written without spaces, by the characters they
cover). What the extractive writer does when no file reads enough of a conversation is in
`statements.readable`.

Each language's entries are sets looked up word by word, not a pattern: a file holds hundreds
of entries, and every memory job asks this of every language.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache

from memory_agent.core import patterns as re
from memory_agent.writers.extractive.words.classes import cut
from memory_agent.writers.extractive.words.language import LANGUAGES, Words, entries_of

# A word as the classes' entries are cut apart: letters, digits, marks, apostrophes and
# hyphens ("don't", "to-do").
_WORD = re.compile(r"[\w'’-]+")
_WORD_CHAR = re.compile(r"[\w'’-]")


@dataclass(frozen=True)
class _Vocabulary:
    """One language's entries: single words, phrases by their first word (the longest
    first), words written with a full stop ("dr."), and for a language written without
    spaces, every entry with the length of the longest."""

    spaces: bool
    singles: frozenset[str]
    phrases: dict[str, tuple[tuple[str, ...], ...]]
    dotted: frozenset[str]
    anywhere: frozenset[str]
    longest: int

    def words_read(self, text: str, words: Sequence[re.Match[str]], lowered: Sequence[str]) -> int:
        """The entries found whole in `text` (cut into `words`, `lowered` in lower case), left
        to right, the longest at each place: a phrase counts once."""
        found, index = 0, 0
        while index < len(words):
            word = lowered[index]
            taken = self._phrase_at(text, words, lowered, index) if word in self.phrases else 0
            if taken:
                found += 1
                index += taken
                continue
            if word in self.singles or (
                word in self.dotted and _ends_with_stop(text, words[index])
            ):
                found += 1
            index += 1
        return found

    def _phrase_at(
        self, text: str, words: Sequence[re.Match[str]], lowered: Sequence[str], index: int
    ) -> int:
        """How many words the longest phrase starting at `words[index]` takes; 0: none."""
        for phrase in self.phrases[lowered[index]]:
            end = index + len(phrase)
            if end <= len(words) and all(
                lowered[index + i] == part
                and (not i or _apart_by_spaces(text, words[index + i - 1], words[index + i]))
                for i, part in enumerate(phrase)
            ):
                return len(phrase)
        return 0

    def characters_read(self, text: str) -> int:
        """The characters of `text` that entries cover, left to right, the longest at each
        place (a language written without spaces: an entry may stand anywhere)."""
        lowered = text.lower()
        covered, at = 0, 0
        while at < len(lowered):
            for length in range(min(self.longest, len(lowered) - at), 0, -1):
                if lowered[at : at + length] in self.anywhere:
                    covered += length
                    at += length
                    break
            else:
                at += 1
        return covered


def _apart_by_spaces(text: str, before: re.Match[str], after: re.Match[str]) -> bool:
    """Nothing but white space (some) stands between the two words: a phrase's words."""
    gap = text[before.end() : after.start()]
    return bool(gap) and not gap.strip()


def _ends_with_stop(text: str, word: re.Match[str]) -> bool:
    """The word is written with a full stop that no word character follows ("Dr. Patel")."""
    end = word.end()
    return text[end : end + 1] == "." and not _WORD_CHAR.match(text, end + 1)


@lru_cache(maxsize=4)
def _vocabularies(codes: frozenset[str] | None = None) -> tuple[_Vocabulary, ...]:
    """Every language's entries of every class, whole (stems and endings left out); only the
    languages of `codes` when given."""
    found = []
    for code, words in LANGUAGES.items():
        if codes is not None and code not in codes:
            continue
        entries = {
            spelling.lower()
            for field in fields(Words)
            if field.type == "str" and field.name not in ("name", "clock")
            and field.metadata.get("read", True)
            for entry in entries_of(getattr(words, field.name))
            for spelling in entry.split("|")
            if spelling and "-" not in (spelling[0], spelling[-1])
        }
        if entries:
            found.append(_vocabulary(words.spaces, entries))
    return tuple(found)


def _vocabulary(spaces: bool, entries: set[str]) -> _Vocabulary:
    phrases: dict[str, list[tuple[str, ...]]] = {}
    for entry in entries:
        parts = tuple(entry.split())
        if len(parts) > 1:
            phrases.setdefault(parts[0], []).append(parts)
    return _Vocabulary(
        spaces,
        frozenset(e for e in entries if " " not in e and not e.endswith(".")),
        {first: tuple(sorted(found, key=lambda p: -len(" ".join(p))))
         for first, found in phrases.items()},
        frozenset(e[:-1] for e in entries if " " not in e and e.endswith(".")),
        frozenset(entries),
        max(map(len, entries)),
    )


# Characters of the scripts written without spaces between words.
UNSPACED = re.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def unspaced_characters(text: str) -> int:
    """The text's characters of a script written without spaces (`some_language_reads`'s
    `unspaced`)."""
    # None of those scripts is in ASCII, which most texts are.
    return 0 if text.isascii() else len(UNSPACED.findall(text))


def some_language_reads(
    text: str, *, words: int, unspaced: int, share: float, codes: frozenset[str] | None = None
) -> bool:
    """Whether one language's file (of `codes`, when given) reads at least `share` of the
    text: its words found whole, for every word of the text (`words`), or for a language
    written without spaces, the characters they cover for every such character (`unspaced`).
    The languages are asked in their files' rank, and the first that reads enough answers."""
    found, lowered = cut(text) if words else ((), ())
    for vocabulary in _vocabularies(codes):
        if vocabulary.spaces and words:
            read = vocabulary.words_read(text, found, lowered) / words
        elif not vocabulary.spaces and unspaced:
            read = vocabulary.characters_read(text) / unspaced
        else:
            continue
        if read >= share:
            return True
    return False
