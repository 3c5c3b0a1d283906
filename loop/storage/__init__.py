"""Where the service keeps its state: `MNEMOLOOP_DB` names a SQLite file (a path or
`sqlite:///path`, the embedded default) or a PostgreSQL database (`postgresql://…`), shared by
any number of instances. Both engines answer the `memory_agent.Database` protocol."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from loop.storage.migrations import Migration, MigrationError
from loop.storage.postgres import PostgresDatabase, redacted
from loop.storage.sqlite import InstanceRefused, SqliteDatabase, apply_migrations, migrate_file
from memory_agent import Database


class Engine(Database, Protocol):
    """A database engine, as the service runs it."""

    # True when other instances may share the database (their claims must run out before
    # their work is taken over); False when this process has it to itself.
    shared: bool

    def describe(self) -> str:
        """The engine and where its data is, for logs (no password)."""
        ...

    def claim_instance(self) -> None:
        """Before running the loop or the worker: refuse (`InstanceRefused`) when this engine
        cannot share the database with an instance already running on it."""
        ...

    async def listen(self, handlers: Mapping[str, Callable[[], None]]) -> None:
        """Call `handlers[channel]` when another instance notifies `channel`."""
        ...

    async def checkpoint(self) -> None:
        """Make deleted data leave the database's files (after a purge)."""
        ...

    async def close(self) -> None: ...
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

__all__ = [
    "Engine",
    "InstanceRefused",
    "MigrationError",
    "PostgresDatabase",
    "SqliteDatabase",
    "apply_migrations",
    "database_exists",
    "database_for",
    "describe_url",
    "is_postgres",
    "migrate",
    "sqlite_path",
]


def is_postgres(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


def sqlite_path(url: str) -> Path:
    """The file a SQLite URL or plain path names."""
    return Path(url.removeprefix("sqlite:///").removeprefix("sqlite://"))


def database_for(url: str, *, pool_size: int = 10) -> SqliteDatabase | PostgresDatabase:
    """The engine for `url`, not yet opened."""
    if is_postgres(url):
        return PostgresDatabase(url, pool_size=pool_size)
    return SqliteDatabase(sqlite_path(url))


def describe_url(url: str) -> str:
    """The database named for a person: a PostgreSQL URL without its password, or the SQLite
    file's absolute path."""
    return redacted(url) if is_postgres(url) else str(sqlite_path(url).absolute())


def database_exists(url: str) -> bool:
    """False for a SQLite file that is not there (a PostgreSQL server answers for itself)."""
    return is_postgres(url) or sqlite_path(url).is_file()


async def migrate(url: str) -> list[Migration]:
    """Bring the database's schema up to date; returns the migrations applied now."""
    if is_postgres(url):
        return await PostgresDatabase(url).migrate()
    return await migrate_file(sqlite_path(url))
