"""Installed apps: install, uninstall (memories kept unless purged), re-install, keys."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

from loop.errors import (
    AppAlreadyInstalled,
    AppNotFound,
    InvalidInput,
    MemoryCountChanged,
    NotRelaying,
)
from loop.jobs.consolidations import ConsolidationStore
from loop.jobs.store import MemoryJobStore
from loop.storage import Engine
from memory_agent import (
    PROFILE_APP,
    Clock,
    Memory,
    MemorySubAgent,
    Row,
    SqlTransaction,
    now_text,
)


@dataclass(frozen=True)
class App:
    app_id: str
    name: str
    installed: bool
    installed_at: str
    uninstalled_at: str | None
    memory_count: int = 0
    # A user's conversation writes its memory to the app's shared space too.
    users_write_shared: bool = False
    # The time to live a new memory of the app gets (None: its memories last).
    memory_ttl_seconds: int | None = None
    # The app reads and writes its users' profiles (the person across apps).
    shares_profile: bool = False
    # The kinds of memory its key and its conversations may read (None: every kind).
    allowed_kinds: tuple[str, ...] | None = None

    def memory_spaces(self, user_id: str) -> list[tuple[str, str]]:
        """The spaces (app, user) a conversation of `user_id` ("" for none) draws its memories
        from: the person's profile when the app shares it, the user's own, the app's shared."""
        if not user_id:
            return [(self.app_id, "")]
        profile = [(PROFILE_APP, user_id)] if self.shares_profile else []
        return [*profile, (self.app_id, user_id), (self.app_id, "")]

    @classmethod
    def from_row(cls, row: Row) -> App:
        keys = row.keys()
        return cls(
            row["app_id"],
            row["name"],
            bool(row["installed"]),
            row["installed_at"],
            row["uninstalled_at"],
            row["memory_count"] if "memory_count" in keys else 0,
            bool(row["users_write_shared"]),
            row["memory_ttl_seconds"],
            bool(row["shares_profile"]),
            tuple(json.loads(row["allowed_kinds"])) if row["allowed_kinds"] is not None else None,
        )

    def readable(self, memories: Sequence[Memory]) -> list[Memory]:
        """`memories`, those of a kind the app may read."""
        allowed = self.allowed_kinds
        return list(memories) if allowed is None else [m for m in memories if m.kind in allowed]


@dataclass(frozen=True)
class ErasedFromApp:
    """What erasing a person took from one app."""

    app_id: str
    memories: int
    conversations: int
    jobs_cancelled: int

    @property
    def is_profile(self) -> bool:
        """What went from the person's profile (`PROFILE_APP`), which no app holds."""
        return self.app_id == PROFILE_APP


@dataclass(frozen=True)
class InstalledApp:
    app: App
    api_key: str  # shown once; only its hash is stored


# The rules for every way in (HTTP, CLI); the HTTP schema declares the same patterns.
APP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
# No control character (C0, DEL or C1), not blank.
NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
MAX_NAME = 200
# A user of an app, as the app names them: as a name, without '/' (it is a path segment).
USER_ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f/]*[^\s\x00-\x1f\x7f-\x9f/][^\x00-\x1f\x7f-\x9f/]*$"
MAX_USER_ID = 200
APP_ID = re.compile(APP_ID_PATTERN)
NAME = re.compile(NAME_PATTERN)
USER_ID = re.compile(USER_ID_PATTERN)


def validate_user_id(user_id: str) -> None:
    if len(user_id) > MAX_USER_ID or not USER_ID.fullmatch(user_id):
        raise InvalidInput(
            f"userId: 1-{MAX_USER_ID} characters, no control characters and no '/', not blank"
        )


