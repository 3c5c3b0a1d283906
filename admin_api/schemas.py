"""Request and response bodies. JSON field names are camelCase, as in the seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from litestar.openapi.spec import Operation, RequestBody
from litestar.params import PathParameter, QueryParameter

from loop.errors import InvalidInput
from loop.operations import APP_ID_PATTERN, MAX_NAME, MAX_USER_ID, NAME_PATTERN, USER_ID_PATTERN
from memory_agent import (
    MAX_BUDGET_TOKENS,
    MAX_IMPORTANCE,
    MAX_MEMORY_ID,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    MIN_BUDGET_TOKENS,
    MIN_IMPORTANCE,
    ImportedMemory,
    Kinds,
    MemoryQuery,
    Sensitivity,
    check_readable,
    given_timestamp,
)

AppId = Annotated[
    str,
    msgspec.Meta(pattern=APP_ID_PATTERN, description="letters, digits, '_', '.', '-'; at most 64"),
]
AppName = Annotated[
    str,
    msgspec.Meta(
        pattern=NAME_PATTERN, max_length=MAX_NAME, description="no control characters, not blank"
    ),
]


MAX_ID = MAX_MEMORY_ID
MemoryId = Annotated[
    int, PathParameter(ge=1, le=MAX_ID, description="a memory's id, as the listing gives it")
]


@dataclass
class OptionalBodyOperation(Operation):
    """An operation whose JSON body may be left out (Litestar marks every body required)."""

    def __post_init__(self) -> None:
        if isinstance(self.request_body, RequestBody):
            self.request_body.required = False


def strict_booleans(raw: object, *names: str) -> None:
    """The request decodes leniently (0 and "false" read as booleans): the named fields of
    the raw JSON body must be true or false (or null, where the field may be left as it is)."""
    if not isinstance(raw, dict):
        return
    for name in names:
        if name in raw and raw[name] is not None and not isinstance(raw[name], bool):
            raise InvalidInput(f"{name}: true or false")


class Body(msgspec.Struct, rename="camel"):
    """A request body. Unknown fields are ignored, as the OpenAPI schema allows them."""


UserIdText = Annotated[
    str,
    msgspec.Meta(
        pattern=USER_ID_PATTERN,
        max_length=MAX_USER_ID,
        description="a user of the app, as the app names them: no control characters, no '/'",
    ),
]
UserIdQuery = Annotated[
    str | None,
    QueryParameter(
        name="userId",
        pattern=USER_ID_PATTERN,
        max_length=MAX_USER_ID,
        description="a user's memory space; without it, the app's shared space",
    ),
]


# An app's default time to live of a new memory: a minute to ten years.
MemoryTtl = Annotated[
    int,
    msgspec.Meta(
        ge=60,
        le=10 * 366 * 24 * 3600,
        description="seconds a new memory lives before it expires (null: memories last)",
    ),
]


# Kinds of memory, as the kinds file names them.
KindName = Annotated[str, msgspec.Meta(min_length=1, max_length=32)]
KindList = Annotated[list[KindName], msgspec.Meta(max_length=32)]


class InstallApp(Body):
    app_id: AppId
    name: AppName
    # A user's conversation writes its memory to the app's shared space too.
    users_write_shared: bool = False
    memory_ttl_seconds: MemoryTtl | None = None
    # The app reads and writes its users' profiles (facts about the person across apps).
    shares_profile: bool = False
    # The kinds of memory its key and its conversations may read (none given: every kind).
    allowed_kinds: KindList | None = None


class AppSettings(Body):
    """Only the fields present change; `memoryTtlSeconds: null` removes the default,
    `allowedKinds: null` allows every kind."""

    users_write_shared: bool | None = None
    memory_ttl_seconds: MemoryTtl | None = None
    shares_profile: bool | None = None
    allowed_kinds: KindList | None = None


class RequestConsolidation(Body):
    # The app whose spaces the pass visits, and the person whose (both: that person's in the
    # app; neither: every space).
    app_id: AppId | None = None
    user_id: UserIdText | None = None


class AnswerProposal(Body):
    # The proposal answered, and the person's answer.
    id: Annotated[int, msgspec.Meta(ge=1, le=MAX_MEMORY_ID)]
    decision: Literal["accept", "decline"]
    # Who relays the answer, when not the caller itself (the client, the CLI, the console
    # say so; an app's key answers as that app whatever it says).
    through: Annotated[str, msgspec.Meta(pattern=r"^(api|client|cli|console|mcp)$")] = "api"


class OpenConversation(Body):
    # The user whose memory space the conversation reads and writes; none: the app's shared.
    user_id: UserIdText | None = None


class PostMessage(Body):
    content: Annotated[str, msgspec.Meta(min_length=1, max_length=32_000)]


class EndConversation(Body):
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] = "app"


# A time as text, read by the import (which names a value it cannot read): a JSON number is
# not one.
Timestamp = Annotated[
    str,
    msgspec.Meta(
        max_length=64,
        description="RFC 3339 (UTC when no offset is given)",
        extra_json_schema={"format": "date-time"},
    ),
]


class ImportedMemoryIn(Body):
    """A memory as the export gives it (its `id` is ignored: the import gives new ones)."""

    content: Annotated[str, msgspec.Meta(min_length=1, max_length=32_000)]
    created_at: Timestamp
    updated_at: Timestamp | None = None
    source_conversation_id: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    pinned: bool = False
    # Every level but public is private; an export from before the levels gives `private` only.
    private: bool | None = None
    sensitivity: SensitivityLevel | None = None
    expires_at: Timestamp | None = None
    # The space the export took it from; an import into another space is refused.
    user_id: Annotated[str, msgspec.Meta(max_length=MAX_USER_ID)] | None = None
    # One of the kinds file's; none given: the kind every memory kept before kinds has.
    kind: KindName | None = None


Importance = Annotated[int, msgspec.Meta(ge=0, le=10, description="0 (least) to 10 (most)")]
Reason = Annotated[str, msgspec.Meta(min_length=1, max_length=300)]


SensitivityLevel = Annotated[
    Sensitivity,
    msgspec.Meta(description="public: injected; private: never injected; secret: never shown"
                 " to a model either; unknown: never returned by a read"),
]


class SteerMemory(Body):
    """Only the fields present change; `expiresAt: null` removes the expiry."""

    pinned: bool | None = None
    # `private: true` makes a public memory private (a secret one stays secret); `false` public.
    private: bool | None = None
    # Unknown is for a memory no one has classified (an import may bring one): never set.
    sensitivity: Annotated[
        Literal["public", "private", "secret"],
        msgspec.Meta(description="public: injected; private: never injected; secret: never"
                     " shown to a model either"),
    ] | None = None
    importance: Importance | None = None
    expires_at: Timestamp | None = None
    # Why, for the history.
    reason: Reason | None = None


class TagMemory(Body):
    """The seed's `tag_memory_relevant` (true) and `tag_memory_irrelevant` (false)."""

    relevant: bool
    reason: Reason


