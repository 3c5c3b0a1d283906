"""The console's pages: what an operator reads. Each is a GET; the forms on them post to
`actions`."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get
from litestar.params import FromPath, QueryParameter
from litestar.response import Template

from admin_api.console.chart import spending_chart
from admin_api.console.render import page
from admin_api.dependencies import Provided
from loop.jobs import JOB_STATUSES
from loop.operations import MAX_USER_ID, HealthChecks, validate_user_id
from loop.service import Stores
from memory_agent import PROFILE_APP, InvalidSearchQuery

CHART_MINUTES = 60
# What the app's page says after a change (`?done=<key>&n=<number>`): fixed texts, so that a
# link from elsewhere cannot make the page say anything else.
NOTICES = {
    "deleted": "Memory {n} deleted; it can be restored until its grace period ends.",
    "restored": "Memory {n} restored.",
    "pinned": "Memory {n} pinned: compaction will not remove it.",
    "unpinned": "Memory {n} unpinned.",
    "leveled": "Memory {n} has its level now.",
    "gone": "Memory {n} was already gone.",
    "purged": "Purged: {n} memories deleted.",
    "uninstalled-kept": "Uninstalled; its memories are kept.",
    "uninstalled-purged": "Uninstalled; its {n} memories were purged.",
    "sharing-on": "It now shares its users' profiles: it reads and writes them.",
    "sharing-off": "It no longer shares its users' profiles.",
    "profile-purged": "Profile erased: {n} memories.",
    "proposal-accepted": "Proposal {n} accepted: the profile holds it now.",
    "proposal-declined": "Proposal {n} declined: nothing was written.",
    "proposal-not-pending": "Proposal {n} was no longer pending (answered, lapsed or"
    " superseded); nothing was changed.",
}
# Answered proposals the profile page shows, besides every pending one.
ANSWERED_SHOWN = 10
LIST_LIMIT = 200
# Consolidation passes the jobs page shows.
PASSES_SHOWN = 10
HISTORY_LIMIT = 50

AppFilter = Annotated[str | None, QueryParameter(name="app", max_length=64)]
# A user's memory space on an app's page; none: the app's shared space.
UserFilter = Annotated[str | None, QueryParameter(name="user", max_length=MAX_USER_ID)]


@get("/", include_in_schema=False)
async def overview(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    health_checks: Provided[HealthChecks],
) -> Template:
    energy = await stores.energy.report()
    return page(
        request,
        "overview.html",
        apps=await stores.registry.list(),
        cap=stores.agent.memory_limit,
        jobs=await stores.jobs.counts_by_status(),
        compaction=await stores.jobs.compaction_tally(),
        energy=energy,
        chart=spending_chart(await stores.energy.spending(CHART_MINUTES)),
        health=await health_checks.check(),
    )


@get("/apps/{app_id:str}", include_in_schema=False)
async def app_page(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: FromPath[str],
    q: Annotated[str | None, QueryParameter(max_length=1000)] = None,
    done: Annotated[str | None, QueryParameter(max_length=40)] = None,
    n: Annotated[int, QueryParameter(ge=0, le=2**53)] = 0,
    user: UserFilter = None,
) -> Template:
    app = await stores.registry.require(app_id)
    if user:
        validate_user_id(user)
    space = user or ""
    search_error = None
    if q:
        try:
            memories = await stores.agent.search_memories(
                app_id, q, limit=LIST_LIMIT, user_id=space
            )
        except InvalidSearchQuery as error:
            memories, search_error = [], str(error)
    else:
        memories = await stores.agent.list_memories(app_id, user_id=space)
    retired = await stores.agent.list_memories(app_id, user_id=space, state="retired")
    held_back = await stores.agent.held_back(app_id, user_id=space)
    # Each memory's latest changes, oldest of them first.
    histories = await stores.agent.latest_history_of(
        app_id, [memory.id for memory in memories], HISTORY_LIMIT
    )
    listed = {memory.id for memory in memories}
    links = {
        memory_id: [other for other in linked if other in listed]
        for memory_id, linked in (await stores.agent.linked_ids(sorted(listed))).items()
    }
    return page(
        request,
        "app.html",
        links=links,
        app=app,
        cap=stores.agent.memory_limit,
        memories=memories,
        retired=retired,
        held_back=held_back,
        now=stores.agent.now(),
        grace_days=stores.agent.grace_seconds / 86400,
        count=await stores.agent.get_memory_count(app_id),
        space_count=await stores.agent.get_memory_count(app_id, user_id=space),
        spaces=await stores.agent.spaces(app_id),
        user=space,
        histories=histories,
        history_limit=HISTORY_LIMIT,
        changes=await stores.agent.history(
            app_id, limit=50, newest_first=True, user_id=space
        ),
        q=q or "",
        search_error=search_error,
        done=NOTICES[done].format(n=n) if done in NOTICES else None,
    )


@get("/users/{user_id:str}/profile", include_in_schema=False)
async def profile_page(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    user_id: FromPath[str],
    q: Annotated[str | None, QueryParameter(max_length=1000)] = None,
    done: Annotated[str | None, QueryParameter(max_length=40)] = None,
    n: Annotated[int, QueryParameter(ge=0, le=2**53)] = 0,
) -> Template:
    """A person's profile: its memories (or those matching `q`), each with its history."""
    validate_user_id(user_id)
    agent = stores.agent
    everything = await agent.list_memories(PROFILE_APP, user_id=user_id)
    memories, search_error = everything, None
    if q:
        try:
            memories = await agent.search_memories(
                PROFILE_APP, q, limit=LIST_LIMIT, user_id=user_id
            )
        except InvalidSearchQuery as error:
            memories, search_error = [], str(error)
    return page(
        request,
        "profile.html",
        user=user_id,
        memories=memories,
        count=len(everything),
        cap=agent.profile_limit,
        sharing=[app for app in await stores.registry.list() if app.shares_profile],
        histories=await agent.latest_history_of(
            PROFILE_APP, [memory.id for memory in memories], HISTORY_LIMIT
        ),
        q=q or "",
        search_error=search_error,
        done=NOTICES[done].format(n=n) if done in NOTICES else None,
        fields=agent.sensitive_fields.fields,
        pending=await agent.proposals.proposals(user_id, "pending"),
        answered=[p for p in await agent.proposals.proposals(user_id, limit=ANSWERED_SHOWN * 5)
                  if p.status != "pending"][:ANSWERED_SHOWN],
    )


