"""What an operator changes from the console: each a form posted with the session's CSRF token
(checked before any of these runs), answered with a redirect to the page that shows the result,
or with a confirmation page first where the change cannot be undone."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Redirect

from admin_api.console.render import page
from loop.service import Services


def _back_to_app(app_id: str, done: str) -> Redirect:
    return Redirect(f"/console/apps/{quote(app_id)}?done={quote(done)}", status_code=303)


@post("/apps/{app_id:str}/memories/{memory_id:int}/delete", include_in_schema=False)
async def delete_memory(
    services: NamedDependency[Services], app_id: FromPath[str], memory_id: FromPath[int]
) -> Redirect:
    await services.registry.require(app_id)
    if await services.agent.delete_memory(app_id, memory_id):
        return _back_to_app(app_id, f"Memory {memory_id} deleted.")
    return _back_to_app(app_id, f"Memory {memory_id} was already gone.")


async def _confirmation(
    request: Request[Any, Any, Any],
    services: Services,
    app_id: str,
    template: str,
    status: int = 200,
    **context: Any,
) -> Response[Any]:
    """A page asking to confirm a change to the app, naming how many memories it holds now."""
    app = await services.registry.require(app_id)
    count = await services.agent.get_memory_count(app_id)
    return page(request, template, status=status, app=app, count=count, **context)


@get("/apps/{app_id:str}/purge", include_in_schema=False)
async def confirm_purge(
    request: Request[Any, Any, Any], services: NamedDependency[Services], app_id: FromPath[str]
) -> Response[Any]:
    return await _confirmation(request, services, app_id, "confirm_purge.html")


@post("/apps/{app_id:str}/purge", include_in_schema=False)
async def purge(
    request: Request[Any, Any, Any], services: NamedDependency[Services], app_id: FromPath[str]
) -> Response[Any]:
    await services.registry.require(app_id)
    confirmed = (await request.form()).get("count")
    if confirmed != str(await services.agent.get_memory_count(app_id)):
        # Memories came or went since the confirmation was shown: it named another number.
        return await _confirmation(
            request, services, app_id, "confirm_purge.html", status=409, changed=True
        )
    deleted = await services.registry.purge_memories(app_id)
    return _back_to_app(app_id, f"Purged: {deleted} memories deleted.")


@get("/apps/{app_id:str}/uninstall", include_in_schema=False)
async def confirm_uninstall(
    request: Request[Any, Any, Any], services: NamedDependency[Services], app_id: FromPath[str]
) -> Response[Any]:
    return await _confirmation(request, services, app_id, "confirm_uninstall.html")


@post("/apps/{app_id:str}/uninstall", include_in_schema=False)
async def uninstall(
    request: Request[Any, Any, Any], services: NamedDependency[Services], app_id: FromPath[str]
) -> Response[Any]:
    purge_memories = (await request.form()).get("memories") == "purge"
    purged = await services.registry.uninstall(app_id, purge_memories=purge_memories)
    kept = "its memories purged" if purge_memories else "its memories kept"
    done = f"{app_id} uninstalled, {kept}" + (f" ({purged} deleted)." if purge_memories else ".")
    return _back_to_app(app_id, done)


@post("/apps", include_in_schema=False)
async def install(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    form = await request.form()
    app_id = str(form.get("app_id") or "").strip()
    name = str(form.get("name") or "").strip() or app_id
    installed = await services.registry.install(app_id, name)
    # The key is shown on this answer only: it is stored as a hash, and no page shows it again.
    return page(request, "installed.html", status=201, installed=installed)
