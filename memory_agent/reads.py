"""The sub-agent's reads of memories, for the loop, the API and the console: a conversation's
memories and their delta header, listings, search, the query for agents, history, links, and
the record of how a turn used what it was given. `MemorySubAgent` is made of these and of its
writes (`agent`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from memory_agent.core.ports import Clock, Database, SqlTransaction, now_text
from memory_agent.models import Memory, MemoryEvent
from memory_agent.recall.decay import Given, stale_before
from memory_agent.recall.delta import MAX_CHANGES, delta_header
from memory_agent.recall.query import (
    POOL,
    POOL_WITH_IMPORTANCE,
    SCAN_LIMIT,
    MemoryQuery,
    QueryAnswer,
    answer,
)
from memory_agent.recall.usage import cited
from memory_agent.storage.search import search_terms
from memory_agent.storage.store import MemoryState, MemoryStore
from memory_agent.writers.asking import MemoryLimits

log = logging.getLogger("mnemoloop.memory")


class MemoryReads:
    """The reads, on the agent's database, store and limits."""

    _db: Database
    _store: MemoryStore
    _clock: Clock
    _limits: MemoryLimits

    def now(self) -> str:
        """The agent's time now, in the stored form (what a memory's state is judged at)."""
        return now_text(self._clock)

    async def get_memories(
        self, app_id: str, limit: int = 10, *, user_id: str = ""
    ) -> list[Memory]:
        """A space's newest memories that may be injected (live, not private), newest first
        (the loop's read for a conversation)."""
        memories = await self._store.list_newest(app_id, limit, user_id=user_id, injectable=True)
        log.info("🧠 Retrieved %d memories for app %s", len(memories), app_id)
        return memories

    async def list_memories(
        self, app_id: str, *, user_id: str = "", state: MemoryState = "live"
    ) -> list[Memory]:
        """Every memory of a space in `state` (live, retired, or all), private and secret ones
        too (never one of unknown sensitivity), newest first (for operators)."""
        return await self._store.list_newest(
            app_id, max(self._limits.memories * 10, 1000), user_id=user_id, state=state
        )

    async def held_back(self, app_id: str, *, user_id: str = "") -> list[int]:
        """The ids of a space's memories of unknown sensitivity, held back from every read."""
        return await self._store.held_back(app_id, user_id=user_id)

    async def get_memory(self, app_id: str, memory_id: int) -> Memory | None:
        """One memory, live or retired; never one of unknown sensitivity (fail-closed)."""
        memory = await self._store.get(app_id, memory_id)
        return memory if memory is not None and memory.returned else None

    async def spaces(self, app_id: str) -> list[tuple[str, int]]:
        """The app's spaces that hold memories, with their counts, the shared one ("")
        first."""
        return await self._store.spaces(app_id)

    async def search_memories(
        self, app_id: str, query: str, limit: int = 20, *, user_id: str = "",
        injectable: bool = False,
    ) -> list[Memory]:
        """A space's live memories matching `query` (its words), most relevant first;
        `injectable`: without private ones (for a model). Raises `InvalidSearchQuery` for an
        empty or overlong query."""
        return await self._store.search(
            app_id, search_terms(query), limit, user_id=user_id, injectable=injectable
        )

    async def query_memories(
        self, spaces: Sequence[tuple[str, str]], query: MemoryQuery,
        cost: Callable[[Memory], int],
    ) -> QueryAnswer:
        """The memories of `spaces` (app, user) that answer `query`, scored, the best first,
        within its `top_k` and budget (`cost`: a memory's tokens as it will be given). Never
        a private one (`recall.query`)."""
        async def candidates(terms: list[str] | None, limit: int) -> list[Memory]:
            return await self._store.query_candidates(
                spaces, terms, limit, pinned=query.pinned, updated_after=query.updated_after,
                updated_before=query.updated_before,
            )

        # Spaces of ordinary size are read whole; beyond that, the engine's search picks.
        found = await candidates(None, SCAN_LIMIT + 1)
        if len(found) > SCAN_LIMIT:
            pool = POOL_WITH_IMPORTANCE if query.importance_range else POOL
            found = await candidates(query.terms, pool)
        return answer(found, query, cost)

    async def record_use(
        self, conversation_id: str, shown: Sequence[Memory], reply: str, asked: str
    ) -> set[int]:
        """A turn of the conversation was given the memories `shown` and answered `reply` to
        the user's `asked`: each one's injection is counted, and its citation when the reply
        holds its values (`recall.usage`). The ids of those cited."""
        if not shown:
            return set()
        used = cited(shown, reply, asked)
        async with self._db.transaction() as tx:
            now = self.now()
            await self._store.within(tx).record_use(
                conversation_id, [memory.id for memory in shown], used, now, stale_before(now)
            )
        return used

    async def given_in(self, conversation_id: str) -> dict[int, Given]:
        """How often the conversation's turns were given each memory, as its decay counts it
        (`recall.decay`)."""
        counts = await self._store.given_in(conversation_id)
        return {memory_id: Given(times, stale) for memory_id, (times, stale) in counts.items()}

    async def injections(self, conversation_id: str) -> dict[int, tuple[int, int]]:
        """How often each memory was given to the conversation's turns, and cited."""
        return await self._store.injections(conversation_id)

    async def memory_counts_by_app(self) -> dict[str, int]:
        """How many live memories each app holds, in all its spaces."""
        return await self._store.counts_by_app()

    async def spaces_holding_memories(self) -> int:
        """How many apps' memory spaces hold at least one live memory."""
        return await self._store.spaces_holding_memories()

    async def has_memory(self, app_id: str, memory_id: int) -> bool:
        """Whether the app holds the memory, as a read may tell (not one of unknown
        sensitivity)."""
        return await self.get_memory(app_id, memory_id) is not None

    async def get_memory_count(
        self, app_id: str, *, tx: SqlTransaction | None = None, user_id: str | None = None
    ) -> int:
        """How many memories the app holds, in all its spaces or in one (inside the caller's
        transaction when one is given)."""
        store = self._store.within(tx) if tx is not None else self._store
        return await store.count(app_id, user_id=user_id)

    async def history(
        self,
        app_id: str,
        *,
        memory_id: int | None = None,
        after_id: int = 0,
        limit: int = 100,
        newest_first: bool = False,
        user_id: str | None = None,
        for_a_model: bool = False,
    ) -> list[MemoryEvent]:
        """The app's history (`storage.history`): never a memory's of unknown sensitivity,
        nor, `for_a_model` (an MCP tool), a secret one's."""
        return await self._store.history(
            app_id, memory_id=memory_id, after_id=after_id, limit=limit,
            newest_first=newest_first, user_id=user_id, for_a_model=for_a_model,
        )

    async def latest_history_of(
        self, app_id: str, memory_ids: Sequence[int], limit: int
    ) -> dict[int, list[MemoryEvent]]:
        """Each memory's newest `limit` events, oldest first."""
        return await self._store.latest_history_of(app_id, memory_ids, limit)

    async def revision(self, spaces: Sequence[tuple[str, str]]) -> int:
        """The spaces' (app id, user id) revision: their newest change
        (`memory_agent.recall.delta`)."""
        return await self._store.revision(spaces)

    async def changes_header(
        self, spaces: Sequence[tuple[str, str]], since: int, up_to: int,
        kinds: Sequence[str] | None = None,
    ) -> str:
        """The delta header of the spaces' changes after revision `since` up to `up_to`, of
        memories of `kinds` only (when given)."""
        # A change may be told in each of the spaces (the header names it once).
        changes = await self._store.changes(
            spaces, since, up_to, MAX_CHANGES * len(spaces),
            None if kinds is None else frozenset(kinds),
        )
        return delta_header(since, changes)

    async def links_of(self, app_id: str, memory_id: int) -> list[tuple[Memory, str, float]]:
        """The live memories the memory is linked to (`links.linking`), with each link's type
        and strength, the strongest first; never one of unknown sensitivity."""
        links = (await self._store.links_of([memory_id])).get(memory_id, [])
        now = self.now()
        found = []
        for other, kind, strength in links:
            memory = await self._store.get(app_id, other)
            if memory is not None and memory.returned and memory.state(now) == "live":
                found.append((memory, kind, strength))
        return found

    async def linked_ids(self, memory_ids: Sequence[int]) -> dict[int, list[int]]:
        """The ids each of these memories is linked to, the strongest link first (for a
        caller that reads only memories it already holds)."""
        links = await self._store.links_of(memory_ids)
        return {memory_id: [other for other, _, _ in found] for memory_id, found in links.items()}

    async def kinds_of(self, app_id: str, memory_ids: Sequence[int]) -> dict[int, str]:
        """The kinds of these memories of the app that are still kept."""
        return await self._store.kinds_of(app_id, memory_ids)

