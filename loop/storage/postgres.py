"""The shared engine: PostgreSQL through asyncpg and a connection pool.

Any number of instances (`serve`, `worker`) on any machines use one database; the stores'
claims (leases on jobs and answers, row locks on apps) keep each piece of work to one of
them. Statements are written with `?` placeholders, as for SQLite, and numbered here.

At most `READS_IN_FLIGHT` reads outside a transaction are sent at once; the rest wait their turn
on the event loop, which then resumes a few requests per turn rather than every one at once.

When the server is out of reach, every call fails with a transient `StorageError` (the HTTP
API answers 503); the pool opens fresh connections once it is back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.lowlevel
import asyncpg

from loop.backoff import backoff_seconds
from loop.storage.migrations import (
    CREATE_RECORD_TABLE,
    Migration,
    discover,
    migrations_dir,
    pending,
)
from memory_agent import POSTGRESQL, Dialect, Params, Row, StorageError, TransactionBody

T = TypeVar("T")
log = logging.getLogger("mnemoloop.storage")

# Serialises migrations when several instances start at once (a transaction-scoped lock).
_MIGRATION_LOCK = 0x6D6E656D
# Mistakes in a statement or the data fail the same way every time; the rest (a server
# restarting, a connection dropped, a deadlock, a serialisation conflict) may pass.
_PERMANENT = (
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.SyntaxOrAccessError,
    asyncpg.DataError,
)


def redacted(url: str) -> str:
    """The URL without its password, for logs and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _storage_error(error: BaseException, doing: str) -> StorageError:
    """The one place asyncpg's errors become ours."""
    storage_error = StorageError(f"{doing} failed: {type(error).__name__}: {error}", cause=error)
    if isinstance(error, _PERMANENT):
        storage_error.transient = False
    return storage_error


# Reads (outside a transaction) sent at once; the others wait their turn on the event loop.
# Sent all at once (32 requests' reads under HTTP load), their answers came back together and
# the loop resumed every one of those requests in one turn: it woke a task 4–8 ms late at p99,
# 2–3.6 ms with eight in flight. The server runs reads side by side, so fewer cost requests
# per second: eight about a tenth at most, four a sixth.
READS_IN_FLIGHT = 8
# How long a statement may wait for a connection from the pool.
_ACQUIRE_SECONDS = 10.0
_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """`?` placeholders as `$1, $2, …`, leaving quoted text alone."""
    out, number, quoted = [], 0, False
    for char in sql:
        if char == "'":
            quoted = not quoted
        if char == "?" and not quoted:
            number += 1
            out.append(f"${number}")
        else:
            out.append(char)
    return "".join(out)


