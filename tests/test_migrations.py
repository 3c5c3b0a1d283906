"""The schema's migrations: a fresh database gets every table, existing rows survive, a second
run does nothing, a newer database is refused, a failing migration leaves no trace."""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from loop.storage import migrate
from loop.storage.migrations import MigrationError, discover, migrations_dir
from loop.storage.sqlite import apply_migrations
from tests.db_query import query


def tables(path) -> set[str]:
    with sqlite3.connect(path) as connection:
        return {
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }


@pytest.mark.sqlite_only
def test_fresh_database_gets_every_table_and_a_record(db_path):
    applied = apply_migrations(db_path)
    assert [m.version for m in applied] == [m.version for m in discover()]
    assert {
        "apps",
        "conversations",
        "messages",
        "app_memories",
        "memory_jobs",
        "energy_state",
        "memory_events",
        "admin_token",
        "console_sessions",
        "energy_spending",
        "memory_injections",
        "consolidations",
        "consolidation_checks",
        "relations",
        "profile_proposals",
        "schema_migrations",
    } <= tables(db_path)
    with sqlite3.connect(db_path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = connection.execute("SELECT version, name FROM schema_migrations").fetchall()
    assert versions == [
        (1, "initial"), (2, "memory_history"), (3, "answer_state"), (4, "leases"),
        (5, "memory_search"), (6, "admin_token"), (7, "answered_up_to"), (8, "console"),
        (9, "client_threads"), (10, "user_spaces"), (11, "steering"),
        (12, "reply_writer"), (13, "many_client_conversations"), (14, "tool_turns"),
        (15, "profiles"),
        (16, "model_calibrations"), (17, "memory_use"), (18, "sensitivity"), (19, "decay"),
        (20, "kinds"), (21, "consolidation"), (22, "relations"),
        (23, "profile_proposals"),
    ]


@pytest.mark.sqlite_only
def test_history_migration_keeps_existing_jobs_and_allows_cancelled(db_path, tmp_path):
    """A database made by the first migration keeps its jobs through the second."""
    first_only = tmp_path / "first"
    first_only.mkdir()
    (first_only / "0001_initial.sql").write_text(
        (migrations_dir() / "0001_initial.sql").read_text()
    )
    apply_migrations(db_path, first_only)
    with sqlite3.connect(db_path) as connection:
        connection.executescript(
            "INSERT INTO apps VALUES ('a', 'A', 1, 't', NULL, NULL);"
            "INSERT INTO conversations VALUES ('c', 'a', 'ended', 'user', 't', 't', 't');"
            "INSERT INTO memory_jobs (app_id, conversation_id, status, attempts, created_at,"
            " updated_at) VALUES ('a', 'c', 'pending', 0, 't', 't');"
        )
    assert [m.version for m in apply_migrations(db_path)] == list(range(2, 24))
    with sqlite3.connect(db_path) as connection:
        assert connection.execute("SELECT conversation_id, status FROM memory_jobs").fetchall() == [
            ("c", "pending")
        ]
        connection.execute("UPDATE memory_jobs SET status = 'cancelled'")


@pytest.mark.sqlite_only
def test_second_run_is_a_no_op(db_path):
    apply_migrations(db_path)
    assert apply_migrations(db_path) == []


@pytest.mark.sqlite_only
def test_a_newer_database_is_refused(db_path):
    apply_migrations(db_path)
    with sqlite3.connect(db_path) as connection:
        connection.execute("INSERT INTO schema_migrations VALUES (99, 'future', 'x')")
    with pytest.raises(MigrationError, match="schema version 99, newer than"):
        apply_migrations(db_path)


@pytest.mark.sqlite_only
def test_a_failing_migration_leaves_no_trace(db_path, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_good.sql").write_text("CREATE TABLE a (x INTEGER);")
    (folder / "0002_bad.sql").write_text("CREATE TABLE b (x INTEGER);\nTHIS IS NOT SQL;")
    with pytest.raises(MigrationError, match=r"0002_bad\.sql"):
        apply_migrations(db_path, folder)
    assert "b" not in tables(db_path)
    assert "a" in tables(db_path)
    with sqlite3.connect(db_path) as connection:
        assert connection.execute("SELECT version FROM schema_migrations").fetchall() == [(1,)]


def test_duplicate_versions_are_an_error(tmp_path):
    (tmp_path / "0001_a.sql").write_text("")
    (tmp_path / "0001_b.sql").write_text("")
    with pytest.raises(MigrationError, match="share version 1"):
        discover(tmp_path)


async def test_foreign_keys_are_enforced(database):
    from memory_agent.core.errors import StorageError

    with pytest.raises(StorageError, match=r"(?i)foreign key"):
        async with database.transaction() as tx:
            await tx.execute("INSERT INTO app_memories (app_id, content) VALUES ('nobody', 'x')")


@pytest.mark.postgresql_only
def test_postgresql_gets_the_same_tables_and_versions(fresh_postgres):
    applied = anyio.run(migrate, fresh_postgres)
    assert [m.version for m in applied] == [m.version for m in discover()]
    assert anyio.run(migrate, fresh_postgres) == []  # a second run is a no-op
    rows = query(
        fresh_postgres,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
    )
    with sqlite3.connect(":memory:") as sqlite:
        for migration in discover():
            sqlite.executescript(migration.path.read_text())
        # The search index is FTS5's own tables on SQLite, a column on PostgreSQL.
        sqlite_tables = {
            r[0] for r in sqlite.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not r[0].startswith("memory_search")
        } - {"sqlite_sequence"}
    assert {r[0] for r in rows} == sqlite_tables | {"schema_migrations"}


@pytest.mark.postgresql_only
def test_postgresql_refuses_a_newer_database(fresh_postgres):
    anyio.run(migrate, fresh_postgres)
    query(fresh_postgres, "INSERT INTO schema_migrations VALUES (999, 'future', 'x')")
    with pytest.raises(MigrationError, match="newer than this mnemoloop knows"):
        anyio.run(migrate, fresh_postgres)


pytestmark = pytest.mark.anyio
