"""The errors the client raises: one for each common status, all `ApiError`s."""

from __future__ import annotations

import httpx
import msgspec

from admin_api.replies import Problem

# Errors:
#
# ApiError        any answer that is not 2xx; carries the problem+json body
#  ├── BadRequest      400
#  ├── Unauthorized    401
#  ├── Forbidden       403
#  ├── NotFound        404
#  ├── Conflict        409
#  └── TooManyRequests 429 (this address sent too many wrong tokens; see `retry_after`)


class ApiError(Exception):
    """The API answered with an error; `problem` is its problem+json body."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.problem = problem

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def detail(self) -> str:
        return self.problem.detail


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class TooManyRequests(ApiError):
    def __init__(self, problem: Problem, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.retry_after = retry_after  # seconds, from the Retry-After header


_ERRORS_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def api_error(response: httpx.Response) -> ApiError:
    """The error for an answer that is not 2xx (its body read)."""
    problem = _problem_in(response)
    if response.status_code == 429:
        return TooManyRequests(problem, _seconds(response.headers.get("retry-after")))
    return _ERRORS_BY_STATUS.get(response.status_code, ApiError)(problem)


def _seconds(header: str | None) -> float | None:
    try:
        return float(header) if header is not None else None
    except ValueError:  # an HTTP date, which this server never sends
        return None


def _problem_in(response: httpx.Response) -> Problem:
    try:
        return msgspec.json.decode(response.content, type=Problem)
    except msgspec.DecodeError:  # not problem+json: a proxy's page, say
        return Problem("about:blank", response.reason_phrase, response.status_code, response.text)
