"""A memory's sensitivity: public (injected), private (never injected), secret (never shown to a
model either) and unknown (never returned by a read: fail-closed), on a real service."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.harness import (
    assistant_model,
    csrf_in,
    eventually,
    http_client,
    running,
    service,
)

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}
SECRET = "The user's safe combination is 31-7-22."
PUBLIC = "The user plays tennis on Saturdays."
HIDDEN = "The user's diagnosis is kept from every reader."


def compaction_prompts() -> tuple[list[str], object]:
    seen: list[str] = []

    def compaction(call) -> str:
        seen.append(call.prompt)
        return "no decision"

    return seen, assistant_model(compaction=compaction)


@pytest.fixture
async def setup(db_path) -> AsyncIterator:
    seen, model = compaction_prompts()
    async with service(db_path, model, memory_limit=3) as services, running(services), \
            http_client(services, "admin-secret") as client:
        installed = await client.post("/apps", json={"appId": "cal", "name": "Calendar"},
                                      headers=ADMIN)
        assert installed.status_code == 201, installed.text
        yield client, services, seen


async def imported(client, *memories: dict) -> dict[str, int]:
    response = await client.post("/apps/cal/memories/import", headers=ADMIN, json={
        "memories": [{"createdAt": "2026-11-01T10:00:00Z", **m} for m in memories]})
    assert response.status_code == 201, response.text
    listed = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
    return {m["content"]: m["id"] for m in listed}


async def steer(client, memory_id: int, **change):
    return await client.patch(f"/apps/cal/memories/{memory_id}", json=change, headers=ADMIN)


async def test_a_secret_memory_is_listed_but_never_injected_queried_or_shown_to_a_model(setup):
    client, services, seen = setup
    ids = await imported(client, {"content": SECRET}, {"content": PUBLIC})
    made = await steer(client, ids[SECRET], sensitivity="secret", reason="a safe's code")
    assert made.status_code == 200, made.text
    assert (made.json()["sensitivity"], made.json()["private"]) == ("secret", True)
    history = (await client.get(f"/apps/cal/memories/{ids[SECRET]}/history",
                                headers=ADMIN)).json()["events"]
    assert (history[-1]["event"], history[-1]["reason"]) == (
        "private", "sensitivity public → secret: a safe's code")

    # `private: true` leaves it secret; the listing shows it; no block, no query gives it.
    kept = await steer(client, ids[SECRET], private=True)
    assert kept.json()["sensitivity"] == "secret"
    public = await steer(client, ids[SECRET], private=False)
    assert (public.json()["sensitivity"], public.json()["private"]) == ("public", False)
    await steer(client, ids[SECRET], sensitivity="secret")
    listed = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
    assert {m["content"]: m["sensitivity"] for m in listed} == {SECRET: "secret",
                                                                PUBLIC: "public"}
    block = (await services.central.contexts.build(
        await services.stores.registry.require("cal"), [])).messages[-1].content
    assert PUBLIC in block and SECRET not in block
    asked = (await client.post("/apps/cal/memories/query", headers=ADMIN,
                               json={"query": "safe combination tennis"})).json()
    assert [r["text"] for r in asked["results"]] == [f"[fact] {PUBLIC}"]

    # A memory job over the cap asks the model to compact: the secret one is not in its prompt.
    await imported(client, {"content": "The user likes green tea."})
    opened = await client.post("/apps/cal/conversations", headers=ADMIN)
    conversation_id = opened.json()["conversationId"]
    await client.post(f"/conversations/{conversation_id}/messages?wait=10",
                      json={"content": "Book my meetings after 2pm."}, headers=ADMIN)
    await client.post(f"/conversations/{conversation_id}/end", json={"reason": "done"},
                      headers=ADMIN)

    async def done() -> bool:
        job = await services.stores.jobs.for_conversation(conversation_id)
        return job is not None and job.status == "done"

    await eventually(done)
    assert seen and all(SECRET not in prompt for prompt in seen)
    assert any(PUBLIC in prompt for prompt in seen)
    # The fallback took it (the oldest): once it is gone, nothing filters its history by
    # its level, so its texts went with it.
    listed = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
    assert SECRET not in [m["content"] for m in listed]
    history = (await client.get("/apps/cal/history", headers=ADMIN)).json()["events"]
    gone = [e for e in history if e["memoryId"] == ids[SECRET]]
    assert [e["event"] for e in gone][-1] == "deleted"
    assert "31-7-22" not in str(gone)



async def test_a_memory_of_unknown_sensitivity_is_held_back_from_every_read(setup):
    client, _, _ = setup
    ids = await imported(client, {"content": PUBLIC},
                         {"content": HIDDEN, "sensitivity": "unknown"})
    assert HIDDEN not in ids  # not listed
    listing = (await client.get("/apps/cal/memories", headers=ADMIN)).json()
    [held] = listing["heldBack"]
    assert (await client.get(f"/apps/cal/memories/{held}", headers=ADMIN)).status_code == 404
    found = (await client.get("/apps/cal/memories?q=diagnosis", headers=ADMIN)).json()
    assert found["memories"] == []
    exported = (await client.get("/apps/cal/memories/export", headers=ADMIN)).text
    history = (await client.get("/apps/cal/history", headers=ADMIN)).text
    assert "diagnosis" not in exported and "diagnosis" not in history
    # It still counts: the space holds it.
    spaces = (await client.get("/apps/cal/spaces", headers=ADMIN)).json()["spaces"]
    assert spaces[0]["memoryCount"] == 2

    # A change would answer with it: refused until it is given a level, which releases it.
    assert (await client.get(f"/apps/cal/memories/{held}/history",
                             headers=ADMIN)).status_code == 404
    pinned = await steer(client, held, pinned=True)
    assert pinned.status_code == 409 and "unknown sensitivity" in pinned.text
    # Not made public by a flag: it is given a level by name.
    assert (await steer(client, held, private=False)).status_code == 409
    released = await steer(client, held, sensitivity="private")
    assert released.status_code == 200 and released.json()["content"] == HIDDEN
    assert (await client.get("/apps/cal/memories", headers=ADMIN)).json()["heldBack"] == []


async def test_the_console_offers_a_level_for_what_is_held_back(setup):
    client, _, _ = setup
    await imported(client, {"content": PUBLIC}, {"content": HIDDEN, "sensitivity": "unknown"})
    [held] = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["heldBack"]
    form = await client.get("/console/sign-in")
    signed = await client.post("/console/sign-in", data={
        "csrf": csrf_in(form.text), "token": "admin-secret", "next": "/console"})
    assert signed.status_code == 303, signed.text
    page = await client.get("/console/apps/cal")
    assert f'id="held-{held}"' in page.text and "diagnosis" not in page.text
    odd = await client.post(f"/console/apps/cal/memories/{held}/sensitivity",
                            data={"csrf": csrf_in(page.text), "sensitivity": "unknown"})
    assert odd.status_code == 400
    given = await client.post(f"/console/apps/cal/memories/{held}/sensitivity",
                              data={"csrf": csrf_in(page.text), "sensitivity": "secret"})
    assert given.status_code == 303, given.text
    shown = await client.get(given.headers["location"])
    assert f"Memory {held} has its level now." in shown.text
    assert "diagnosis is kept" in shown.text and "secret: never shown to a model" in shown.text


@pytest.mark.parametrize(("body", "field"), [
    ({"sensitivity": "unknown"}, "sensitivity"),
    ({"sensitivity": "classified"}, "sensitivity"),
    ({"sensitivity": "secret", "private": False}, "private"),
])
async def test_a_level_that_cannot_be_given_is_refused(setup, body, field):
    client, _, _ = setup
    ids = await imported(client, {"content": PUBLIC})
    refused = await steer(client, ids[PUBLIC], **body)
    assert refused.status_code == 400 and field in refused.text, refused.text
    listed = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
    assert listed[0]["sensitivity"] == "public"


async def test_an_export_carries_the_level_and_an_old_one_without_it_is_read_by_private(setup):
    client, _, _ = setup
    ids = await imported(
        client, {"content": SECRET, "sensitivity": "secret"},
        {"content": "The user's locker is 12.", "private": True}, {"content": PUBLIC},
    )
    listed = {m["id"]: m["sensitivity"] for m in (await client.get(
        "/apps/cal/memories", headers=ADMIN)).json()["memories"]}
    assert [listed[ids[text]] for text in (SECRET, "The user's locker is 12.", PUBLIC)] == [
        "secret", "private", "public"]
    exported = (await client.get("/apps/cal/memories/export", headers=ADMIN)).json()
    assert {m["content"]: m["sensitivity"] for m in exported["memories"]}[SECRET] == "secret"
    conflicting = await client.post("/apps/cal/memories/import", headers=ADMIN, json={
        "memories": [{"content": "x y z", "createdAt": "2026-11-01T10:00:00Z",
                      "private": False, "sensitivity": "secret"}]})
    assert conflicting.status_code == 400 and "memories[0].private" in conflicting.text
