"""mnemoloop for agents in MCP clients: an app's memories as tools and as a resource.

The same server runs over stdio (`mnemoloop mcp`, its caller fixed by the token it was started
with) and over streamable HTTP at /mcp in the service (each request's bearer token says who
calls). An app key scopes every tool to its own app; the admin token sees every app and also
gets `list_apps`. Errors a caller can fix (an unknown memory, another app, bad arguments)
come back as tool errors, never as a broken session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import msgspec
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import Tool as McpTool
from pydantic import BaseModel, Field

from admin_api.auth import TokenOwner, token_owner
from admin_api.readers import kinds_allowed, readable, readable_events, require_readable
from admin_api.replies import (
    job_out,
    memory_event_out,
    memory_out,
    proposal_out,
    query_cost,
    query_out,
)
from admin_api.schemas import QueryFilters, QueryMemories, memory_query
from loop.operations import MAX_USER_ID, AdminToken, AppRegistry, validate_user_id
from loop.service import Stores
from memory_agent import (
    MAX_BUDGET_TOKENS,
    MAX_IMPORTANCE,
    MAX_MEMORY_ID,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    MIN_BUDGET_TOKENS,
    MIN_IMPORTANCE,
    PROFILE_APP,
    Memory,
    MemoryActor,
    MemoryChange,
    MemoryNotFound,
    MnemoloopError,
    ProposalStatus,
    format_memories_for_context,
)

ADMIN_TOOLS = frozenset({"list_apps"})
MAX_TURNS = 200
# Linked memories `recall` gives after the one asked for by id.
RELATED_RECALLED = 2
MAX_TURN_CHARS = 32_000
# A request to /mcp may carry a whole transcript; nothing larger is read.
MAX_REQUEST_BYTES = 1024 * 1024
# A user of the app, as the app names them: their memory space instead of the app's shared one.
UserIdArgument = Annotated[str | None, Field(min_length=1, max_length=MAX_USER_ID)]
MemoryIdArgument = Annotated[int, Field(ge=1, le=MAX_MEMORY_ID)]
# Why a memory was tagged or pinned, for its history.
ReasonArgument = Annotated[str, Field(min_length=1, max_length=300)]


class Caller(TokenOwner):
    """Who calls a tool: an app (by its key) or the admin (`app_id` None)."""

    @property
    def is_admin(self) -> bool:
        return self.app_id is None

    def app(self, app_id: str | None) -> str:
        """The app a tool works on: the key's own, or the one an admin names."""
        if self.app_id is None:
            if not app_id:
                raise ToolError("app_id is required with the admin token")
            return app_id
        if app_id and app_id != self.app_id:
            raise ToolError(f"this key belongs to app {self.app_id!r}, not {app_id!r}")
        return self.app_id


async def caller_for_token(
    registry: AppRegistry, admin_token: AdminToken, token: str
) -> Caller | None:
    """The caller a bearer token stands for; None when it is nobody's."""
    owner = await token_owner(registry, admin_token, token)
    return Caller(owner.app_id) if owner else None


class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: Annotated[str, Field(min_length=1, max_length=MAX_TURN_CHARS)]


FindCaller = Callable[[Context[Any, Any, Any]], Awaitable[Caller]]


class _ScopedServer(FastMCP[Any]):
    """FastMCP listing the admin's tools to the admin only."""

    def __init__(self, find_caller: FindCaller, **settings: Any) -> None:
        super().__init__(**settings)
        self.find_caller = find_caller

    async def list_tools(self) -> list[McpTool]:
        tools = await super().list_tools()
        if (await self.find_caller(self.get_context())).is_admin:
            return tools
        return [tool for tool in tools if tool.name not in ADMIN_TOOLS]


