"""Health, memory jobs, energy and metrics."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, MediaType, Response, get
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromQuery, QueryParameter
from litestar.response import Redirect

from admin_api.auth import admin_only
from admin_api.dependencies import Provided
from admin_api.replies import (
    EnergyOut,
    HealthOut,
    JobsOut,
    ModelSetupOut,
    PartHealthOut,
    job_out,
    problems,
)
from loop.operations import CONTENT_TYPE, HealthChecks, Metrics, PartHealth
from loop.service import Stores

JobStatusFilter = Literal[
    "pending", "running", "deferred", "done", "skipped", "failed", "cancelled"
]


@get("/", include_in_schema=False)
async def home() -> Redirect:
    """The root leads to the console (which asks for the admin token; the API reference is
    at /schema)."""
    return Redirect("/console")


@get(
    "/health",
    tags=["operations"],
    summary="Whether the model, the database and the memory worker are ready; needs no token",
    description="200 with status `ok` when all three are ready; else 503 with status"
    " `degraded`, and each part not ready says why.",
    responses={503: ResponseSpec(HealthOut, description="A part is not ready.")},
)
async def health(health_checks: Provided[HealthChecks]) -> Response[HealthOut]:
    checked = await health_checks.check()
    body = HealthOut(
        "ok" if checked.ready else "degraded",
        _part(checked.model),
        _part(checked.database),
        _part(checked.memory_worker),
        list(checked.warnings),
        ModelSetupOut(
            checked.setup.chat_window, checked.setup.memory_window,
            checked.setup.memory_writer, checked.setup.memory_writer_why,
        ),
    )
    return Response(body, status_code=200 if checked.ready else 503)


def _part(part: PartHealth) -> PartHealthOut:
    return PartHealthOut(part.ready, part.reason)


class OperationsController(Controller):
    path = "/"
    tags = ["operations"]
    before_request = staticmethod(admin_only)

    @get(
        "/memory-jobs",
        summary="Memory jobs, newest first, with what each wrote and its compaction steps",
        responses=problems(400, 401, 403),
    )
    async def list_jobs(
        self,
        stores: Provided[Stores],
        app_id: Annotated[str | None, QueryParameter(name="appId", max_length=64)] = None,
        status: FromQuery[JobStatusFilter | None] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=10_000)] = 1000,
    ) -> JobsOut:
        jobs = await stores.jobs.list(app_id=app_id, status=status, limit=limit)
        return JobsOut([job_out(j) for j in jobs])

    @get(
        "/energy",
        summary="The energy budget and what memory and conversations spent",
        responses=problems(401, 403),
    )
    async def energy(self, stores: Provided[Stores]) -> EnergyOut:
        report = await stores.energy.report()
        return EnergyOut(
            report.capacity, report.level, report.memory_spent, report.conversation_spent
        )

    @get(
        "/metrics",
        media_type=MediaType.TEXT,
        summary="Prometheus metrics",
        responses=problems(401, 403),
    )
    async def metrics(
        self, stores: Provided[Stores], metrics: Provided[Metrics]
    ) -> Response[bytes]:
        apps = await stores.registry.list()
        energy = await stores.energy.report()
        spaces_with_memories, spaces = await stores.registry.space_counts()
        text = metrics.render(
            stats=stores.agent.stats,
            grounding=stores.agent.grounding,
            jobs_by_status=await stores.jobs.counts_by_status(),
            energy_spent={"memory": energy.memory_spent, "conversation": energy.conversation_spent},
            apps_with_memories=sum(1 for app in apps if app.memory_count),
            apps=len(apps),
            spaces_with_memories=spaces_with_memories,
            spaces=spaces,
        )
        return Response(text, media_type=CONTENT_TYPE)
