"""All SQL for memories. Reads go to the database at once; a write is one statement on its
own, or runs inside the caller's transaction when one is given."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from memory_agent.models import Memory
from memory_agent.ports import Database, Params, SqlReader, SqlTransaction, WriteResult

# The order Memory.from_row reads them in.
_COLUMNS = "id, app_id, content, created_at, updated_at, source_conversation_id, metadata"


class MemoryStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlTransaction]:
        async with self._db.transaction() as tx:
            yield tx

    async def insert(
        self,
        app_id: str,
        content: str,
        *,
        created_at: str,
        source_conversation_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tx: SqlTransaction | None = None,
    ) -> Memory:
        metadata = metadata or {}
        sql = (
            "INSERT INTO app_memories (app_id, content, created_at, updated_at,"
            " source_conversation_id, metadata) VALUES (?, ?, ?, ?, ?, ?)"
        )
        params = (
            app_id,
            content,
            created_at,
            created_at,
            source_conversation_id,
            json.dumps(metadata),
        )
        result = await self._write(sql, params, tx)
        assert result.lastrowid is not None
        return Memory(
            result.lastrowid,
            app_id,
            content,
            created_at,
            created_at,
            source_conversation_id,
            metadata,
        )

    async def list_newest(
        self, app_id: str, limit: int, *, tx: SqlReader | None = None
    ) -> list[Memory]:
        rows = await (tx or self._db).fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE app_id = ?"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            (app_id, limit),
        )
        return [Memory.from_row(row) for row in rows]

    async def list_oldest_first(self, app_id: str, *, tx: SqlReader | None = None) -> list[Memory]:
        rows = await (tx or self._db).fetch_all(
            f"SELECT {_COLUMNS} FROM app_memories WHERE app_id = ? ORDER BY created_at, id",
            (app_id,),
        )
        return [Memory.from_row(row) for row in rows]

    async def count(self, app_id: str, *, tx: SqlReader | None = None) -> int:
        row = await (tx or self._db).fetch_one(
            "SELECT COUNT(*) FROM app_memories WHERE app_id = ?", (app_id,)
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
        tx: SqlTransaction | None = None,
    ) -> bool:
        result = await self._write(
            "UPDATE app_memories SET content = ?, updated_at = ?, metadata = ?"
            " WHERE app_id = ? AND id = ?",
            (content, updated_at, json.dumps(metadata), app_id, memory_id),
            tx,
        )
        return result.rowcount == 1

    async def delete(
        self, app_id: str, memory_id: int, *, tx: SqlTransaction | None = None
    ) -> bool:
        result = await self._write(
            "DELETE FROM app_memories WHERE app_id = ? AND id = ?", (app_id, memory_id), tx
        )
        return result.rowcount == 1

    async def delete_all(self, app_id: str, *, tx: SqlTransaction | None = None) -> int:
        result = await self._write("DELETE FROM app_memories WHERE app_id = ?", (app_id,), tx)
        return result.rowcount

    async def _write(self, sql: str, params: Params, tx: SqlTransaction | None) -> WriteResult:
        return await (tx or self._db).execute(sql, params)
