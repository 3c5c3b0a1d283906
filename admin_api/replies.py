"""Response bodies, as the API answers: JSON field names are camelCase, as in the seed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from loop.jobs import ConsolidationPass, MemoryJob
from memory_agent import (
    PROFILE_APP,
    Memory,
    MemoryEvent,
    ProfileProposal,
    QueryAnswer,
    estimate_tokens,
    neutralise,
)


class Reply(msgspec.Struct, rename="camel"):
    pass


class InstalledAppOut(Reply):
    app_id: str
    name: str
    installed: bool
    api_key: str


class AppOut(Reply):
    app_id: str
    name: str
    installed: bool
    memory_count: int
    users_write_shared: bool
    memory_ttl_seconds: int | None
    shares_profile: bool
    # The kinds of memory its key and its conversations may read; null: every kind.
    allowed_kinds: list[str] | None = None


class KindOut(Reply):
    name: str
    # What a memory of this kind holds, in words (as the model writer is shown it).
    holds: str


class KindsOut(Reply):
    kinds: list[KindOut]
    default: str
    # Each agent a read may name, with the kinds it may read.
    allowlists: dict[str, list[str]]


class SpaceOut(Reply):
    """A memory space of an app: its shared one (`userId` "") or a user's."""

    user_id: str
    memory_count: int


class SpacesOut(Reply):
    spaces: list[SpaceOut]


class ErasedAppOut(Reply):
    app_id: str
    memories: int
    conversations: int
    jobs_cancelled: int


class ErasedUserOut(Reply):
    user_id: str
    apps: list[ErasedAppOut]
    # Memories erased from the person's profile (shared by the apps that allow it).
    profile_memories: int = 0


class ProfileErasedOut(Reply):
    user_id: str
    profile_memories: int


class AppsOut(Reply):
    apps: list[AppOut]


class UninstalledOut(Reply):
    success: bool
    purged_memories: int


class ConversationCreatedOut(Reply):
    conversation_id: str


class AcceptedOut(Reply):
    accepted: bool


class ToolCallOut(Reply):
    id: str
    name: str
    arguments: dict[str, Any]


class MessageOut(Reply):
    id: int
    role: str
    content: str
    created_at: str
    # A reply's calls of a dialect client's tools; on a `tool` message, the call whose
    # result it is and its tool.
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


class PostedOut(Reply):
    """A posted user message, and where its reply stands."""

    message_id: int
    # open, answering, failed (see `error`) or ended.
    state: str
    error: str | None
    # The assistant's reply, once it is stored (`?wait=` returns it when it comes in time).
    reply: MessageOut | None
    conversation_ended: bool


class ConversationOut(Reply):
    conversation_id: str
    app_id: str
    status: str
    end_reason: str | None
    messages: list[MessageOut]
    # open, answering, failed (see `error`; POST .../retry tries again) or ended.
    state: str
    error: str | None


class MemoryOut(Reply):
    id: int
    content: str
    created_at: str
    updated_at: str
    source_conversation_id: str | None
    metadata: dict[str, Any]
    # The space: "" for the app's shared one, else the user's.
    user_id: str
    pinned: bool
    private: bool
    # 0-10; 5 when none was set.
    importance: int
    expires_at: str | None
    deleted_at: str | None
    # live, expired or deleted (expired and deleted ones are restorable until erased).
    state: str
    # How many turns were given it, how many replies used its values, and when it was last
    # given to a turn (`memory_agent.recall.usage`).
    access_count: int = 0
    citation_count: int = 0
    last_accessed: str | None = None
    # public, private, secret (private, and never shown to a model); `private` says whether
    # it is injected.
    sensitivity: str = "public"
    # What it holds, one of the kinds file's (`memory_agent/core/kinds.toml`).
    kind: str = "fact"


class QueryHitOut(Reply, omit_defaults=True):
    id: int
    # The memory's text as a model is given it in the memory block.
    text: str
    # 0-1: the share of the query's words the memory holds, the rarer weighing more.
    score: float
    # Where it is from: "profile" (the person's, across apps), "user" or "shared".
    space: str
    # Its kind (the kinds file's); a bullet's text opens with it, "[event] ...".
    kind: str
    # With `"return": "full"`: the memory and its metadata.
    memory: MemoryOut | None = None


class QueryOut(Reply):
    results: list[QueryHitOut]
    # The estimated tokens of the results, within the query's `budgetTokens`.
    tokens: int
    # Memories that met the threshold but not `topK` or the budget.
    omitted: int