class RestoreMemory(Body):
    # The expiry the restored memory gets in place of one that has passed; none: it lasts.
    expires_at: Timestamp | None = None


class QueryFilters(Body, forbid_unknown_fields=True):
    """What a query's memories must be; each optional. A filter this service does not know
    is refused (400 naming it), not ignored."""

    # The user whose conversation the query serves: their space, the app's shared one and,
    # in an app that shares profiles, their profile. Without it, the app's shared space.
    user_id: UserIdText | None = None
    pinned: bool | None = None
    importance_min: Importance = MIN_IMPORTANCE
    importance_max: Importance = MAX_IMPORTANCE
    updated_after: Timestamp | None = None
    updated_before: Timestamp | None = None


class QueryMemories(Body):
    """The seed's `memory.query`, in the API's camelCase."""

    query: Annotated[
        str,
        msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS, description="what to recall"),
    ]
    filters: QueryFilters = msgspec.field(default_factory=QueryFilters)
    # The kinds of memory asked for (the kinds file's); none: every kind the reader may read.
    # A kind outside what the reader may read is refused (403), an unknown one (400).
    categories: Annotated[
        list[KindName],
        msgspec.Meta(max_length=32, description="the kinds of memory to return"),
    ] | None = None
    top_k: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_K)] = 5
    threshold: Annotated[
        float, msgspec.Meta(ge=0, le=1, description="the least score (0-1) a memory needs")
    ] = 0.0
    budget_tokens: Annotated[
        int, msgspec.Meta(ge=MIN_BUDGET_TOKENS, le=MAX_BUDGET_TOKENS)
    ] = 2000
    # `return` in the seed: bullets (each memory's text, as a model is given it) or full
    # memories with their metadata.
    shape: Literal["bullets", "full"] = msgspec.field(default="bullets", name="return")
    # The agent reading (one the kinds file's allow-lists name): it reads its kinds only.
    agent: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


