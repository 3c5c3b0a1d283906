"""The web console at /console: server-rendered pages for operators, signed in with the
admin token. Nothing is fetched from elsewhere; htmx (served from here) refreshes the pages
that change on their own."""

from __future__ import annotations

from typing import Any

from litestar import Router
from litestar.static_files import create_static_files_router

from admin_api.console import actions, pages
from admin_api.console.render import STATIC, error_page, template_config
from admin_api.console.session import require_session, sign_in, sign_in_page, sign_out
from admin_api.errors import EXCEPTION_HANDLERS

__all__ = ["console_routes", "template_config"]


def console_routes() -> list[Router]:
    """The console's routes: the sign-in page and the static files are open; every other page
    needs a session, and every form its CSRF token."""
    # Every kind the API maps to problem+json, mapped here to a page (the most specific kind
    # wins across layers, so each must be named again).
    handlers: dict[type[Exception] | int, Any] = dict.fromkeys(EXCEPTION_HANDLERS, error_page)
    signed_in = Router(
        path="/console",
        route_handlers=[
            pages.overview,
            pages.app_page,
            pages.jobs_page,
            pages.conversations_page,
            pages.conversation_page,
            pages.profile_page,
            actions.delete_memory,
            actions.restore_memory,
            actions.pin_memory,
            actions.set_sensitivity,
            actions.confirm_purge,
            actions.purge,
            actions.confirm_uninstall,
            actions.uninstall,
            actions.install,
            actions.profile_sharing,
            actions.confirm_profile_purge,
            actions.purge_profile,
            actions.answer_proposal,
            actions.request_consolidation,
            sign_out,
        ],
        before_request=require_session,
        exception_handlers=handlers,
        include_in_schema=False,
    )
    open_door = Router(
        path="/",
        route_handlers=[sign_in_page, sign_in],
        exception_handlers=handlers,
        include_in_schema=False,
    )
    static = create_static_files_router(
        path="/console/static", directories=[STATIC], include_in_schema=False
    )
    return [signed_in, open_door, static]
