"""The console's sign-in, session and CSRF rules over HTTP, and the figures its overview reads:
energy spending by the minute, compaction outcomes, conversations by latest activity."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from httpx import AsyncClient

from loop.jobs.store import MemoryJobStore
from loop.operations.energy import EnergyBudget
from tests.harness import assistant_model, csrf_in, eventually, http_client, running, service

pytestmark = pytest.mark.anyio

TOKEN = "console-http-token"


async def _signed_in(client: AsyncClient) -> str:
    """Sign in; returns the CSRF token of the overview's forms."""
    form = await client.get("/console/sign-in")
    answer = await client.post(
        "/console/sign-in", data={"csrf": csrf_in(form.text), "token": TOKEN, "next": "/console"}
    )
    assert answer.status_code == 303, answer.text
    return csrf_in((await client.get("/console")).text)


async def test_sign_in_needs_the_admin_token_and_the_forms_own_csrf_token(db_path):
    async with service(db_path, assistant_model()) as services:
        client = http_client(services, TOKEN)
        assert (await client.get("/console/jobs")).status_code == 303  # to the sign-in page

        form = await client.get("/console/sign-in")
        csrf = csrf_in(form.text)
        wrong = await client.post("/console/sign-in", data={"csrf": csrf, "token": "nope"})
        assert wrong.status_code == 401 and "not the admin token" in wrong.text

        # A sign-in posted from elsewhere carries no matching cookie.
        stranger = http_client(services, TOKEN)
        forged = await stranger.post("/console/sign-in", data={"csrf": csrf, "token": TOKEN})
        assert forged.status_code == 403 and "mnemoloop_console" not in forged.headers.get(
            "set-cookie", ""
        )

        odd = await client.post("/console/sign-in", data={"csrf": "é", "token": TOKEN})
        assert odd.status_code == 403
        signed = await client.post(
            "/console/sign-in", data={"csrf": csrf, "token": TOKEN, "next": "https://evil.test/"}
        )
        assert signed.status_code == 303 and signed.headers["location"] == "/console"
        cookie = signed.headers.get_list("set-cookie")[0]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        page = await client.get("/console")
        assert page.status_code == 200
        huge = await client.post(
            f"/console/apps/cal/memories/{10**30}/delete", data={"csrf": csrf_in(page.text)}
        )
        assert huge.status_code == 400 and "Error 400" in huge.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["cache-control"] == "no-store"


async def test_every_form_needs_the_sessions_csrf_token(db_path):
    async with service(db_path, assistant_model()) as services:
        await services.stores.registry.install("cal", "Calendar")
        client = http_client(services, TOKEN)
        csrf = await _signed_in(client)
        for data in ({}, {"csrf": "forged"}, {"csrf": csrf + "x"}, {"csrf": "é"}):
            refused = await client.post("/console/apps/cal/purge", data={**data, "count": "0"})
            assert refused.status_code == 403 and "Form refused" in refused.text
        assert (await client.post(
            "/console/apps", data={"csrf": "", "app_id": "evil", "name": "Evil"}
        )).status_code == 403
        assert await services.stores.registry.get("evil") is None

        installed = await client.post(
            "/console/apps", data={"csrf": csrf, "app_id": "food", "name": "Food"}
        )
        assert installed.status_code == 201
        key = re.search(r'data-testid="api-key">([^<]+)<', installed.text)
        assert key and await services.stores.registry.app_for_key(key.group(1)) == "food"
        # The key is on that answer only.
        assert key.group(1) not in (await client.get("/console/apps/food")).text
        assert key.group(1) not in (await client.get("/console")).text


