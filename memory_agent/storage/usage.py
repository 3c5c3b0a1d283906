"""How memories are used, as the store keeps it: each turn's injections and citations per
conversation and in all on the memory (`recall.usage`), and the counts a memory's decay within
a conversation reads (`recall.decay`)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.core.ports import SqlSession


class MemoryUse:
    """The usage statements, on the session of the `MemoryStore` they are part of."""

    _db: SqlSession

    async def record_use(
        self, conversation_id: str, shown: Sequence[int], cited: set[int], at: str,
        stale_before: str,
    ) -> None:
        """A turn of `conversation_id` was given the memories `shown` and its reply used the
        values of those `cited`: each one's injection in the conversation and its counts; a
        memory given to the conversation first when unseen since `stale_before` is marked
        stale there (`recall.decay`). A memory or a conversation erased meanwhile is passed
        over."""
        if not shown:
            return
        # Two statements whatever the block held (this is on every answered turn).
        ids = sorted(shown)
        used = sorted(cited & set(ids))

        def citing(column: str) -> str:
            marks = ",".join("?" * len(used))
            return f"CASE WHEN {column} IN ({marks}) THEN 1 ELSE 0 END" if used else "0"

        every = ",".join("?" * len(ids))
        await self._db.execute(
            "INSERT INTO memory_injections (conversation_id, memory_id, shown, cited,"
            " first_at, last_at, stale) SELECT c.conversation_id, m.id, 1,"
            f" {citing('m.id')}, ?, ?,"
            " CASE WHEN COALESCE(m.last_accessed, '') < ? AND m.updated_at < ? THEN 1 ELSE 0"
            " END"
            " FROM app_memories AS m, conversations AS c"
            f" WHERE m.id IN ({every}) AND c.conversation_id = ?"
            " ON CONFLICT (conversation_id, memory_id) DO UPDATE SET"
            " shown = memory_injections.shown + 1,"
            " cited = memory_injections.cited + excluded.cited, last_at = excluded.last_at",
            (*used, at, at, stale_before, stale_before, *ids, conversation_id),
        )
        await self._db.execute(
            "UPDATE app_memories SET access_count = access_count + 1,"
            f" citation_count = citation_count + {citing('id')}, last_accessed = ?"
            f" WHERE id IN ({every})",
            (*used, at, *ids),
        )

    async def injections(self, conversation_id: str) -> dict[int, tuple[int, int]]:
        """How often each memory was given to the conversation's turns, and cited in its
        replies."""
        rows = await self._db.fetch_all(
            "SELECT memory_id, shown, cited FROM memory_injections WHERE conversation_id = ?",
            (conversation_id,),
        )
        return {int(row[0]): (int(row[1]), int(row[2])) for row in rows}

    async def given_in(self, conversation_id: str) -> dict[int, tuple[int, bool]]:
        """How often each memory was given to the conversation's turns since its count last
        started, and whether it came to the conversation stale (`recall.decay`)."""
        rows = await self._db.fetch_all(
            "SELECT memory_id, shown - counted_from, stale FROM memory_injections"
            " WHERE conversation_id = ?",
            (conversation_id,),
        )
        return {int(row[0]): (int(row[1]), bool(row[2])) for row in rows}

    async def restart_decay(self, memory_id: int) -> None:
        """Start the memory's counts again in every conversation (a relevance tag)."""
        await self._db.execute(
            "UPDATE memory_injections SET counted_from = shown, stale = 0 WHERE memory_id = ?",
            (memory_id,),
        )
