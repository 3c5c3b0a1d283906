"""Pages of the console: rendered from templates, with the headers every page carries, and
errors shown as pages (the API's problem+json is for programs)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Template
from litestar.template import TemplateConfig

from admin_api.errors import domain_status, validation_detail
from memory_agent import MnemoloopError, digest_of

log = logging.getLogger("mnemoloop.http")
TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

# Everything a page loads comes from this service: it works offline, and injected markup
# cannot fetch or run anything from elsewhere.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none';"
    " form-action 'self'; frame-ancestors 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        # A name a template uses but its page did not give is a fault, not an empty string.
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = when
    # A memory as a conversation shows it once it has faded (`recall.decay`).
    environment.filters["digest"] = digest_of
    return TemplateConfig(engine=JinjaTemplateEngine.from_environment(environment))


def when(stored: str | None) -> str:
    """A stored time as people read it: `2026-11-22 14:03:09 UTC`."""
    if not stored:
        return ""
    return stored.replace("T", " ")[:19] + " UTC"


def page(
    request: Request[Any, Any, Any], template: str, *, status: int = 200, **context: Any
) -> Template:
    session = getattr(request.state, "console_session", None)
    context.setdefault("csrf", session.csrf if session else "")
    context["signed_in"] = session is not None
    context["path"] = request.url.path
    # This page's own address, which a refresh loads again.
    query = request.url.query
    context["here"] = request.url.path + (f"?{query}" if query else "")
    return Template(template, context=context, status_code=status, headers=PAGE_HEADERS)


def error_page(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    """Any error inside the console, as a page saying what happened."""
    if isinstance(error, MnemoloopError):
        status, text = domain_status(error), str(error)
    elif isinstance(error, UnicodeDecodeError):
        status, text = 400, "The form is not valid UTF-8."
    elif isinstance(error, ValidationException):
        status, text = 400, validation_detail(error)
    elif isinstance(error, HTTPException):
        status, text = error.status_code, str(error.detail)
    else:
        status, text = 500, "Something went wrong on our side; the service log says what."
    if status >= 500:
        log.error("console: %s %s failed", request.method, request.url.path, exc_info=error)
    return page(request, "message.html", status=status, title=f"Error {status}", text=text)