async def test_a_purge_confirmed_for_another_count_asks_again(db_path):
    model = assistant_model()
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        for text in ("I live in Oslo.", "I work at the harbour."):
            conversation_id = await services.stores.conversations.open("cal")
            await services.stores.conversations.add_message(conversation_id, "user", text)
            await services.stores.conversations.end(conversation_id, "app")
        await eventually(lambda: _count_is(services, "cal", 2))
        client = http_client(services, TOKEN)
        csrf = await _signed_in(client)

        stale = await client.post("/console/apps/cal/purge", data={"csrf": csrf, "count": "1"})
        assert stale.status_code == 409 and "Delete all 2 memories" in stale.text
        assert await services.stores.agent.get_memory_count("cal") == 2
        stale = await client.post(
            "/console/apps/cal/uninstall", data={"csrf": csrf, "count": "3", "memories": "purge"}
        )
        assert stale.status_code == 409 and "all 2, and their text" in stale.text
        assert (await services.stores.registry.require("cal")).installed
        done = await client.post("/console/apps/cal/purge", data={"csrf": csrf, "count": "2"})
        assert done.status_code == 303
        assert done.headers["location"] == "/console/apps/cal?done=purged&n=2"
        assert "Purged: 2 memories deleted." in (await client.get(done.headers["location"])).text
        assert await services.stores.agent.get_memory_count("cal") == 0

        gone = await client.post(
            "/console/apps/cal/uninstall", data={"csrf": csrf, "memories": "keep"}
        )
        assert gone.headers["location"] == "/console/apps/cal?done=uninstalled-kept&n=0"
        again = await client.post(
            "/console/apps/cal/uninstall", data={"csrf": csrf, "memories": "keep"}
        )
        assert again.status_code == 409 and "is uninstalled" in again.text

        # The notice is one of the page's own texts, whatever a link says.
        spoofed = await client.get("/console/apps/cal?done=Visit+evil.test&n=1")
        assert spoofed.status_code == 200 and 'class="notice"' not in spoofed.text


async def _count_is(services, app_id: str, count: int) -> bool:
    return await services.stores.agent.get_memory_count(app_id) == count


async def test_signing_out_or_rotating_the_admin_token_ends_the_session(db_path):
    async with service(db_path, assistant_model(), admin_token=None) as services:
        token = await services.admin_token.ensure()
        assert token
        client = http_client(services)  # the service's own admin token
        form = await client.get("/console/sign-in")
        await client.post("/console/sign-in", data={"csrf": csrf_in(form.text), "token": token})
        overview = await client.get("/console")
        assert overview.status_code == 200

        # A rotated token signs everyone out; signing in again leads back to the same page,
        # or to the page a form was posted from.
        new = await services.admin_token.rotate()
        again = await client.get("/console/jobs?status=done")
        assert again.headers["location"] == (
            "/console/sign-in?next=%2Fconsole%2Fjobs%3Fstatus%3Ddone"
        )
        from_jobs = {"referer": "http://mnemoloop.test/console/jobs"}
        posted = await client.post("/console/apps", data={"csrf": "x"}, headers=from_jobs)
        assert posted.status_code == 401 and "next=%2Fconsole%2Fjobs" in posted.text

        form = await client.get("/console/sign-in")
        await client.post("/console/sign-in", data={"csrf": csrf_in(form.text), "token": new})
        csrf = csrf_in((await client.get("/console")).text)
        cookie = client.cookies["mnemoloop_console"]
        assert (await client.post("/console/sign-out", data={"csrf": csrf})).status_code == 303
        replayed = http_client(services)
        replayed.cookies.set("mnemoloop_console", cookie)
        assert (await replayed.get("/console")).status_code == 303


class _Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


async def test_spending_is_kept_by_the_minute_for_every_instance(database):
    clock = _Clock(datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC))
    one, two = (
        EnergyBudget(database, clock, capacity=1000, refill_per_second=0, memory_floor=0.2)
        for _ in range(2)
    )
    await one.load()
    await two.load()
    await one.charge("memory", 5)
    await two.charge("conversation", 7)
    await one.charge("memory", 1)
    clock.at += timedelta(minutes=2)
    await one.charge("conversation", 3)
    await one.write_spending()  # as it does every minute while it runs
    await one.charge("conversation", 2)  # not written yet

    minutes = await two.spending(3)  # writes its own first
    assert [(m.memory, m.conversation) for m in minutes] == [(6, 7), (0, 0), (0, 3)]
    minutes = await one.spending(3)
    assert [(m.memory, m.conversation) for m in minutes] == [(6, 7), (0, 0), (0, 5)]
    assert minutes[0].minute_s == int(datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp())
    report = await one.report()
    assert (report.memory_spent, report.conversation_spent) == (6, 12)

    # An instance that spends and then idles still shows on the others' charts.
    await one.charge("memory", 4)
    async with anyio.create_task_group() as group:
        group.start_soon(one.write_spending_every, 0.05)
        await eventually(lambda: _last_minute_memory(two, 4))
        group.cancel_scope.cancel()