def _rowcount(status: str) -> int:
    """asyncpg reports `UPDATE 3`, `INSERT 0 1`, `DELETE 2`: the last number is the count."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PostgresDatabase:
    dialect: Dialect = POSTGRESQL
    # Other instances may be using it: only an expired lease says their work was abandoned.
    shared = True

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._reads = anyio.Semaphore(READS_IN_FLIGHT, fast_acquire=True)

    def describe(self) -> str:
        return f"PostgreSQL {redacted(self.url)}"

    async def open(self) -> PostgresDatabase:
        try:
            await self.migrate()
            self._pool = await asyncpg.create_pool(
                self.url, min_size=1, max_size=self._pool_size, command_timeout=60
            )
        except _DRIVER_ERRORS as error:
            raise _storage_error(error, f"opening {redacted(self.url)}") from None
        return self

    async def close(self) -> None:
        if self._pool is not None:
            with anyio.move_on_after(5):
                await self._pool.close()
            self._pool.terminate()
            self._pool = None

    async def __aenter__(self) -> PostgresDatabase:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def claim_instance(self) -> None:
        """Any number of instances may share the database."""

    async def migrate(self) -> list[Migration]:
        """Apply what is missing, one instance at a time; returns what was applied now."""
        known = discover(migrations_dir("postgresql"))
        connection = await asyncpg.connect(self.url)
        applied: list[Migration] = []
        try:
            await connection.execute(f"SELECT pg_advisory_lock({_MIGRATION_LOCK})")
            await connection.execute(CREATE_RECORD_TABLE)
            rows = await connection.fetch("SELECT version, name FROM schema_migrations")
            for migration in pending(known, {r[0]: r[1] for r in rows}, redacted(self.url)):
                async with connection.transaction():
                    await connection.execute(migration.script(datetime.now(UTC).isoformat()))
                applied.append(migration)
        finally:
            await connection.close()
        return applied

    @asynccontextmanager
    async def _connection(self, doing: str) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise StorageError("database is not open")
        pool = self._pool
        try:
            # Shielded (and bounded): a connection cut off while it is being opened or reset
            # is lost mid-handshake; the cancellation takes effect once it is in hand.
            with anyio.CancelScope(shield=True):
                connection = await pool.acquire(timeout=_ACQUIRE_SECONDS)
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
                yield connection
            except _DRIVER_ERRORS as error:
                # Past a server's answer (a constraint, a deadlock) the connection is sound;
                # otherwise it may be broken or mid-protocol, and the pool opens a fresh one.
                if not isinstance(error, asyncpg.PostgresError) or isinstance(
                    error, asyncpg.PostgresConnectionError | asyncpg.AdminShutdownError
                ):
                    connection.terminate()
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await pool.release(connection)
        except _DRIVER_ERRORS as error:
            raise _storage_error(error, doing) from None

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        async with self._reads, self._connection("read") as connection:
            return await _Session(connection).fetch_all(sql, params)

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def execute(self, sql: str, params: Params = ()) -> int:
        async with self._connection("write") as connection:
            return await _Session(connection).execute(sql, params)

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        async with self._connection("write") as connection:
            return await _Session(connection).fetch_all(sql, params)

    async def notify(self, channel: str) -> None:
        await self.execute("SELECT pg_notify(?, '')", (channel,))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Session]:
        async with self._connection("write") as connection:
            transaction = connection.transaction()
            with anyio.CancelScope(shield=True):
                await transaction.start()
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
                yield _Session(connection)
                # The body is done: the commit must finish even if we are cancelled now.
                with anyio.CancelScope(shield=True):
                    await transaction.commit()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    try:
                        await transaction.rollback()
                    except _DRIVER_ERRORS:
                        pass  # the connection is gone, and the transaction with it
                raise

    async def run_transaction(self, body: TransactionBody[T]) -> T:
        async with self.transaction() as tx:
            return await body(tx)

    async def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL has no log file of our own to truncate."""

    async def listen(self, handlers: Mapping[str, Callable[[], None]]) -> None:
        """Call `handlers[channel]` whenever any instance notifies `channel`, until cancelled.
        A lost connection is opened again; each handler is called on reconnecting, since
        work may have arrived meanwhile (polling covers the gap too)."""
        failures = 0
        while True:
            lost = anyio.Event()
            try:
                # Shielded (and bounded) as the pool's acquire is: a connection cancelled
                # mid-handshake is left open, a socket no one closes.
                with anyio.CancelScope(shield=True):
                    connection = await asyncpg.connect(self.url, timeout=_ACQUIRE_SECONDS)
            except _DRIVER_ERRORS as error:
                failures += 1
                log.warning("cannot listen for notifications (%s); polling meanwhile", error)
                await anyio.sleep(min(backoff_seconds(failures, 0.5), 10.0))
                continue
            failures = 0
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
                connection.add_termination_listener(_listener(lost.set))
                for channel, handler in handlers.items():
                    await connection.add_listener(channel, _listener(handler))
                for handler in handlers.values():
                    handler()
                await lost.wait()
                log.warning("the notification connection was lost; listening again")
            except _DRIVER_ERRORS as error:
                log.warning("listening for notifications failed (%s); again", error)
                await anyio.sleep(0.5)
            finally:
                connection.terminate()


def _listener(handler: Callable[[], None]) -> Callable[..., None]:
    def on_notification(*_args: Any) -> None:
        handler()

    return on_notification


class _Session:
    """Statements on one connection, inside a transaction or each its own. Each runs to its
    end once sent, even if the caller is cancelled meanwhile (the cancellation takes effect
    right after): a statement cut off mid-protocol would leave the connection unusable, and
    the rollback with it."""

    dialect: Dialect = POSTGRESQL

    def __init__(self, connection: asyncpg.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = ()) -> int:
        with anyio.CancelScope(shield=True):
            status = await self._connection.execute(numbered(sql), *params)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return _rowcount(status)

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.fetch_all(sql, params)

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        with anyio.CancelScope(shield=True):
            rows = await self._connection.fetch(numbered(sql), *params)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return list(rows)

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def notify(self, channel: str) -> None:
        # Delivered when (and only if) the transaction commits.
        await self.execute("SELECT pg_notify(?, '')", (channel,))
