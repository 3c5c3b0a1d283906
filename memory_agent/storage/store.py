"""All SQL for memories and their history, on one session: the database itself (each
statement its own transaction) or a transaction, when the store is made `within(tx)`.

An app's memories live in spaces: the app's shared one (`user_id` "") and one per user of the
app. Reads and writes of one space take `user_id`; whole-app operations take `user_id=None`
for every space.

A memory is live until it expires (`expires_at` has passed) or is deleted (`deleted_at`, a
soft delete); then it is retired: out of every read but `get` and the listing of retired
ones, and out of the cap's count, until it is restored or the worker erases it. Only live
memories are compacted, counted, searched and injected."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory_agent.core.kinds import KEPT_BEFORE
from memory_agent.core.ports import Clock, SqlSession, SystemClock, in_space, now_text
from memory_agent.models import (
    Memory,
    Sensitivity,
)
from memory_agent.storage import search
from memory_agent.storage.consolidation import ConsolidationReads
from memory_agent.storage.history import (
    MemoryHistory,
    injectable_condition,
    live_condition,
    returned_condition,
)
from memory_agent.storage.proposals import ProfileProposals
from memory_agent.storage.relations import MemoryRelations
from memory_agent.storage.usage import MemoryUse

# The app id of every person's profile space (no app can have it): the person's memories that
# hold whatever the app, which the apps sharing the profile read and write.
PROFILE_APP = ""
# The order Memory.from_row reads them in.
_COLUMNS = (
    "id, app_id, content, created_at, updated_at, source_conversation_id, metadata, user_id,"
    " pinned, private, expires_at, deleted_at, access_count, citation_count, last_accessed,"
    " sensitivity, kind"
)
# Which memories a listing shows: the live ones, the retired ones (expired or deleted, not yet
# erased), or both.
MemoryState = Literal["live", "retired", "all"]
# Erasing history text: the events stay, marked erased (followed by the rows' condition).
_ERASE_HISTORY_TEXT = (
    "UPDATE memory_events SET content_before = NULL, content_after = NULL, reason = NULL,"
    " erased = 1 WHERE app_id = ?"
)
# The columns a steering change may set.
_STEERABLE = ("pinned", "private", "sensitivity", "expires_at", "deleted_at", "metadata")
# The same, of `app_memories AS m` in a join.
_MEMORY_COLUMNS = ", ".join(f"m.{column.strip()}" for column in _COLUMNS.split(","))
_EVENT_COLUMNS = (
    "id, app_id, memory_id, event, actor, created_at, reason, content_before, content_after,"
    " conversation_id, job_id, model, erased"
)


@dataclass(frozen=True)
class EventSource:
    """When a change happened and on whose behalf: the job, its conversation, the model."""

    at: str
    conversation_id: str | None = None
    job_id: int | None = None
    model: str | None = None


def _state_condition(state: MemoryState, now: str) -> tuple[str, tuple[str, ...]]:
    if state == "live":
        return live_condition(now)
    if state == "retired":
        return " AND (deleted_at IS NOT NULL OR expires_at <= ?)", (now,)
    return "", ()


class MemoryStore(
    MemoryHistory, MemoryUse, ConsolidationReads, MemoryRelations, ProfileProposals
):
    def __init__(self, session: SqlSession, clock: Clock | None = None) -> None:
        self._db = session
        self._clock = clock or SystemClock()

    def within(self, tx: SqlSession) -> MemoryStore:
        """The same store, its statements inside `tx`."""
        return MemoryStore(tx, self._clock)

    async def lock_app(self, app_id: str) -> None:
        """Inside a transaction: hold the app's row until commit, so that the app's memory
        writes (from any instance) run one after another. Portable to PostgreSQL-compatible
        distributed engines; on SQLite the write transaction already holds the database, and
        nothing is read."""
        if not self._db.dialect.lock_rows:
            return
        await self._db.fetch_one(
            f"SELECT app_id FROM apps WHERE app_id = ?{self._db.dialect.lock_rows}", (app_id,)
        )

    async def lock_space(self, app_id: str, user_id: str, *, create: bool = True) -> None:
        """Inside a transaction: hold what serialises writes to the space: the app's row, or
        for a person's profile (which many apps write) the person's `profiles` row, made on
        their first profile write (`create`; else held only if it is there: a write that
        changes only what the profile holds never makes it again after an erasure)."""
        if app_id != PROFILE_APP:
            await self.lock_app(app_id)
            return
        if not create:
            if self._db.dialect.lock_rows:
                await self._db.fetch_one(
                    f"SELECT user_id FROM profiles WHERE user_id = ?{self._db.dialect.lock_rows}",
                    (user_id,),
                )
            return
        while True:
            await self._db.execute(
                "INSERT INTO profiles (user_id, created_at) VALUES (?, ?)"
                " ON CONFLICT (user_id) DO NOTHING",
                (user_id, now_text(self._clock)),
            )
            if not self._db.dialect.lock_rows:
                return
            # An erasure may delete the row between the two: then it is made again.
            if await self._db.fetch_one(
                f"SELECT user_id FROM profiles WHERE user_id = ?{self._db.dialect.lock_rows}",
                (user_id,),
            ):
                return

    async def insert(
        self,
        app_id: str,
        content: str,
        *,
        created_at: str,
        updated_at: str | None = None,
        source_conversation_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        user_id: str = "",
        pinned: bool = False,
        sensitivity: Sensitivity = "public",
        expires_at: str | None = None,
        kind: str = KEPT_BEFORE,
    ) -> Memory:
        metadata = metadata or {}
        updated_at = updated_at or created_at
        private = sensitivity != "public"
        sql = (
            "INSERT INTO app_memories (app_id, content, created_at, updated_at,"
            " source_conversation_id, metadata, user_id, pinned, private, expires_at,"
            " sensitivity, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
        )
        params = (
            app_id,
            content,
            created_at,
            updated_at,
            source_conversation_id,
            json.dumps(metadata),
            user_id,
            int(pinned),
            int(private),
            expires_at,
            sensitivity,
            kind,
        )
        rows = await self._db.execute_returning(sql, params)
        return Memory(
            int(rows[0][0]),
            app_id,
            content,
            created_at,
            updated_at,
            source_conversation_id,
            metadata,
            user_id,
            pinned,
            private,
            expires_at,
            sensitivity=sensitivity,
            kind=kind,
        )

    async def get(self, app_id: str, memory_id: int) -> Memory | None:
        """The memory, live or retired."""
        row = await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM app_memories WHERE app_id = ? AND id = ?", (app_id, memory_id)
        )
        return Memory.from_row(row) if row else None

    async def list_newest(
        self,
        app_id: str,
        limit: int,
        *,
        user_id: str = "",
        state: MemoryState = "live",
        injectable: bool = False,
    ) -> list[Memory]:
        """A space's memories in `state`, newest first; `injectable`: without private ones."""
        condition, params = _state_condition(state, now_text(self._clock))
        condition += injectable_condition() if injectable else returned_condition()
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE app_id = ? AND user_id = ?{condition}"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            (app_id, user_id, *params, limit),
        )
        return [Memory.from_row(row) for row in rows]

    async def held_back(self, app_id: str, *, user_id: str = "") -> list[int]:
        """The ids of a space's live memories of unknown sensitivity, which no read returns:
        an operator gives each a level (or deletes it) by id."""
        live, params = self._live()
        rows = await self._db.fetch_all(
            f"SELECT id FROM app_memories WHERE app_id = ? AND user_id = ?{live}"
            " AND sensitivity = 'unknown' ORDER BY id",
            (app_id, user_id, *params),
        )
        return [int(row[0]) for row in rows]

    async def list_oldest_first(self, app_id: str, *, user_id: str = "") -> list[Memory]:
        """A space's live memories, oldest first (what the cap and compaction see)."""
        live, params = self._live()
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE app_id = ? AND user_id = ?{live}"
            " ORDER BY created_at, id",
            (app_id, user_id, *params),
        )
        return [Memory.from_row(row) for row in rows]

    async def search(
        self, app_id: str, terms: list[str], limit: int, *, user_id: str = "",
        injectable: bool = False,
    ) -> list[Memory]:
        """The space's live memories holding any of `terms`, most relevant first."""

        def where(alias: str) -> tuple[str, tuple[str, ...]]:
            live, params = self._live(alias)
            shown = injectable_condition(alias) if injectable else returned_condition(alias)
            return (f" AND {alias}app_id = ? AND {alias}user_id = ?{live}{shown}",
                    (app_id, user_id, *params))

        return await self._matching(terms, where, limit)

    async def query_candidates(
        self,
        spaces: Sequence[tuple[str, str]],
        terms: list[str] | None,
        limit: int,
        *,
        pinned: bool | None = None,
        updated_after: str | None = None,
        updated_before: str | None = None,
    ) -> list[Memory]:
        """Live memories of `spaces` (app, user) that are not private, within the filters:
        without `terms`, the most recently updated; with them, those holding any of the
        words, the engine's most relevant first. At most `limit`."""

        def where(alias: str) -> tuple[str, tuple[str | int, ...]]:
            condition, live = self._live(alias)
            params: tuple[str | int, ...] = live
            condition += f"{injectable_condition(alias)} AND ("
            condition += " OR ".join(
                f"({alias}app_id = ? AND {alias}user_id = ?)" for _ in spaces
            )
            condition += ")"
            params += tuple(value for space in spaces for value in space)
            for clause, value in ((f" AND {alias}pinned = ?", pinned),
                                  (f" AND {alias}updated_at > ?", updated_after),
                                  (f" AND {alias}updated_at < ?", updated_before)):
                if value is not None:
                    condition += clause
                    params += (int(value) if isinstance(value, bool) else value,)
            return condition, params

        if terms is not None:
            return await self._matching(terms, where, limit)
        condition, params = where("")
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE 1 = 1{condition}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [Memory.from_row(row) for row in rows]

    async def _matching(
        self,
        terms: list[str],
        where: Callable[[str], tuple[str, tuple[str | int, ...]]],
        limit: int,
    ) -> list[Memory]:
        """The memories holding any of `terms` that meet `where` (its condition, ` AND …`,
        and parameters, for the table's alias), the engine's most relevant first: SQLite's
        FTS5 by bm25, PostgreSQL's full-text search by ts_rank."""
        if self._db.dialect.name == "postgresql":
            condition, params = where("")
            rows = await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM app_memories,"
                " websearch_to_tsquery('english', ?) AS query"
                f" WHERE search @@ query{condition}"
                " ORDER BY ts_rank(search, query) DESC, id DESC LIMIT ?",
                (search.postgres_websearch(terms), *params, limit),
            )
        else:
            condition, params = where("m.")
            rows = await self._db.fetch_all(
                f"SELECT {_MEMORY_COLUMNS} FROM memory_search JOIN app_memories AS m"
                " ON m.id = memory_search.rowid"
                f" WHERE memory_search MATCH ?{condition}"
                " ORDER BY bm25(memory_search), m.id DESC LIMIT ?",
                (search.sqlite_match(terms), *params, limit),
            )
        return [Memory.from_row(row) for row in rows]

    async def count(self, app_id: str, *, user_id: str | None = None) -> int:
        """How many live memories the app holds: in one space, or in all (`None`)."""
        space, params = in_space(user_id)
        live, live_params = self._live()
        row = await self._db.fetch_one(
            f"SELECT COUNT(*) FROM app_memories WHERE app_id = ?{space}{live}",
            (app_id, *params, *live_params),
        )
        return int(row[0]) if row else 0

    async def count_pinned(self, app_id: str, user_id: str) -> int:
        """How many of a space's live memories are pinned."""
        live, params = self._live()
        row = await self._db.fetch_one(
            f"SELECT COUNT(*) FROM app_memories WHERE app_id = ? AND user_id = ?"
            f" AND pinned = 1{live}",
            (app_id, user_id, *params),
        )
        return int(row[0]) if row else 0

    async def spaces(self, app_id: str) -> list[tuple[str, int]]:
        """The app's spaces that hold live memories, with how many: the shared one ("")
        first, then its users' in order."""
        live, params = self._live()
        rows = await self._db.fetch_all(
            f"SELECT user_id, COUNT(*) FROM app_memories WHERE app_id = ?{live}"
            " GROUP BY user_id ORDER BY user_id",
            (app_id, *params),
        )
        return [(str(row[0]), int(row[1])) for row in rows]

    async def counts_by_app(self) -> dict[str, int]:
        """How many live memories each app holds, in all its spaces (the profiles' '' too)."""
        live, params = self._live()
        rows = await self._db.fetch_all(
            f"SELECT app_id, COUNT(*) FROM app_memories WHERE 1 = 1{live} GROUP BY app_id",
            params,
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def spaces_holding_memories(self) -> int:
        """How many apps' memory spaces (not profiles) hold at least one live memory."""
        live, params = self._live()
        row = await self._db.fetch_one(
            "SELECT COUNT(*) FROM (SELECT DISTINCT app_id, user_id FROM app_memories"
            f" WHERE app_id <> ''{live}) AS s",
            params,
        )
        return int(row[0]) if row else 0

    async def update_content(
        self,
        app_id: str,
        memory_id: int,
        content: str,
        *,
        updated_at: str,
        metadata: dict[str, Any],
    ) -> bool:
        changed = await self._db.execute(
            "UPDATE app_memories SET content = ?, updated_at = ?, metadata = ?"
            " WHERE app_id = ? AND id = ?",
            (content, updated_at, json.dumps(metadata), app_id, memory_id),
        )
        return changed == 1

    async def steer(self, app_id: str, memory_id: int, **columns: Any) -> bool:
        """Set steering columns (`pinned`, `private`, `expires_at`, `deleted_at`, `metadata`)
        of one memory; its content and times stay."""
        unknown = set(columns) - set(_STEERABLE)
        if unknown:
            raise ValueError(f"not a steering column: {sorted(unknown)}")
        values = [
            json.dumps(value) if name == "metadata"
            else int(value) if isinstance(value, bool) else value
            for name, value in columns.items()
        ]
        assignments = ", ".join(f"{name} = ?" for name in columns)
        changed = await self._db.execute(
            f"UPDATE app_memories SET {assignments} WHERE app_id = ? AND id = ?",
            (*values, app_id, memory_id),
        )
        return changed == 1

    async def retired_before(self, cutoff: str, limit: int) -> list[Memory]:
        """Memories deleted, or expired, at or before `cutoff` (their grace period is over),
        in app order (the order every writer locks apps in), oldest first within one."""
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE deleted_at <= ?"
            f" UNION SELECT {_COLUMNS} FROM app_memories"
            " WHERE deleted_at IS NULL AND expires_at <= ? ORDER BY app_id, id LIMIT ?",
            (cutoff, cutoff, limit),
        )
        return [Memory.from_row(row) for row in rows]

    async def erase_retired(self, app_id: str, memory_id: int, cutoff: str) -> bool:
        """Erase one memory for good if it is still retired since `cutoff` or before (a
        restore meanwhile keeps it): its row, and the texts of its history."""
        erased = await self._db.execute(
            "DELETE FROM app_memories WHERE app_id = ? AND id = ? AND (deleted_at <= ?"
            " OR (deleted_at IS NULL AND expires_at <= ?))",
            (app_id, memory_id, cutoff, cutoff),
        )
        if erased:
            await self.erase_history_of(app_id, [memory_id])
        return erased == 1

    async def delete(self, app_id: str, memory_id: int) -> bool:
        deleted = await self._db.execute(
            "DELETE FROM app_memories WHERE app_id = ? AND id = ?", (app_id, memory_id)
        )
        return deleted == 1

    async def delete_all(
        self, app_id: str, *, user_id: str | None = None
    ) -> list[tuple[int, str, bool]]:
        """Delete every memory of the app (of one space, or of all: `None`), live or retired;
        returns their ids, each with its space and whether it was retired."""
        space, params = in_space(user_id)
        rows = await self._db.fetch_all(
            "SELECT id, user_id, deleted_at IS NOT NULL OR expires_at <= ? FROM app_memories"
            f" WHERE app_id = ?{space} ORDER BY id",
            (now_text(self._clock), app_id, *params),
        )
        await self._db.execute(
            f"DELETE FROM app_memories WHERE app_id = ?{space}", (app_id, *params)
        )
        return [(int(row[0]), str(row[1]), bool(row[2])) for row in rows]

    async def erase_space(self, app_id: str, user_id: str) -> int:
        """Erasing a person: the user's memories and their space's history, with no event
        left behind; returns how many memories went."""
        erased = await self._db.execute(
            "DELETE FROM app_memories WHERE app_id = ? AND user_id = ?", (app_id, user_id)
        )
        await self._db.execute(
            "DELETE FROM memory_events WHERE app_id = ? AND user_id = ?", (app_id, user_id)
        )
        return erased

    # -- history ----------------------------------------------------------------------------

    async def compact_search_index(self) -> None:
        """Purge: deleted memories' terms can linger in the SQLite search index's older
        segments until they are merged; merge them now (PostgreSQL keeps the terms in the
        memory's own row, gone with it)."""
        if self._db.dialect.name == "sqlite":
            await self._db.execute("INSERT INTO memory_search (memory_search) VALUES ('optimize')")
