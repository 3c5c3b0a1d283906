"""Every change to a memory, as its history keeps it: one event a change, with who made it and
why; a space's revision (its newest event), the changes since one for the delta header, and
the erasure of the history's text with a purge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_agent.core.ports import Clock, Row, SqlSession, in_space, now_text
from memory_agent.models import (
    CONSOLIDATED,
    MERGED,
    MemoryActor,
    MemoryEvent,
    MemoryEventKind,
    SpaceChange,
)

if TYPE_CHECKING:
    from memory_agent.storage.store import EventSource

_EVENT_COLUMNS = (
    "id, app_id, memory_id, event, actor, created_at, reason, content_before, content_after,"
    " conversation_id, job_id, model, erased"
)
# Erasing history text: the events stay, marked erased (followed by the rows' condition).
_ERASE_HISTORY_TEXT = (
    "UPDATE memory_events SET content_before = NULL, content_after = NULL, reason = NULL,"
    " erased = 1 WHERE app_id = ?"
)


def returned_condition(alias: str = "") -> str:
    """The condition (` AND …`) every read that returns memories keeps to: none of unknown
    sensitivity (fail-closed). A read for a model keeps to `injectable_condition`."""
    return f" AND {alias}sensitivity <> 'unknown'"


def injectable_condition(alias: str = "") -> str:
    """The condition (` AND …`) that keeps the memories a model may be given: public ones.
    Both columns are read (every write sets them together), so that a row where either
    says it is not public is never given (fail-closed)."""
    return f" AND {alias}private = 0 AND {alias}sensitivity = 'public'"


def live_condition(now: str, alias: str = "") -> tuple[str, tuple[str]]:
    """The condition (` AND …`, with its parameter) that keeps the memories live at `now`:
    neither deleted nor expired. `alias` names the table (`m.`) in a join."""
    return (
        f" AND {alias}deleted_at IS NULL AND ({alias}expires_at IS NULL OR {alias}expires_at > ?)",
        (now,),
    )


class MemoryHistory:
    """The history's statements, on the session of the `MemoryStore` they are part of."""

    _db: SqlSession
    _clock: Clock

    def _live(self, alias: str = "") -> tuple[str, tuple[str]]:
        return live_condition(now_text(self._clock), alias)

    async def erase_history_of(self, app_id: str, memory_ids: Sequence[int]) -> None:
        """The texts of these memories' history go; the events stay, marked erased."""
        for memory_id in memory_ids:
            await self._db.execute(
                f"{_ERASE_HISTORY_TEXT} AND memory_id = ?", (app_id, memory_id)
            )

    async def record_event(
        self,
        app_id: str,
        memory_id: int,
        event: MemoryEventKind,
        actor: MemoryActor,
        source: EventSource,
        *,
        reason: str | None = None,
        before: str | None = None,
        after: str | None = None,
        user_id: str = "",
    ) -> None:
        await self._db.execute(
            "INSERT INTO memory_events (app_id, memory_id, event, actor, reason, content_before,"
            " content_after, conversation_id, job_id, model, created_at, user_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (app_id, memory_id, event, actor, reason, before, after, source.conversation_id,
             source.job_id, source.model, source.at, user_id),
        )

    async def revision(self, spaces: Sequence[tuple[str, str]]) -> int:
        """The spaces' revision: their newest history event (0: none yet). Each space is
        read on its own, from the end of its index (an OR of spaces would scan the table)."""
        newest = 0
        for app_id, user_id in spaces:
            row = await self._db.fetch_one(
                "SELECT MAX(id) FROM memory_events WHERE app_id = ? AND user_id = ?",
                (app_id, user_id),
            )
            newest = max(newest, int(row[0]) if row and row[0] is not None else 0)
        return newest

    async def changes(
        self, spaces: Sequence[tuple[str, str]], after: int, up_to: int, limit: int,
        kinds: frozenset[str] | None = None,
    ) -> list[SpaceChange]:
        """The spaces' changes after revision `after` up to `up_to`, newest first: created,
        edited, deleted and restored memories, but for private ones, those of a kind not in
        `kinds` (when given) and erased text."""
        of_kinds: str = ""
        kind_params: tuple[str, ...] = ()
        if kinds is not None:
            marks = ",".join("?" * len(kinds)) or "NULL"
            of_kinds = f" AND m.kind IN ({marks})"
            kind_params = tuple(sorted(kinds))
        # A deletion is named without its text (the memory may have been private, or
        # deleted to be out of sight); any other change with its text only while the memory
        # is live and not private.
        live, live_params = self._live("m.")
        rows = []
        for app_id, user_id in spaces:
            rows += await self._db.fetch_all(
                "SELECT e.id, e.event, e.reason,"
                " CASE WHEN e.event = 'deleted' THEN '' ELSE COALESCE(e.content_after, '') END"
                " FROM memory_events e LEFT JOIN app_memories m"
                " ON m.app_id = e.app_id AND m.id = e.memory_id"
                " WHERE e.app_id = ? AND e.user_id = ? AND e.id > ? AND e.id <= ?"
                " AND e.erased = 0 AND (e.event = 'deleted' OR (e.event IN"
                f" ('created', 'edited', 'restored'){injectable_condition('m.')}{live}"
                f"{of_kinds}))"
                " ORDER BY e.id DESC LIMIT ?",
                (app_id, user_id, after, up_to, *live_params, *kind_params, limit),
            )
        newest = sorted(rows, key=lambda row: -int(row[0]))[:limit]
        return [
            # An edit that folded a memory in, or any change of a consolidation pass.
            SpaceChange(int(r[0]), str(r[1]), str(r[3]),
                        merged=(r[2] or "").startswith((MERGED, CONSOLIDATED)))
            for r in newest
        ]

    async def kinds_of(self, app_id: str, memory_ids: Sequence[int]) -> dict[int, str]:
        """The kinds of these memories of the app that are still kept."""
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        rows = await self._db.fetch_all(
            f"SELECT id, kind FROM app_memories WHERE app_id = ? AND id IN ({marks})",
            (app_id, *memory_ids),
        )
        return {int(row[0]): str(row[1]) for row in rows}

    async def erase_history_text(self, app_id: str, *, user_id: str | None = None) -> None:
        """Purge: every text of the app's history (of one space, or of all: `None`) goes;
        the events stay, marked erased."""
        space, params = in_space(user_id)
        await self._db.execute(f"{_ERASE_HISTORY_TEXT}{space}", (app_id, *params))

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
        """Events oldest first, from the one after `after_id` (the cursor); or the newest
        `limit` of them, newest first. Of one space, or of all (`None`). Never an event of a
        memory of unknown sensitivity, nor, `for_a_model`, of a secret one: their texts."""
        space, space_params = in_space(user_id)
        where, params = f"app_id = ? AND id > ?{space}", [app_id, after_id, *space_params]
        hidden = "'secret', 'unknown'" if for_a_model else "'unknown'"
        where += (" AND memory_id NOT IN (SELECT id FROM app_memories WHERE app_id = ?"
                  f" AND sensitivity IN ({hidden}))")
        params.append(app_id)
        if memory_id is not None:
            where += " AND memory_id = ?"
            params.append(memory_id)
        rows = await self._db.fetch_all(
            f"SELECT {_EVENT_COLUMNS} FROM memory_events WHERE {where}"
            f" ORDER BY id {'DESC' if newest_first else ''} LIMIT ?",
            (*params, limit),
        )
        return [_event(row) for row in rows]

    async def latest_history_of(
        self, app_id: str, memory_ids: Sequence[int], limit: int
    ) -> dict[int, list[MemoryEvent]]:
        """The newest `limit` events of each of these memories, oldest first, in one read
        (a page of memories would otherwise take a read each)."""
        histories: dict[int, list[MemoryEvent]] = {memory_id: [] for memory_id in memory_ids}
        if not memory_ids:
            return histories
        placeholders = ",".join("?" * len(memory_ids))
        rows = await self._db.fetch_all(
            f"SELECT {_EVENT_COLUMNS} FROM (SELECT {_EVENT_COLUMNS}, ROW_NUMBER() OVER"
            " (PARTITION BY memory_id ORDER BY id DESC) AS newer FROM memory_events"
            f" WHERE app_id = ? AND memory_id IN ({placeholders})) AS latest"
            " WHERE newer <= ? ORDER BY id",
            (app_id, *memory_ids, limit),
        )
        for row in rows:
            histories[row[2]].append(_event(row))
        return histories


def _event(row: Row) -> MemoryEvent:
    return MemoryEvent(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
        row[10], row[11], bool(row[12]),
    )
