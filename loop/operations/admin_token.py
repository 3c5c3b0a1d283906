"""The admin token: set by `MNEMOLOOP_ADMIN_TOKEN`, or generated once and kept in the
database as a SHA-256 hash, so that it survives restarts and every instance on the database
knows it. `mnemoloop token rotate` replaces it; running instances notice within
`REFRESH_SECONDS`."""

from __future__ import annotations

import hmac
import secrets
import time

from loop.operations.registry import hash_key
from memory_agent import Clock, Database, now_text

REFRESH_SECONDS = 5.0
PREFIX = "mla_"


class AdminToken:
    """Checks a presented token against the admin token."""

    def __init__(
        self, database: Database | None, clock: Clock | None, *, configured: str | None = None
    ) -> None:
        self._db = database
        self._clock = clock
        self._configured_hash = hash_key(configured) if configured else None
        self._stored_hash: str | None = None
        self._read_at = -REFRESH_SECONDS

    @classmethod
    def fixed(cls, token: str) -> AdminToken:
        """A token given as is (tests, a configured token without a database)."""
        return cls(None, None, configured=token)

    @property
    def configured(self) -> bool:
        return self._configured_hash is not None

    async def matches(self, token: str) -> bool:
        return bool(token) and await self.hash_matches(hash_key(token))

    async def hash_matches(self, token_hash: str) -> bool:
        """Whether `token_hash` is the hash of the admin token (a console session keeps the
        hash of the token it was opened with, never the token)."""
        expected = self._configured_hash or await self._current_hash()
        return expected is not None and hmac.compare_digest(token_hash, expected)

    async def ensure(self) -> str | None:
        """Make the token if there is none: returns it (to be shown once), else None."""
        if self.configured:
            return None
        token = PREFIX + secrets.token_urlsafe(24)
        async with self._database().transaction() as tx:
            made = await tx.execute(
                "INSERT INTO admin_token (id, token_hash, created_at) VALUES (1, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (hash_key(token), now_text(self._the_clock())),
            )
        self._read_at = -REFRESH_SECONDS
        return token if made == 1 else None

    async def rotate(self) -> str:
        """A new token; the old one stops opening anything."""
        token = PREFIX + secrets.token_urlsafe(24)
        async with self._database().transaction() as tx:
            await tx.execute("DELETE FROM admin_token")
            await tx.execute(
                "INSERT INTO admin_token (id, token_hash, created_at) VALUES (1, ?, ?)",
                (hash_key(token), now_text(self._the_clock())),
            )
        self._read_at = -REFRESH_SECONDS
        return token

    async def _current_hash(self) -> str | None:
        # Read again now and then, so that a rotation elsewhere takes effect here too.
        if time.monotonic() - self._read_at >= REFRESH_SECONDS:
            row = await self._database().fetch_one("SELECT token_hash FROM admin_token")
            self._stored_hash = row[0] if row else None
            self._read_at = time.monotonic()
        return self._stored_hash

    def _database(self) -> Database:
        assert self._db is not None, "a fixed admin token has no database"
        return self._db

    def _the_clock(self) -> Clock:
        assert self._clock is not None
        return self._clock