def validate_app(app_id: str, name: str) -> None:
    if not APP_ID.fullmatch(app_id):
        raise InvalidInput(
            f"appId {app_id!r}: 1-64 of letters, digits, '_', '.', '-', starting with a letter "
            "or digit"
        )
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise InvalidInput(f"name: 1-{MAX_NAME} characters, no control characters, not blank")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class AppRegistry:
    def __init__(
        self, database: Engine, agent: MemorySubAgent, jobs: MemoryJobStore, clock: Clock,
        passes: ConsolidationStore,
    ) -> None:
        self._db = database
        self._agent = agent
        self._jobs = jobs
        self._clock = clock
        # Consolidation passes: a purge, an uninstall or an erasure cancels those it touches.
        self._passes = passes

    async def install(self, app_id: str, name: str) -> InstalledApp:
        """Install, or re-install an uninstalled app (its memories come back), with a new key.
        An app already installed is refused (`AppAlreadyInstalled`): its key stays valid."""
        validate_app(app_id, name)
        key = "mlk_" + secrets.token_urlsafe(24)
        now = now_text(self._clock)
        changed = await self._db.execute(
            "INSERT INTO apps (app_id, name, installed, installed_at, api_key_hash)"
            " VALUES (?, ?, 1, ?, ?) ON CONFLICT (app_id) DO UPDATE SET name = excluded.name,"
            " installed = 1, installed_at = excluded.installed_at, uninstalled_at = NULL,"
            " api_key_hash = excluded.api_key_hash WHERE apps.installed = 0",
            (app_id, name, now, hash_key(key)),
        )
        if changed != 1:
            raise AppAlreadyInstalled(app_id)
        return InstalledApp(await self.require(app_id), key)

    async def uninstall(
        self, app_id: str, *, purge_memories: bool = False, confirmed_count: int | None = None
    ) -> int:
        """Mark the app uninstalled; the row stays so no cascade fires. Returns memories purged
        (see `purge_memories` for `confirmed_count`)."""
        await self.require(app_id)
        async with self._db.transaction() as tx:
            await tx.execute(
                "UPDATE apps SET installed = 0, uninstalled_at = ?, api_key_hash = NULL"
                " WHERE app_id = ?",
                (now_text(self._clock), app_id),
            )
            await self._passes.within(tx).cancel_for("cancelled: the app was uninstalled",
                                                     app_id=app_id)
            purged = await self._purge(tx, app_id, confirmed_count) if purge_memories else 0
        if purge_memories:
            await self._db.checkpoint()
        return purged

    async def purge_memories(
        self, app_id: str, *, confirmed_count: int | None = None, user_id: str | None = None
    ) -> int:
        """Delete every memory of the app (of all its spaces, or of one user's), erase their
        text everywhere, and cancel the memory jobs that would write there, in one
        transaction: no job in flight can write afterwards. Returns the number of memories
        deleted. With `confirmed_count` (what an operator was shown), raises
        `MemoryCountChanged` and deletes nothing when there is another number."""
        await self.require(app_id)
        async with self._db.transaction() as tx:
            purged = await self._purge(tx, app_id, confirmed_count, user_id)
        await self._db.checkpoint()
        return purged

    async def _purge(
        self,
        tx: SqlTransaction,
        app_id: str,
        confirmed_count: int | None = None,
        user_id: str | None = None,
    ) -> int:
        # The app's row first, as a memory job's transaction takes it first: the two wait for
        # each other in the same order, never in a cycle.
        await tx.fetch_one(
            f"SELECT app_id FROM apps WHERE app_id = ?{tx.dialect.lock_rows}", (app_id,)
        )
        if confirmed_count is not None:
            count = await self._agent.get_memory_count(app_id, tx=tx, user_id=user_id)
            if count != confirmed_count:
                raise MemoryCountChanged(app_id, confirmed_count, count)
        jobs = self._jobs.within(tx)
        await jobs.cancel_for_app(
            app_id, "cancelled: the memories it would write to were purged", user_id=user_id
        )
        await jobs.erase_steps(app_id, user_id=user_id)
        await self._passes.within(tx).cancel_for(
            "cancelled: the memories it would consolidate were purged", app_id=app_id,
            user_id=user_id,
        )
        return await self._agent.delete_app_memories(app_id, tx=tx, user_id=user_id)

    async def erase_user(self, user_id: str, *, app_id: str | None = None) -> list[ErasedFromApp]:
        """Erase one person from every app (or from `app_id` only), in one transaction: their
        memory spaces, their conversations with every message, their memory jobs (cancelled
        first, so none in flight can write) and the history of their spaces, and (from every
        app) their profile. Nothing of them is kept, not even an erased event. Returns what
        went, per app, and from the profile (`ErasedFromApp.is_profile`), last."""
        validate_user_id(user_id)
        async with self._db.transaction() as tx:
            apps = await self._apps_of_user(tx, user_id, app_id)
            if app_id is None and PROFILE_APP not in apps:
                # A first profile write may be under way: taking the person's row waits for it.
                apps.append(PROFILE_APP)
            erased = [await self._erase_user_within(tx, user_id, app) for app in apps]
            await self._passes.within(tx).cancel_for(
                "cancelled: its person was erased", user_id=user_id, app_id=app_id
            )
        await self._db.checkpoint()
        return [e for e in erased if not (e.is_profile and not e.memories)]

    async def erase_profile(self, user_id: str) -> int:
        """Erase one person's profile, its memories and their history, in one transaction;
        returns how many memories went."""
        validate_user_id(user_id)
        async with self._db.transaction() as tx:
            erased = await self._erase_user_within(tx, user_id, PROFILE_APP)
            await self._passes.within(tx).cancel_for(
                "cancelled: its person was erased", user_id=user_id
            )
        await self._db.checkpoint()
        return erased.memories

    async def _apps_of_user(
        self, tx: SqlTransaction, user_id: str, app_id: str | None
    ) -> list[str]:
        only, params = ("", ()) if app_id is None else (" AND app_id = ?", (app_id,))
        rows = await tx.fetch_all(
            "SELECT app_id FROM ("
            f" SELECT app_id FROM app_memories WHERE user_id = ?{only}"
            f" UNION SELECT app_id FROM conversations WHERE user_id = ?{only}"
            f" UNION SELECT app_id FROM memory_events WHERE user_id = ?{only}"
            ") AS touched ORDER BY app_id",
            (user_id, *params) * 3,
        )
        # The profile last: a profile write holds only the person's row, never an app's.
        apps = [str(row[0]) for row in rows]
        return sorted(apps, key=lambda app: app == PROFILE_APP)

    async def _erase_user_within(
        self, tx: SqlTransaction, user_id: str, app_id: str
    ) -> ErasedFromApp:
        if app_id == PROFILE_APP:
            # The person's row, as a profile write holds it (made, so that a first write
            # under way is waited for), then their profile.
            await self._agent.lock_space(PROFILE_APP, user_id, tx=tx)
            memories = await self._agent.erase_space(PROFILE_APP, user_id, tx=tx)
            await tx.execute("DELETE FROM profiles WHERE user_id = ?", (user_id,))
            return ErasedFromApp(PROFILE_APP, memories, 0, 0)
        # The app's row first, in app order: a memory job's transaction takes it first too.
        # Keeping keys: a conversation ending meanwhile inserts a memory job that points at
        # this row, and must not wait for us while we wait for its conversation.
        await tx.fetch_one(
            f"SELECT app_id FROM apps WHERE app_id = ?{tx.dialect.lock_rows_keeping_keys}",
            (app_id,),
        )
        cancelled = await self._jobs.within(tx).cancel_for_app(
            app_id, "cancelled: its user was erased", user_id=user_id
        )
        memories = await self._agent.erase_space(app_id, user_id, tx=tx)
        space = (app_id, user_id)
        theirs = "SELECT conversation_id FROM conversations WHERE app_id = ? AND user_id = ?"
        await tx.execute(f"DELETE FROM messages WHERE conversation_id IN ({theirs})", space)
        await tx.execute(f"DELETE FROM memory_jobs WHERE conversation_id IN ({theirs})", space)
        conversations = await tx.execute(
            "DELETE FROM conversations WHERE app_id = ? AND user_id = ?", space
        )
        return ErasedFromApp(app_id, memories, conversations, cancelled)

    async def space_counts(self) -> tuple[int, int]:
        """Memory spaces holding at least one memory, and all known: each app's shared one
        and each user an app has had a conversation or a memory of."""
        holding = await self._agent.spaces_holding_memories()
        known = await self._db.fetch_one(
            "SELECT COUNT(*) FROM (SELECT app_id, '' AS user_id FROM apps WHERE app_id <> ''"
            " UNION SELECT app_id, user_id FROM conversations"
            " UNION SELECT app_id, user_id FROM app_memories WHERE app_id <> '') AS s"
        )
        return holding, int(known[0]) if known else 0

    async def set_users_write_shared(self, app_id: str, value: bool) -> App:
        """Whether a user's conversation writes its memory to the app's shared space too."""
        await self.require(app_id)
        await self._db.execute(
            "UPDATE apps SET users_write_shared = ? WHERE app_id = ?", (int(value), app_id)
        )
        return await self.require(app_id)

    async def set_shares_profile(self, app_id: str, value: bool) -> App:
        """Whether the app reads and writes its users' profiles: the facts about a person
        that hold whatever the app, which every app sharing them is given."""
        await self.require(app_id)
        await self._db.execute(
            "UPDATE apps SET shares_profile = ? WHERE app_id = ?", (int(value), app_id)
        )
        return await self.require(app_id)

    async def set_memory_ttl(self, app_id: str, seconds: int | None) -> App:
        """The time to live a new memory of the app gets from now on (None: none); the
        memories it holds keep theirs."""
        await self.require(app_id)
        await self._db.execute(
            "UPDATE apps SET memory_ttl_seconds = ? WHERE app_id = ?", (seconds, app_id)
        )
        return await self.require(app_id)

    async def set_allowed_kinds(self, app_id: str, kinds: Sequence[str] | None) -> App:
        """The kinds of memory the app's key and conversations may read from now on (None:
        every kind); each one of the kinds file's (`InvalidKind` otherwise)."""
        await self.require(app_id)
        given = None if kinds is None else self._agent.kinds.known(kinds, "allowedKinds")
        await self._db.execute(
            "UPDATE apps SET allowed_kinds = ? WHERE app_id = ?",
            (None if given is None else json.dumps(sorted(set(given))), app_id),
        )
        return await self.require(app_id)

    async def get(self, app_id: str) -> App | None:
        if not APP_ID.fullmatch(app_id):
            return None  # no app can have such an id (it may not even be encodable)
        row = await self._db.fetch_one("SELECT * FROM apps WHERE app_id = ?", (app_id,))
        return App.from_row(row) if row else None

    async def require(self, app_id: str) -> App:
        app = await self.get(app_id)
        if app is None:
            raise AppNotFound(app_id)
        return app

    async def relays_for(self, app_id: str, user_id: str) -> App:
        """The app, when it may show a person the changes proposed to their profile and
        relay their answer: it shares people's profiles and serves this one (a conversation
        or a memory of theirs); else `NotRelaying`."""
        app = await self.require(app_id)
        if not app.shares_profile:
            raise NotRelaying(
                f"the app {app_id!r} does not share people's profiles: it cannot relay their"
                " answers"
            )
        served = await self._db.fetch_one(
            "SELECT 1 FROM conversations WHERE app_id = ? AND user_id = ?"
            " UNION ALL SELECT 1 FROM app_memories WHERE app_id = ? AND user_id = ? LIMIT 1",
            (app_id, user_id, app_id, user_id),
        )
        if served is None:
            raise NotRelaying(f"the app {app_id!r} serves no user {user_id!r}")
        return app

    async def list(self) -> list[App]:
        # The profiles' row ('') is no app.
        rows = await self._db.fetch_all(
            "SELECT * FROM apps WHERE app_id <> '' ORDER BY app_id"
        )
        counts = await self._agent.memory_counts_by_app()
        return [
            replace(App.from_row(row), memory_count=counts.get(row["app_id"], 0)) for row in rows
        ]

    async def get_app_id_for_conversation(self, conversation_id: str) -> str | None:
        row = await self._db.fetch_one(
            "SELECT app_id FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        return row["app_id"] if row else None

    async def app_for_key(self, key: str) -> str | None:
        row = await self._db.fetch_one(
            "SELECT app_id FROM apps WHERE api_key_hash = ? AND installed = 1", (hash_key(key),)
        )
        return row["app_id"] if row else None
