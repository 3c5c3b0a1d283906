"""What the memory sub-agent needs from its host, as protocols.

The host (`loop`) implements them; tests may too. A `Database` answers reads at once and
serialises writes in transactions; any failure surfaces as `errors.StorageError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

Params = Sequence[Any]


@dataclass(frozen=True)
class WriteResult:
    rowcount: int
    lastrowid: int | None


class SqlReader(Protocol):
    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]: ...

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None: ...


class SqlTransaction(SqlReader, Protocol):
    """Reads inside a transaction see its own writes."""

    async def execute(self, sql: str, params: Params = ()) -> WriteResult: ...


class Database(SqlReader, Protocol):
    def transaction(self) -> AbstractAsyncContextManager[SqlTransaction]:
        """Open a write transaction (`BEGIN IMMEDIATE`); commits on exit, rolls back on error."""
        ...

    async def execute(self, sql: str, params: Params = ()) -> WriteResult:
        """One write statement, atomic on its own, serialised with transactions."""
        ...

    async def execute_returning(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """One write statement with a RETURNING clause; the rows it returns."""
        ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_timestamp(moment: datetime) -> str:
    """One sortable text form for every stored time (UTC, microseconds, `Z`)."""
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def parse_timestamp(text: str) -> datetime:
    return datetime.strptime(text, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
