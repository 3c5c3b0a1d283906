"""Numbered `.sql` migrations, applied in order, each committed together with its record."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(Exception):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def migrations_dir() -> Path:
    """The packaged copy when installed from a wheel, else the source tree's `migrations/`."""
    packaged = Path(__file__).parent / "sql_migrations"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "migrations"


def discover(directory: Path | None = None) -> list[Migration]:
    found: dict[int, Migration] = {}
    for path in sorted((directory or migrations_dir()).glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"migration file {path.name!r} is not named NNNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(
                f"two migrations share version {version}: "
                f"{found[version].path.name} and {path.name}"
            )
        found[version] = Migration(version, match.group(2), path)
    return [found[v] for v in sorted(found)]


def applied(connection: sqlite3.Connection) -> dict[int, str]:
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    return dict(connection.execute("SELECT version, name FROM schema_migrations").fetchall())


def apply_migrations(db_path: str | Path, directory: Path | None = None) -> list[Migration]:
    """Apply what is missing; returns what was applied now. Refuses a newer database."""
    known = discover(directory)
    connection = sqlite3.connect(db_path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA busy_timeout=5000")
        done = applied(connection)
        newest_known = known[-1].version if known else 0
        if done and max(done) > newest_known:
            raise MigrationError(
                f"database {db_path} has schema version {max(done)}, newer than this "
                f"mnemoloop knows ({newest_known}); upgrade mnemoloop to open it"
            )
        fresh = [m for m in known if m.version not in done]
        for migration in fresh:
            _apply_one(connection, migration)
        return fresh
    finally:
        connection.close()


def _apply_one(connection: sqlite3.Connection, migration: Migration) -> None:
    # executescript runs the script as written: the BEGIN/COMMIT around it make the schema
    # change and its record one transaction.
    now = datetime.now(UTC).isoformat()
    script = (
        "BEGIN IMMEDIATE;\n"
        + migration.path.read_text(encoding="utf-8")
        + "\nINSERT INTO schema_migrations (version, name, applied_at) VALUES "
        + f"({migration.version}, '{migration.name}', '{now}');\nCOMMIT;"
    )
    try:
        connection.executescript(script)
    except sqlite3.Error as error:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise MigrationError(f"migration {migration.path.name} failed: {error}") from error