async def _last_minute_memory(budget: EnergyBudget, units: int) -> bool:
    return (await budget.spending(1))[-1].memory == units


async def test_compaction_outcomes_are_counted_from_the_jobs_steps(db_path):
    model = assistant_model(compaction=lambda call: "no decision")
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        for n in range(12):
            conversation_id = await services.stores.conversations.open("cal")
            await services.stores.conversations.add_message(
                conversation_id, "user", f"Remember code {n:04d} for locker {n}."
            )
            await services.stores.conversations.end(conversation_id, "app")
        await eventually(lambda: _all_done(services.stores.jobs, 12))
        tally = await services.stores.jobs.compaction_tally()
        assert tally.jobs == 2
        assert sum(tally.outcomes.values()) == 2
        assert tally.outcomes["delete by model"] == tally.outcomes["merge by model"] == 0
        assert sum(tally.fallback_reasons.values()) == 2

        recent = await services.stores.conversations.recent("cal", limit=5)
        assert len(recent) == 5 and all(c.state == "ended" for c in recent)
        assert recent[0].last_activity_at >= recent[-1].last_activity_at
        assert await services.stores.conversations.recent("other") == []


async def _all_done(jobs: MemoryJobStore, count: int) -> bool:
    return (await jobs.counts_by_status())["done"] == count


async def test_an_apps_profile_sharing_and_a_persons_profile_page(db_path):
    """The app's page says whether it shares its users' profiles and changes it; a person's
    profile page lists, searches and purges their profile memories."""
    from memory_agent.storage.store import PROFILE_APP, MemoryStore

    async with service(db_path, assistant_model()) as services:
        await services.stores.registry.install("cal", "Calendar")
        client = http_client(services, TOKEN)
        csrf = await _signed_in(client)
        app_page = await client.get("/console/apps/cal?user=ana")
        assert "Does not share its users' profiles" in app_page.text
        assert 'href="/console/users/ana/profile"' in app_page.text
        shared = await client.post("/console/apps/cal/profile-sharing",
                                   data={"csrf": csrf, "sharing": "1"})
        assert shared.status_code == 303
        assert (await services.stores.registry.require("cal")).shares_profile
        assert "It now shares its users" in (
            await client.get(shared.headers["location"])).text

        store = MemoryStore(services.database, services.clock)
        for content in ("The user is vegetarian.", "The user's partner is Sam."):
            await store.insert(PROFILE_APP, content, created_at="2026-01-01T00:00:00.000000Z",
                               user_id="ana")
        profile = await client.get("/console/users/ana/profile")
        assert profile.status_code == 200
        assert "vegetarian" in profile.text and "Sam" in profile.text
        assert 'href="/console/apps/cal?user=ana">Calendar</a>' in profile.text
        found = await client.get("/console/users/ana/profile", params={"q": "partner"})
        assert "Sam" in found.text and "vegetarian" not in found.text
        asked = await client.get("/console/users/ana/profile/purge")
        assert "all <strong>2</strong> memories" in asked.text
        purged = await client.post("/console/users/ana/profile/purge", data={"csrf": csrf})
        assert purged.status_code == 303
        assert "Profile erased: 2 memories." in (await client.get(purged.headers["location"])).text
        assert await services.stores.agent.list_memories(PROFILE_APP, user_id="ana") == []
        refused = await client.post("/console/users/ana/profile/purge", data={"csrf": "x"})
        assert refused.status_code == 403


async def test_a_memorys_digest_and_its_irrelevant_tag_are_shown(db_path):
    from memory_agent.storage.store import MemoryStore

    async with service(db_path, assistant_model()) as services:
        await services.stores.registry.install("gym", "Gym")
        store = MemoryStore(services.database)
        now = services.stores.agent.now()
        long = await store.insert("gym", "The locker is 4417. It is on the second floor.",
                                  created_at=now)
        await store.insert("gym", "The user likes tea.", created_at=now)
        await services.stores.agent.tag_memory("gym", long.id, relevant=False, reason="stale")
        async with http_client(services, TOKEN) as client:
            await _signed_in(client)
            page = (await client.get("/console/apps/gym")).text
    assert "Digest, as a conversation shows it after three turns: The locker is 4417." in page
    assert page.count("Digest, as a conversation shows it") == 1  # a one-sentence memory is its own
    assert "tagged irrelevant: a stub in every conversation" in page
