"""Transactions cancelled at any point leave no half-write, and the database stays usable."""

from __future__ import annotations

import random

import anyio
import pytest

from tests.conftest import install_app

pytestmark = [pytest.mark.fault, pytest.mark.anyio]


async def test_cancelled_transactions_are_all_or_nothing(database):
    await install_app(database, "app")
    rng = random.Random(7)
    for n in range(80):
        with anyio.move_on_after(rng.uniform(0, 0.003)):
            async with database.transaction() as tx:
                for part in ("a", "b"):
                    await tx.execute(
                        "INSERT INTO app_memories (app_id, content, created_at, updated_at)"
                        " VALUES ('app', ?, 'x', 'x')", (f"{n}{part}",))

    contents = {row[0] for row in await database.fetch_all("SELECT content FROM app_memories")}
    halves = [n for n in range(80) if (f"{n}a" in contents) != (f"{n}b" in contents)]
    assert halves == []
    async with database.transaction() as tx:  # still usable
        await tx.execute("INSERT INTO app_memories (app_id, content) VALUES ('app', 'after')")
    assert await database.fetch_one("SELECT 1 FROM app_memories WHERE content = 'after'")