class MemoriesOut(Reply):
    memories: list[MemoryOut]
    # The listing's: the ids of the space's live memories of unknown sensitivity, which no
    # read returns (a PATCH giving a level, or a DELETE, by id).
    held_back: list[int] = msgspec.field(default_factory=list)


class ExportOut(Reply):
    """An app's memories, newest first, in the form `POST .../memories/import` takes back."""

    app_id: str
    exported_at: str
    memories: list[MemoryOut]


class ImportedOut(Reply):
    imported: int
    memory_count: int


class PurgedOut(Reply):
    success: bool
    deleted_count: int


class SuccessOut(Reply):
    success: bool


class CompactionStepOut(Reply):
    action: str
    target_memory_id: int
    folded_memory_id: int | None
    decided_by: str
    reason: str | None
    fallback_reason: str | None
    update: bool


class JobOut(Reply):
    id: int
    app_id: str
    conversation_id: str
    status: str
    attempts: int
    last_error: str | None
    created_at: str
    updated_at: str
    memory_id: int | None
    note: str | None
    steps: list[CompactionStepOut]


class JobsOut(Reply):
    jobs: list[JobOut]


class LinkOut(Reply):
    """A memory linked to another: the two share much of their text (`strength`, 0-1)."""

    memory_id: int
    type: str
    strength: float
    content: str
    user_id: str


class LinksOut(Reply):
    memory_id: int
    links: list[LinkOut]


class ConsolidationOut(Reply):
    """A consolidation pass: its scope (null: every app, every person), how it was asked
    for, where it is, and what it did."""

    id: int
    app_id: str | None
    user_id: str | None
    origin: str
    status: str
    requested_at: str
    started_at: str | None
    finished_at: str | None
    spaces: int
    pairs_asked: int
    # Pairs the writer could not judge (the model failed; `error` says why): asked again by
    # the next pass.
    pairs_unjudged: int
    changes: int
    model_calls: int
    error: str | None


class ConsolidationsOut(Reply):
    consolidations: list[ConsolidationOut]


class ProposalOut(Reply):
    """A change proposed to a sensitive fact of a person's profile, waiting for their answer
    (or answered): never injected while it waits; it lapses after 7 days."""

    id: int
    user_id: str
    # The app whose conversation (or memories, for a consolidation) proposed it.
    app_id: str
    origin: str
    # The sensitive fields it speaks of ("unread language": one the service cannot read).
    fields: list[str]
    # The profile's text as proposed (null: a fact removed), and the texts it replaces.
    content: str | None
    before: str | None
    status: str
    proposed_at: str
    lapses_at: str
    decided_at: str | None
    # Who answered: api, client, cli, console, mcp, app:<id>, or lapsed.
    decided_through: str | None
    # The profile memory the accepted change wrote or went into.
    memory_id: int | None


class ProposalsOut(Reply):
    proposals: list[ProposalOut]


class MemoryEventOut(Reply):
    id: int
    memory_id: int
    event: str
    actor: str
    reason: str | None
    content_before: str | None
    content_after: str | None
    conversation_id: str | None
    job_id: int | None
    model: str | None
    erased: bool
    created_at: str


class HistoryOut(Reply):
    events: list[MemoryEventOut]
    # Pass as `since` for the next page; null when this page is the last.
    next_cursor: int | None


class EnergyOut(Reply):
    capacity: float
    level: float
    memory_spent: int
    conversation_spent: int


class PartHealthOut(Reply):
    ready: bool
    # Why it is not ready (null when it is).
    reason: str | None


class HealthOut(Reply):
    # ok, or degraded when a part is not ready (then the answer is 503).
    status: str
    model: PartHealthOut
    database: PartHealthOut
    memory_worker: PartHealthOut
    # What an operator should know though every part is ready ("40% of the memory model's
    # sentences were not grounded ..."); empty when nothing.
    warnings: list[str] = msgspec.field(default_factory=list)
    # How the models were set up: each one's window and where it came from, and which
    # writer writes the memories, and why.
    models: ModelSetupOut | None = None


class ModelSetupOut(Reply):
    # "4096 tokens (Ollama /api/show: llama.context_length); it is asked for 4096 (num_ctx)"
    chat_window: str
    memory_window: str
    # model or extractive
    memory_writer: str
    memory_writer_why: str


