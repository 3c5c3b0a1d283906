"""Links between memories of one space (`links.linking`), as the store keeps them: one edge a
pair, from the lower id to the higher, gone with either memory (a foreign key's cascade)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.core.ports import SqlSession


class MemoryRelations:
    """The relations' statements, on the session of the `MemoryStore` they are part of."""

    _db: SqlSession

    async def link(
        self, memory_id: int, links: Sequence[tuple[int, float]], kind: str, at: str
    ) -> None:
        """Link the memory to each of `links` (id, strength); an edge already there takes
        the new strength."""
        if not links:
            return
        rows = [(min(memory_id, other), max(memory_id, other), kind, strength, at)
                for other, strength in links if other != memory_id]
        marks = ", ".join("(?, ?, ?, ?, ?)" for _ in rows)
        await self._db.execute(
            f"INSERT INTO relations (from_id, to_id, type, strength, created_at) VALUES {marks}"
            " ON CONFLICT (from_id, to_id, type) DO UPDATE SET strength = excluded.strength",
            [value for row in rows for value in row],
        )

    async def links_of(
        self, memory_ids: Sequence[int]
    ) -> dict[int, list[tuple[int, str, float]]]:
        """Each memory's links (the other memory, the type, the strength), strongest first."""
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        rows = await self._db.fetch_all(
            f"SELECT from_id, to_id, type, strength FROM relations WHERE from_id IN ({marks})"
            f" UNION ALL SELECT to_id, from_id, type, strength FROM relations"
            f" WHERE to_id IN ({marks})",
            (*memory_ids, *memory_ids),
        )
        found: dict[int, list[tuple[int, str, float]]] = {}
        for one, other, kind, strength in rows:
            found.setdefault(int(one), []).append((int(other), str(kind), float(strength)))
        for links in found.values():
            links.sort(key=lambda link: (-link[2], link[0]))
        return found
