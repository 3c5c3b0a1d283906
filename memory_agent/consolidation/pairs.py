"""Which pairs of memories a consolidation pass asks the writer about, found without a model:
two memories whose texts share enough (`links.likeness`: weighted character trigrams, in any
language and script). The pairs that share the most are asked first, at most a cap
per space and run, and a pair asked before (the same two texts) is not asked again until its
recheck period is over. Two values of one thing ("lives in Lisbon", "now lives in Porto") share
less than two wordings of one fact: the threshold lets both through, and the writer decides.

A pair is two live memories a model may be shown and a reader may be given (public, neither
pinned, which nothing may change, nor private), of one space, or one of a person's profile and
one of their own memories in an app that shares the profile (what the profile holds, such an
app reads anyway). Two texts that are the same in two spaces are a copy made on purpose (an
app's memory and its profile part): not a pair."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory_agent.links.likeness import Likeness
from memory_agent.models import Memory
from memory_agent.storage.store import PROFILE_APP

# The weighted share of the lighter text's trigrams the other must hold. Among ten memories of
# one person, two wordings of one fact share about 0.6, "lives in Lisbon, in Alfama" and "now
# lives in Porto, in Ribeira" 0.25, most facts about different things under 0.2; some share as
# much as two values of one thing do ("prefers email", "prefers window seats": 0.24), which
# only the writer can tell apart.
MIN_SHARE = 0.2


@dataclass(frozen=True)
class Pair:
    older: Memory
    newer: Memory
    share: float

    @property
    def same_space(self) -> bool:
        return (self.older.app_id, self.older.user_id) == (self.newer.app_id, self.newer.user_id)

    @property
    def mergeable(self) -> bool:
        """Whether the two may become one: of one space, one kind and one expiry (a reader
        allowed one kind must not get the other's text; a lasting fact must not expire with
        the memory it went into)."""
        return (self.same_space and self.older.kind == self.newer.kind
                and self.older.expires_at == self.newer.expires_at)

    @property
    def fingerprint(self) -> str:
        """The two memories' spaces and texts, whichever order: a text that changes makes the
        pair a new one, and the same texts in another person's spaces are another pair."""
        sides = sorted(f"{m.app_id}\0{m.user_id}\0{m.content}" for m in (self.older, self.newer))
        return hashlib.sha256("\0\0".join(sides).encode()).hexdigest()[:32]

    @property
    def kept_with(self) -> tuple[str, str]:
        """The space its record is kept with (so that a purge or an erasure takes it): the
        app's, where one memory is of an app, else the profile's."""
        app = next((m for m in (self.older, self.newer) if m.app_id != PROFILE_APP), self.older)
        return app.app_id, app.user_id


def consolidable(memory: Memory) -> bool:
    return memory.sensitivity == "public" and not memory.private and not memory.pinned


def candidate_pairs(
    spaces: Sequence[Sequence[Memory]], crossings: Iterable[tuple[int, int]],
) -> list[Pair]:
    """Every pair of `spaces` (each a space's memories) that shares enough: within each space,
    and between the spaces of each `crossings` (indexes into `spaces`); the most alike first."""
    kept = [[m for m in space if consolidable(m)] for space in spaces]
    likeness = Likeness({m.id: m.content for space in kept for m in space})
    found: list[Pair] = []

    def consider(one: Memory, other: Memory) -> None:
        if one.content == other.content and (one.app_id, one.user_id) != (
            other.app_id, other.user_id
        ):
            return
        alike = likeness.share(one.id, other.id)
        if alike >= MIN_SHARE:
            older, newer = sorted((one, other), key=lambda m: (m.updated_at, m.id))
            found.append(Pair(older, newer, round(alike, 4)))

    for space in kept:
        for index, one in enumerate(space):
            for other in space[index + 1 :]:
                consider(one, other)
    for first, second in crossings:
        for one in kept[first]:
            for other in kept[second]:
                consider(one, other)
    return sorted(found, key=lambda pair: (-pair.share, pair.older.id, pair.newer.id))


def within_caps(pairs: Sequence[Pair], per_space: int) -> list[Pair]:
    """The pairs in order, at most `per_space` charged to each space (a pair to both of its
    spaces), and no memory in two pairs (the first change would make the second stale)."""
    charged: dict[tuple[str, str], int] = {}
    taken: set[int] = set()
    chosen = []
    for pair in pairs:
        spaces = {(m.app_id, m.user_id) for m in (pair.older, pair.newer)}
        if pair.older.id in taken or pair.newer.id in taken:
            continue
        if any(charged.get(space, 0) >= per_space for space in spaces):
            continue
        for space in spaces:
            charged[space] = charged.get(space, 0) + 1
        taken |= {pair.older.id, pair.newer.id}
        chosen.append(pair)
    return chosen
