"""The web console's sign-in sessions, kept in the database so that every instance behind
one address knows them.

A session is opened by presenting the admin token. Its cookie is a random value of which only
a hash is stored. A session ends when it is closed (sign-out), when it expires, or when the
admin token it was opened with is no longer the admin token (a rotation signs everyone out).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from loop.operations.admin_token import AdminToken
from loop.operations.registry import hash_key
from memory_agent import Clock, Database, now_text

SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class ConsoleSession:
    # The cookie's value: known only to the browser and, for the moment it is made, to us.
    cookie: str
    # What this session's forms carry, so that a form from elsewhere is refused.
    csrf: str
    expires_s: float


class ConsoleSessions:
    def __init__(self, database: Database, clock: Clock, admin_token: AdminToken) -> None:
        self._db = database
        self._clock = clock
        self._admin_token = admin_token

    async def sign_in(self, token: str) -> ConsoleSession | None:
        """A new session for the admin token; None for any other token."""
        if not await self._admin_token.matches(token):
            return None
        now = self._clock.now().timestamp()
        session = ConsoleSession(
            secrets.token_urlsafe(32), secrets.token_urlsafe(32), now + SESSION_SECONDS
        )
        async with self._db.transaction() as tx:
            await tx.execute("DELETE FROM console_sessions WHERE expires_s <= ?", (now,))
            await tx.execute(
                "INSERT INTO console_sessions (session_hash, token_hash, csrf, created_at,"
                " expires_s) VALUES (?, ?, ?, ?, ?)",
                (hash_key(session.cookie), hash_key(token), session.csrf,
                 now_text(self._clock), session.expires_s),
            )
        return session

    async def find(self, cookie: str) -> ConsoleSession | None:
        """The live session this cookie opens, if any."""
        if not cookie:
            return None
        row = await self._db.fetch_one(
            "SELECT token_hash, csrf, expires_s FROM console_sessions WHERE session_hash = ?",
            (hash_key(cookie),),
        )
        if row is None or float(row[2]) <= self._clock.now().timestamp():
            return None
        if not await self._admin_token.hash_matches(row[0]):
            return None  # opened with a token that has since been replaced
        return ConsoleSession(cookie, row[1], float(row[2]))

    async def sign_out(self, cookie: str) -> None:
        await self._db.execute(
            "DELETE FROM console_sessions WHERE session_hash = ?", (hash_key(cookie),)
        )
