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

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import (
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    TooManyRequestsException,
)

from admin_api.throttle import Refused, TokenCheck, WrongTokens
from loop.operations import AdminToken, AppRegistry

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mnemoloop"'}
# Where `admin_or_any_app` leaves the app of the key, in the request's state.
_KEY_APP = "key_app"


def _registry(connection: ASGIConnection[Any, Any, Any, Any]) -> AppRegistry:
    registry: AppRegistry = connection.app.state.registry
    return registry


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" when there is none."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def checking_token(
    connection: ASGIConnection[Any, Any, Any, Any],
) -> AbstractAsyncContextManager[TokenCheck]:
    """`WrongTokens.checking` for a token this connection presents, counted by its peer's
    address (raises `Refused`)."""
    throttle: WrongTokens = connection.app.state.wrong_tokens
    return throttle.checking(connection.client.host if connection.client else "")


@asynccontextmanager
async def _api_token_check(
    connection: ASGIConnection[Any, Any, Any, Any],
) -> AsyncIterator[TokenCheck]:
    """`checking_token` for the API: its refusal as 429 problem+json."""
    try:
        async with checking_token(connection) as check:
            yield check
    except Refused as refused:
        raise TooManyRequestsException(
            str(refused), headers={"Retry-After": str(refused.seconds)}
        ) from None


@dataclass(frozen=True)
class TokenOwner:
    """Whom a bearer token stands for: an app, by its key, or the admin (`app_id` None)."""

    app_id: str | None


async def token_owner(
    registry: AppRegistry, admin_token: AdminToken, token: str
) -> TokenOwner | None:
    """None when the token is neither the admin token nor an installed app's key."""
    if await admin_token.matches(token):
        return TokenOwner(None)
    app_id = await registry.app_for_key(token) if token else None
    return TokenOwner(app_id) if app_id else None


async def checked_owner(connection: ASGIConnection[Any, Any, Any, Any]) -> TokenOwner:
    """The owner of the request's bearer token, checked under its address's count of wrong
    tokens; 401 when there is no token or it is nobody's."""
    token = bearer_token(connection.headers.get("authorization", ""))
    if not token:
        raise NotAuthorizedException("send Authorization: Bearer <token>", headers=CHALLENGE)
    async with _api_token_check(connection) as check:
        owner = await token_owner(_registry(connection), connection.app.state.admin_token, token)
        if owner is None:
            check.wrong()
            raise NotAuthorizedException("the token is not valid", headers=CHALLENGE)
        return owner


async def admin_only(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    if (await checked_owner(connection)).app_id is not None:
        raise PermissionDeniedException(
            "this route needs the admin token: an app key opens only its own app's"
            " conversations and the reading of its memories"
        )


async def admin_or_any_app(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """The admin token or any app's key; the handler scopes what the key reaches to its own
    app (`key_app`)."""
    connection.state[_KEY_APP] = (await checked_owner(connection)).app_id


def key_app(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The app whose key `admin_or_any_app` found; None for the admin token."""
    app_id: str | None = connection.state[_KEY_APP]
    return app_id


async def admin_or_own_app(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """The admin token, or the key of the app the path names (of the conversation it
    names); `key_app` says which."""
    key_app = (await checked_owner(connection)).app_id
    connection.state[_KEY_APP] = key_app
    if key_app is None:
        return
    if "app_id" in connection.path_params:
        if connection.path_params["app_id"] != key_app:
            raise PermissionDeniedException("this key belongs to another app")
        return
    conversation_id = connection.path_params.get("conversation_id", "")
    owner = await _registry(connection).get_app_id_for_conversation(conversation_id)
    if owner != key_app:
        # Another app's conversation answers as if it did not exist.
        raise NotFoundException(f"conversation {conversation_id!r} not found")