def build_mcp_server(stores: Stores, find_caller: FindCaller) -> FastMCP[Any]:
    server = _ScopedServer(
        find_caller,
        name="mnemoloop",
        instructions=(
            "Long-term memory per app. `recall` an app's memories (optionally those matching a "
            "query) before answering, or `query` the ones that answer a question, scored and "
            "within a token budget; `remember` a finished conversation so that its memory "
            "is written; `forget` a memory that is wrong; `tag_memory_relevant` or "
            "`tag_memory_irrelevant` one that proved useful or not; `pin_memory` one that "
            "must stay."
        ),
        # Every request needs a bearer token; the token, not the Host header, is the defence.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        stateless_http=True,
        json_response=True,
        log_level="WARNING",
    )
    agent, registry, conversations = stores.agent, stores.registry, stores.conversations

    @server.tool()
    async def recall(
        ctx: Context[Any, Any, Any],
        app_id: str | None = None,
        query: str | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        user_id: UserIdArgument = None,
        memory_id: MemoryIdArgument | None = None,
    ) -> list[dict[str, Any]]:
        """An app's memories, newest first; with `query`, those matching it, best first. Of
        the user's space with `user_id`, else of the app's shared space; with `user_id` in an
        app that shares its users' profiles, the person's profile memories after them (marked
        `"profile": true`). With `memory_id`, that memory whole (one a conversation's memory
        block shows as a digest or a stub), when it is live in one of those spaces, then up to two
        memories of its space it is linked to (marked `"related": true`). Private
        memories are never given to a model, here either; nor a kind the app's key may not
        read."""
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            space = _space(user_id)
            spaces = [(app, space)]
            if space and record.shares_profile:
                spaces.append((PROFILE_APP, space))
            if memory_id is not None:
                # The user's block also shows the app's shared memories.
                shared = [(app, "")] if space else []
                whole = await _one_whole([*spaces, *shared], memory_id)
                if not readable(record, caller.app_id, [whole]):
                    raise MemoryNotFound(app, memory_id)
                # Then up to two memories of its space it is linked to (`"related": true`).
                linked = [m for m, _, _ in await agent.links_of(whole.app_id, whole.id)
                          if m.user_id == whole.user_id and not m.private]
                related = readable(record, caller.app_id, linked)[:RELATED_RECALLED]
                return [_recalled(whole), *({**_recalled(m), "related": True} for m in related)]
            found: list[dict[str, Any]] = []
            for holder, user in spaces:
                if query is not None:
                    memories = await agent.search_memories(
                        holder, query, limit=limit, user_id=user, injectable=True
                    )
                elif holder == PROFILE_APP:
                    memories = (await agent.get_profile(user))[:limit]
                else:
                    memories = await agent.get_memories(holder, limit, user_id=user)
                found += [_recalled(m) for m in readable(record, caller.app_id, memories)]
        return found

    def _recalled(memory: Memory) -> dict[str, Any]:
        return {**_builtins(memory_out(memory, agent.now())),
                **({"profile": True} if memory.app_id == PROFILE_APP else {})}

    async def _one_whole(spaces: list[tuple[str, str]], memory_id: int) -> Memory:
        """The memory, live and injectable, of one of `spaces`; else not found."""
        for holder, user in spaces:
            memory = await agent.get_memory(holder, memory_id)
            if (memory is not None and memory.user_id == user and not memory.private
                    and memory.state(agent.now()) == "live"):
                return memory
        raise MemoryNotFound(spaces[0][0], memory_id)

    @server.tool()
    async def query(
        ctx: Context[Any, Any, Any],
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)],
        app_id: str | None = None,
        user_id: UserIdArgument = None,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K)] = 5,
        threshold: Annotated[float, Field(ge=0, le=1)] = 0.0,
        budget_tokens: Annotated[
            int, Field(ge=MIN_BUDGET_TOKENS, le=MAX_BUDGET_TOKENS)
        ] = 2000,
        full: bool = False,
        pinned: bool | None = None,
        importance_min: Annotated[int, Field(ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)] = 0,
        importance_max: Annotated[int, Field(ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)] = 10,
        updated_after: str | None = None,
        updated_before: str | None = None,
        categories: Annotated[list[str], Field(max_length=32)] | None = None,
        agent_name: Annotated[str, Field(min_length=1, max_length=64)] | None = None,
    ) -> dict[str, Any]:
        """The memories that answer `query`, each scored 0-1 (the share of its words a memory
        holds, rarer words weighing more), at least `threshold`, the best first, at most
        `top_k` and within `budget_tokens`. With `user_id`: the person's profile (when the app
        shares it), their own memories and the app's shared ones; else the app's shared ones.
        Each result is the memory's text as a model is given it; `full` adds the memory and
        its metadata. `updated_after`/`updated_before`: RFC 3339 times. `categories`: the
        kinds of memory to return; `agent_name`: the agent reading, which reads the kinds its
        allow-list names. A kind the app's key or the agent may not read is refused. Private
        memories are never returned."""
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            asked = memory_query(QueryMemories(
                query, QueryFilters(
                    _space(user_id) or None, pinned, importance_min, importance_max,
                    updated_after, updated_before,
                ),
                categories, top_k, threshold, budget_tokens, "full" if full else "bullets",
                agent_name,
            ), agent.kinds, kinds_allowed(record, caller.app_id))
            now = agent.now()
            found = await agent.query_memories(
                record.memory_spaces(user_id or ""), asked, query_cost(asked.shape, now)
            )
            return _builtins(query_out(found, asked.shape, now))

    @server.tool()
    async def remember(
        ctx: Context[Any, Any, Any],
        transcript: Annotated[list[Turn], Field(min_length=1, max_length=MAX_TURNS)],
        app_id: str | None = None,
        user_id: UserIdArgument = None,
    ) -> dict[str, Any]:
        """Hand a finished conversation (its turns, oldest first) to the memory sub-agent,
        which writes the app's memory of it in the background (in the user's space with
        `user_id`); answers with the job."""
        app = (await find_caller(ctx)).app(app_id)
        async with _tool_errors():
            job = await conversations.record_finished(
                app, [(turn.role, turn.content) for turn in transcript], reason="mcp",
                user_id=_space(user_id),
            )
        return _builtins(job_out(job))

    @server.tool()
    async def forget(
        ctx: Context[Any, Any, Any],
        memory_id: Annotated[int, Field(ge=1, le=MAX_MEMORY_ID)],
        app_id: str | None = None,
    ) -> dict[str, Any]:
        """Delete one of the app's memories; an operator can restore it until the grace period
        ends (the history keeps that it was deleted)."""
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            await require_readable(agent, record, caller.app_id, memory_id)
            await agent.delete_memory(app, memory_id, actor=_actor(caller))
        return {"deleted": memory_id}

    @server.tool()
    async def tag_memory_relevant(
        ctx: Context[Any, Any, Any],
        memory_id: MemoryIdArgument,
        reason: ReasonArgument,
        app_id: str | None = None,
    ) -> dict[str, Any]:
        """Say that a memory proved useful: its importance goes up by 2 (of 10), which keeps
        it longer when the app's memories must be compacted, and conversations show it whole
        again (its decay starts over). The reason goes to the history."""
        return await _tag(ctx, app_id, memory_id, True, reason)

    @server.tool()
    async def tag_memory_irrelevant(
        ctx: Context[Any, Any, Any],
        memory_id: MemoryIdArgument,
        reason: ReasonArgument,
        app_id: str | None = None,
    ) -> dict[str, Any]:
        """Say that a memory did not help: its importance goes down by 2 (of 10), so it is
        among the first given up when the app's memories must be compacted, and every
        conversation shows it as a stub only."""
        return await _tag(ctx, app_id, memory_id, False, reason)

    async def _tag(
        ctx: Context[Any, Any, Any], app_id: str | None, memory_id: int, relevant: bool,
        reason: str,
    ) -> dict[str, Any]:
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            await require_readable(agent, record, caller.app_id, memory_id)
            await _shown_to_models(app, memory_id)
            memory = await agent.tag_memory(
                app, memory_id, relevant=relevant, reason=reason, actor=_actor(caller)
            )
        return _builtins(memory_out(memory, agent.now()))

    @server.tool()
    async def pin_memory(
        ctx: Context[Any, Any, Any],
        memory_id: MemoryIdArgument,
        pinned: bool = True,
        reason: ReasonArgument | None = None,
        app_id: str | None = None,
    ) -> dict[str, Any]:
        """Pin a memory (`pinned=false` unpins it): compaction never deletes, merges or
        edits a pinned one. A space may pin at most its memory cap less one."""
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            await require_readable(agent, record, caller.app_id, memory_id)
            await _shown_to_models(app, memory_id)
            memory = await agent.steer_memory(
                app, memory_id, MemoryChange(pinned=pinned, reason=reason),
                actor=_actor(caller),
            )
        return _builtins(memory_out(memory, agent.now()))

    async def _shown_to_models(app: str, memory_id: int) -> None:
        """A tool answers with the memory: never a secret one (nor one of unknown
        sensitivity, which no read finds)."""
        memory = await agent.get_memory(app, memory_id)
        if memory is None:
            raise MemoryNotFound(app, memory_id)
        if not memory.shown_to_models:
            raise ToolError(f"memory {memory_id} is secret: no tool gives it to a model")

    @server.tool()
    async def memory_history(
        ctx: Context[Any, Any, Any],
        app_id: str | None = None,
        memory_id: Annotated[int | None, Field(ge=1, le=MAX_MEMORY_ID)] = None,
        since: Annotated[int, Field(ge=0, le=MAX_MEMORY_ID)] = 0,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        user_id: UserIdArgument = None,
    ) -> list[dict[str, Any]]:
        """Every change to the app's memories (or to one, or to one user's space), oldest
        first, after event `since`."""
        caller = await find_caller(ctx)
        app = caller.app(app_id)
        async with _tool_errors():
            record = await registry.require(app)
            if memory_id is not None:
                await require_readable(agent, record, caller.app_id, memory_id)
            events = await readable_events(agent, record, caller.app_id, await agent.history(
                app, memory_id=memory_id, after_id=since, limit=limit,
                user_id=None if user_id is None else _space(user_id), for_a_model=True,
            ))
        return [_builtins(memory_event_out(event)) for event in events]

    @server.tool()
    async def profile_proposals(
        ctx: Context[Any, Any, Any],
        user_id: Annotated[str, Field(min_length=1, max_length=MAX_USER_ID)],
        status: ProposalStatus | None = "pending",
    ) -> list[dict[str, Any]]:
        """The changes proposed to a sensitive fact of the person's profile (their name,
        city, health...), newest first; by default those waiting for their answer. Show them
        to the person, and relay their answer with `answer_profile_proposal`. An app's key
        reaches them only when the app shares its users' profiles and serves this person."""
        await _relaying(await find_caller(ctx), user_id)
        async with _tool_errors():
            found = await agent.proposals.proposals(_space(user_id), status)
        return [_builtins(proposal_out(p)) for p in found]

    @server.tool()
    async def answer_profile_proposal(
        ctx: Context[Any, Any, Any],
        user_id: Annotated[str, Field(min_length=1, max_length=MAX_USER_ID)],
        proposal_id: MemoryIdArgument,
        decision: Literal["accept", "decline"],
    ) -> dict[str, Any]:
        """The person's own answer to a pending proposal: `accept` writes it into their
        profile now, `decline` writes nothing. Relay only what the person said."""
        caller = await find_caller(ctx)
        await _relaying(caller, user_id)
        async with _tool_errors():
            answered = await agent.proposals.answer(
                _space(user_id), proposal_id, accept=decision == "accept",
                through="mcp" if caller.is_admin else f"app:{caller.app_id} (mcp)",
            )
        return _builtins(proposal_out(answered))

    async def _relaying(caller: Caller, user_id: str) -> None:
        """Only the admin, or an app that shares its users' profiles and serves this
        person, sees their proposals."""
        if caller.app_id is not None:
            async with _tool_errors():
                await registry.relays_for(caller.app_id, _space(user_id))

    @server.tool()
    async def list_apps(ctx: Context[Any, Any, Any]) -> list[dict[str, Any]]:
        """Every app, installed or not, with its memory count (admin token only)."""
        if not (await find_caller(ctx)).is_admin:
            raise ToolError("list_apps needs the admin token")
        async with _tool_errors():
            apps = await registry.list()
        return [
            {"appId": a.app_id, "name": a.name, "installed": a.installed,
             "memoryCount": a.memory_count}
            for a in apps
        ]

    @server.resource(
        "mnemoloop://apps/{app_id}/memories",
        name="memory block",
        description="The app's memories as they are given to its conversations",
        mime_type="text/plain",
    )
    async def memory_block(app_id: str) -> str:
        # The request's context, as the server holds it (a `ctx` argument to a resource is
        # a copy without the request).
        caller = await find_caller(server.get_context())
        app = caller.app(app_id)
        async with _tool_errors():
            app_record = await registry.require(app)
            memories = readable(app_record, caller.app_id, await agent.get_memories(app))
        return format_memories_for_context(app_record.name, memories)

    return server


def _actor(caller: Caller) -> MemoryActor:
    """Who the history names: the app, when its own key called."""
    return "admin" if caller.is_admin else "app"


def _space(user_id: str | None) -> str:
    """The space a tool reads or writes: the user's (checked), else the app's shared one."""
    if user_id is None:
        return ""
    try:
        validate_user_id(user_id)
    except MnemoloopError as error:
        raise ToolError(str(error)) from error
    return user_id


@asynccontextmanager
async def _tool_errors() -> AsyncIterator[None]:
    """Our errors become tool errors with their message (an unknown app, a bad query, a
    database out of reach); anything else is the SDK's to report."""
    try:
        yield
    except MnemoloopError as error:
        raise ToolError(str(error)) from error


def _builtins(struct: msgspec.Struct) -> dict[str, Any]:
    built: dict[str, Any] = msgspec.to_builtins(struct)
    return built
