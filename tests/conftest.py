"""The fixtures every test shares: a migrated database on each engine, a clock, installed
apps."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from loop.llm import guard
from loop.storage import Engine, database_for, migrate
from tests.postgres_server import PostgresServer

ENGINES = ("sqlite", "postgresql")
_MIGRATED_TEMPLATE = "mnemoloop_migrated"
_database_numbers = itertools.count(1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on a database runs on both engines, unless marked `sqlite_only` (it looks
    inside the SQLite file) or `postgresql_only`."""
    if "engine" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("sqlite_only"):
        engines: tuple[str, ...] = ("sqlite",)
    elif metafunc.definition.get_closest_marker("postgresql_only"):
        engines = ("postgresql",)
    else:
        engines = ENGINES
    metafunc.parametrize("engine", engines)


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session, with a migrated template database
    that each test's own database is copied from."""
    server = PostgresServer.start(tmp_path_factory.mktemp("postgres"))
    try:
        template = server.create_database(_MIGRATED_TEMPLATE)
        anyio.run(migrate, template)
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def fresh_postgres(postgres_server: PostgresServer) -> Iterator[str]:
    """An empty database of its own (no schema), for tests of migrations."""
    name = f"empty_{next(_database_numbers)}"
    yield postgres_server.create_database(name)
    postgres_server.drop_database(name)


@pytest.fixture
def db_path(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path | str]:
    """The test's own database: a SQLite file, or a PostgreSQL database's URL."""
    if engine == "sqlite":
        yield tmp_path / "mnemoloop.db"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"test_{next(_database_numbers)}"
    yield server.create_database(name, template=_MIGRATED_TEMPLATE)
    server.drop_database(name)


@pytest.fixture
def anyio_backend() -> str:
    # aiosqlite runs on asyncio only.
    return "asyncio"


@pytest.fixture(autouse=True)
def _forbid_model_requests() -> Iterator[None]:
    guard.ALLOW_MODEL_REQUESTS = False
    yield
    guard.ALLOW_MODEL_REQUESTS = True


@pytest.fixture
def allow_model_requests() -> Iterator[None]:
    guard.ALLOW_MODEL_REQUESTS = True
    yield


@pytest.fixture
async def database(db_path: Path | str) -> AsyncIterator[Engine]:
    async with database_for(str(db_path)) as db:
        yield db


class SteppingClock:
    """A clock that moves one second forward on every reading, so creation order is exact."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2025, 10, 1, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        self.current += timedelta(seconds=1)
        return self.current


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


async def install_app(database: Engine, app_id: str, name: str | None = None) -> None:
    """Insert an app row directly, for tests below the registry."""
    async with database.transaction() as tx:
        await tx.execute(
            "INSERT INTO apps (app_id, name, installed, installed_at) VALUES (?, ?, 1, ?)",
            (app_id, name or app_id, "2025-10-01T00:00:00.000000Z"),
        )
