"""The API's routes, in groups, and the two clients that run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self, TypeVar

import httpx
import msgspec
from msgspec import UNSET, UnsetType

from admin_api.replies import (
    AcceptedOut,
    AppOut,
    AppsOut,
    ConversationCreatedOut,
    ConversationOut,
    EnergyOut,
    ExportOut,
    HealthOut,
    HistoryOut,
    ImportedOut,
    InstalledAppOut,
    JobOut,
    JobsOut,
    LinksOut,
    MemoriesOut,
    MemoryOut,
    PostedOut,
    PurgedOut,
    QueryOut,
    SpaceOut,
    SpacesOut,
    SuccessOut,
    UninstalledOut,
)
from admin_api.schemas import (
    EndConversation,
    ImportMemories,
    InstallApp,
    OpenConversation,
    PostMessage,
    QueryFilters,
    QueryMemories,
    RestoreMemory,
    TagMemory,
)
from memory_agent import MAX_IMPORTANCE, MIN_IMPORTANCE
from mnemoloop.client.calls import (
    AsyncSession,
    Call,
    Group,
    SyncSession,
    decoded_as,
    event_stream,
    nothing,
    picked,
    query_params,
    route,
    segment,
)
from mnemoloop.client.consolidations import Consolidations
from mnemoloop.client.people import Users

DEFAULT_TIMEOUT = 30.0
# How much longer than `wait` the client waits for the server's answer.
WAIT_MARGIN = 10.0

S = TypeVar("S")
AppList = list[AppOut]
MemoryList = list[MemoryOut]
SpaceList = list[SpaceOut]
JobList = list[JobOut]


class Apps(Group[S]):
    """Installing and uninstalling apps (admin token)."""

    @route
    def install(
        self, app_id: str, name: str, *, memory_ttl_seconds: int | None = None,
        shares_profile: bool = False, allowed_kinds: list[str] | None = None,
    ) -> Call[InstalledAppOut]:
        """Install an app (or re-install an uninstalled one); its API key is in this answer
        only. An app already installed raises `Conflict` (its key stays valid).
        `memory_ttl_seconds`: the time to live of its new memories; `shares_profile`: it
        reads and writes its users' profiles; `allowed_kinds`: the kinds of memory its key
        and conversations read (None: every kind)."""
        body = InstallApp(app_id, name, memory_ttl_seconds=memory_ttl_seconds,
                          shares_profile=shares_profile, allowed_kinds=allowed_kinds)
        return Call("POST", "/apps", decoded_as(InstalledAppOut), body=body)

    @route
    def change(
        self,
        app_id: str,
        *,
        users_write_shared: bool | UnsetType = UNSET,
        memory_ttl_seconds: int | UnsetType | None = UNSET,
        shares_profile: bool | UnsetType = UNSET,
        allowed_kinds: list[str] | UnsetType | None = UNSET,
    ) -> Call[AppOut]:
        """Change an app's settings; only those given change (`memory_ttl_seconds=None`
        removes the default time to live; `shares_profile`: the app reads and writes its
        users' profiles; `allowed_kinds`: the kinds of memory its key and conversations read,
        None every kind)."""
        body = _AppChange(users_write_shared, memory_ttl_seconds, shares_profile, allowed_kinds)
        return Call("PATCH", f"/apps/{segment(app_id)}", decoded_as(AppOut), body=body)

    @route
    def uninstall(self, app_id: str, purge_memories: bool = False) -> Call[UninstalledOut]:
        params = query_params(purgeMemories=purge_memories)
        return Call("DELETE", f"/apps/{segment(app_id)}", decoded_as(UninstalledOut), params)

    @route
    def get(self, app_id: str) -> Call[AppOut]:
        """An app: its settings and memory count."""
        return Call("GET", f"/apps/{segment(app_id)}", decoded_as(AppOut))

    @route
    def list(self) -> Call[AppList]:
        return Call("GET", "/apps", picked(AppsOut, lambda out: out.apps))


class Conversations(Group[S]):
    """Conversations and their messages (admin token or the app's key)."""

    @route
    def open(self, app_id: str, user_id: str | None = None) -> Call[str]:
        """Open a conversation (of one of the app's users: it reads and writes their memory
        space); returns its id."""
        path = f"/apps/{segment(app_id)}/conversations"
        body = OpenConversation(user_id) if user_id is not None else None
        return Call(
            "POST", path, picked(ConversationCreatedOut, lambda out: out.conversation_id),
            body=body,
        )

    @route
    def send(
        self, conversation_id: str, content: str, wait: float | None = None
    ) -> Call[PostedOut]:
        """Post a user message. With `wait`, wait up to that many seconds for the reply."""
        return _message(conversation_id, content, wait)

    @event_stream
    def stream(self, conversation_id: str, content: str) -> Call[Any]:
        """Post a user message and follow its reply: `ReplyDelta`s, then `ReplyDone` or
        `ReplyError`."""
        return _message(conversation_id, content, None)

    @route
    def get(self, conversation_id: str) -> Call[ConversationOut]:
        return Call("GET", _conversation(conversation_id), decoded_as(ConversationOut))

    @route
    def end(self, conversation_id: str, reason: str = "app") -> Call[None]:
        """End a conversation (again is fine); its memory is written in the background."""
        path = f"{_conversation(conversation_id)}/end"
        return Call("POST", path, picked(AcceptedOut, nothing), body=EndConversation(reason))

    @route
    def retry(self, conversation_id: str) -> Call[None]:
        """Try again to answer a conversation whose answer failed."""
        path = f"{_conversation(conversation_id)}/retry"
        return Call("POST", path, picked(AcceptedOut, nothing))


def _conversation(conversation_id: str) -> str:
    return f"/conversations/{segment(conversation_id)}"


def _message(conversation_id: str, content: str, wait: float | None) -> Call[PostedOut]:
    return Call(
        "POST",
        f"{_conversation(conversation_id)}/messages",
        decoded_as(PostedOut),
        params=query_params(wait=wait),
        body=PostMessage(content),
        min_timeout=0.0 if wait is None else wait + WAIT_MARGIN,
    )


class Memories(Group[S]):
    """An app's memories and their history: an app's key reads its own; deleting needs the
    admin token. `user_id` names a user's memory space; without it, the app's shared one."""

    @route
    def list(
        self, app_id: str, user_id: str | None = None, state: str | None = None
    ) -> Call[MemoryList]:
        """The space's memories, newest first: the live ones, or with `state` "retired"
        (expired or deleted, restorable until erased) or "all"."""
        return Call(
            "GET", _memories(app_id), picked(MemoriesOut, lambda out: out.memories),
            query_params(userId=user_id, state=state),
        )

    @route
    def get(self, app_id: str, memory_id: int) -> Call[MemoryOut]:
        """One memory, live or retired (until it is erased)."""
        return Call("GET", f"{_memories(app_id)}/{memory_id}", decoded_as(MemoryOut))

    @route
    def links(self, app_id: str, memory_id: int) -> Call[LinksOut]:
        """The memories this one is linked to (they share much of their text), the strongest
        link first."""
        return Call("GET", f"{_memories(app_id)}/{int(memory_id)}/links", decoded_as(LinksOut))

    @route
    def steer(
        self,
        app_id: str,
        memory_id: int,
        *,
        pinned: bool | UnsetType = UNSET,
        private: bool | UnsetType = UNSET,
        importance: int | UnsetType = UNSET,
        expires_at: str | UnsetType | None = UNSET,
        reason: str | UnsetType = UNSET,
        sensitivity: str | UnsetType = UNSET,
    ) -> Call[MemoryOut]:
        """Pin, weigh (0-10), make private or set the expiry (RFC 3339; None removes it) of
        a live memory; only what is given changes. A pin beyond the cap less one raises
        `Conflict`."""
        body = _MemoryChange(pinned, private, importance, expires_at, reason, sensitivity)
        return Call("PATCH", f"{_memories(app_id)}/{memory_id}", decoded_as(MemoryOut), body=body)

    @route
    def tag(self, app_id: str, memory_id: int, relevant: bool, reason: str) -> Call[MemoryOut]:
        """The seed's `tag_memory_relevant` (True) / `tag_memory_irrelevant` (False): the
        memory's importance goes up or down by 2, the reason kept in its history."""
        path = f"{_memories(app_id)}/{memory_id}/relevance"
        return Call("POST", path, decoded_as(MemoryOut), body=TagMemory(relevant, reason))

    @route
    def restore(
        self, app_id: str, memory_id: int, expires_at: str | None = None
    ) -> Call[MemoryOut]:
        """Bring back a deleted or expired memory before it is erased (with a new expiry,
        or none). Its space at its cap raises `Conflict`."""
        path = f"{_memories(app_id)}/{memory_id}/restore"
        return Call("POST", path, decoded_as(MemoryOut), body=RestoreMemory(expires_at))

    @route
    def spaces(self, app_id: str) -> Call[SpaceList]:
        """The app's spaces that hold memories, with their counts: the shared one first."""
        path = f"/apps/{segment(app_id)}/spaces"
        return Call("GET", path, picked(SpacesOut, lambda out: out.spaces))

    @route
    def search(
        self, app_id: str, query: str, limit: int | None = None, user_id: str | None = None
    ) -> Call[MemoryList]:
        """The space's memories matching any word of `query`, best first."""
        params = query_params(q=query, limit=limit, userId=user_id)
        return Call(
            "GET", _memories(app_id), picked(MemoriesOut, lambda out: out.memories), params
        )

    @route
    def query(
        self,
        app_id: str,
        query: str,
        *,
        user_id: str | None = None,
        top_k: int = 5,
        threshold: float = 0.0,
        budget_tokens: int = 2000,
        full: bool = False,
        pinned: bool | None = None,
        importance_min: int = MIN_IMPORTANCE,
        importance_max: int = MAX_IMPORTANCE,
        updated_after: str | None = None,
        updated_before: str | None = None,
        categories: Sequence[str] | None = None,
        agent: str | None = None,
    ) -> Call[QueryOut]:
        """The memories that answer `query` (for `user_id`'s conversation: their profile when
        the app shares it, their own and the app's shared), scored 0-1, at least
        `threshold`, the best first, at most `top_k` within `budget_tokens`; `full` gives
        each memory with its metadata; `categories`: of these kinds only; `agent`: the agent
        reading (it reads the kinds its allow-list names)."""
        filters = QueryFilters(user_id, pinned, importance_min, importance_max,
                               updated_after, updated_before)
        kinds = None if categories is None else [*categories]
        body = QueryMemories(query, filters, kinds, top_k, threshold, budget_tokens,
                             "full" if full else "bullets", agent)
        return Call("POST", f"{_memories(app_id)}/query", decoded_as(QueryOut), body=body)

    @route
    def delete(self, app_id: str, memory_id: int) -> Call[None]:
        """Delete one memory (admin token); `restore` brings it back until the grace period
        ends."""
        path = f"{_memories(app_id)}/{memory_id}"
        return Call("DELETE", path, picked(SuccessOut, nothing))

    @route
    def export(self, app_id: str, user_id: str | None = None) -> Call[ExportOut]:
        """The space's memories as a document `import_` takes back (here or elsewhere)."""
        return Call(
            "GET", f"{_memories(app_id)}/export", decoded_as(ExportOut),
            query_params(userId=user_id),
        )

    @route
    def import_(
        self,
        app_id: str,
        document: ExportOut | ImportMemories,
        *,
        replace: bool = False,
        user_id: str | None = None,
    ) -> Call[ImportedOut]:
        """Store the memories of an export in a space, all or none (admin token). Refused
        (`Conflict`) when the space would hold more than its limit; `replace` deletes its
        memories first."""
        params = query_params(replace="true" if replace else None, userId=user_id)
        path = f"{_memories(app_id)}/import"
        return Call("POST", path, decoded_as(ImportedOut), params, body=document)

    @route
    def purge(self, app_id: str, user_id: str | None = None) -> Call[PurgedOut]:
        """Delete all of the app's memories (every space), or of one user's space."""
        return Call(
            "DELETE", _memories(app_id), decoded_as(PurgedOut), query_params(userId=user_id)
        )

    @route
    def history(
        self,
        app_id: str,
        memory_id: int | None = None,
        *,
        since: int | None = None,
        limit: int | None = None,
        user_id: str | None = None,
    ) -> Call[HistoryOut]:
        """Every change to the app's memories (or to one memory, or to one user's space),
        oldest first; pass the answer's `next_cursor` as `since` for the next page."""
        path = f"/apps/{segment(app_id)}/history"
        params = query_params(since=since, limit=limit, userId=user_id)
        if memory_id is not None:
            path = f"{_memories(app_id)}/{memory_id}/history"
            params = query_params(since=since, limit=limit)
        return Call("GET", path, decoded_as(HistoryOut), params)


class _AppChange(msgspec.Struct, rename="camel", omit_defaults=True):
    """`PATCH /apps/{id}`: what is left unset is not sent, and does not change."""

    users_write_shared: bool | UnsetType = UNSET
    memory_ttl_seconds: int | UnsetType | None = UNSET
    shares_profile: bool | UnsetType = UNSET
    allowed_kinds: list[str] | UnsetType | None = UNSET


class _MemoryChange(msgspec.Struct, rename="camel", omit_defaults=True):
    """`PATCH .../memories/{id}`: what is left unset is not sent, and does not change."""

    pinned: bool | UnsetType = UNSET
    private: bool | UnsetType = UNSET
    importance: int | UnsetType = UNSET
    expires_at: str | UnsetType | None = UNSET
    reason: str | UnsetType = UNSET
    sensitivity: str | UnsetType = UNSET


def _memories(app_id: str) -> str:
    return f"/apps/{segment(app_id)}/memories"


class _Api(Group[S]):
    """Every route, in groups; `Client` and `AsyncClient` say how they are run."""

    def __init__(self, session: S) -> None:
        super().__init__(session)
        self.apps = Apps(session)
        self.conversations = Conversations(session)
        self.memories = Memories(session)
        self.users = Users(session)
        self.consolidations = Consolidations(session)

    @route
    def health(self) -> Call[HealthOut]:
        return Call("GET", "/health", decoded_as(HealthOut))

    @route
    def energy(self) -> Call[EnergyOut]:
        """The energy budget, and what memory work and conversations spent of it."""
        return Call("GET", "/energy", decoded_as(EnergyOut))

    @route
    def jobs(self, app_id: str | None = None, status: str | None = None) -> Call[JobList]:
        """Memory jobs, newest first; `status` is pending, running, deferred, done, skipped,
        failed or cancelled."""
        params = query_params(appId=app_id, status=status)
        return Call("GET", "/memory-jobs", picked(JobsOut, lambda out: out.jobs), params)


class Client(_Api[SyncSession]):
    """The API, blocking. `token` is the admin token or an app's key; `http_client`, if
    given, is used as it is (and not closed by `close()`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(SyncSession(base_url, token, timeout, http_client))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Api[AsyncSession]):
    """The API, async. `token` is the admin token or an app's key; `http_client`, if given,
    is used as it is (and not closed by `aclose()`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(AsyncSession(base_url, token, timeout, http_client))

    async def aclose(self) -> None:
        await self._session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
