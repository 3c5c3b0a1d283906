"""`create_app(services)`: the HTTP face of a running mnemoloop."""

from __future__ import annotations

import json
from typing import Any

from litestar import Litestar, Router, asgi
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import HTTPResponseStartEvent, Receive, Scope, Send
from mcp.server.fastmcp.exceptions import ToolError

from admin_api.auth import bearer_token
from admin_api.console import console_routes, template_config
from admin_api.controllers.apps import AppsController
from admin_api.controllers.consolidations import ConsolidationsController
from admin_api.controllers.conversations import ConversationsController
from admin_api.controllers.history import HistoryController
from admin_api.controllers.kinds import list_kinds
from admin_api.controllers.memories import MemoriesController
from admin_api.controllers.operations import OperationsController, health, home
from admin_api.controllers.proposals import ProposalsController
from admin_api.controllers.steering import SteeringController
from admin_api.controllers.users import ProfilesController, SpacesController
from admin_api.dependencies import dependencies
from admin_api.dialects import ollama_router, openai_router
from admin_api.errors import EXCEPTION_HANDLERS, PROBLEM_JSON, problem_body
from admin_api.mcp_server import (
    MAX_REQUEST_BYTES,
    Caller,
    build_mcp_server,
    caller_for_token,
)
from admin_api.reference_page import ReferencePagePlugin
from admin_api.throttle import Refused, WrongTokens
from loop.operations import AdminToken, ConsoleSessions
from loop.service import Services

MAX_BODY_BYTES = 64 * 1024
# Where the /mcp door leaves the caller it found, in the request's scope (a copy of its own).
_CALLER = "mnemoloop.caller"


def create_app(services: Services, admin_token: AdminToken | str | None = None) -> Litestar:
    """The app; the admin token is the service's own unless one is given (a test's)."""
    if admin_token is None:
        admin_token = services.admin_token
    elif isinstance(admin_token, str):
        admin_token = AdminToken.fixed(admin_token)

    # Each controller or handler in it checks the bearer token (admin_api/auth.py).
    api = Router(
        path="/",
        route_handlers=[
            AppsController,
            ConsolidationsController,
            ConversationsController,
            HistoryController,
            list_kinds,
            MemoriesController,
            OperationsController,
            SteeringController,
            SpacesController,
            ProfilesController,
            ProposalsController,
        ],
        security=[{"bearer": []}],
    )
    mcp_endpoint, mcp_sessions = _mcp_mount(services, admin_token)
    app = Litestar(
        route_handlers=[
            home, health, api, mcp_endpoint, openai_router(), ollama_router(), *console_routes()
        ],
        template_config=template_config(),
        # The MCP sessions' task group lives as long as the app.
        lifespan=[lambda _: mcp_sessions.run()],
        dependencies=dependencies(services),
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=OpenAPIConfig(
            title="mnemoloop",
            version="0.1.0",
            description="Per-app memories that maintain themselves; admin and conversation API.",
            path="/schema",
            # The page at /schema works offline; the JSON document stays at /schema/openapi.json.
            render_plugins=[ReferencePagePlugin(), JsonRenderPlugin()],
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer"),
                }
            ),
        ),
        debug=False,
        # The service configures logging once, for every part of it.
        logging_config=None,
    )
    app.state.registry = services.stores.registry
    app.state.models = services.models
    app.state.admin_token = admin_token
    app.state.wrong_tokens = WrongTokens()
    app.state.console_sessions = ConsoleSessions(services.database, services.clock, admin_token)
    return app


def _mcp_mount(services: Services, admin_token: AdminToken) -> tuple[Any, Any]:
    """The MCP server at /mcp (streamable HTTP), open to a bearer token only, and its
    session manager (to run for the app's lifetime)."""

    async def caller_of_request(ctx: Any) -> Caller:
        # The door below found the request's caller; the SDK hands tools the same scope.
        request = ctx.request_context.request
        caller: Caller | None = request.scope.get(_CALLER) if request else None
        if caller is None:
            raise ToolError("no caller for this request")
        return caller

    server = build_mcp_server(services.stores, caller_of_request)
    server.streamable_http_app()  # creates the session manager
    sessions = server.session_manager

    @asgi("/mcp", is_mount=True, copy_scope=True, include_in_schema=False)
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        token = bearer_token(headers.get("authorization", ""))
        caller = None
        if token:
            throttle: WrongTokens = scope["app"].state.wrong_tokens
            client = scope.get("client")
            try:
                async with throttle.checking(client[0] if client else "") as check:
                    caller = await caller_for_token(services.stores.registry, admin_token, token)
                    if caller is None:
                        check.wrong()
            except Refused as refused:
                await _problem(
                    send, 429, str(refused), [(b"retry-after", str(refused.seconds).encode())]
                )
                return
        if caller is None:
            await _problem(
                send, 401, "send Authorization: Bearer <token> (an app key or the admin token)",
                [(b"www-authenticate", b'Bearer realm="mnemoloop"')],
            )
            return
        if scope.get("method") == "POST":
            body = await _body_within(receive, MAX_REQUEST_BYTES)
            if body is None:
                await _problem(send, 413, f"the body is larger than {MAX_REQUEST_BYTES} bytes")
                return
            receive = _replaying(body, receive)
        scope[_CALLER] = caller  # type: ignore[literal-required]
        await sessions.handle_request(scope, receive, send)  # type: ignore[arg-type]

    return mcp_endpoint, sessions


async def _body_within(receive: Receive, limit: int) -> bytes | None:
    """The request's whole body, or None once it passes `limit` bytes (the SDK itself reads
    a body of any size)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body  # the client left; the handler will see that too
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return body


def _replaying(body: bytes, receive: Receive) -> Receive:
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


async def _problem(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(problem_body(status, detail)).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})  # type: ignore[arg-type]
