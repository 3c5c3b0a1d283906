"""Signing in and out of the console, and what every console request must carry.

The session cookie is HttpOnly and SameSite=Strict, scoped to /console. Every form carries a
CSRF token besides: the session's own once signed in; before that (the sign-in form) a random
value also set in a cookie of its own, which the form must repeat.
"""

from __future__ import annotations

import hmac
import posixpath
import secrets
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.params import QueryParameter
from litestar.response import Redirect, Template

from admin_api.auth import checking_token
from admin_api.console.render import page
from admin_api.throttle import Refused
from loop.operations import SESSION_SECONDS, ConsoleSession, ConsoleSessions

SESSION_COOKIE = "mnemoloop_console"
SIGN_IN_COOKIE = "mnemoloop_sign_in"
CSRF_FIELD = "csrf"
CHANGING_METHODS = ("POST", "PUT", "PATCH", "DELETE")
HOME = "/console"
SIGN_IN = "/console/sign-in"


def sessions_of(request: Request[Any, Any, Any]) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.console_sessions
    return sessions


def session_of(request: Request[Any, Any, Any]) -> ConsoleSession:
    """The signed-in session (the hook below put it there)."""
    session: ConsoleSession = request.state.console_session
    return session


async def require_session(request: Request[Any, Any, Any]) -> Response[Any] | None:
    """Before every console page and form: a live session, and a form's CSRF token."""
    session = await sessions_of(request).find(request.cookies.get(SESSION_COOKIE, ""))
    if session is None:
        return _to_sign_in(request)
    if request.method in CHANGING_METHODS and not await _carries(request, session.csrf):
        return _forged(request)
    request.state.console_session = session
    return None


def _to_sign_in(request: Request[Any, Any, Any]) -> Response[Any]:
    target = f"{SIGN_IN}?next={quote(_return_path(request), safe='')}"
    if request.headers.get("hx-request"):
        # A refresh in the page: htmx loads the sign-in page in place of the whole page.
        return Response(None, status_code=204, headers={"HX-Redirect": target})
    if request.method == "GET":
        return Redirect(target, status_code=303)
    return page(
        request, "message.html", status=401,
        title="Signed out", text="Your session has ended: sign in again, then repeat this.",
        link=target, link_label="Sign in",
    )


def _return_path(request: Request[Any, Any, Any]) -> str:
    """Where to come back after signing in: this page with its query; after a form, the page
    the form was on (a form's own address is not a page)."""
    if request.method == "GET":
        query = request.url.query
        return request.url.path + (f"?{query}" if query else "")
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc == request.url.netloc and referer.path:
        return referer.path + (f"?{referer.query}" if referer.query else "")
    return HOME


def _forged(request: Request[Any, Any, Any]) -> Response[Any]:
    return page(
        request, "message.html", status=403,
        title="Form refused",
        text="This form did not come from this console (its CSRF token is missing or out of"
        " date), so nothing was changed. Reload the page and try again.",
        link=HOME, link_label="Back to the overview",
    )


async def _carries(request: Request[Any, Any, Any], expected: str) -> bool:
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    return (
        isinstance(sent, str)
        and bool(expected)
        # As bytes: compare_digest refuses a str with characters beyond ASCII.
        and hmac.compare_digest(sent.encode(), expected.encode())
    )


@get(SIGN_IN, include_in_schema=False)
async def sign_in_page(
    request: Request[Any, Any, Any],
    next_path: Annotated[str, QueryParameter(name="next", max_length=2000)] = HOME,
) -> Response[Any]:
    if await sessions_of(request).find(request.cookies.get(SESSION_COOKIE, "")):
        return Redirect(_safe_next(next_path), status_code=303)
    return _sign_in_form(request, next_path)


def _sign_in_form(
    request: Request[Any, Any, Any], next_path: str, error: str | None = None, status: int = 200
) -> Template:
    token = request.cookies.get(SIGN_IN_COOKIE) or secrets.token_urlsafe(32)
    response = page(
        request, "sign_in.html", status=status, csrf=token, next=_safe_next(next_path),
        error=error,
    )
    response.set_cookie(_cookie(request, SIGN_IN_COOKIE, token, SIGN_IN, 3600))
    return response


@post(SIGN_IN, include_in_schema=False, status_code=303)
async def sign_in(request: Request[Any, Any, Any]) -> Response[Any]:
    form = await request.form()
    next_path = str(form.get("next") or HOME)
    if not await _carries(request, request.cookies.get(SIGN_IN_COOKIE, "")):
        return _sign_in_form(
            request, next_path, status=403,
            error="The form was out of date (its CSRF token did not match); try again.",
        )
    token = str(form.get("token") or "").strip()
    try:
        async with checking_token(request) as check:
            session = await sessions_of(request).sign_in(token)
            if session is None:
                check.wrong()
    except Refused as refused:
        refusal = _sign_in_form(request, next_path, status=429, error=f"{refused}.")
        refusal.headers["Retry-After"] = str(refused.seconds)
        return refusal
    if session is None:
        return _sign_in_form(request, next_path, status=401, error="That is not the admin token.")
    response = Redirect(_safe_next(next_path), status_code=303)
    response.set_cookie(_cookie(request, SESSION_COOKIE, session.cookie, HOME, SESSION_SECONDS))
    response.set_cookie(_cookie(request, SIGN_IN_COOKIE, "", SIGN_IN, 0))
    return response


@post("/sign-out", include_in_schema=False, status_code=303)
async def sign_out(request: Request[Any, Any, Any]) -> Response[Any]:
    await sessions_of(request).sign_out(session_of(request).cookie)
    response = Redirect(SIGN_IN, status_code=303)
    response.set_cookie(_cookie(request, SESSION_COOKIE, "", HOME, 0))
    return response


def _cookie(
    request: Request[Any, Any, Any], key: str, value: str, path: str, max_age: int
) -> Cookie:
    return Cookie(
        key=key, value=value, path=path, max_age=max_age, httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )


def _safe_next(path: str) -> str:
    """Where to go after signing in: a console page of this service, never elsewhere."""
    page_path, _, query = path.partition("?")
    normal = posixpath.normpath(page_path) if page_path else ""
    plain = "\\" not in path and all(" " < c < "\x7f" for c in path)
    if plain and (normal == HOME or normal.startswith(HOME + "/")):
        return normal + (f"?{query}" if query else "")
    return HOME
