"""A person's profile across the apps that share it, and the memory delta header, on both
engines: a lasting personal fact told to one app reaches the person's conversations in every
app that shares the profile, never another app's nor another person's; the profile keeps its
cap; erasing the person leaves no byte of it; the header names what changed since the same
user's previous conversation, at most three bullets, and nothing when nothing changed."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.fake_ollama import SHOW_PROMPT
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall
from tests.harness import eventually, http_client, running, service
from tests.test_user_spaces import ADMIN, _every_text, contents, converse, settled

pytestmark = pytest.mark.anyio


def echoing_model() -> FunctionModel:
    """Answers `SHOW_PROMPT` with the system messages it was given; the extractive writer
    writes the memories (no model is asked for them)."""

    def answer(call: ModelCall) -> str:
        if call.messages[-1].content == SHOW_PROMPT:
            return "\n".join(m.content for m in call.messages if m.role == "system")
        return "Noted."

    return FunctionModel(answer)


@pytest.fixture
async def client(db_path) -> AsyncIterator[httpx.AsyncClient]:
    async with service(db_path, echoing_model(), memory_writer="extractive",
                       profile_limit=3) as services, running(services), \
            http_client(services, "admin-secret") as client:
        yield client


async def install(client: httpx.AsyncClient, app_id: str, shares: bool) -> None:
    installed = await client.post("/apps", json={"appId": app_id, "name": app_id,
                                                 "sharesProfile": shares}, headers=ADMIN)
    assert installed.status_code == 201, installed.text


async def profile(client: httpx.AsyncClient, user: str) -> list[str]:
    listed = await client.get(f"/users/{user}/profile", headers=ADMIN)
    assert listed.status_code == 200, listed.text
    return [m["content"] for m in listed.json()["memories"]]


async def test_a_fact_told_to_one_app_follows_the_person_to_the_apps_that_share(
    client, db_path, engine
):
    await install(client, "calendar", True)
    await install(client, "travel", True)
    await install(client, "notes", False)
    await converse(client, "calendar", "I'm vegetarian and my partner is Sam.", user="ana")
    await converse(client, "calendar", "Book the dentist for Tuesday at 15:00.", user="ana")
    await settled(client, "calendar")
    # The profile's copy is written after the job is recorded done.
    [fact] = await eventually(lambda: profile(client, "ana"))
    assert "vegetarian" in fact and "dentist" not in fact  # the app's business stays its own

    in_travel = await converse(client, "travel", SHOW_PROMPT, user="ana")
    assert "About this person, from every app they use:" in in_travel
    assert "vegetarian" in in_travel
    assert "vegetarian" not in await converse(client, "notes", SHOW_PROMPT, user="ana")
    assert "vegetarian" not in await converse(client, "travel", SHOW_PROMPT, user="ben")
    assert "vegetarian" not in await converse(client, "travel", SHOW_PROMPT)  # shared space

    # An app that does not share writes nothing there either.
    await converse(client, "notes", "I am allergic to penicillin.", user="ana")
    await settled(client, "notes")
    assert not [f for f in await profile(client, "ana") if "penicillin" in f]

    # Its own cap (3 here) and compaction, like a space (facts that need no consent:
    # test_consent.py holds those that do).
    for said in ("I prefer window seats.", "My timezone is Europe/Lisbon.",
                 "I prefer replies in the evening.", "My daughter Lia is 6."):
        await converse(client, "travel", said, user="ana")
    await settled(client, "travel")
    assert len(await profile(client, "ana")) == 3
    history = (await client.get("/users/ana/profile/history", headers=ADMIN)).json()["events"]
    assert any("from the app travel" in (e["reason"] or "") for e in history)
    found = await client.get("/users/ana/profile", params={"q": "evening"}, headers=ADMIN)
    assert [m for m in found.json()["memories"] if "evening" in m["content"]]

    # Exported, erased, and imported back, within its cap.
    exported = await client.get("/users/ana/profile/export", headers=ADMIN)
    assert exported.json()["appId"] == "" and len(exported.json()["memories"]) == 3
    kept = await profile(client, "ana")
    assert (await client.delete("/users/ana/profile", headers=ADMIN)).status_code == 200
    imported = await client.post("/users/ana/profile/import", json=exported.json(),
                                 headers=ADMIN)
    assert imported.status_code == 201, imported.text
    assert sorted(await profile(client, "ana")) == sorted(kept)
    too_many = await client.post("/users/ana/profile/import", json=exported.json(),
                                 headers=ADMIN)
    assert too_many.status_code == 409  # 6 would be above the profile's cap of 3

    erased = await client.delete("/users/ana/memories", headers=ADMIN)
    assert erased.status_code == 200, erased.text
    assert erased.json()["profileMemories"] == 3
    assert "" not in [a["appId"] for a in erased.json()["apps"]]
    assert await profile(client, "ana") == []
    texts = _every_text(db_path, engine)
    assert not [row for row in texts if "Lisbon" in row or "vegetarian" in row]
    if engine == "sqlite":
        for path in Path(db_path).parent.glob(Path(db_path).name + "*"):
            assert b"vegetarian" not in path.read_bytes(), path.name


async def test_sharing_is_an_app_setting_shown_and_changed_by_the_api(client):
    await install(client, "calendar", False)
    shown = (await client.get("/apps/calendar", headers=ADMIN)).json()
    assert shown["sharesProfile"] is False
    changed = await client.patch("/apps/calendar", json={"sharesProfile": True}, headers=ADMIN)
    assert changed.status_code == 200 and changed.json()["sharesProfile"] is True
    listed = (await client.get("/apps", headers=ADMIN)).json()["apps"]
    assert [a["sharesProfile"] for a in listed if a["appId"] == "calendar"] == [True]
    refused = await client.patch("/apps/calendar", json={"sharesProfile": "yes"}, headers=ADMIN)
    assert refused.status_code == 400
    await converse(client, "calendar", "I'm vegan.", user="bo")
    await settled(client, "calendar")
    erased = await client.delete("/users/bo/profile", headers=ADMIN)
    assert erased.json() == {"userId": "bo", "profileMemories": 1}
    assert await profile(client, "bo") == []
    assert await contents(client, "calendar", "bo")  # the app's own memory stays


def header_of(prompt: str) -> list[str]:
    """The delta header's lines: its heading and bullets."""
    match = re.search(r"Memory updates since rev \d+:\n((?:- .*\n?)+)", prompt)
    return match.group(0).strip().splitlines() if match else []


