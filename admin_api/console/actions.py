"""What an operator changes from the console: each a form posted with the session's CSRF token
(checked before any of these runs), answered with a redirect to the page that shows the result,
or with a confirmation page first where the change cannot be undone."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, Response, get, post
from litestar.params import FromPath, PathParameter, QueryParameter
from litestar.response import Redirect

from admin_api.console.render import page
from admin_api.dependencies import Provided
from loop.errors import AppNotInstalled, InvalidInput, MemoryCountChanged
from loop.operations import MAX_USER_ID, validate_user_id
from loop.service import Stores
from memory_agent import (
    MAX_MEMORY_ID,
    PROFILE_APP,
    MemoryChange,
    MemoryNotFound,
    ProposalNotPending,
)


def _back_to_app(app_id: str, done: str, n: int, user: str = "") -> Redirect:
    """To the app's page (of a user's space), which says what was done (`done`: one of
    `pages.NOTICES`)."""
    space = f"&user={quote(user, safe='')}" if user else ""
    return Redirect(
        f"/console/apps/{quote(app_id, safe='')}?done={done}&n={n}{space}", status_code=303
    )


# A user's memory space: the purge of that space only.
UserFilter = Annotated[str | None, QueryParameter(name="user", max_length=MAX_USER_ID)]


MemoryId = Annotated[int, PathParameter(ge=1, le=MAX_MEMORY_ID)]


@post("/apps/{app_id:str}/memories/{memory_id:int}/delete", include_in_schema=False)
async def delete_memory(
    stores: Provided[Stores], app_id: FromPath[str], memory_id: MemoryId
) -> Redirect:
    await stores.registry.require(app_id)
    try:
        memory = await stores.agent.delete_memory(app_id, memory_id)
    except MemoryNotFound:
        return _back_to_app(app_id, "gone", memory_id)
    return _back_to_app(app_id, "deleted", memory_id, memory.user_id)


@post("/apps/{app_id:str}/memories/{memory_id:int}/restore", include_in_schema=False)
async def restore_memory(
    stores: Provided[Stores], app_id: FromPath[str], memory_id: MemoryId
) -> Redirect:
    """Bring back a deleted or expired memory (a space at its cap refuses: 409 page)."""
    await stores.registry.require(app_id)
    memory = await stores.agent.restore_memory(app_id, memory_id)
    return _back_to_app(app_id, "restored", memory_id, memory.user_id)


@post("/apps/{app_id:str}/memories/{memory_id:int}/pin", include_in_schema=False)
async def pin_memory(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: FromPath[str],
    memory_id: MemoryId,
) -> Redirect:
    """Pin (`pinned=1`) or unpin (`pinned=0`) a memory."""
    pinned = (await request.form()).get("pinned") == "1"
    await stores.registry.require(app_id)
    memory = await stores.agent.steer_memory(
        app_id, memory_id, MemoryChange(pinned=pinned, reason="from the console")
    )
    return _back_to_app(app_id, "pinned" if pinned else "unpinned", memory_id, memory.user_id)


@post("/apps/{app_id:str}/memories/{memory_id:int}/sensitivity", include_in_schema=False)
async def set_sensitivity(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: FromPath[str],
    memory_id: MemoryId,
) -> Redirect:
    """Give a memory a level (public, private, secret); anything else is refused (400)."""
    level = (await request.form()).get("sensitivity")
    if level not in ("public", "private", "secret"):
        raise InvalidInput("sensitivity: public, private or secret")
    await stores.registry.require(app_id)
    memory = await stores.agent.steer_memory(
        app_id, memory_id, MemoryChange(sensitivity=level, reason="from the console")
    )
    return _back_to_app(app_id, "leveled", memory_id, memory.user_id)


async def _confirmation(
    request: Request[Any, Any, Any],
    stores: Stores,
    app_id: str,
    template: str,
    status: int = 200,
    **context: Any,
) -> Response[Any]:
    """A page asking to confirm a change to the app (or to a user's space: `user`), naming
    how many memories it holds now."""
    app = await stores.registry.require(app_id)
    user = context.pop("user", "") or ""
    count = await stores.agent.get_memory_count(app_id, user_id=user or None)
    return page(request, template, status=status, app=app, count=count, user=user, **context)


@get("/apps/{app_id:str}/purge", include_in_schema=False)
async def confirm_purge(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: FromPath[str],
    user: UserFilter = None,
) -> Response[Any]:
    if user:
        validate_user_id(user)
    return await _confirmation(request, stores, app_id, "confirm_purge.html", user=user)


@post("/apps/{app_id:str}/purge", include_in_schema=False)
async def purge(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: FromPath[str],
    user: UserFilter = None,
) -> Response[Any]:
    if user:
        validate_user_id(user)
    try:
        deleted = await stores.registry.purge_memories(
            app_id, confirmed_count=await _confirmed_count(request), user_id=user or None
        )
    except MemoryCountChanged:
        # Memories came or went since the confirmation was shown: it named another number.
        return await _confirmation(
            request, stores, app_id, "confirm_purge.html", status=409, changed=True, user=user
        )
    return _back_to_app(app_id, "purged", deleted, user or "")


@get("/apps/{app_id:str}/uninstall", include_in_schema=False)
async def confirm_uninstall(
    request: Request[Any, Any, Any], stores: Provided[Stores], app_id: FromPath[str]
) -> Response[Any]:
    await _require_installed(stores, app_id)
    return await _confirmation(request, stores, app_id, "confirm_uninstall.html")


@post("/apps/{app_id:str}/uninstall", include_in_schema=False)
async def uninstall(
    request: Request[Any, Any, Any], stores: Provided[Stores], app_id: FromPath[str]
) -> Response[Any]:
    await _require_installed(stores, app_id)
    if (await request.form()).get("memories") != "purge":
        await stores.registry.uninstall(app_id)
        return _back_to_app(app_id, "uninstalled-kept", 0)
    try:
        purged = await stores.registry.uninstall(
            app_id, purge_memories=True, confirmed_count=await _confirmed_count(request)
        )
    except MemoryCountChanged:
        return await _confirmation(
            request, stores, app_id, "confirm_uninstall.html", status=409, changed=True
        )
    return _back_to_app(app_id, "uninstalled-purged", purged)


async def _require_installed(stores: Stores, app_id: str) -> None:
    if not (await stores.registry.require(app_id)).installed:
        raise AppNotInstalled(app_id)


async def _confirmed_count(request: Request[Any, Any, Any]) -> int:
    """The number of memories the confirmation named (-1, matching none, if it is unreadable)."""
    sent = (await request.form()).get("count")
    return int(sent) if isinstance(sent, str) and sent.isdecimal() and len(sent) < 12 else -1


@post("/apps/{app_id:str}/profile-sharing", include_in_schema=False)
async def profile_sharing(
    request: Request[Any, Any, Any], stores: Provided[Stores], app_id: FromPath[str]
) -> Redirect:
    """Whether the app reads and writes its users' profiles (`sharing=1` or `0`)."""
    sharing = (await request.form()).get("sharing") == "1"
    await stores.registry.set_shares_profile(app_id, sharing)
    return _back_to_app(app_id, "sharing-on" if sharing else "sharing-off", 0)


UserPath = Annotated[str, PathParameter(max_length=MAX_USER_ID)]


@get("/users/{user_id:str}/profile/purge", include_in_schema=False)
async def confirm_profile_purge(
    request: Request[Any, Any, Any], stores: Provided[Stores], user_id: UserPath
) -> Response[Any]:
    validate_user_id(user_id)
    count = len(await stores.agent.list_memories(PROFILE_APP, user_id=user_id))
    return page(request, "confirm_profile_purge.html", user=user_id, count=count)


@post("/users/{user_id:str}/profile/purge", include_in_schema=False)
async def purge_profile(stores: Provided[Stores], user_id: UserPath) -> Redirect:
    erased = await stores.registry.erase_profile(user_id)
    return Redirect(
        f"/console/users/{quote(user_id, safe='')}/profile?done=profile-purged&n={erased}",
        status_code=303,
    )


@post("/users/{user_id:str}/profile/proposals/{proposal_id:int}", include_in_schema=False)
async def answer_proposal(
    request: Request[Any, Any, Any], stores: Provided[Stores], user_id: UserPath,
    proposal_id: Annotated[int, PathParameter(ge=1, le=MAX_MEMORY_ID)],
) -> Redirect:
    """The person's answer to a pending proposal, relayed by the operator (`decision`:
    accept or decline); back to the profile, which says what came of it."""
    validate_user_id(user_id)
    decision = (await request.form()).get("decision")
    if decision not in ("accept", "decline"):
        raise InvalidInput("decision: accept or decline")
    try:
        await stores.agent.proposals.answer(
            user_id, proposal_id, accept=decision == "accept", through="console"
        )
        done = "proposal-accepted" if decision == "accept" else "proposal-declined"
    except ProposalNotPending:
        done = "proposal-not-pending"
    return Redirect(
        f"/console/users/{quote(user_id, safe='')}/profile?done={done}&n={proposal_id}",
        status_code=303,
    )


@post("/consolidations", include_in_schema=False)
async def request_consolidation(
    request: Request[Any, Any, Any], stores: Provided[Stores]
) -> Redirect:
    """A consolidation pass over an app's spaces, a person's, both, or every space (the form's
    `app` and `user`, each optional); back to the jobs page, which shows it."""
    form = await request.form()
    app_id = str(form.get("app") or "").strip() or None
    user_id = str(form.get("user") or "").strip() or None
    if app_id is not None:
        await stores.registry.require(app_id)
    if user_id is not None:
        validate_user_id(user_id)
    asked = await stores.consolidations.request(app_id, user_id)
    return Redirect(f"/console/jobs?asked={asked.id}#passes", status_code=303)


@post("/apps", include_in_schema=False)
async def install(
    request: Request[Any, Any, Any], stores: Provided[Stores]
) -> Response[Any]:
    form = await request.form()
    app_id = str(form.get("app_id") or "").strip()
    existing = await stores.registry.get(app_id)
    # No name given: the one it had before (a re-install), else its id.
    name = str(form.get("name") or "").strip() or (existing.name if existing else app_id)
    installed = await stores.registry.install(app_id, name)
    # The key is shown on this answer only: it is stored as a hash, and no page shows it again.
    return page(request, "installed.html", status=201, installed=installed)
