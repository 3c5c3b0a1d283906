"""Read a test's database from outside the service, whichever engine holds it (a SQLite
file or a PostgreSQL URL): what a test checks is what the database really holds."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import asyncpg

from loop.storage import is_postgres
from loop.storage.postgres import numbered


def query(db: Path | str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement (`?` placeholders) on a connection of its own; the rows as tuples."""
    if is_postgres(str(db)):
        # A thread of its own: the caller may be inside an event loop (an async test).
        with ThreadPoolExecutor(1) as thread:
            return thread.submit(anyio.run, _postgres, str(db), sql, params).result()
    with sqlite3.connect(db) as connection:
        return [tuple(row) for row in connection.execute(sql, params).fetchall()]


async def _postgres(url: str, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    connection = await asyncpg.connect(url)
    try:
        return [tuple(row) for row in await connection.fetch(numbered(sql), *params)]
    finally:
        await connection.close()
