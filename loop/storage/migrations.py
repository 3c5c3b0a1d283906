"""Numbered `.sql` migrations, one folder per engine (`migrations/sqlite`,
`migrations/postgresql`), with the same versions in both. Each engine applies a migration
and its record in one transaction; what to apply, and the refusal of a database newer than
this code, are decided here for both."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

CREATE_RECORD_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)
RECORD = "INSERT INTO schema_migrations (version, name, applied_at) VALUES ({v}, '{n}', '{at}')"


class MigrationError(Exception):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def script(self, applied_at: str) -> str:
        """The migration's SQL followed by its record (names are [a-z0-9_] only)."""
        record = RECORD.format(v=self.version, n=self.name, at=applied_at)
        return self.path.read_text(encoding="utf-8") + f"\n{record};\n"


def migrations_dir(engine: str = "sqlite") -> Path:
    """The packaged copy when installed from a wheel, else the source tree's `migrations/`."""
    packaged = Path(__file__).parent.parent / "sql_migrations"
    root = packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "migrations"
    return root / engine


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


def pending(known: list[Migration], done: Mapping[int, str], where: str) -> list[Migration]:
    """The migrations still to apply, in order; refuses a database newer than `known`."""
    newest_known = known[-1].version if known else 0
    if done and max(done) > newest_known:
        raise MigrationError(
            f"database {where} has schema version {max(done)}, newer than this "
            f"mnemoloop knows ({newest_known}); upgrade mnemoloop to open it"
        )
    return [m for m in known if m.version not in done]
