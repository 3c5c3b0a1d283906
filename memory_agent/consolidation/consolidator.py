"""One consolidation pass over a scope (every space, an app's, a person's, or one person's in
one app), away from the hot path: the spaces are visited in groups (a person's spaces together,
so that what their profile holds meets what their apps hold; each app's shared space alone),
each group's pairs found (`pairs`), the writer asked about each (`MemoryWriter.judge_pair`:
no lock, no transaction while a model thinks), and its verdict applied in a transaction of its
own, only if both memories are still as the verdict saw them and the pass is still wanted (a
purge, an uninstall or an erasure meanwhile says no). So an interrupted pass leaves every pair
either consolidated or untouched, and a space never holds more than it did.

Every change is in the history with `consolidated: ` leading its reason (the delta header
names it ↔merged), decided by the model or by the writer's policy."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory_agent.consent.holding import Consent
from memory_agent.consolidation.pairs import Pair, candidate_pairs, consolidable, within_caps
from memory_agent.core.ports import Clock, Database, SqlTransaction, format_timestamp, now_text
from memory_agent.core.redaction import redact_text
from memory_agent.links.linking import link_in_space
from memory_agent.models import CONSOLIDATED, DEFAULT_IMPORTANCE, Memory
from memory_agent.storage.store import PROFILE_APP, EventSource, MemoryStore
from memory_agent.writers.pairs import PairVerdict
from memory_agent.writers.writer import MemoryWriter

log = logging.getLogger("mnemoloop.memory")

# A pair asked about is not asked again for this long (unless either text changes).
RECHECK_AFTER = timedelta(days=14)
# Pairs asked about per space and pass, by default.
PAIRS_PER_SPACE = 5

# Inside a change's transaction: whether the host still wants a change to these spaces (the
# pass is still held; their apps are installed, and one crossed with a profile shares it).
Wanted = Callable[[SqlTransaction, Sequence[tuple[str, str]]], Awaitable[bool]]


@dataclass
class PassFigures:
    """What a pass did: spaces visited, pairs asked about, changes applied, model calls."""

    spaces: int = 0
    pairs_asked: int = 0
    changes: int = 0
    model_calls: int = 0
    # Pairs the writer could not judge (the model failed or gave no verdict): asked again by
    # the next pass, and the last reason why.
    unjudged: int = 0
    last_failure: str | None = None


@dataclass(frozen=True)
class Group:
    """Spaces whose pairs are found together: `spaces` (app, user), and the pairs of spaces
    (indexes) whose memories are compared with each other too."""

    spaces: tuple[tuple[str, str], ...]
    crossings: tuple[tuple[int, int], ...] = ()


def groups_of(
    spaces: Sequence[tuple[str, str]], shares_profile: Callable[[str], bool],
    visited: Callable[[str], bool] = lambda app_id: True,
) -> list[Group]:
    """Each person's spaces as one group (their profile first, crossed with their spaces in
    the apps that share it), and each app's shared space alone; only the spaces of the apps
    `visited` says (and profiles)."""
    by_person: dict[str, list[tuple[str, str]]] = {}
    groups = []
    for app_id, user_id in spaces:
        if app_id != PROFILE_APP and not visited(app_id):
            continue
        if user_id == "":
            groups.append(Group(((app_id, user_id),)))
        else:
            by_person.setdefault(user_id, []).append((app_id, user_id))
    for _person, own in sorted(by_person.items()):
        ordered = sorted(own, key=lambda space: space[0] != PROFILE_APP)
        crossings = tuple(
            (0, index) for index, (app_id, _) in enumerate(ordered)
            if index and ordered[0][0] == PROFILE_APP and shares_profile(app_id)
        )
        groups.append(Group(tuple(ordered), crossings))
    return groups


class Consolidator:
    def __init__(
        self, database: Database, store: MemoryStore, writer: Callable[[], MemoryWriter],
        clock: Clock, consent: Consent | None = None,
    ) -> None:
        self._db = database
        self._store = store
        # The writer the agent writes with now (`auto` may choose it after the start).
        self._writer = writer
        self._clock = clock
        # A change to a sensitive profile fact waits for the person (None: none does).
        self._consent = consent

    async def spaces(
        self, app_id: str | None, user_id: str | None
    ) -> list[tuple[str, str]]:
        """The spaces a pass over the scope visits: those of the app and the person when given
        (and, for an app, the profiles of its users), each holding a memory."""
        now = now_text(self._clock)
        found = await self._store.spaces_holding(now, app_id, user_id)
        if app_id is not None and app_id != PROFILE_APP:
            users = {user for _, user in found if user}
            found += [
                space for space in await self._store.spaces_holding(now, PROFILE_APP, user_id)
                if space[1] in users
            ]
        return sorted(set(found))

    async def consolidate(
        self, group: Group, figures: PassFigures, *, pairs_per_space: int, wanted: Wanted,
    ) -> None:
        """Ask about the group's pairs and apply each verdict (see the module)."""
        figures.spaces += len(group.spaces)
        memories = [
            await self._store.list_oldest_first(app_id, user_id=user_id)
            for app_id, user_id in group.spaces
        ]
        found = candidate_pairs(memories, group.crossings)
        since = format_timestamp(self._clock.now() - RECHECK_AFTER)
        known = await self._store.checked_since([pair.fingerprint for pair in found], since)
        for pair in within_caps([p for p in found if p.fingerprint not in known],
                                pairs_per_space):
            if not await self._still_there(pair):
                continue  # deleted, changed or erased since the group was read
            writer = self._writer()
            verdict = await writer.judge_pair(pair.older, pair.newer, same_space=pair.same_space)
            figures.pairs_asked += 1
            figures.model_calls += verdict.model_calls
            if not verdict.judged:
                figures.unjudged += 1
                figures.last_failure = verdict.reason
                log.warning("🧹 Memories %d and %d were not judged: %s", pair.older.id,
                            pair.newer.id, verdict.reason)
                continue
            applied = await self._db.run_transaction(
                functools.partial(self._apply, pair=pair, verdict=verdict,
                                  model=writer.model_name, wanted=wanted)
            )
            if applied:
                figures.changes += 1
                log.info("🧹 Consolidated memories %d and %d (%s, by %s): %s", pair.older.id,
                         pair.newer.id, verdict.action, verdict.decided_by, verdict.reason)

    async def forget_old_checks(self) -> int:
        """Drop the records of pairs whose recheck period is over."""
        cutoff = format_timestamp(self._clock.now() - RECHECK_AFTER)
        async with self._db.transaction() as tx:
            return await self._store.within(tx).forget_checks_before(cutoff)

    async def _still_there(self, pair: Pair) -> bool:
        """Both memories are still live and as the group's read found them: no text of a
        memory deleted or erased meanwhile goes to a model."""
        now = now_text(self._clock)
        for memory in (pair.older, pair.newer):
            if not _unchanged(await self._store.get(memory.app_id, memory.id), memory, now):
                return False
        return True

    async def apply_accepted(
        self, tx: SqlTransaction, change: dict[str, Any], accepted_as: str
    ) -> int | None:
        """Inside the answer's transaction: a held change the person accepted, applied if
        both memories are still as the writer saw them (text, steering, level, kind,
        expiry) and may still be consolidated; the history's reason names `accepted_as`.
        The memory it kept (None: they changed meanwhile, and nothing was)."""
        store = self._store.within(tx)
        now = now_text(self._clock)
        found = []
        for side in (change["older"], change["newer"]):
            memory = await store.get(side["app"], side["id"])
            if (memory is None or memory.state(now) != "live" or not consolidable(memory)
                    or _seen(memory) != side["seen"]):
                return None
            found.append(memory)
        verdict = PairVerdict(**{**change["verdict"],
                                 "reason": f"{change['verdict']['reason']} ({accepted_as})"})
        applied = await self._apply(
            tx, pair=Pair(found[0], found[1], change["share"]), verdict=verdict,
            model=change["model"], wanted=_always, hold=False,
        )
        if not applied:
            return None
        # The memory that holds the fact now: the one rewritten, or the newer that updates
        # the one removed.
        return found[0].id if verdict.content else found[1].id

    async def _apply(
        self, tx: SqlTransaction, *, pair: Pair, verdict: PairVerdict, model: str,
        wanted: Wanted, hold: bool = True,
    ) -> bool:
        """Inside the pair's transaction: if both memories are still as the writer saw them
        and the host still wants the change, the pair recorded as asked and the verdict
        applied. Nothing is written of a memory gone meanwhile (a purge, an erasure)."""
        store = self._store.within(tx)
        # In the order every writer takes them: apps, then the person's profile (whose row
        # is not made here: a person erased meanwhile stays erased).
        spaces = sorted({(m.app_id, m.user_id) for m in (pair.older, pair.newer)},
                        key=lambda space: (space[0] == PROFILE_APP, space))
        for space in spaces:
            await store.lock_space(*space, create=False)
        now = now_text(self._clock)
        older = await store.get(pair.older.app_id, pair.older.id)
        newer = await store.get(pair.newer.app_id, pair.newer.id)
        if not (_unchanged(older, pair.older, now) and _unchanged(newer, pair.newer, now)):
            return False
        if not await wanted(tx, spaces):
            return False
        await store.record_check(pair.fingerprint, now, *pair.kept_with)
        if verdict.action == "keep" or (verdict.action == "merge" and not pair.mergeable):
            return False
        source = EventSource(now, model=model if verdict.decided_by == "model" else None)
        reason = redact_text(verdict.reason)
        content = redact_text(verdict.content) if verdict.content else None
        if hold and await self._held(store, pair, verdict, content, model):
            return False
        if verdict.action == "merge" and content:
            await self._merge(store, pair, content, reason, verdict, source)
        elif content:
            await self._rewrite(store, pair.older, content, source, verdict,
                                f"{CONSOLIDATED}memory {pair.newer.id} updates it: {reason}")
        else:
            await self._delete(store, pair.older, source, verdict,
                               f"{CONSOLIDATED}memory {pair.newer.id} updates it: {reason}")
            return True
        # The memory rewritten, linked anew to the memories of its space.
        older = pair.older
        kept = await store.list_oldest_first(older.app_id, user_id=older.user_id)
        await link_in_space(
            store, [older.id], {m.id: m.content for m in kept if m.shown_to_models}, now
        )
        return True

    async def _held(
        self, store: MemoryStore, pair: Pair, verdict: PairVerdict, content: str | None,
        model: str,
    ) -> bool:
        """The change filed as the person's proposal instead, when it rewrites or removes a
        profile memory and a text it reads or writes there speaks of a sensitive field."""
        older, newer = pair.older, pair.newer
        changed = [older] + ([newer] if verdict.action == "merge" else [])
        in_profile = [m for m in changed if m.app_id == PROFILE_APP]
        if self._consent is None or not in_profile:
            return False
        writes = [content] if older.app_id == PROFILE_APP else []
        fields = self._consent.touched([*writes, *(m.content for m in in_profile)])
        if not fields:
            return False
        proposal = await self._consent.propose(
            store, user_id=older.user_id, app_id=pair.kept_with[0], origin="consolidation",
            fields=fields, content=content, before=[m.content for m in in_profile],
            change={
                "older": _side(older), "newer": _side(newer),
                "share": pair.share, "model": model,
                "verdict": {"action": verdict.action, "reason": verdict.reason,
                            "decided_by": verdict.decided_by, "content": content},
            },
        )
        log.info("🧹 Memories %d and %d: the change waits for the person's consent"
                 " (profile proposal %d)", older.id, newer.id, proposal)
        return True

    async def _merge(
        self, store: MemoryStore, pair: Pair, content: str, reason: str,
        verdict: PairVerdict, source: EventSource,
    ) -> None:
        older, newer = pair.older, pair.newer
        related = list(older.metadata.get("relatedConversations", []))
        related += [c for c in newer.metadata.get("relatedConversations", []) if c not in related]
        metadata = {**older.metadata, "relatedConversations": related}
        if "importance" in newer.metadata:
            metadata["importance"] = max(
                newer.importance, older.metadata.get("importance", DEFAULT_IMPORTANCE)
            )
        await self._rewrite(store, older, content, source, verdict,
                            f"{CONSOLIDATED}merged memory {newer.id} into it: {reason}",
                            metadata)
        await self._delete(store, newer, source, verdict,
                           f"{CONSOLIDATED}folded into memory {older.id}: {reason}")

    async def _rewrite(
        self, store: MemoryStore, memory: Memory, content: str, source: EventSource,
        verdict: PairVerdict, reason: str, metadata: dict[str, object] | None = None,
    ) -> None:
        await store.update_content(memory.app_id, memory.id, content, updated_at=source.at,
                                   metadata=metadata if metadata is not None else memory.metadata)
        await store.record_event(memory.app_id, memory.id, "edited", verdict.decided_by, source,
                                 reason=reason, before=memory.content, after=content,
                                 user_id=memory.user_id)

    async def _delete(
        self, store: MemoryStore, memory: Memory, source: EventSource, verdict: PairVerdict,
        reason: str,
    ) -> None:
        await store.delete(memory.app_id, memory.id)
        await store.record_event(memory.app_id, memory.id, "deleted", verdict.decided_by,
                                 source, reason=reason, before=memory.content,
                                 user_id=memory.user_id)


def _seen(memory: Memory) -> list[object]:
    """What a held change depends on of a memory, as its proposal stores it."""
    seen: list[object] = json.loads(json.dumps([
        memory.updated_at, memory.content, memory.pinned, memory.private, memory.sensitivity,
        memory.kind, memory.expires_at, memory.metadata,
    ]))
    return seen


def _side(memory: Memory) -> dict[str, object]:
    return {"app": memory.app_id, "user": memory.user_id, "id": memory.id,
            "seen": _seen(memory)}


async def _always(tx: SqlTransaction, spaces: Sequence[tuple[str, str]]) -> bool:
    """A change the person accepted is wanted (a purge or an erasure took the proposal)."""
    return True


def _unchanged(now_: Memory | None, seen: Memory, now: str) -> bool:
    """The memory is still live and as the writer saw it (its text, its metadata, and how it
    is steered)."""
    return (
        now_ is not None and now_.state(now) == "live"
        and (now_.updated_at, now_.content, now_.pinned, now_.private, now_.sensitivity,
             now_.kind, now_.expires_at, now_.metadata)
        == (seen.updated_at, seen.content, seen.pinned, seen.private, seen.sensitivity,
            seen.kind, seen.expires_at, seen.metadata)
    )
