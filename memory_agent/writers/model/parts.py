"""A long conversation's transcript in parts that each fit one memory prompt.

A transcript that fits is one part. One that does not is cut between turns into consecutive
parts of at most `room` tokens each, every turn in one part, so that no fact is dropped for
where it was said. The parts are bounded (`MAX_PARTS`): a conversation longer than that many
prompts hold has its longest turns shortened, each keeping its beginning and its end, until
it fits; a turn longer than a whole part is shortened the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger("mnemoloop.memory")

# The most parts one conversation is read in, so that the calls a memory takes stay bounded
# (a part's call, a second when its answer is not the JSON or a sentence is asked for again,
# and the calls that put the parts' sentences together). At Ollama's default window of 4,096
# tokens a part holds about 1,100 tokens of transcript as a model counts them (the estimate
# counts English about twice over): 24 parts read a conversation of about 20,000 tokens whole.
MAX_PARTS = 24
# What stands for the middle of a shortened turn.
_GAP = " […] "


@dataclass(frozen=True)
class TranscriptPart:
    lines: tuple[str, ...]
    # The indexes of the turns it holds, in the conversation's order.
    turns: tuple[int, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def transcript_parts(
    lines: Sequence[str], room: int, count: Callable[[str], int], max_parts: int = MAX_PARTS
) -> list[TranscriptPart]:
    """`lines` (one per turn) in consecutive parts of at most `room` tokens (`count` tells a
    text's tokens), at most `max_parts` of them."""
    room = max(room, 1)
    costs = [count(line) + 1 for line in lines]  # and its line break
    if sum(costs) <= room:
        return [TranscriptPart(tuple(lines), tuple(range(len(lines))))]
    # Whole turns when they pack into the bound (a turn longer than a part shortened to one).
    parts = _packed(lines, room, room, count)
    if len(parts) <= max_parts:
        return parts
    # Else the longest turns shortened: a part is never quite full (a turn that does not fit
    # starts the next), so all of them together take somewhat less than every part's room;
    # less again while the turns still pack into too many parts.
    total = int(max_parts * room * 0.8)
    while True:
        cap = _largest_cap(costs, room, total=total)
        parts = _packed(lines, room, cap, count)
        if len(parts) <= max_parts:
            return parts
        if cap == 1:
            # Thousands of turns: their middle goes unread (logged), the parts stay bounded.
            log.warning("📝 A conversation of %d turns is too long to read whole; its middle"
                        " turns are left out", len(lines))
            return parts[: max_parts // 2] + parts[-(max_parts - max_parts // 2):]
        total = int(total * 0.8)


def _packed(
    lines: Sequence[str], room: int, cap: int, count: Callable[[str], int]
) -> list[TranscriptPart]:
    """`lines`, each shortened to `cap` tokens, in consecutive parts of at most `room`."""
    fitted = [_shortened(line, cap, count) for line in lines]
    parts: list[TranscriptPart] = []
    current: list[int] = []
    used = 0
    for index, line in enumerate(fitted):
        cost = count(line) + 1
        if current and used + cost > room:
            parts.append(_part(fitted, current))
            current, used = [], 0
        current.append(index)
        used += cost
    if current:
        parts.append(_part(fitted, current))
    return parts


def _part(lines: Sequence[str], indexes: list[int]) -> TranscriptPart:
    return TranscriptPart(tuple(lines[i] for i in indexes), tuple(indexes))


def _largest_cap(costs: Sequence[int], room: int, *, total: int) -> int:
    """The largest length (at most `room`) that, with every longer turn shortened to it,
    keeps the turns within `total` tokens."""
    low, high = 1, room
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(cost, middle) for cost in costs) <= total:
            low = middle
        else:
            high = middle - 1
    return low


def _shortened(line: str, tokens: int, count: Callable[[str], int]) -> str:
    """`line` within `tokens`, its middle left out: a turn's beginning says what it is about,
    its end often what was settled."""
    if count(line) + 1 <= tokens:
        return line
    low, high = 0, len(line) // 2
    while low < high:  # the most characters kept at each end
        middle = (low + high + 1) // 2
        if count(line[:middle] + _GAP + line[-middle:]) + 1 <= tokens:
            low = middle
        else:
            high = middle - 1
    return line[:low] + _GAP + line[-low:] if low else line[: max(tokens, 1)]
