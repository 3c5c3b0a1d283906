"""How a dialect refuses: `DialectError` with its status, and every error of a dialect's routes
rendered in that dialect's own shape (`error_handlers`), mid-stream too (`stream_failure`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from admin_api.errors import domain_status, validation_detail
from memory_agent import MnemoloopError

log = logging.getLogger("mnemoloop.http")


class DialectError(Exception):
    """Refused in the dialect's own error shape, with this status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def stream_failure(error: Exception) -> tuple[int, str]:
    """The status and message of an error met while a reply streams (the response's status
    was sent already: the dialect's clients read an error event)."""
    if isinstance(error, DialectError):
        return error.status, str(error)
    if isinstance(error, MnemoloopError):
        log.error("a streamed reply failed: %s", error)
        return domain_status(error), str(error)
    log.exception("a streamed reply failed unexpectedly")
    return 500, "internal error; see the service log"


Render = Callable[[int, str, "dict[str, str] | None"], Response[Any]]


def error_handlers(render: Render) -> dict[type[Exception], Callable[..., Response[Any]]]:
    """Every error of a dialect's routes in that dialect's shape, with the status the native
    routes would give."""

    def dialect(_: Request[Any, Any, Any], error: DialectError) -> Response[Any]:
        return render(error.status, str(error), error.headers)

    def domain(_: Request[Any, Any, Any], error: MnemoloopError) -> Response[Any]:
        status = domain_status(error)
        if status >= 500:
            log.error("request failed: %s", error)
        return render(status, str(error), None)

    def invalid(_: Request[Any, Any, Any], error: ValidationException) -> Response[Any]:
        return render(400, validation_detail(error), None)

    def http(_: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
        return render(error.status_code, str(error.detail), error.headers)

    def unexpected(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return render(500, "internal error; see the service log", None)

    return {
        DialectError: dialect,
        MnemoloopError: domain,
        ValidationException: invalid,
        HTTPException: http,
        Exception: unexpected,
    }
