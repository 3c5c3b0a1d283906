"""The embedded engine: one SQLite file in WAL mode, every call off the event loop.

Writes are serialised by one lock and run on one aiosqlite connection (a transaction is
`BEGIN IMMEDIATE`). Reads run on one more aiosqlite connection with its own thread: in WAL
mode a reader never waits for a writer, and a read that must wait waits on its thread, not on
the loop's. One reader is enough (a read of an app's memories takes some 30 µs) and more cost
more: every thread that runs Python contends with the event loop for the interpreter lock.
At most `READS_IN_FLIGHT` reads are queued on that thread; the rest wait their turn on the
loop. Under HTTP load (32 connections) with every request's read queued at once, the answers
could come back together and the loop resume all of those requests in one turn, and once in
that rhythm it stayed there: on a busy machine it woke a task 11–14 ms late at p99 in most
runs. With four in flight it is 1–4 ms late, busy or not.

One process serves a file: `claim_instance` takes a lock beside it, and a second `serve`,
`worker`, `chat` or `demo` on the same file is refused in one line. Several instances share
a PostgreSQL database instead.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import aiosqlite
import anyio

from loop.storage.migrations import (
    CREATE_RECORD_TABLE,
    Migration,
    MigrationError,
    discover,
    migrations_dir,
    pending,
)
from memory_agent import SQLITE, Dialect, Params, Row, StorageError, TransactionBody

T = TypeVar("T")

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
# Reads handed to the reader's thread at once. The thread runs them one at a time whatever
# the number, so more in flight add no speed, only answers that come back together.
READS_IN_FLIGHT = 4
# Readers serve the hot path: map the file into memory and keep a larger page cache.
_READER_PRAGMAS = ("PRAGMA query_only=ON", "PRAGMA mmap_size=268435456", "PRAGMA cache_size=-32768")


class InstanceRefused(Exception):
    """Another process already serves this database file."""


def _storage_error(error: sqlite3.Error, doing: str) -> StorageError:
    """The one place SQLite's errors become ours."""
    storage_error = StorageError(f"{doing} failed: {error}", cause=error)
    # A broken constraint or a bad statement fails the same way every time; anything else
    # (busy, locked, I/O, disk full) may pass.
    if isinstance(error, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        storage_error.transient = False
    return storage_error


@contextmanager
def _translated(doing: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as error:
        raise _storage_error(error, doing) from None


class SqliteDatabase:
    dialect: Dialect = SQLITE
    # Only this process uses the file (see claim_instance): what it finds `running` or
    # `answering` at start-up was left by its own earlier life.
    shared = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        # Taken without a trip through the event loop when free: every write waits on the
        # writer's thread anyway.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._reads = anyio.Semaphore(READS_IN_FLIGHT, fast_acquire=True)
        self._instance_lock: IO[str] | None = None

    def describe(self) -> str:
        return f"SQLite file {self.path}"

    async def open(self) -> SqliteDatabase:
        """Apply pending migrations and open the connections."""
        await migrate_file(self.path)
        try:
            self._writer = await self._connect(_PRAGMAS)
            self._reader = await self._connect((*_PRAGMAS, *_READER_PRAGMAS))
        except (sqlite3.Error, OSError) as error:
            await self.close()
            raise StorageError(f"cannot open database {self.path}: {error}", cause=error) from None
        return self

    async def _connect(self, pragmas: tuple[str, ...]) -> aiosqlite.Connection:
        connection = await aiosqlite.connect(self.path, isolation_level=None)
        connection.row_factory = sqlite3.Row
        for pragma in pragmas:
            await connection.execute(pragma)
        return connection

    async def close(self) -> None:
        for connection in (self._writer, self._reader):
            if connection is not None:
                await connection.close()
        self._writer, self._reader = None, None
        if self._instance_lock is not None:
            self._instance_lock.close()
            self._instance_lock = None

    async def __aenter__(self) -> SqliteDatabase:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def claim_instance(self) -> None:
        """Take the file for this process, or raise InstanceRefused naming the holder. The
        lock is the kernel's: it goes with the process, however that ends."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        handle = lock_path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise InstanceRefused(
                f"{self.path} is in use by another mnemoloop ({holder}); stop it, or run "
                "several instances on PostgreSQL (MNEMOLOOP_DB=postgresql://...)"
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._instance_lock = handle

    async def listen(self, handlers: Mapping[str, Callable[[], None]]) -> None:
        """Nothing to listen to: one process uses the file, and it wakes itself."""

    async def notify(self, channel: str) -> None:
        """One process: its stores wake their own waiters."""

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        reader = self._reader_connection()
        async with self._reads:
            with _translated("read"):
                return list(await reader.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        return next(iter(await self.fetch_all(sql, params)), None)

    async def execute(self, sql: str, params: Params = ()) -> int:
        writer = self._writer_connection()
        async with self._write_lock:
            with _translated("write"):
                cursor = await writer.execute(sql, params)
                return cursor.rowcount

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        writer = self._writer_connection()
        async with self._write_lock:
            with _translated("write"):
                return list(await writer.execute_fetchall(sql, params))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Transaction]:
        writer = self._writer_connection()
        async with self._write_lock:
            try:
                await writer.execute("BEGIN IMMEDIATE")
            except BaseException as error:
                # Cancelled while BEGIN ran on the connection's thread: it may have begun.
                with anyio.CancelScope(shield=True):
                    await _rollback(writer)
                if isinstance(error, sqlite3.Error):
                    raise _storage_error(error, "starting a transaction") from None
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
                    raise _storage_error(error, "write") from None
                raise

    async def run_transaction(self, body: TransactionBody[T]) -> T:
        """The whole transaction in one call on the writer's thread: BEGIN, the body, COMMIT.
        A statement at a time costs a trip between threads each, all of it under the write
        lock; in one call the lock is held for the statements alone."""
        writer = self._writer_connection()
        async with self._write_lock:
            # Once on the thread the transaction runs to its end, committed or rolled back;
            # a cancellation meanwhile takes effect right after.
            with anyio.CancelScope(shield=True), _translated("write"):
                result: T = await _on_thread(writer, _run_whole, writer, body)
            await anyio.lowlevel.checkpoint_if_cancelled()
            return result

    async def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file and truncate the log, so that
        deleted text is gone from both files (after a purge). A reader still using the log
        makes this a partial checkpoint; the next one finishes it."""
        writer = self._writer_connection()
        async with self._write_lock:
            with _translated("checkpoint"):
                # Read to its end and closed: a statement left open on the writer would make
                # its next COMMIT fail ("SQL statements in progress").
                async with writer.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cursor:
                    await cursor.fetchall()

    def _writer_connection(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("database is not open")
        return self._writer

    def _reader_connection(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise StorageError("database is not open")
        return self._reader


async def _rollback(writer: aiosqlite.Connection) -> None:
    """Roll back; statements still queued on the connection's thread run first, so this undoes
    them too. Nothing to roll back (the failure was COMMIT itself) is fine."""
    try:
        await writer.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if "no transaction is active" not in str(error):
            raise


async def _on_thread(connection: aiosqlite.Connection, function: Callable[..., T], *args: Any
                     ) -> T:
    """Call `function` on the connection's own thread, after what is queued there. aiosqlite
    offers this only as `_execute`; its version is pinned in pyproject for that reason, and
    the tests of both paths would fail on a change."""
    result: T = await connection._execute(function, *args)  # type: ignore[no-untyped-call]
    return result


def _run_whole(connection: aiosqlite.Connection, body: TransactionBody[T]) -> T:
    """On the connection's thread: BEGIN IMMEDIATE, run `body` to its end, COMMIT (ROLLBACK
    if it raised)."""
    raw = connection._conn
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = _run_to_end(body(_DirectSession(raw)))
        raw.execute("COMMIT")
        return result
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (it awaits only `_DirectSession` statements)."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a transaction body awaited something other than its statements")


class _DirectSession:
    """Statements on a connection, called on its own thread: the awaits never suspend."""

    dialect: Dialect = SQLITE

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = ()) -> int:
        return self._connection.execute(sql, params).rowcount

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.fetch_all(sql, params)

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return self._connection.execute(sql, params).fetchall()

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        return self._connection.execute(sql, params).fetchone()

    async def notify(self, channel: str) -> None:
        pass


class _Transaction:
    dialect: Dialect = SQLITE

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = ()) -> int:
        cursor = await self._connection.execute(sql, params)
        return cursor.rowcount

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.fetch_all(sql, params)

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(await self._connection.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        return next(iter(await self.fetch_all(sql, params)), None)

    async def notify(self, channel: str) -> None:
        pass


async def migrate_file(path: Path) -> list[Migration]:
    """Create the file (and its folder) if need be and apply what is missing; `StorageError`
    in one line when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return await anyio.to_thread.run_sync(apply_migrations, path)
    except (sqlite3.Error, OSError) as error:
        raise StorageError(f"cannot open database {path}: {error}", cause=error) from None


def apply_migrations(db_path: str | Path, directory: Path | None = None) -> list[Migration]:
    """Apply what is missing to the file; returns what was applied now."""
    known = discover(directory or migrations_dir("sqlite"))
    connection = sqlite3.connect(db_path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA busy_timeout=5000")
        connection.execute(CREATE_RECORD_TABLE)
        done = dict(connection.execute("SELECT version, name FROM schema_migrations").fetchall())
        fresh = pending(known, done, str(db_path))
        for migration in fresh:
            _apply_one(connection, migration)
        return fresh
    finally:
        connection.close()


def _apply_one(connection: sqlite3.Connection, migration: Migration) -> None:
    # executescript runs the script as written: BEGIN/COMMIT around it make the schema
    # change and its record one transaction.
    script = migration.script(datetime.now(UTC).isoformat())
    try:
        connection.executescript(f"BEGIN IMMEDIATE;\n{script}COMMIT;")
    except sqlite3.Error as error:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise MigrationError(f"migration {migration.path.name} failed: {error}") from error
