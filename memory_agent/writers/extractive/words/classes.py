"""A word class of every language at once, found in a text by its words, not by a pattern.

A class (`first_person`, `lasting`, `greetings`...) holds a few hundred entries over the
language files. As one alternation it was tried entry by entry at every position of every
text the extractive writer reads; here the text is cut into words once, and each word is
looked up in sets: single words, phrases (by their first word), stems of languages whose words
take endings ("alerji-") and those endings ("-yorum"). Only the entries of languages written
without spaces ("过敏", "アレルギー"), which may stand anywhere in a run of characters, are
found by a pattern, a small one.

What is found is what the alternation found: left to right, a whole word or phrase at a
word's start first (the longest), then a stem with its ending, then a word with an ending,
then an entry of a language written without spaces wherever it stands.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from memory_agent.core import patterns as re

# A word as entries are cut apart: letters, digits, marks, apostrophes and hyphens.
_WORD = re.compile(r"[\w'’-]+")
_LETTERS = re.compile(r"\w+")


def folded(text: str) -> str:
    """Lower case as a case-insensitive pattern reads it ("İ" is "i", not "i̇")."""
    return text.lower().replace("i\u0307", "i")


@dataclass(frozen=True)
class Found:
    """Where an entry stands in a text, and its words as written there."""

    start_at: int
    end_at: int
    text: str

    def start(self) -> int:
        return self.start_at

    def end(self) -> int:
        return self.end_at

    def group(self) -> str:
        return self.text


class WordClass:
    def __init__(
        self,
        whole: set[str],
        stems: set[str],
        endings: set[str],
        anywhere: re.Pattern | None,
    ) -> None:
        self._singles = frozenset(folded(e) for e in whole if " " not in e)
        phrases: dict[str, list[tuple[str, ...]]] = {}
        for entry in whole:
            parts = tuple(folded(entry).split())
            if len(parts) > 1:
                phrases.setdefault(parts[0], []).append(parts)
        # The longest first, as an alternation tries them.
        self._phrases = {
            first: tuple(sorted(found, key=lambda p: -len(" ".join(p))))
            for first, found in phrases.items()
        }
        self._stems = frozenset(folded(s) for s in stems)
        self._endings = frozenset(folded(e) for e in endings)
        self._longest_stem = max(map(len, self._stems), default=0)
        self._longest_ending = max(map(len, self._endings), default=0)
        # What a stem starts with and an ending ends with: most words have neither.
        self._stem_starts = frozenset(stem[0] for stem in self._stems)
        self._ending_ends = frozenset(ending[-1] for ending in self._endings)
        self._anywhere = anywhere

    def finditer(self, text: str) -> Iterator[Found]:
        return iter(self._found(text))

    # A text is read by several checks of one memory job (a statement's score, whether it
    # is about the person, its clauses when it is trimmed): each class reads it once.
    @lru_cache(maxsize=8192)  # noqa: B019 (the classes live as long as the process)
    def _found(self, text: str) -> tuple[Found, ...]:
        return tuple(self._scan(text))

    def _scan(self, text: str) -> Iterator[Found]:
        words, lowered = cut(text)
        index, at = 0, 0
        while True:
            while index < len(words) and words[index].start() < at:
                index += 1
            by_word: Found | None = None
            while index < len(words) and by_word is None:
                by_word = self._at_word(text, words, lowered, index)
                if by_word is None:
                    index += 1
            elsewhere = self._anywhere.search(text, at) if self._anywhere else None
            if elsewhere is not None and (by_word is None or elsewhere.start() < by_word.start_at):
                found = Found(elsewhere.start(), elsewhere.end(), elsewhere.group())
            elif by_word is not None:
                found = by_word
            else:
                return
            yield found
            at = found.end_at

    def search(self, text: str) -> Found | None:
        return next(self.finditer(text), None)

    def findall(self, text: str) -> list[str]:
        return [found.text for found in self.finditer(text)]

    def sub(self, replacement: str, text: str) -> str:
        pieces, at = [], 0
        for found in self.finditer(text):
            pieces += [text[at : found.start_at], replacement]
            at = found.end_at
        return "".join(pieces) + text[at:]

    def fullmatch(self, word: str) -> bool:
        """The word is an entry, a stem with an ending, or a word with an ending."""
        lowered = folded(word)
        if lowered in self._singles or any(
            _all_letters(word[length:]) for length in self._stem_lengths(lowered)
        ):
            return True
        if _all_letters(word) and self._has_ending(lowered):
            return True
        return self._anywhere is not None and self._anywhere.fullmatch(word) is not None

    def _at_word(
        self, text: str, words: Sequence[re.Match[str]], lowered: Sequence[str], index: int
    ) -> Found | None:
        """An entry that starts where `words[index]` does: a whole word or phrase (the
        longest), else a stem and the letters after it, else the word with an ending."""
        word, start = lowered[index], words[index].start()
        for phrase in self._phrases.get(word, ()):
            last = index + len(phrase) - 1
            if last < len(words) and all(
                lowered[index + i] == part
                and (not i or _apart_by_spaces(text, words[index + i - 1], words[index + i]))
                for i, part in enumerate(phrase)
            ):
                return Found(start, words[last].end(), text[start : words[last].end()])
        if word in self._singles:
            return Found(start, words[index].end(), words[index].group())
        for length in self._stem_lengths(word):
            letters = _LETTERS.match(text, start)
            if letters is not None and letters.end() - start >= length:
                return Found(start, letters.end(), letters.group())
        if self._has_ending(word) and _all_letters(words[index].group()):
            return Found(start, words[index].end(), words[index].group())
        return None

    def _stem_lengths(self, word: str) -> Iterator[int]:
        """The lengths of the stems `word` starts with, the longest first."""
        if not word or word[0] not in self._stem_starts:
            return
        for length in range(min(len(word), self._longest_stem), 0, -1):
            if word[:length] in self._stems:
                yield length

    def _has_ending(self, word: str) -> bool:
        """`word` is an ending after at least one more character."""
        return bool(word) and word[-1] in self._ending_ends and any(
            word[-length:] in self._endings
            for length in range(1, min(len(word) - 1, self._longest_ending) + 1)
        )


@lru_cache(maxsize=4096)
def cut(text: str) -> tuple[tuple[re.Match[str], ...], tuple[str, ...]]:
    """The text's words, and each in lower case: cut once for every class that reads it."""
    words = tuple(_WORD.finditer(text))
    return words, tuple(folded(word.group()) for word in words)


def _all_letters(text: str) -> bool:
    """Every character is a word character (no apostrophe, no hyphen): what `\\w` takes."""
    return _LETTERS.fullmatch(text) is not None if text else True


def _apart_by_spaces(text: str, before: re.Match[str], after: re.Match[str]) -> bool:
    """Nothing but white space (some) stands between the two words: a phrase's words."""
    gap = text[before.end() : after.start()]
    return bool(gap) and not gap.strip()
