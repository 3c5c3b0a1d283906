from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loop.database import SqliteDatabase
from loop.llm import guard


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
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mnemoloop.db"


@pytest.fixture
async def database(db_path: Path) -> AsyncIterator[SqliteDatabase]:
    async with SqliteDatabase(db_path) as db:
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


async def install_app(database: SqliteDatabase, app_id: str, name: str | None = None) -> None:
    """Insert an app row directly, for tests below the registry."""
    async with database.transaction() as tx:
        await tx.execute(
            "INSERT INTO apps (app_id, name, installed, installed_at) VALUES (?, ?, 1, ?)",
            (app_id, name or app_id, "2025-10-01T00:00:00.000000Z"),
        )
