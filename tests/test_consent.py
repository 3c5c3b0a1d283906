"""Consent before a person's profile changes, on both engines: a sensitive fact (name, city,
health...) a conversation tells waits as a proposal, never injected, while the app's own
memory is written at once; the person accepts or declines it through the API, the client,
the CLI, the console or an app's MCP tools (each a test here), and nothing else writes it;
an answer to a proposal that is not pending is 409; one no one answers lapses; a
consolidation pass's change to a sensitive profile fact waits the same way. The detector
finds the fields in several languages and scripts, and fails closed on a language it cannot
read."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pydantic
import pytest

from loop.settings import Settings
from memory_agent.consent.fields import UNREAD, SensitiveFields, checked_fields
from mnemoloop.client import AsyncClient, Conflict
from tests.db_query import query
from tests.fake_ollama import SHOW_PROMPT
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall
from tests.harness import csrf_in, eventually, http_client, live_http, running, service
from tests.test_cli import mnemoloop
from tests.test_consolidation import consolidated
from tests.test_mcp import error_text, http_session, payload
from tests.test_profiles import echoing_model, profile
from tests.test_user_spaces import ADMIN, _every_text, contents, converse, settled

pytestmark = pytest.mark.anyio

TOKEN = "admin-secret"
LISBON = "My name is Ana and I live in Lisbon."


@pytest.fixture
async def services(db_path) -> AsyncIterator[Any]:
    async with service(db_path, echoing_model(), memory_writer="extractive") as running_one, \
            running(running_one):
        yield running_one


@pytest.fixture
async def client(services) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(services, TOKEN) as client:
        yield client


async def install(client: httpx.AsyncClient, app_id: str, shares: bool) -> str:
    """Install the app (sharing its users' profiles or not); its key."""
    installed = await client.post("/apps", json={"appId": app_id, "name": app_id,
                                                 "sharesProfile": shares}, headers=ADMIN)
    assert installed.status_code == 201, installed.text
    return str(installed.json()["apiKey"])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def pending(client: httpx.AsyncClient, user: str) -> list[dict[str, Any]]:
    listed = await client.get(f"/users/{user}/profile/proposals", params={"status": "pending"},
                              headers=ADMIN)
    assert listed.status_code == 200, listed.text
    return list(listed.json()["proposals"])


async def told(
    client: httpx.AsyncClient, app_id: str, said: str, user: str = "ana"
) -> dict[str, Any]:
    """The user tells `app_id` a sensitive fact; the proposal it leaves (the newest)."""
    before = {p["id"] for p in await pending(client, user)}
    await converse(client, app_id, said, user=user)
    await settled(client, app_id)
    fresh = await eventually(
        lambda: _newer(pending(client, user), before)
    )
    return dict(fresh[0])


async def _newer(listed: Any, before: set[int]) -> list[dict[str, Any]]:
    return [p for p in await listed if p["id"] not in before]


async def answer(client: httpx.AsyncClient, user: str, proposal_id: int, decision: str,
                 headers: dict[str, str] = ADMIN) -> httpx.Response:
    return await client.post(f"/users/{user}/profile/proposals",
                             json={"id": proposal_id, "decision": decision}, headers=headers)


async def test_a_sensitive_fact_waits_for_the_person_and_is_written_once_accepted(client):
    await install(client, "calendar", True)
    await install(client, "travel", True)
    proposal = await told(client, "calendar", LISBON)
    assert set(proposal["fields"]) == {"name", "city"}
    assert "Lisbon" in proposal["content"] and proposal["appId"] == "calendar"
    assert proposal["origin"] == "memory" and proposal["decidedAt"] is None
    # The app's own memory is not held back; the profile and every other app see nothing.
    assert [m for m in await contents(client, "calendar", "ana") if "Lisbon" in m]
    assert await profile(client, "ana") == []
    assert "Lisbon" not in await converse(client, "travel", SHOW_PROMPT, user="ana")

    accepted = await answer(client, "ana", proposal["id"], "accept")
    assert accepted.status_code == 200, accepted.text
    body = accepted.json()
    assert (body["status"], body["decidedThrough"]) == ("accepted", "api")
    [fact] = await profile(client, "ana")
    assert "Lisbon" in fact
    listed = (await client.get("/users/ana/profile", headers=ADMIN)).json()["memories"]
    assert body["memoryId"] == listed[0]["id"]
    assert "Lisbon" in await converse(client, "travel", SHOW_PROMPT, user="ana")
    history = (await client.get("/users/ana/profile/history", headers=ADMIN)).json()["events"]
    assert any(f"proposal {proposal['id']}, accepted through api" in (e["reason"] or "")
               for e in history)

    # Answered once: again is 409, and nothing changes.
    again = await answer(client, "ana", proposal["id"], "decline")
    assert again.status_code == 409 and "accepted, not pending" in again.json()["detail"]
    assert len(await profile(client, "ana")) == 1


async def test_a_declined_or_lapsed_proposal_writes_nothing(client, db_path, engine):
    await install(client, "calendar", True)
    declined = await told(client, "calendar", "I am allergic to penicillin.")
    assert declined["fields"] == ["health"]
    answered = await answer(client, "ana", declined["id"], "decline")
    assert answered.status_code == 200 and answered.json()["status"] == "declined"
    assert await profile(client, "ana") == []

    lapsing = await told(client, "calendar", "I moved to Porto last year.")
    assert lapsing["fields"] == ["city"]
    # Its seven days are over (no clock is turned: the row's time is).
    query(db_path, "UPDATE profile_proposals SET lapses_at = '2000-01-01T00:00:00.000000Z'"
                   " WHERE id = ?", (lapsing["id"],))
    late = await answer(client, "ana", lapsing["id"], "accept")
    assert late.status_code == 409 and "lapsed" in late.json()["detail"]
    every = (await client.get("/users/ana/profile/proposals", headers=ADMIN)).json()["proposals"]
    assert {p["id"]: p["status"] for p in every} == {
        declined["id"]: "declined", lapsing["id"]: "lapsed"}
    assert await profile(client, "ana") == []

    # Bad answers: an unknown proposal, another person's, a decision that is neither.
    assert (await answer(client, "ana", 10**6, "accept")).status_code == 404
    assert (await answer(client, "ben", declined["id"], "accept")).status_code == 404
    odd = await answer(client, "ana", declined["id"], "maybe")
    assert odd.status_code == 400 and "decision" in odd.json()["detail"]

    # Erasing the person takes their proposals, whatever their status, to the last byte.
    await told(client, "calendar", "My name is Ana Pereira.")
    assert (await client.delete("/users/ana/memories", headers=ADMIN)).status_code == 200
    assert (await client.get("/users/ana/profile/proposals", headers=ADMIN)).json() == {
        "proposals": []}
    assert not [t for t in _every_text(db_path, engine)
                if "Porto" in t or "penicillin" in t or "Pereira" in t]


async def test_what_needs_no_consent_and_what_an_app_may_relay(client):
    keys = {"calendar": bearer(await install(client, "calendar", True)),
            "notes": bearer(await install(client, "notes", False))}
    await converse(client, "calendar", "I prefer window seats.", user="ana")
    await settled(client, "calendar")
    [fact] = await eventually(lambda: profile(client, "ana"))
    assert "window" in fact and await pending(client, "ana") == []

    proposal = await told(client, "calendar", "My work email is ana@example.org.")
    assert proposal["fields"] == ["contact"]
    refused = await client.get("/users/ana/profile/proposals", headers=keys["notes"])
    assert refused.status_code == 403 and "does not share" in refused.json()["detail"]
    assert (await answer(client, "ana", proposal["id"], "accept",
                         keys["notes"])).status_code == 403
    # An app that shares profiles but has never served this person sees nothing of theirs.
    keys["travel"] = bearer(await install(client, "travel", True))
    stranger = await client.get("/users/ana/profile/proposals", headers=keys["travel"])
    assert stranger.status_code == 403 and "serves no user" in stranger.json()["detail"]
    relayed = await answer(client, "ana", proposal["id"], "accept", keys["calendar"])
    assert relayed.status_code == 200, relayed.text
    assert relayed.json()["decidedThrough"] == "app:calendar"
    assert [f for f in await profile(client, "ana") if "ana@example.org" in f]


async def test_a_change_is_asked_once_and_a_refusal_is_remembered(client):
    await install(client, "calendar", True)
    first = await told(client, "calendar", LISBON)
    await converse(client, "calendar", LISBON, user="ana")
    await settled(client, "calendar")
    assert [p["id"] for p in await pending(client, "ana")] == [first["id"]]
    assert (await answer(client, "ana", first["id"], "decline")).status_code == 200
    await converse(client, "calendar", LISBON, user="ana")
    await settled(client, "calendar")
    every = (await client.get("/users/ana/profile/proposals", headers=ADMIN)).json()
    assert [(p["id"], p["status"]) for p in every["proposals"]] == [(first["id"], "declined")]
    assert await profile(client, "ana") == []


async def test_an_accepted_change_that_no_longer_fits_as_shown_asks_again(db_path):
    async with service(db_path, echoing_model(), memory_writer="extractive",
                       profile_limit=1) as small, running(small), \
            http_client(small, TOKEN) as client:
        await install(client, "calendar", True)
        await converse(client, "calendar", "I prefer window seats.", user="ana")
        await settled(client, "calendar")
        await eventually(lambda: profile(client, "ana"))
        lisbon = await told(client, "calendar", LISBON)
        assert "window" in (lisbon["before"] or "")  # making room would remove it
        health = await told(client, "calendar", "I am allergic to penicillin.")
        assert (await answer(client, "ana", health["id"], "accept")).status_code == 200
        [held] = await profile(client, "ana")
        assert "penicillin" in held
        # Making room for Lisbon now would remove the allergy, which the person was not shown.
        late = await answer(client, "ana", lisbon["id"], "accept")
        assert late.status_code == 409 and "superseded" in late.json()["detail"], late.text
        [again] = await pending(client, "ana")
        assert "Lisbon" in again["content"] and "penicillin" in (again["before"] or "")
        assert await profile(client, "ana") == [held]
        accepted = await answer(client, "ana", again["id"], "accept")
        assert accepted.status_code == 200, accepted.text
        assert [f for f in await profile(client, "ana") if "Lisbon" in f]


async def test_the_client_lists_and_answers(services):
    async with live_http(services, TOKEN) as url, AsyncClient(url, TOKEN) as admin:
        await admin.apps.install("cal", "Calendar", shares_profile=True)
        conversation = await admin.conversations.open("cal", user_id="ana")
        await admin.conversations.send(conversation, LISBON, wait=20)
        await admin.conversations.end(conversation, reason="done")
        [proposal] = await eventually(lambda: admin.users.proposals("ana", status="pending"))
        answered = await admin.users.answer_proposal("ana", proposal.id, accept=True)
        assert (answered.status, answered.decided_through) == ("accepted", "client")
        assert [m for m in await admin.users.profile("ana") if "Lisbon" in m.content]
        with pytest.raises(Conflict, match="not pending"):
            await admin.users.answer_proposal("ana", proposal.id, accept=False)


async def test_the_command_line_lists_and_answers(services, client, db_path):
    await install(client, "calendar", True)
    first = await told(client, "calendar", LISBON)
    second = await told(client, "calendar", "I am diabetic.")
    listed = mnemoloop(db_path, "users", "proposals", "ana", "--status", "pending")
    assert listed.returncode == 0, listed.stderr
    assert f"proposal {first['id']} (city, name" in listed.stdout
    assert f"proposal {second['id']} (health" in listed.stdout
    accepted = mnemoloop(db_path, "users", "accept", "ana", str(first["id"]))
    assert accepted.returncode == 0, accepted.stderr
    assert "accepted by cli" in accepted.stdout
    declined = mnemoloop(db_path, "users", "decline", "ana", str(second["id"]))
    assert "declined by cli" in declined.stdout
    again = mnemoloop(db_path, "users", "accept", "ana", str(second["id"]))
    assert again.returncode != 0 and "declined, not pending" in again.stderr
    kept = await profile(client, "ana")
    assert [f for f in kept if "Lisbon" in f] and not [f for f in kept if "diabetic" in f]


async def test_the_console_shows_and_answers(client):
    await install(client, "calendar", True)
    proposal = await told(client, "calendar", LISBON)
    form = await client.get("/console/sign-in")
    signed = await client.post("/console/sign-in", data={
        "csrf": csrf_in(form.text), "token": TOKEN, "next": "/console"})
    assert signed.status_code == 303
    page = await client.get("/console/users/ana/profile")
    assert f'data-proposal="{proposal["id"]}"' in page.text and "Lisbon" in page.text
    csrf = csrf_in(page.text)
    done = await client.post(f"/console/users/ana/profile/proposals/{proposal['id']}",
                             data={"csrf": csrf, "decision": "accept"})
    assert done.status_code == 303 and "proposal-accepted" in done.headers["location"]
    after = await client.get(done.headers["location"])
    assert "accepted: the profile holds it now" in after.text
    assert re.search(r"Nothing waits", after.text)
    assert [f for f in await profile(client, "ana") if "Lisbon" in f]
    twice = await client.post(f"/console/users/ana/profile/proposals/{proposal['id']}",
                              data={"csrf": csrf, "decision": "decline"})
    assert "proposal-not-pending" in twice.headers["location"]


async def test_an_apps_mcp_tools_show_and_relay_the_answer(services, client):
    keys = {"calendar": await install(client, "calendar", True),
            "notes": await install(client, "notes", False)}
    proposal = await told(client, "calendar", LISBON)
    async with live_http(services, TOKEN) as url:
        async with http_session(f"{url}/mcp", keys["notes"]) as session:
            assert "does not share" in error_text(
                await session.call_tool("profile_proposals", {"user_id": "ana"}))
        async with http_session(f"{url}/mcp", keys["calendar"]) as session:
            [shown] = payload(await session.call_tool("profile_proposals", {"user_id": "ana"}))
            assert shown["id"] == proposal["id"] and "Lisbon" in shown["content"]
            answered = payload(await session.call_tool("answer_profile_proposal", {
                "user_id": "ana", "proposal_id": proposal["id"], "decision": "accept"}))
            assert answered["decidedThrough"] == "app:calendar (mcp)"
            assert "not pending" in error_text(await session.call_tool(
                "answer_profile_proposal",
                {"user_id": "ana", "proposal_id": proposal["id"], "decision": "decline"}))
    assert [f for f in await profile(client, "ana") if "Lisbon" in f]


async def test_a_passs_change_to_a_sensitive_profile_fact_waits_too(client):
    await install(client, "calendar", True)
    await install(client, "travel", True)
    for app_id in ("calendar", "travel"):
        told_here = await told(client, app_id, LISBON)
        assert (await answer(client, "ana", told_here["id"], "accept")).status_code == 200
    assert sum("Lisbon" in f for f in await profile(client, "ana")) == 2

    ended = await consolidated(client, {"userId": "ana"})
    assert ended["status"] == "done" and ended["changes"] == 0, ended
    [held] = await pending(client, "ana")
    assert held["origin"] == "consolidation" and "Lisbon" in (held["before"] or "")
    assert sum("Lisbon" in f for f in await profile(client, "ana")) == 2
    accepted = await answer(client, "ana", held["id"], "accept")
    assert accepted.status_code == 200, accepted.text
    assert sum("Lisbon" in f for f in await profile(client, "ana")) == 1
    history = (await client.get("/users/ana/profile/history", headers=ADMIN)).json()["events"]
    assert any(f"proposal {held['id']}, accepted through api" in (e["reason"] or "")
               and "consolidated" in (e["reason"] or "") for e in history)
    block = await converse(client, "travel", SHOW_PROMPT, user="ana")
    assert block.count("Lisbon") >= 1


async def test_the_model_writers_profile_part_waits_too(db_path):
    """With the model writer, what the model marks `aboutPerson` is what is read for the
    fields; the app's memory is written whole at once."""

    def answer(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            return json.dumps({"sentences": [
                {"quote": "I'm Ana from Lisbon",
                 "text": "The user's name is Ana; she lives in Lisbon.", "aboutPerson": True},
                {"quote": "table for two", "text": "The user booked a table for two.",
                 "aboutPerson": False}], "updates": []})
        return "Noted."

    async with service(db_path, FunctionModel(answer)) as model_service, \
            running(model_service), http_client(model_service, TOKEN) as client:
        await install(client, "bistro", True)
        proposal = await told(client, "bistro", "I'm Ana from Lisbon, a table for two please.")
        assert proposal["content"] == "The user's name is Ana; she lives in Lisbon."
        assert set(proposal["fields"]) == {"name", "city"}
        assert await contents(client, "bistro", "ana") == [
            "The user's name is Ana; she lives in Lisbon. The user booked a table for two."]
        assert await profile(client, "ana") == []
        assert (await answer_to(client, proposal["id"])).status_code == 200
        assert await profile(client, "ana") == ["The user's name is Ana; she lives in Lisbon."]


async def answer_to(client: httpx.AsyncClient, proposal_id: int) -> httpx.Response:
    return await answer(client, "ana", proposal_id, "accept")


async def test_no_fields_configured_asks_for_nothing(db_path):
    async with service(db_path, echoing_model(), memory_writer="extractive",
                       sensitive_fields="") as quiet, running(quiet), \
            http_client(quiet, TOKEN) as client:
        await install(client, "calendar", True)
        await converse(client, "calendar", LISBON, user="ana")
        await settled(client, "calendar")
        assert [f for f in await eventually(lambda: profile(client, "ana")) if "Lisbon" in f]
        assert await pending(client, "ana") == []


@pytest.mark.parametrize(("text", "fields"), [
    ("The user's name is Ana and she lives in Lisbon.", {"name", "city"}),
    ("The user is allergic to peanuts.", {"health"}),
    ("Reach the user at ana@example.org.", {"contact"}),
    ("Ana mora em Lisboa e fala português.", {"city", "language"}),
    ("Der Nutzer heißt Jonas.", {"name"}),
    ("Пользователя зовут Анна.", {"name"}),
    ("用户住在北京。", {"city"}),
    ("ユーザーは東京に住んでいる。", {"city"}),
    # A language no file with the fields' words reads: every change in it waits.
    ("사용자는 서울에 산다.", {UNREAD}),
    ("Mtumiaji anaishi Nairobi na anapenda chai.", {UNREAD}),
    # Nothing sensitive: written at once.
    ("The user prefers tea over coffee in the morning.", set()),
    ("The user has a meeting on 2026-05-04 at 10:00.", set()),
    ("La usuaria siempre prefiere el té y no el café por la mañana.", set()),
])
def test_the_fields_a_text_speaks_of(text, fields):
    assert SensitiveFields().found_in(text) == fields


def test_the_fields_are_the_operators_and_an_unknown_one_is_refused():
    assert SensitiveFields(("health",)).found_in("My name is Ana; I have asthma.") == {"health"}
    assert SensitiveFields(()).found_in("My name is Ana.") == set()
    assert checked_fields(["name", " city", ""]) == ("name", "city")
    with pytest.raises(ValueError, match="'shoe size' is no sensitive field"):
        checked_fields(["name", "shoe size"])
    with pytest.raises(pydantic.ValidationError, match="shoe size"):
        Settings(sensitive_fields="name,shoe size")