def memory_out(m: Memory, now: str) -> MemoryOut:
    return MemoryOut(
        m.id, m.content, m.created_at, m.updated_at, m.source_conversation_id, m.metadata,
        m.user_id, m.pinned, m.private, m.importance, m.expires_at, m.deleted_at, m.state(now),
        m.access_count, m.citation_count, m.last_accessed, m.sensitivity, m.kind,
    )


def query_hit_out(memory: Memory, score: float, shape: str, now: str) -> QueryHitOut:
    space = "profile" if memory.app_id == PROFILE_APP else "user" if memory.user_id else "shared"
    full = memory_out(memory, now) if shape == "full" else None
    return QueryHitOut(memory.id, _hit_text(memory, shape), score, space, memory.kind, full)


def _hit_text(memory: Memory, shape: str) -> str:
    """A hit's text: the seed's bullet, `[kind] text`, or with the whole memory its text."""
    text = neutralise(memory.content)
    return text if shape == "full" else f"[{memory.kind}] {text}"


def query_out(found: QueryAnswer, shape: str, now: str) -> QueryOut:
    return QueryOut(
        [query_hit_out(hit.memory, hit.score, shape, now) for hit in found.hits],
        found.tokens, found.omitted,
    )


def query_cost(shape: str, now: str) -> Callable[[Memory], int]:
    """A memory's tokens as a query gives it: its bullet's text, or its whole JSON."""
    def cost(memory: Memory) -> int:
        if shape == "full":
            return estimate_tokens(msgspec.json.encode(query_hit_out(memory, 1.0, shape, now))
                                   .decode())
        return estimate_tokens(f"- {_hit_text(memory, shape)}\n")
    return cost


def export_out(app_id: str, exported_at: str, memories: list[Memory]) -> ExportOut:
    return ExportOut(app_id, exported_at, [memory_out(m, exported_at) for m in memories])


def memory_event_out(e: MemoryEvent) -> MemoryEventOut:
    return MemoryEventOut(
        e.id, e.memory_id, e.event, e.actor, e.reason, e.content_before, e.content_after,
        e.conversation_id, e.job_id, e.model, e.erased, e.created_at,
    )


def job_out(j: MemoryJob) -> JobOut:
    return JobOut(
        j.id, j.app_id, j.conversation_id, j.status, j.attempts, j.last_error, j.created_at,
        j.updated_at, j.memory_id, j.note,
        [
            CompactionStepOut(
                s["action"], s["targetMemoryId"], s.get("foldedMemoryId"), s["decidedBy"],
                s.get("reason"), s.get("fallbackReason"), bool(s.get("update")),
            )
            for s in j.steps
        ],
    )


def consolidation_out(p: ConsolidationPass) -> ConsolidationOut:
    return ConsolidationOut(
        p.id, p.app_id, p.user_id, p.origin, p.status, p.requested_at, p.started_at,
        p.finished_at, p.spaces, p.pairs_asked, p.pairs_unjudged, p.changes, p.model_calls,
        p.error,
    )


def proposal_out(p: ProfileProposal) -> ProposalOut:
    return ProposalOut(
        p.id, p.user_id, p.app_id, p.origin, list(p.fields), p.content, p.before, p.status,
        p.proposed_at, p.lapses_at, p.decided_at, p.decided_through, p.memory_id,
    )


class Problem(Reply):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str


_PROBLEM_DESCRIPTIONS = {
    400: "The body or a parameter does not validate (`detail` names the field), or a search"
    " query holds no words or is too long.",
    401: "No bearer token, or not a valid one.",
    403: "The token does not open this route (an app key used outside its own app).",
    404: "No such app, conversation or memory (or not this key's).",
    409: "The app is uninstalled (or, to install, already installed), the conversation has"
    " ended, or an import would leave the app above its memory limit.",
    413: "The body is larger than 64 KiB.",
    429: "This address sent too many wrong tokens; try again after `Retry-After` seconds.",
}


def problems(*codes: int) -> dict[int, Any]:
    """OpenAPI descriptions of the errors a route can answer, as problem+json. A route that
    checks a token (401) can also refuse an address that guesses (429)."""
    from litestar.openapi.datastructures import ResponseSpec

    if 401 in codes:
        codes = (*codes, 429)

    return {
        code: ResponseSpec(
            data_container=Problem,
            description=_PROBLEM_DESCRIPTIONS[code],
            media_type="application/problem+json",
            generate_examples=False,
        )
        for code in codes
    }
