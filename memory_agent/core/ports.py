"""What the memory sub-agent needs from its host, as protocols.

The host (`loop`) implements them; tests may too. SQL is written once with `?` placeholders
in the subset that SQLite and PostgreSQL share; the few places where they differ ask the
session's `Dialect`. Every failure of the database surfaces as `errors.StorageError`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Params = Sequence[Any]
# A driver's row (sqlite3.Row, asyncpg.Record): read by position or by column name.
Row = Any


@dataclass(frozen=True)
class Dialect:
    """Where the two engines' SQL differs."""

    name: str
    # Appended to a SELECT inside a transaction: locks the rows read until commit. SQLite
    # needs none (a write transaction holds the whole database).
    lock_rows: str
    # Appended to the SELECT that picks a job to claim: concurrent claimers skip each
    # other's rows instead of waiting.
    skip_locked: str
    greatest: str
    least: str
    # As `lock_rows`, but rows of other tables may still point at the locked ones meanwhile
    # (PostgreSQL's FOR NO KEY UPDATE: an insert that references the row does not wait).
    lock_rows_keeping_keys: str = ""


SQLITE = Dialect("sqlite", lock_rows="", skip_locked="", greatest="MAX", least="MIN")
POSTGRESQL = Dialect(
    "postgresql",
    lock_rows=" FOR UPDATE",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    greatest="GREATEST",
    least="LEAST",
    lock_rows_keeping_keys=" FOR NO KEY UPDATE",
)


def in_space(user_id: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition (` AND user_id = ?`, with its parameter) that keeps one memory space of
    an app; nothing for `None`, every space."""
    return ("", ()) if user_id is None else (" AND user_id = ?", (user_id,))


def of_app_and_user(app_id: str | None, user_id: str | None) -> tuple[str, list[str]]:
    """The condition (with its parameters) that keeps the rows of an app, of a person, of
    both, or (neither given) every row."""
    condition, params = "1 = 1", []
    for column, value in (("app_id", app_id), ("user_id", user_id)):
        if value is not None:
            condition += f" AND {column} = ?"
            params.append(value)
    return condition, params


class SqlSession(Protocol):
    """Statements on the database: on the database itself each statement is its own
    transaction; inside `Database.transaction()` they share one."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetch_one(self, sql: str, params: Params = ()) -> Row | None: ...

    async def execute(self, sql: str, params: Params = ()) -> int:
        """A write statement; returns the number of rows it changed."""
        ...

    async def execute_returning(self, sql: str, params: Params = ()) -> list[Row]:
        """A write statement with a RETURNING clause; the rows it returns."""
        ...

    async def notify(self, channel: str) -> None:
        """Tell every instance sharing the database that there is work on `channel` (inside a
        transaction: once it commits)."""
        ...


# Reads inside a transaction see its own writes.
SqlTransaction = SqlSession


TransactionBody = Callable[[SqlSession], Coroutine[Any, Any, T]]


class Database(SqlSession, Protocol):
    def transaction(self) -> AbstractAsyncContextManager[SqlSession]:
        """A write transaction; commits on exit, rolls back on error."""
        ...

    async def run_transaction(self, body: TransactionBody[T]) -> T:
        """`await body(tx)` in one write transaction, committed when it returns and rolled
        back when it raises; returns what it returns. `body` may await only statements on
        `tx`: the embedded engine runs the whole of it on the database's own thread, in one
        step, which keeps the write lock for the shortest time."""
        ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_AFTER_THE_YEAR = TIMESTAMP_FORMAT.removeprefix("%Y")


def format_timestamp(moment: datetime) -> str:
    """One sortable text form for every stored time (UTC, microseconds, `Z`)."""
    utc = moment.astimezone(UTC)
    # strftime's %Y does not pad years before 1000, and the text must sort as the time does.
    return f"{utc.year:04d}" + utc.strftime(_AFTER_THE_YEAR)


def given_timestamp(text: str, field: str) -> str:
    """A time someone gave (ISO 8601 / RFC 3339; UTC when it has no offset) in the stored
    form; `ValueError` naming `field` and what is wrong with it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field}: {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return format_timestamp(moment)
    except OverflowError:
        raise ValueError(f"{field}: {text!r} is outside the years 1 to 9999 in UTC") from None


def parse_timestamp(text: str) -> datetime:
    return datetime.strptime(text, TIMESTAMP_FORMAT).replace(tzinfo=UTC)


def now_text(clock: Clock) -> str:
    """The clock's time now, in the stored form."""
    return format_timestamp(clock.now())