async def test_the_delta_header_names_what_changed_since_the_users_last_conversation(
    client,
):
    await install(client, "calendar", True)
    assert header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana")) == []
    await converse(client, "calendar", "My gym locker code is 4821.", user="ana")
    await settled(client, "calendar")
    header = header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana"))
    assert len(header) == 2 and header[1].startswith('- +created: "') and "4821" in header[1]
    # Nothing changed since: no header.
    assert header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana")) == []
    # Another user's changes are not this user's; the app's shared space's are.
    await converse(client, "calendar", "My locker code is 9999.", user="ben")
    await converse(client, "calendar", "The gym opens at 6:00 on weekdays.")
    await settled(client, "calendar")
    header = header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana"))
    assert len(header) == 2 and "6:00" in header[1] and "9999" not in "".join(header)
    # At most three bullets, newest first: the newer locker code retires the old one.
    for said in ("My bike lock code is 1357.", "My car plate is AB-12-CD.",
                 "My gym locker code is now 4822."):
        await converse(client, "calendar", said, user="ana")
    await settled(client, "calendar")
    header = header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana"))
    assert len(header) == 4, header
    # A deletion is named without its text.
    assert header[1:3] == ["- −deleted", "- −deleted"], header
    assert header[3].startswith('- +created: "') and "4822" in header[3], header
    # A memory made private is never named, nor any text of it.
    [newest] = [m for m in (await client.get(
        "/apps/calendar/memories", params={"userId": "ana"}, headers=ADMIN)).json()["memories"]
        if "4822" in m["content"]]
    assert (await client.patch(f"/apps/calendar/memories/{newest['id']}",
                               json={"private": True}, headers=ADMIN)).status_code == 200
    await converse(client, "calendar", "My gym locker code is now 5555.", user="ana")
    await settled(client, "calendar")
    header = header_of(await converse(client, "calendar", SHOW_PROMPT, user="ana"))
    assert header and "4822" not in "".join(header) and "5555" in "".join(header), header


