"""The benchmark's query figures: how long one agent's query takes at 100,000 memories, on
SQLite and on PostgreSQL, in spaces of ordinary size (read whole) and in spaces at the largest
cap (searched by the engine's full-text index).

The memories are sentences of words drawn from a vocabulary of 5,000 by a Zipf law (a few
words in most memories, most words in few), as people's words are; each query is four to
eight words drawn the same way, so that some queries hold words that most memories hold."""

from __future__ import annotations

import random
import sqlite3
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
from bench_support import STAMP, copy_to_postgres, migrated_with_apps, percentile

from loop.llm import NoModelLoaded
from loop.storage import database_for
from memory_agent import MemoryQuery, MemorySubAgent, estimate_tokens

MEMORIES = 100_000
VOCABULARY = 5_000
# (users, memories per user): ten thousand users of ten memories (each query reads its spaces
# whole), or a hundred users at the largest cap (each query is answered by the engine's index).
LAYOUTS = {"": (10_000, 10), "_large_spaces": (100, 1_000)}


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
            for _ in range(VOCABULARY)]


def _drawn(rng: random.Random, words: list[str], count: int) -> list[str]:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return rng.choices(words, weights, k=count)


def seed_query_memories(db: Path, users: int, per_user: int) -> None:
    """One app (`app0`) whose users' spaces hold `per_user` memories each, `MEMORIES` in all."""
    rng = random.Random(7)
    words = _vocabulary(rng)
    drawn = iter(_drawn(rng, words, users * per_user * 12))
    with closing(migrated_with_apps(db, 1)) as connection, connection:
        connection.executemany(
            "INSERT INTO app_memories (app_id, user_id, content, created_at, updated_at,"
            " metadata) VALUES ('app0', ?, ?, ?, ?, '{}')",
            ((f"user{n}", "The user said " + " ".join(next(drawn) for _ in range(10)) + ".",
              STAMP, STAMP) for n in range(users) for _ in range(per_user)),
        )
        connection.execute("ANALYZE")


async def query_latencies(db: Path | str, users: int, samples: int) -> list[float]:
    """Seconds per query of a random user's spaces, as `POST .../memories/query` asks it."""
    rng = random.Random(11)
    words = _vocabulary(random.Random(7))
    async with database_for(str(db)) as database:
        agent = MemorySubAgent(database, NoModelLoaded())
        timings = []
        for _ in range(samples):
            user = f"user{rng.randrange(users)}"
            query = MemoryQuery(" ".join(_drawn(rng, words, rng.randint(4, 8))) + "?")
            started = time.perf_counter()
            await agent.query_memories(
                [("app0", user), ("app0", "")], query,
                lambda memory: estimate_tokens(memory.content),
            )
            timings.append(time.perf_counter() - started)
        return timings


def bench_query(tmp: Path, quick: bool) -> dict[str, Any]:
    """`query_p99_ms` and `query_large_spaces_p99_ms` at 100,000 memories, and the same on
    PostgreSQL (`pg_`)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.postgres_server import PostgresServer

    samples = 200 if quick else 1_000
    results: dict[str, Any] = {"query_memories": MEMORIES}
    server = PostgresServer.start(tmp)
    try:
        for suffix, (users, per_user) in LAYOUTS.items():
            seeded = tmp / f"query{suffix}.db"
            seed_query_memories(seeded, users, per_user)
            postgres = server.create_database(f"query{suffix}")
            anyio.run(copy_to_postgres, seeded, postgres)
            for prefix, db in (("", seeded), ("pg_", postgres)):
                timings = anyio.run(query_latencies, db, users, samples)
                results[f"{prefix}query{suffix}_p50_ms"] = round(percentile(timings, 50) * 1000, 2)
                results[f"{prefix}query{suffix}_p99_ms"] = round(percentile(timings, 99) * 1000, 2)
    finally:
        server.cleanup()
    return results


if __name__ == "__main__":
    import json
    import tempfile

    sqlite3.enable_callback_tracebacks(True)
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(bench_query(Path(folder), "--quick" in sys.argv), indent=2))
