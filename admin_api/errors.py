"""Every error becomes `application/problem+json`, mapped in this one table."""

from __future__ import annotations

import logging
import traceback
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from loop.errors import (
    AppAlreadyInstalled,
    AppNotFound,
    AppNotInstalled,
    ConsolidationNotFound,
    ConversationEnded,
    ConversationNotFound,
    InvalidInput,
    MemoryCountChanged,
    NoChatModel,
    NotRelaying,
)
from memory_agent import (
    InvalidExpiry,
    InvalidImport,
    InvalidKind,
    InvalidSearchQuery,
    KindNotAllowed,
    MemoryImportRefused,
    MemoryNotFound,
    MemorySteeringRefused,
    MnemoloopError,
    ProposalNotFound,
    ProposalNotPending,
    StorageError,
)

log = logging.getLogger("mnemoloop.http")
PROBLEM_JSON = "application/problem+json"

DOMAIN_STATUS: dict[type[MnemoloopError], int] = {
    InvalidInput: 400,
    InvalidSearchQuery: 400,
    InvalidImport: 400,
    InvalidKind: 400,
    KindNotAllowed: 403,
    NotRelaying: 403,
    AppNotFound: 404,
    ConversationNotFound: 404,
    ConsolidationNotFound: 404,
    MemoryNotFound: 404,
    ProposalNotFound: 404,
    ProposalNotPending: 409,
    AppNotInstalled: 409,
    AppAlreadyInstalled: 409,
    ConversationEnded: 409,
    MemoryImportRefused: 409,
    MemorySteeringRefused: 409,
    InvalidExpiry: 400,
    MemoryCountChanged: 409,
    StorageError: 503,
    NoChatModel: 503,
}
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def problem_body(status: int, detail: str) -> dict[str, Any]:
    return {
        "type": "about:blank",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }


def problem(status: int, detail: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        problem_body(status, detail), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def domain_status(error: MnemoloopError) -> int:
    return next((code for kind, code in DOMAIN_STATUS.items() if isinstance(error, kind)), 500)


def domain_error(_: Request[Any, Any, Any], error: MnemoloopError) -> Response[Any]:
    status = domain_status(error)
    if status >= 500:
        log.error("request failed: %s", error)
    return problem(status, str(error))


def validation_detail(error: ValidationException) -> str:
    """Each field the request got wrong, and how."""
    fields = [
        f"{item.get('key') or 'body'}: {item.get('message')}"
        for item in (error.extra if isinstance(error.extra, list) else [])
        if isinstance(item, dict)
    ]
    return "; ".join(fields) or str(error.detail)


def validation_error(_: Request[Any, Any, Any], error: ValidationException) -> Response[Any]:
    return problem(400, validation_detail(error))


def http_error(_: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
    return problem(error.status_code, str(error.detail), headers=error.headers)


def unreadable_body(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    """A body the JSON reader cannot take: not UTF-8, or nested past its depth. The same
    error raised anywhere else is a fault of ours, and answers 500."""
    if not _raised_decoding_json(error):
        return unexpected_error(request, error)
    if isinstance(error, UnicodeDecodeError):
        return problem(400, "the body is not valid UTF-8")
    return problem(400, "the body is nested too deeply")


def _raised_decoding_json(error: Exception) -> bool:
    return any(
        frame.f_code.co_name == "decode_json" for frame, _ in traceback.walk_tb(error.__traceback__)
    )


def unexpected_error(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    log.exception("unexpected error in %s %s", request.method, request.url.path)
    return problem(HTTP_500_INTERNAL_SERVER_ERROR, "internal error; see the service log")


EXCEPTION_HANDLERS: dict[type[Exception] | int, Any] = {
    MnemoloopError: domain_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    UnicodeDecodeError: unreadable_body,
    RecursionError: unreadable_body,
    Exception: unexpected_error,
}
