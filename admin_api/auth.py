"""Bearer-token checks: the admin token opens everything; an app's key opens only its own
app's conversation routes and the reading of its memories and their history.

They run as before-request hooks (`before_request=admin_only` on a handler,
`before_request = staticmethod(admin_only)` on a controller, for the type checker), not as
Litestar guards: a guard is handed a copy of the route handler on every call, some 15 µs of
each request. A hook is one slot, not a list: the innermost layer's replaces the others', so a
route that needs a hook of its own must call these itself. A test checks that every API route
resolves to one of them. An address that sends too many wrong tokens is refused for a while
(admin_api/throttle.py)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import (
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    TooManyRequestsException,
)

from admin_api.throttle import WrongTokens, refusal_detail
from loop.admin_token import AdminToken
from loop.registry import AppRegistry

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mnemoloop"'}


def _registry(connection: ASGIConnection[Any, Any, Any, Any]) -> AppRegistry:
    registry: AppRegistry = connection.app.state.registry
    return registry


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" when there is none."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    return connection.client.host if connection.client else ""


def wrong_tokens(connection: ASGIConnection[Any, Any, Any, Any]) -> WrongTokens:
    throttle: WrongTokens = connection.app.state.wrong_tokens
    return throttle


def refuse_if_throttled(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """429 when this address has sent too many wrong tokens (admin_api/throttle.py)."""
    seconds = wrong_tokens(connection).refused_for(client_address(connection))
    if seconds is not None:
        raise TooManyRequestsException(
            refusal_detail(seconds), headers={"Retry-After": str(seconds)}
        )


def _bearer(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    token = bearer_token(connection.headers.get("authorization", ""))
    if not token:
        raise NotAuthorizedException("send Authorization: Bearer <token>", headers=CHALLENGE)
    refuse_if_throttled(connection)
    return token


def _not_valid(connection: ASGIConnection[Any, Any, Any, Any]) -> NotAuthorizedException:
    wrong_tokens(connection).record(client_address(connection))
    return NotAuthorizedException("the token is not valid", headers=CHALLENGE)


async def _is_admin(connection: ASGIConnection[Any, Any, Any, Any], token: str) -> bool:
    admin_token: AdminToken = connection.app.state.admin_token
    return await admin_token.matches(token)


async def admin_only(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    token = _bearer(connection)
    if await _is_admin(connection, token):
        return
    if await _registry(connection).app_for_key(token):
        raise PermissionDeniedException(
            "this route needs the admin token: an app key opens only its own app's"
            " conversations and the reading of its memories"
        )
    raise _not_valid(connection)


async def admin_or_own_app(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    token = _bearer(connection)
    if await _is_admin(connection, token):
        return
    registry = _registry(connection)
    key_app = await registry.app_for_key(token)
    if key_app is None:
        raise _not_valid(connection)
    if "app_id" in connection.path_params:
        if connection.path_params["app_id"] != key_app:
            raise PermissionDeniedException("this key belongs to another app")
        return
    conversation_id = connection.path_params.get("conversation_id", "")
    owner = await registry.get_app_id_for_conversation(conversation_id)
    if owner != key_app:
        # Another app's conversation answers as if it did not exist.
        raise NotFoundException(f"conversation {conversation_id!r} not found")