async def test_the_delta_header_holds_over_a_restart(db_path):
    async def once(text: str, user: str = "ana") -> str:
        async with service(db_path, echoing_model(), memory_writer="extractive") as services, \
                running(services), http_client(services, "admin-secret") as client:
            if not (await client.get("/apps/calendar", headers=ADMIN)).is_success:
                await install(client, "calendar", False)
            reply = await converse(client, "calendar", text, user=user)
            await settled(client, "calendar")
            return reply

    await once(SHOW_PROMPT)
    await once("My locker code is 4821.")
    assert "4821" in "".join(header_of(await once(SHOW_PROMPT)))
    assert header_of(await once(SHOW_PROMPT)) == []


async def test_the_model_writer_says_which_facts_are_about_the_person(db_path):
    """With the model writer, the model's `aboutPerson` marks what goes to the profile."""

    def answer(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            assert '"aboutPerson"' in call.prompt
            return json.dumps({"sentences": [
                {"quote": "I'm vegan", "text": "The user is vegan.", "aboutPerson": True},
                {"quote": "table for two", "text": "The user booked a table for two.",
                 "aboutPerson": False}], "updates": []})
        return "Noted."

    async with service(db_path, FunctionModel(answer)) as services, running(services), \
            http_client(services, "admin-secret") as client:
        await install(client, "bistro", True)
        await converse(client, "bistro", "I'm vegan, a table for two please.", user="cy")
        await settled(client, "bistro")
        # The profile's copy is written after the job is recorded done.
        await eventually(lambda: profile(client, "cy"))
        assert await profile(client, "cy") == ["The user is vegan."]
        assert await contents(client, "bistro", "cy") == [
            "The user is vegan. The user booked a table for two."]

    async def no_job() -> bool:
        return True

    await eventually(no_job)


@pytest.mark.postgresql_only
@pytest.mark.fault
async def test_the_delta_header_over_three_instances_on_postgresql(db_path, tmp_path):
    """Each conversation answered by another instance: the header is the database's, not an
    instance's."""
    from tests.fake_ollama import fake_ollama
    from tests.test_multi_instance import HEADERS, Instances

    with fake_ollama(delay=0.01) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            urls = await instances.serve(3)
            clients = [httpx.AsyncClient(base_url=u, headers=HEADERS, timeout=30) for u in urls]
            installed = await clients[0].post("/apps", json={"appId": "team", "name": "Team"})
            assert installed.status_code == 201

            async def talk(instance: int, text: str) -> str:
                client = clients[instance]
                opened = await client.post("/apps/team/conversations", json={"userId": "ana"})
                conversation_id = opened.json()["conversationId"]
                posted = await client.post(f"/conversations/{conversation_id}/messages?wait=30",
                                           json={"content": text})
                await client.post(f"/conversations/{conversation_id}/end")
                return str(posted.json()["reply"]["content"])

            async def written() -> bool:
                jobs = (await clients[0].get("/memory-jobs?appId=team")).json()["jobs"]
                return bool(jobs) and all(j["status"] == "done" for j in jobs)

            assert header_of(await talk(0, SHOW_PROMPT)) == []
            await talk(1, "My friend Ines lives in Braga.")
            await eventually(written, timeout=30)
            header = header_of(await talk(2, SHOW_PROMPT))
            assert len(header) == 2 and "Ines" in header[1] and "+created" in header[1]
            assert header_of(await talk(0, SHOW_PROMPT)) == []
            assert header_of(await talk(1, SHOW_PROMPT)) == []
            for client in clients:
                await client.aclose()
        finally:
            instances.stop()


async def test_a_fact_the_profile_holds_is_given_once_in_the_apps_own_conversations(client):
    """Told to an app that shares profiles, the fact is in the user's space there and in the
    profile; the next memory block of that user in that app says it once."""
    await install(client, "calendar", True)
    await converse(client, "calendar", "I'm vegetarian and my partner is Sam.", user="ana")
    await settled(client, "calendar")
    [fact] = await eventually(lambda: profile(client, "ana"))
    own = (await client.get("/apps/calendar/memories", params={"userId": "ana"},
                            headers=ADMIN)).json()["memories"]
    assert [m["content"] for m in own] == [fact]  # the same fact in both spaces

    block = await converse(client, "calendar", SHOW_PROMPT, user="ana")
    lines = [line for line in block.splitlines() if "vegetarian" in line]
    # Once in the delta header (created in both spaces) and once as a memory.
    assert [line.split(" ", 1)[0] for line in lines] == ["-", "1."], block
    assert "About this person, from every app they use:" in block
    assert "About this user:" not in block  # its one memory is the profile's
