"""Steering memories, on both engines: pinned memories that compaction never removes,
importance that weighs in the retention policy, relevance tags, private memories that are
never injected, expiry and soft deletion with restore (across a restart) until the worker
erases what its grace period no longer keeps, and the expiry a user asks for in words."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import anyio
import httpx
import pytest

from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent
from memory_agent.core.errors import MemorySteeringRefused
from memory_agent.steering.changes import MemoryChange
from memory_agent.writers.extractive.words.expiry import remembered_until
from tests.conftest import install_app
from tests.fake_ollama import SHOW_PROMPT
from tests.fakes import ModelCall, decision, ids_in_prompt, memory_lines, memory_model
from tests.harness import eventually, http_client, running, service
from tests.test_user_spaces import converse, prompt_echoing_model

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}
GIVEN = ["Petra", "Quentin", "Rhea", "Soren", "Talia", "Ulric", "Vanya", "Wim", "Xavi", "Yara"]


def colleague(n: int) -> str:
    """A user message with one fact of its own: colleague n (a made-up name) and their desk."""
    return f"My colleague {GIVEN[n % 10]}{_letters(n)} sits at desk {1000 + n} in room {n % 7}."


def _letters(n: int) -> str:
    return "".join("abcdefghij"[int(digit)] for digit in f"{n:03d}")


def written(call: ModelCall) -> str:
    said = call.prompt.split("User: My colleague ", 1)[1].split("\n")[0]
    return f"The user's colleague {said}"


def request(n: int, app_id: str = "app") -> MemoryCreationRequest:
    messages = [ChatMessage("user", colleague(n)), ChatMessage("assistant", "Noted.")]
    return MemoryCreationRequest(app_id, f"c{n}", messages)


async def test_pinned_memories_survive_a_hundred_compactions(database, clock):
    await install_app(database, "app")
    shown: list[list[int]] = []

    def delete_the_first_shown(call: ModelCall) -> str:
        shown.append(ids_in_prompt(call))
        return decision("delete", ids_in_prompt(call)[0], reason="the oldest")

    agent = MemorySubAgent(
        database, memory_model(written, delete_the_first_shown), clock=clock, memory_limit=5
    )
    for n in range(5):
        await agent.create_memory(request(n))
    pinned = [m.id for m in await agent.list_memories("app")][:4]
    for memory_id in pinned:
        await agent.steer_memory("app", memory_id, MemoryChange(pinned=True, reason="keep"))
    # The cap less one: the fifth pin is refused, and nothing changes.
    last = (await agent.list_memories("app"))[-1]
    with pytest.raises(MemorySteeringRefused, match="at most 4"):
        await agent.steer_memory("app", last.id, MemoryChange(pinned=True))
    before = {m.id: m.content for m in await agent.list_memories("app") if m.pinned}

    for n in range(5, 105):
        await agent.create_memory(request(n))

    after = {m.id: m.content for m in await agent.list_memories("app") if m.pinned}
    assert after == before and len(after) == 4
    assert await agent.get_memory_count("app") == 5
    steps = sum(agent.stats.compactions.values())
    assert steps >= 100, agent.stats.compactions
    # The model was never shown a pinned memory, and no step touched one.
    assert len(shown) >= 100
    assert not any(set(ids) & set(pinned) for ids in shown)
    touched = [e for e in await agent.history("app", limit=10_000)
               if e.memory_id in pinned and e.event in ("deleted", "edited")]
    assert touched == []


async def test_the_grace_period_bounds_restore_and_the_worker_erases_after_it(database, clock):
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(written), clock=clock, memory_limit=5,
                           grace_seconds=60)
    for n in range(2):
        await agent.create_memory(request(n))
    first, second = [m.id for m in reversed(await agent.list_memories("app"))]
    await agent.delete_memory("app", first)
    await agent.delete_memory("app", second)
    assert await agent.erase_retired() == 0  # within the grace period: kept
    assert (await agent.restore_memory("app", first)).state(agent.now()) == "live"
    await agent.delete_memory("app", first)
    clock.current += timedelta(seconds=90)
    with pytest.raises(MemorySteeringRefused, match="grace period ended"):
        await agent.restore_memory("app", second)
    assert await agent.erase_retired() == 2
    assert await agent.list_memories("app", state="all") == []
    events = await agent.history("app", memory_id=first)
    assert [(e.event, e.actor) for e in events] == [
        ("created", "job"), ("deleted", "admin"), ("restored", "admin"), ("deleted", "admin"),
        ("erased", "worker")]
    assert all(e.content_before is None and e.content_after is None for e in events)


async def test_a_tag_at_the_end_of_the_scale_still_keeps_its_reason(database, clock):
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(written), clock=clock)
    await agent.create_memory(request(0))
    [memory] = await agent.list_memories("app")
    await agent.steer_memory("app", memory.id, MemoryChange(importance=10))
    tagged = await agent.tag_memory("app", memory.id, relevant=True, reason="asked again")
    assert tagged.importance == 10
    last = (await agent.history("app", memory_id=memory.id))[-1]
    assert (last.event, last.reason) == (
        "importance", "importance stays 10: tagged relevant: asked again")


async def test_a_private_memory_is_never_merged_into_an_injected_one(database, clock):
    await install_app(database, "app")
    merges: list[int] = []

    def merge_the_private_one(call: ModelCall) -> str:
        merges.append(1)
        lines = memory_lines(call)
        return decision("edit", private, f"{lines[private]} {lines[0]}", reason="merge")

    agent = MemorySubAgent(database, memory_model(written, merge_the_private_one), clock=clock,
                           memory_limit=3)
    for n in range(3):
        await agent.create_memory(request(n))
    private = (await agent.list_memories("app"))[-1].id
    await agent.steer_memory("app", private, MemoryChange(private=True))

    private_text = (await agent.get_memory("app", private)).content

    created = await agent.create_memory(request(3))

    # Refused, and the fallback (FIFO) decides; nothing private is injected.
    assert merges and created.compactions[0].decided_by == "policy"
    assert "private" in (created.compactions[0].fallback_reason or "")
    injected = " ".join(m.content for m in await agent.get_memories("app"))
    assert private_text not in injected


async def test_with_the_extractive_writer_importance_weighs_what_the_policy_gives_up(
    database, clock
):
    await install_app(database, "app")
    shown: list[str] = []

    def delete_the_important_one(call: ModelCall) -> str:
        shown.append(call.prompt)
        return decision("delete", important, reason="old")

    # Memories too long to merge two into one: the policy must delete one with facts.
    agent = MemorySubAgent(
        database, memory_model(written, delete_the_important_one), clock=clock,
        memory_limit=3, max_chars=80, writer="extractive",
    )
    for n in range(3):
        await agent.create_memory(request(n))
    oldest, second, _ = [m.id for m in reversed(await agent.list_memories("app"))]
    important = oldest
    await agent.steer_memory("app", oldest, MemoryChange(importance=9, reason="the boss"))
    await agent.tag_memory("app", second, relevant=False, reason="never asked about")

    created = await agent.create_memory(request(3))

    # The model's delete of the important memory is overruled; the least important goes.
    [step] = created.compactions
    assert step.target_memory_id == second and step.decided_by == "policy"
    assert "importance 9" in (step.fallback_reason or "")
    assert "importance 9/10" in shown[0] and "importance 3/10" in shown[0]
    remaining = {m.id for m in await agent.list_memories("app")}
    assert oldest in remaining and second not in remaining
    events = [(e.event, e.reason) for e in await agent.history("app", memory_id=second)]
    assert ("importance", "importance 5 → 3: tagged irrelevant: never asked about") in events


async def test_the_fifo_fallback_gives_up_the_least_important_memory_first(database, clock):
    """The model writer's fallback is the seed's FIFO, least important first: a failed
    decision does not take the oldest memory when an operator weighed it up."""
    await install_app(database, "app")
    shown: list[str] = []

    def no_decision(call: ModelCall) -> str:
        shown.append(call.prompt)
        return "I cannot decide."

    agent = MemorySubAgent(database, memory_model(written, no_decision), clock=clock,
                           memory_limit=3)
    for n in range(3):
        await agent.create_memory(request(n))
    oldest, second, _ = [m.id for m in reversed(await agent.list_memories("app"))]
    await agent.steer_memory("app", oldest, MemoryChange(importance=9, reason="the boss"))
    await agent.tag_memory("app", second, relevant=False, reason="never asked about")

    created = await agent.create_memory(request(3))

    [step] = created.compactions
    assert (step.target_memory_id, step.decided_by, step.outcome) == (second, "policy", "fifo")
    assert "importance 9/10" in shown[0] and "importance 3/10" in shown[0]
    remaining = {m.id for m in await agent.list_memories("app")}
    assert oldest in remaining and second not in remaining


@pytest.fixture
async def steering(db_path) -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    async with service(db_path, prompt_echoing_model(), memory_limit=3) as services, running(
        services
    ), http_client(services, "admin-secret") as client:
        yield client, services


def memories_document(*contents: str, **extra: object) -> dict[str, object]:
    return {"memories": [
        {"content": text, "createdAt": f"2026-01-0{n + 1}T10:00:00Z", **extra}
        for n, text in enumerate(contents)
    ]}


async def test_pin_importance_tags_and_private_over_the_api(steering):
    client, _ = steering
    installed = await client.post("/apps", json={"appId": "desk", "name": "Desk"}, headers=ADMIN)
    key = {"Authorization": f"Bearer {installed.json()['apiKey']}"}
    await client.post("/apps/desk/memories/import", headers=ADMIN, json=memories_document(
        "The user's gate code is 4455.", "The user's locker is number 12.",
        "The user's parking spot is P7."))
    gate, locker, parking = [
        m["id"] for m in reversed((await client.get("/apps/desk/memories", headers=ADMIN))
                                  .json()["memories"])
    ]

    pinned = await client.patch(f"/apps/desk/memories/{gate}", headers=key,
                                json={"pinned": True, "reason": "asked daily"})
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["pinned"] is True
    second = await client.patch(f"/apps/desk/memories/{locker}", headers=ADMIN,
                                json={"pinned": True})
    assert second.json()["pinned"] is True
    refused = await client.patch(f"/apps/desk/memories/{parking}", headers=ADMIN,
                                 json={"pinned": True})
    assert refused.status_code == 409 and "at most 2" in refused.json()["detail"]
    empty = await client.patch(f"/apps/desk/memories/{parking}", headers=ADMIN, json={})
    assert empty.status_code == 400 and "nothing to change" in empty.json()["detail"]
    not_bool = await client.patch(f"/apps/desk/memories/{parking}", headers=ADMIN,
                                  json={"pinned": 1})
    assert not_bool.status_code == 400

    tagged = await client.post(f"/apps/desk/memories/{parking}/relevance", headers=key,
                               json={"relevant": True, "reason": "the user asked twice"})
    assert tagged.status_code == 200 and tagged.json()["importance"] == 7
    too_high = await client.patch(f"/apps/desk/memories/{parking}", headers=ADMIN,
                                  json={"importance": 11})
    assert too_high.status_code == 400
    past = await client.patch(f"/apps/desk/memories/{parking}", headers=ADMIN,
                              json={"expiresAt": "2020-01-01T00:00:00Z"})
    assert past.status_code == 400 and "not in the future" in past.json()["detail"]

    private = await client.patch(f"/apps/desk/memories/{locker}", headers=ADMIN,
                                 json={"private": True, "reason": "the user's own business"})
    assert private.json()["private"] is True
    # Listed and exported for the operator, never in a conversation's prompt.
    listed = (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]
    assert {m["id"] for m in listed} == {gate, locker, parking}
    exported = (await client.get("/apps/desk/memories/export", headers=ADMIN)).json()
    assert [m["private"] for m in exported["memories"] if m["id"] == locker] == [True]
    prompt = await converse(client, "desk", SHOW_PROMPT)
    assert "4455" in prompt and "P7" in prompt and "locker" not in prompt

    history = (await client.get(f"/apps/desk/memories/{parking}/history", headers=ADMIN)).json()
    assert [(e["event"], e["actor"], e["reason"]) for e in history["events"]][-1] == (
        "importance", "app", "importance 5 → 7: tagged relevant: the user asked twice")
    events = [(e["event"], e["actor"]) for e in
              (await client.get(f"/apps/desk/memories/{gate}/history", headers=ADMIN))
              .json()["events"]]
    assert events == [("created", "import"), ("pinned", "app")]
    # Another app's key reaches none of it.
    other = await client.post("/apps", json={"appId": "other", "name": "O"}, headers=ADMIN)
    other_key = {"Authorization": f"Bearer {other.json()['apiKey']}"}
    assert (await client.patch(f"/apps/desk/memories/{gate}", headers=other_key,
                               json={"pinned": False})).status_code == 403
    assert (await client.patch(f"/apps/other/memories/{gate}", headers=other_key,
                               json={"pinned": False})).status_code == 404


async def test_expiry_and_restore_survive_a_restart_until_the_worker_erases(db_path):
    soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    async with service(db_path, prompt_echoing_model(), memory_limit=3,
                       memory_grace_seconds=3600) as services, \
            http_client(services, "admin-secret") as client:
        await client.post("/apps", json={"appId": "desk", "name": "Desk"}, headers=ADMIN)
        document = memories_document("The user's visitor badge is V-1180.", expiresAt=soon)
        document["memories"] += memories_document("The user's desk is 4.12.")["memories"]
        assert (await client.post("/apps/desk/memories/import", json=document,
                                  headers=ADMIN)).status_code == 201
        badge, desk = [m["id"] for m in reversed(
            (await client.get("/apps/desk/memories?state=all", headers=ADMIN)).json()["memories"])]
        await anyio.sleep(1.2)
        live = (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]
        assert [m["id"] for m in live] == [desk]
        # What a conversation is given: the live memory only.
        assert [m.id for m in await services.stores.agent.get_memories("desk")] == [desk]
        deleted = await client.delete(f"/apps/desk/memories/{desk}", headers=ADMIN)
        assert deleted.status_code == 200
        assert (await client.get("/apps/desk/memories", headers=ADMIN)).json() == {
            "memories": [], "heldBack": []}
        assert (await client.get("/apps", headers=ADMIN)).json()["apps"][0]["memoryCount"] == 0

    # After a restart both are still there, out of sight, and can be restored.
    async with service(db_path, prompt_echoing_model(), memory_limit=3,
                       memory_grace_seconds=3600) as services, \
            http_client(services, "admin-secret") as client:
        retired = (await client.get("/apps/desk/memories?state=retired", headers=ADMIN)).json()
        assert {m["id"]: m["state"] for m in retired["memories"]} == {
            badge: "expired", desk: "deleted"}
        restored = await client.post(f"/apps/desk/memories/{badge}/restore", headers=ADMIN)
        assert restored.status_code == 200, restored.text
        assert restored.json()["state"] == "live" and restored.json()["expiresAt"] is None
        again = await client.post(f"/apps/desk/memories/{desk}/restore", headers=ADMIN,
                                  json={"expiresAt": "2099-01-01T00:00:00Z"})
        assert again.json()["expiresAt"] == "2099-01-01T00:00:00.000000Z"
        live = (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]
        assert {m["id"] for m in live} == {badge, desk}
        events = [(e["event"], e["actor"]) for e in (await client.get(
            f"/apps/desk/memories/{desk}/history", headers=ADMIN)).json()["events"]]
        assert events == [("created", "import"), ("deleted", "admin"), ("restored", "admin")]
        deleted = await client.delete(f"/apps/desk/memories/{desk}", headers=ADMIN)
        assert deleted.status_code == 200

    # With a grace period of one second, the worker erases it: row and history text.
    async with service(db_path, prompt_echoing_model(), memory_limit=3,
                       memory_grace_seconds=1) as services, running(services), \
            http_client(services, "admin-secret") as client:

        async def erased() -> bool:
            return await services.stores.agent.get_memory("desk", desk) is None

        await eventually(erased, timeout=15)
        gone = await client.post(f"/apps/desk/memories/{desk}/restore", headers=ADMIN)
        assert gone.status_code == 404
        history = (await client.get(f"/apps/desk/memories/{desk}/history", headers=ADMIN)).json()
        assert history["events"][-1]["event"] == "erased"
        assert history["events"][-1]["actor"] == "worker"
        assert all(e["contentBefore"] is None and e["contentAfter"] is None
                   for e in history["events"])
        assert "4.12" not in str(history)
        assert [m["id"] for m in (await client.get("/apps/desk/memories", headers=ADMIN))
                .json()["memories"]] == [badge]


async def test_a_restore_into_a_full_space_is_refused(steering):
    client, _ = steering
    await client.post("/apps", json={"appId": "desk", "name": "Desk"}, headers=ADMIN)
    await client.post("/apps/desk/memories/import", headers=ADMIN, json=memories_document(
        "The user's gate code is 4455.", "The user's locker is number 12.",
        "The user's parking spot is P7."))
    first = (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"][0]["id"]
    await client.delete(f"/apps/desk/memories/{first}", headers=ADMIN)
    await client.post("/apps/desk/memories/import", headers=ADMIN,
                      json=memories_document("The user's bike lock code is 9031."))
    refused = await client.post(f"/apps/desk/memories/{first}/restore", headers=ADMIN)
    assert refused.status_code == 409 and "cap" in refused.json()["detail"]
    assert len((await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]) == 3


async def test_an_asked_expiry_and_the_apps_default_time_to_live(steering):
    client, _ = steering
    await client.post("/apps", json={"appId": "desk", "name": "Desk"}, headers=ADMIN)
    await converse(client, "desk", "Please remember that my guest pass is G-5521 until 2099-12-05.")

    async def written() -> list[dict[str, object]]:
        return (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]

    [memory] = await eventually(written)
    assert memory["expiresAt"] == "2099-12-06T00:00:00.000000Z"

    changed = await client.patch("/apps/desk", headers=ADMIN, json={"memoryTtlSeconds": 3600})
    assert changed.json()["memoryTtlSeconds"] == 3600
    await converse(client, "desk", "My parking spot is P7 on level two.")
    newest = (await eventually(lambda: _count(client, 2)))[0]
    expires = datetime.fromisoformat(str(newest["expiresAt"]))
    assert timedelta(minutes=55) < expires - datetime.now(UTC) <= timedelta(hours=1)
    cleared = await client.patch("/apps/desk", headers=ADMIN, json={"memoryTtlSeconds": None})
    assert cleared.json()["memoryTtlSeconds"] is None
    too_short = await client.patch("/apps/desk", headers=ADMIN, json={"memoryTtlSeconds": 5})
    assert too_short.status_code == 400


async def _count(client: httpx.AsyncClient, n: int) -> list[dict[str, object]] | None:
    memories = (await client.get("/apps/desk/memories", headers=ADMIN)).json()["memories"]
    return memories if len(memories) == n else None


NOW = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(("said", "expires"), [
    ("Remember my locker is 12 until Friday.", "2026-11-28"),
    ("Please remember the gate code 4455 until 2026-12-05.", "2026-12-06"),
    ("Keep in mind the promo code runs until December 10th.", "2026-12-11"),
    ("Recuerda que el código es 88 hasta el 3 de diciembre.", "2026-12-04"),
    ("Merk dir: Parkplatz 7 bis zum 5.12.2026.", "2026-12-06"),
    ("Retiens que la salle B est à moi jusqu'au 12 décembre.", "2026-12-13"),
    ("Ricorda il codice 77 fino al 2 gennaio.", "2027-01-03"),
    ("Lembra que o código é 5 até sexta.", "2026-11-28"),
])
def test_a_user_can_ask_for_an_expiry_in_several_languages(said, expires):
    until = remembered_until([ChatMessage("user", said)], NOW)
    assert until is not None and until.date().isoformat() == expires


@pytest.mark.parametrize("said", [
    "I am in Lisbon until Friday.",  # no one asked to remember
    "Remember we are open Monday until Friday.",  # a range
    "Remember: from 3.12 until 5.12 the office is closed.",
    "Remember the sale until 2020-01-01.",  # already past
    "Remember the meeting runs until 5pm.",  # a time, not a date
    "Remember the shop is open until 10.30 today.",
    "Remember the code until 31.12.9999.",  # no day after it to end on
])
def test_no_expiry_where_none_was_asked(said):
    assert remembered_until([ChatMessage("user", said)], NOW) is None


def test_only_the_users_words_count():
    said = [ChatMessage("assistant", "I will remember it until Friday.")]
    assert remembered_until(said, NOW) is None