def memory_query(
    body: QueryMemories, kinds: Kinds, app_allows: tuple[str, ...] | None
) -> MemoryQuery:
    """The agent's query, its filters' times in the stored form, within the kinds its reader
    may read (`app_allows`, the app's list when an app's key asks; the agent's); `InvalidInput`
    or `InvalidKind` naming a field that cannot be, `KindNotAllowed` for a kind it may not
    read."""
    asked = kinds.known(body.categories or (), "categories")
    readable = kinds.readable(app_allows, body.agent)
    check_readable(asked, readable)
    allowed = frozenset(asked) if asked else readable
    filters = body.filters
    # A query with no words, or a range that holds nothing: `InvalidSearchQuery` (400).
    return MemoryQuery(
        body.query, body.top_k, body.threshold, body.budget_tokens, body.shape,
        filters.pinned, filters.importance_min, filters.importance_max,
        stored_time(filters.updated_after, "filters.updatedAfter"),
        stored_time(filters.updated_before, "filters.updatedBefore"),
        allowed,
    )


class ImportMemories(Body):
    """The export's document (`appId` and `exportedAt` are ignored)."""

    memories: Annotated[list[ImportedMemoryIn], msgspec.Meta(max_length=1000)]


def stored_time(text: str | None, field: str) -> str | None:
    """An RFC 3339 time of a request (UTC when it gives no offset) in the stored form;
    `InvalidInput` naming `field` when it is not one."""
    if text is None:
        return None
    try:
        return given_timestamp(text, field)
    except ValueError as error:
        raise InvalidInput(str(error)) from None


def imported_memories(document: ImportMemories, user_id: str = "") -> list[ImportedMemory]:
    """The document's memories, for the space of `user_id` ("" the app's shared one): a
    memory exported from another space is refused rather than moved (a user's memories in the
    shared space would be given to every user)."""
    for index, m in enumerate(document.memories):
        if m.user_id is not None and m.user_id != user_id:
            into = f"user {user_id!r}'s space" if user_id else "the app's shared space"
            raise InvalidInput(
                f"memories[{index}] was exported from "
                + (f"user {m.user_id!r}'s space" if m.user_id else "the app's shared space")
                + f", not {into}: import it there (userId), or leave out its userId"
            )
    return [
        ImportedMemory(
            m.content, m.created_at, m.updated_at, m.source_conversation_id, m.metadata,
            m.pinned, m.expires_at, sensitivity_of(m.private, m.sensitivity, f"memories[{index}]"),
            m.kind,
        )
        for index, m in enumerate(document.memories)
    ]


def sensitivity_of(
    private: bool | None, sensitivity: Sensitivity | None, where: str
) -> Sensitivity:
    """The level a memory is given: `sensitivity`, or from `private` alone (a document or a
    change from before the levels); `InvalidInput` when the two disagree."""
    if sensitivity is None:
        return "private" if private else "public"
    if private is not None and private != (sensitivity != "public"):
        raise InvalidInput(
            f"{where}.private: {str(private).lower()} disagrees with sensitivity {sensitivity!r}"
            " (every level but public is private)"
        )
    return sensitivity


