"""The consolidation pass, on both engines: a fact told to two apps that share profiles is in
the profile twice until a pass asked for through the API merges it, and then once in the
person's next memory block; every change is in the history as consolidated and in the delta
header as merged; a pass over an app that is purged meanwhile is cancelled and writes nothing;
bad requests are refused naming the field; a change needs its pass still held and its apps
still installed (and sharing, where it touches a profile)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from admin_api.replies import ConsolidationOut
from mnemoloop.client import AsyncClient, BadRequest, NotFound
from tests.db_query import query
from tests.fake_ollama import SHOW_PROMPT
from tests.harness import csrf_in, eventually, http_client, live_http, running, service
from tests.test_cli import mnemoloop
from tests.test_profiles import echoing_model, install, profile
from tests.test_user_spaces import ADMIN, contents, converse, settled

pytestmark = pytest.mark.anyio

VEGETARIAN = "I'm vegetarian and my partner is Sam."


def extractive_service(db_path: Any, **overrides: Any) -> Any:
    """The service with the extractive writer (its memories are the users' statements)."""
    return service(db_path, echoing_model(), memory_writer="extractive", **overrides)


@pytest.fixture
async def client(db_path) -> AsyncIterator[httpx.AsyncClient]:
    # No scheduled pass (the harness's default): the tests ask for theirs.
    async with extractive_service(db_path) as services, running(services), \
            http_client(services, "admin-secret") as client:
        yield client


async def consolidated(client: httpx.AsyncClient, body: dict[str, Any] | None) -> dict[str, Any]:
    """Ask for a pass and wait for its end; the pass as it ended."""
    asked = await client.post("/consolidations", json=body, headers=ADMIN)
    assert asked.status_code == 202, asked.text
    assert asked.json()["status"] == "pending"
    pass_id = asked.json()["id"]

    async def ended() -> dict[str, Any] | None:
        found = (await client.get(f"/consolidations/{pass_id}", headers=ADMIN)).json()
        return found if found["status"] not in ("pending", "running") else None

    return dict(await eventually(ended))


async def test_a_fact_told_to_two_apps_is_once_in_the_profile_after_a_pass(client):
    await install(client, "calendar", True)
    await install(client, "travel", True)
    await converse(client, "calendar", VEGETARIAN, user="ana")
    await settled(client, "calendar")
    await eventually(lambda: profile(client, "ana"))
    await converse(client, "travel", VEGETARIAN, user="ana")
    await converse(client, "travel", "My budget for the trip is 900 euros.", user="ana")
    await settled(client, "travel")
    # The profile holds it twice (each app's job wrote its profile part).
    await eventually(lambda: _with(profile(client, "ana"),
                                   lambda kept: sum("vegetarian" in m for m in kept) == 2))

    ended = await consolidated(client, {"userId": "ana"})
    assert ended["status"] == "done", ended
    assert ended["pairsAsked"] >= 1 and ended["changes"] >= 1, ended
    assert ended["modelCalls"] == 0  # the extractive writer's policy asks no model
    kept = await profile(client, "ana")
    assert sum("vegetarian" in m for m in kept) == 1, kept
    # Each app keeps its own memory of it: a space is never merged with another.
    assert [m for m in await contents(client, "calendar", "ana") if "vegetarian" in m]
    assert [m for m in await contents(client, "travel", "ana") if "vegetarian" in m]

    history = (await client.get("/users/ana/profile/history", headers=ADMIN)).json()["events"]
    changes = [e for e in history if (e["reason"] or "").startswith("consolidated: ")]
    assert {e["event"] for e in changes} == {"edited", "deleted"}, changes

    block = await converse(client, "travel", SHOW_PROMPT, user="ana")
    memory_lines = [line for line in block.splitlines()
                    if "vegetarian" in line and not line.startswith("- ")]
    assert len(memory_lines) == 1, block
    assert "↔merged" in block, block

    # Asked again, the same pairs are not asked about (nor changed) for 14 days.
    again = await consolidated(client, {"userId": "ana"})
    assert again["status"] == "done" and again["changes"] == 0, again


async def test_a_purge_cancels_the_apps_pass_and_a_change_needs_its_pass_and_apps(db_path):
    # The worker is not running: the passes wait.
    async with extractive_service(db_path) as services:
        client = http_client(services, "admin-secret")
        await install(client, "cal", True)
        asked = (await client.post("/consolidations", json={"appId": "cal"},
                                   headers=ADMIN)).json()
        assert (await client.delete("/apps/cal/memories", headers=ADMIN)).status_code == 200
        ended = (await client.get(f"/consolidations/{asked['id']}", headers=ADMIN)).json()
        assert ended["status"] == "cancelled" and "purged" in ended["error"], ended

        # Inside each change's transaction: the pass still held, its apps installed, and an
        # app crossed with a person's profile still sharing it.
        passes = services.stores.consolidations
        await passes.request(None, None)
        held = await passes.claim_next()
        assert held is not None

        async def allowed(*spaces: tuple[str, str]) -> bool:
            async with services.database.transaction() as tx:
                return await passes.within(tx).change_allowed(held, spaces)

        assert await allowed(("", "ana"), ("cal", "ana"))
        await client.patch("/apps/cal", json={"sharesProfile": False}, headers=ADMIN)
        assert not await allowed(("", "ana"), ("cal", "ana"))
        assert await allowed(("cal", "ana")) and await allowed(("", "ana"))
        assert (await client.delete("/apps/cal", headers=ADMIN)).status_code == 200
        assert not await allowed(("cal", "ana"))
        assert not await allowed(("nowhere", ""))
        erasing = await passes.request(None, "ana")
        assert (await client.delete("/users/ana/memories", headers=ADMIN)).status_code == 200
        assert (await passes.get(erasing.id)).status == "cancelled"  # type: ignore[union-attr]
        await passes.cancel_for("an operator's test", app_id=None)
        assert not await allowed(("", "ana"))  # no longer held


async def test_bad_requests_are_refused_and_a_pass_over_nothing_is_done(client):
    await install(client, "calendar", True)
    missing = await client.post("/consolidations", json={"appId": "nowhere"}, headers=ADMIN)
    assert missing.status_code == 404, missing.text
    bad = await client.post("/consolidations", json={"appId": "no spaces!"}, headers=ADMIN)
    assert bad.status_code == 400 and "appId" in bad.json()["detail"], bad.text
    assert (await client.get("/consolidations/999", headers=ADMIN)).status_code == 404
    assert (await client.post("/consolidations", json={})).status_code == 401

    ended = await consolidated(client, None)  # every space, none holding memories yet
    assert ended["status"] == "done" and ended["spaces"] == 0, ended
    listed = (await client.get("/consolidations", headers=ADMIN)).json()["consolidations"]
    assert [p["id"] for p in listed][:1] == [ended["id"]]


async def _with(read: Any, holds: Any) -> Any:
    value = await read
    return value if holds(value) else None


async def test_the_command_line_asks_and_the_services_worker_runs_the_pass(db_path):
    # The service's database, made by the command line as an operator would.
    assert mnemoloop(db_path, "migrate").returncode == 0
    assert mnemoloop(db_path, "apps", "install", "cal", "--shares-profile").returncode == 0
    for day in (1, 2):
        query(db_path, "INSERT INTO app_memories (app_id, user_id, content, created_at,"
                       " updated_at, metadata) VALUES ('', 'ana', ?, ?, ?, '{}')",
              (VEGETARIAN, f"2025-10-0{day}T10:00:00.000000Z", f"2025-10-0{day}T10:00:00.000000Z"))
    refused = mnemoloop(db_path, "consolidations", "request", "--app", "nowhere")
    assert refused.returncode == 2 and "nowhere" in refused.stderr
    asked = mnemoloop(db_path, "consolidations", "request", "--user", "ana")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("pass 1 (request, user ana): pending"), asked.stdout
    assert "memory worker" in asked.stderr

    async with extractive_service(db_path) as services, running(services):
        async def done() -> bool:
            found = await services.stores.consolidations.get(1)
            return found is not None and found.status == "done"

        await eventually(done)
    shown = mnemoloop(db_path, "consolidations", "show", "1")
    assert "pass 1 (request, user ana): done; 1 spaces, 1 pairs asked, 1 changed" in shown.stdout
    assert mnemoloop(db_path, "users", "profile", "ana").stdout.count(VEGETARIAN) == 1
    assert mnemoloop(db_path, "consolidations", "list").stdout.startswith("pass 1 ")
    assert mnemoloop(db_path, "consolidations", "show", "7").returncode == 2


async def test_the_client_asks_follows_and_lists_passes(db_path):
    async with extractive_service(db_path) as services, running(services), \
            live_http(services, "admin-secret") as url, \
            AsyncClient(url, "admin-secret") as admin:
        await admin.apps.install("cal", "Calendar", shares_profile=True)
        asked = await admin.consolidations.request(app_id="cal")
        assert (asked.app_id, asked.user_id, asked.status) == ("cal", None, "pending")

        async def ended() -> ConsolidationOut | None:
            found = await admin.consolidations.get(asked.id)
            return found if found.status == "done" else None

        assert (await eventually(ended)).spaces == 0
        assert [p.id for p in await admin.consolidations.list()] == [asked.id]
        with pytest.raises(NotFound):
            await admin.consolidations.get(asked.id + 1)
        with pytest.raises(NotFound):
            await admin.consolidations.request(app_id="nowhere")
        with pytest.raises(BadRequest):
            await admin.consolidations.request(user_id="a/b")
        with pytest.raises(NotFound):
            await admin.memories.links("cal", 12345)


async def test_the_console_asks_for_a_pass_and_shows_what_it_did(db_path):
    async with extractive_service(db_path) as services, running(services):
        client = http_client(services, "admin-secret")
        form = await client.get("/console/sign-in")
        await client.post("/console/sign-in", data={
            "csrf": csrf_in(form.text), "token": "admin-secret", "next": "/console"})
        await install(client, "calendar", True)
        for said in (VEGETARIAN, VEGETARIAN):
            await converse(client, "calendar", said, user="ana")
            await settled(client, "calendar")
        csrf = csrf_in((await client.get("/console/jobs")).text)
        assert (await client.post("/console/consolidations",
                                  data={"csrf": "forged", "user": "ana"})).status_code == 403
        missing = await client.post("/console/consolidations",
                                    data={"csrf": csrf, "app": "nowhere"})
        assert missing.status_code == 404
        asked = await client.post("/console/consolidations",
                                  data={"csrf": csrf, "app": "calendar", "user": "ana"})
        assert asked.status_code == 303 and asked.headers["location"].startswith("/console/jobs")

        async def shown_done() -> str | None:
            text = (await client.get("/console/jobs")).text
            done = '<strong>Pass 1</strong> <span class="badge status-done">'
            return text if done in text else None

        text = await eventually(shown_done)
        assert "app calendar user ana" in text
        assert re.search(r"\d+ spaces · 2 pairs asked · 2 changed · 0 model calls", text), text


async def test_the_worker_asks_for_the_scheduled_pass_at_its_first_look_and_runs_it(db_path):
    async with extractive_service(db_path, consolidation_every_seconds=3600) as services, \
            running(services):
        passes = services.stores.consolidations

        async def scheduled_done() -> bool:
            found = await passes.recent(5)
            return [(p.origin, p.status, p.app_id, p.user_id) for p in found] == [
                ("schedule", "done", None, None)]

        await eventually(scheduled_done)
        # Asked for once an interval, whoever looks.
        assert await passes.request_scheduled(due="2000-01-01T00:00:00.000000Z") is None
        assert len(await passes.recent(5)) == 1
