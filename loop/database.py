"""The SQLite database: one file, WAL mode, foreign keys on.

Reads run on a plain `sqlite3` connection on the event loop's thread: an indexed read of a
few rows takes tens of microseconds, less than handing it to a thread would, and in WAL mode
a reader never waits for a writer.

Writes are serialised by one lock. A transaction of several statements runs on an aiosqlite
connection (`BEGIN IMMEDIATE`), off the event loop. A single statement, atomic on its own in
autocommit mode, runs on the loop's thread too, on a connection that never waits: it takes
~20 µs there against ~150 µs for a trip to a thread. If another process holds the database's
write lock, the statement goes the aiosqlite way instead and waits there, off the loop. That
connection never checkpoints (which would fsync on the loop); the aiosqlite connection does,
and every `_CHECKPOINT_EVERY`th single statement is sent its way so the WAL stays bounded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
import anyio

from loop.migrations import apply_migrations
from memory_agent.errors import StorageError
from memory_agent.ports import Params, WriteResult

_PRAGMAS = (
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    # NORMAL in WAL mode: a commit survives a crash of the process; only a power cut
    # can take the last few back.
    "PRAGMA synchronous=NORMAL",
    # Deleted content is overwritten with zeros, so a purged memory leaves no bytes behind in
    # free pages.
    "PRAGMA secure_delete=ON",
)


# The reader serves the hot path: map the file into memory (a page read is a memory read, not
# a system call) and keep a larger page cache.
_READER_PRAGMAS = ("PRAGMA query_only=ON", "PRAGMA mmap_size=268435456", "PRAGMA cache_size=-32768")
_CHECKPOINT_EVERY = 500


class SqliteDatabase:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._reader: sqlite3.Connection | None = None
        self._writer: aiosqlite.Connection | None = None
        self._loop_writer: sqlite3.Connection | None = None
        # fast_acquire: an uncontended lock is taken without a trip round the event loop.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._single_writes = 0

    async def open(self) -> SqliteDatabase:
        """Apply pending migrations and open the connections."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            await anyio.to_thread.run_sync(apply_migrations, self.path)
            self._writer = await aiosqlite.connect(self.path, isolation_level=None)
            self._writer.row_factory = sqlite3.Row
            for pragma in _PRAGMAS:
                await self._writer.execute(pragma)
            self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._reader.row_factory = sqlite3.Row
            for pragma in (*_PRAGMAS, *_READER_PRAGMAS):
                self._reader.execute(pragma)
            self._loop_writer = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False
            )
            self._loop_writer.row_factory = sqlite3.Row
            for pragma in (*_PRAGMAS, "PRAGMA busy_timeout=0", "PRAGMA wal_autocheckpoint=0"):
                self._loop_writer.execute(pragma)
        except (sqlite3.Error, OSError) as error:
            await self.close()
            raise StorageError(f"cannot open database {self.path}: {error}", cause=error) from None
        return self

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.close()
            self._writer = None
        for connection in (self._reader, self._loop_writer):
            if connection is not None:
                connection.close()
        self._reader = self._loop_writer = None

    async def __aenter__(self) -> SqliteDatabase:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        try:
            return self._read_connection().execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise StorageError(f"read failed: {error}", cause=error) from None

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        try:
            row: sqlite3.Row | None = self._read_connection().execute(sql, params).fetchone()
            return row
        except sqlite3.Error as error:
            raise StorageError(f"read failed: {error}", cause=error) from None

    async def execute(self, sql: str, params: Params = ()) -> WriteResult:
        cursor = await self._single_statement(sql, params)
        return WriteResult(cursor.rowcount, cursor.lastrowid)

    async def execute_returning(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        cursor = await self._single_statement(sql, params, fetch=True)
        return cursor.rows

    async def _single_statement(self, sql: str, params: Params, fetch: bool = False) -> _Outcome:
        writer = self._write_connection()
        async with self._write_lock:
            self._single_writes += 1
            if self._loop_writer is not None and self._single_writes % _CHECKPOINT_EVERY:
                try:
                    cursor = self._loop_writer.execute(sql, params)
                    return _Outcome(
                        cursor.fetchall() if fetch else [], cursor.rowcount, cursor.lastrowid
                    )
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) and "busy" not in str(error):
                        raise StorageError(f"write failed: {error}", cause=error) from None
                except sqlite3.Error as error:
                    raise StorageError(f"write failed: {error}", cause=error) from None
            try:
                async_cursor = await writer.execute(sql, params)
                rows = list(await async_cursor.fetchall()) if fetch else []
                return _Outcome(rows, async_cursor.rowcount, async_cursor.lastrowid)
            except sqlite3.Error as error:
                raise StorageError(f"write failed: {error}", cause=error) from None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Transaction]:
        writer = self._write_connection()
        async with self._write_lock:
            try:
                await writer.execute("BEGIN IMMEDIATE")
            except BaseException as error:
                # Cancelled while BEGIN ran on the connection's thread: it may have begun.
                with anyio.CancelScope(shield=True):
                    await _rollback(writer)
                if isinstance(error, sqlite3.Error):
                    raise StorageError(
                        f"cannot start a transaction: {error}", cause=error
                    ) from None
                raise
            try:
                yield _Transaction(writer)
                # Once the body is done the commit must finish, even if we are cancelled:
                # the statements already ran on aiosqlite's thread.
                with anyio.CancelScope(shield=True):
                    await writer.execute("COMMIT")
            except BaseException as error:
                with anyio.CancelScope(shield=True):
                    await _rollback(writer)
                if isinstance(error, sqlite3.Error):
                    raise StorageError(f"write failed: {error}", cause=error) from None
                raise

    async def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file and truncate the log, so that
        deleted text is gone from both files (after a purge). A reader still using the log
        makes this a partial checkpoint; the next one finishes it."""
        writer = self._write_connection()
        async with self._write_lock:
            try:
                await writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as error:
                raise StorageError(f"checkpoint failed: {error}", cause=error) from None

    def _write_connection(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("database is not open")
        return self._writer

    def _read_connection(self) -> sqlite3.Connection:
        if self._reader is None:
            raise StorageError("database is not open")
        return self._reader


@dataclass(frozen=True)
class _Outcome:
    rows: list[sqlite3.Row]
    rowcount: int
    lastrowid: int | None


async def _rollback(writer: aiosqlite.Connection) -> None:
    """Roll back; statements still queued on the connection's thread run first, so this undoes
    them too. Nothing to roll back (the failure was COMMIT itself) is fine."""
    try:
        await writer.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if "no transaction is active" not in str(error):
            raise


class _Transaction:
    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = ()) -> WriteResult:
        cursor = await self._connection.execute(sql, params)
        return WriteResult(cursor.rowcount, cursor.lastrowid)

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return list(await self._connection.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self._connection.execute_fetchall(sql, params)
        return next(iter(rows), None)
