"""`create_app(services, admin_token)`: the HTTP face of a running mnemoloop."""

from __future__ import annotations

import json
from typing import Any

from litestar import Litestar, Router, asgi
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import HTTPResponseStartEvent, Receive, Scope, Send
from mcp.server.fastmcp.exceptions import ToolError

from admin_api.controllers.apps import AppsController
from admin_api.controllers.conversations import ConversationsController
from admin_api.controllers.history import HistoryController
from admin_api.controllers.memories import MemoriesController
from admin_api.controllers.operations import OperationsController, health
from admin_api.errors import EXCEPTION_HANDLERS, PROBLEM_JSON
from admin_api.mcp_server import Caller, bearer_token, build_mcp_server, caller_for_token
from loop.service import Services

MAX_BODY_BYTES = 64 * 1024


def create_app(services: Services, admin_token: str) -> Litestar:
    def provide_services() -> Services:
        return services

    guarded = Router(
        path="/",
        route_handlers=[
            AppsController,
            ConversationsController,
            HistoryController,
            MemoriesController,
            OperationsController,
        ],
        security=[{"bearer": []}],
    )
    mcp_endpoint, mcp_sessions = _mcp_mount(services, admin_token)
    app = Litestar(
        route_handlers=[health, guarded, mcp_endpoint],
        # The MCP sessions' task group lives as long as the app.
        lifespan=[lambda _: mcp_sessions.run()],
        dependencies={"services": Provide(provide_services, use_cache=True, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=OpenAPIConfig(
            title="mnemoloop",
            version="0.1.0",
            description="Per-app memories that maintain themselves; admin and conversation API.",
            path="/schema",
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
    app.state.services = services
    app.state.admin_token = admin_token
    return app


def _mcp_mount(services: Services, admin_token: str) -> tuple[Any, Any]:
    """The MCP server at /mcp (streamable HTTP), open to a bearer token only, and its
    session manager (to run for the app's lifetime)."""

    async def caller_of_request(ctx: Any) -> Caller:
        request = ctx.request_context.request
        token = bearer_token(request.headers.get("authorization", "")) if request else ""
        caller = await caller_for_token(services, admin_token, token)
        if caller is None:  # checked at the door already; the key may be gone since
            raise ToolError("the token is not valid")
        return caller

    server = build_mcp_server(services, caller_of_request)
    server.streamable_http_app()  # creates the session manager
    sessions = server.session_manager

    @asgi("/mcp", is_mount=True, copy_scope=True, include_in_schema=False)
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        token = bearer_token(headers.get("authorization", ""))
        if await caller_for_token(services, admin_token, token) is None:
            await _unauthorized(send)
            return
        await sessions.handle_request(scope, receive, send)  # type: ignore[arg-type]

    return mcp_endpoint, sessions


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {
            "type": "about:blank",
            "title": "Unauthorized",
            "status": 401,
            "detail": "send Authorization: Bearer <token> (an app key or the admin token)",
        }
    ).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": 401,
        "headers": [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"www-authenticate", b'Bearer realm="mnemoloop"'),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})  # type: ignore[arg-type]