@get("/jobs", include_in_schema=False)
async def jobs_page(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    app_id: AppFilter = None,
    status: Annotated[str | None, QueryParameter(max_length=20)] = None,
) -> Template:
    app_id, status = app_id or None, status or None
    if status is not None and status not in JOB_STATUSES:
        return page(
            request, "message.html", status=400, title="Unknown status",
            text=f"{status!r} is not a job status; one of: {', '.join(JOB_STATUSES)}.",
        )
    return page(
        request,
        "jobs.html",
        jobs=await stores.jobs.list(app_id=app_id, status=status, limit=LIST_LIMIT),
        apps=await stores.registry.list(),
        statuses=JOB_STATUSES,
        app_id=app_id or "",
        status_filter=status or "",
        passes=await stores.consolidations.recent(PASSES_SHOWN),
    )


@get("/conversations", include_in_schema=False)
async def conversations_page(
    request: Request[Any, Any, Any], stores: Provided[Stores], app_id: AppFilter = None
) -> Template:
    app_id = app_id or None
    return page(
        request,
        "conversations.html",
        conversations=await stores.conversations.recent(app_id, limit=LIST_LIMIT),
        apps=await stores.registry.list(),
        app_id=app_id or "",
    )


@get("/conversations/{conversation_id:str}", include_in_schema=False)
async def conversation_page(
    request: Request[Any, Any, Any],
    stores: Provided[Stores],
    conversation_id: FromPath[str],
) -> Template:
    conversation = await stores.conversations.get(conversation_id)
    return page(
        request,
        "conversation.html",
        conversation=conversation,
        job=await stores.jobs.for_conversation(conversation_id),
    )
