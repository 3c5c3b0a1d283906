"""How a conversation used the memories its turns were given.

Every memory in a turn's memory block is an injection of that memory in the conversation
(counted there and on the memory, with the time). A reply cites a memory when it holds one of
the memory's values that the user's own message does not: a number or a code (two characters
or more, at least one a digit: "4417", "RX-20917", "16:00"), or a name as the memory writes it
(a word with a capital letter that does not open a sentence: "Ruiz", "Lisbon"; a stop after a
short capitalised word, "Dr.", is an abbreviation's). No language's
word list is read; in a script without capitals only numbers and codes can be told.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import folded
from memory_agent.models import Memory

# A word, or a number or code written with joiners inside it (16:00, 1,650, RX-20917, a.b).
_TOKEN = re.compile(r"[\p{L}\p{M}\p{N}]+(?:[.,:/\-][\p{L}\p{M}\p{N}]+)*")
# What may stand before a sentence's first word: its end, an opening quote or bracket.
_OPENS = frozenset(".!?:;\"'“‘«(「『")
_ABBREVIATION = re.compile(r"(?<![\p{L}\p{M}])\p{Lu}\p{Ll}{0,2}$")


def values_of(text: str) -> set[str]:
    """The numbers, codes and names `text` holds, folded as words are compared."""
    found: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if any(char.isdigit() for char in token):
            if len(token) >= 2:
                found.add(folded(token))
        elif len(token) >= 2 and token[0].isupper() and not _opens_a_sentence(text, match.start()):
            found.add(folded(token))
    return found


def _opens_a_sentence(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    if not before or before[-1] not in _OPENS:
        return not before
    # A stop after a short capitalised word is an abbreviation's ("Dr. Ruiz", "St. Louis").
    return not (before[-1] == "." and _ABBREVIATION.search(before[:-1]))


def _tokens(text: str) -> set[str]:
    return {folded(match.group(0)) for match in _TOKEN.finditer(text)}


def cited(shown: Sequence[Memory], reply: str, asked: str) -> set[int]:
    """The ids of the memories `shown` whose values `reply` holds and the user's message
    `asked` does not."""
    said = _tokens(reply) - _tokens(asked)
    return {memory.id for memory in shown if values_of(memory.content) & said}
