"""Memory spaces per user of an app, on both engines: a user's conversation reads and writes
that user's space and the app's shared one, never another user's; the cap, compaction and
purge work per space; erasing a person leaves nothing of them behind."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.db_query import query
from tests.fake_ollama import SHOW_PROMPT, fake_ollama
from tests.fakes import (
    CITIES,
    COMPACTION_PREFIX,
    CREATION_PREFIX,
    FRIENDS,
    FunctionModel,
    ModelCall,
    quoted,
)
from tests.harness import eventually, http_client, running, service
from tests.test_multi_instance import HEADERS, Instances

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}


def prompt_echoing_model() -> FunctionModel:
    """Writes each conversation's first user message as its memory (with the end the user
    asked for, "until 2099-12-05", as a model gives it); answers `SHOW_PROMPT` with the system
    messages it was given."""

    def answer(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            said = call.prompt.split("User: ", 1)[1].split("\n")[0].rstrip(".")
            until = re.search(r"until (\d{4}-\d\d-\d\d)", said)
            keep = (until.group(1), until.group()) if until else None
            return quoted(f'The user said: "{said}."', call, keep_until=keep)
        if call.prompt.startswith(COMPACTION_PREFIX):
            return "no decision"
        if call.messages[-1].content == SHOW_PROMPT:
            return "\n".join(m.content for m in call.messages if m.role == "system")
        return "Noted."

    return FunctionModel(answer)


@pytest.fixture
async def client(db_path) -> AsyncIterator[httpx.AsyncClient]:
    async with service(db_path, prompt_echoing_model(), memory_limit=3) as services, running(
        services
    ), http_client(services, "admin-secret") as client:
        yield client


async def converse(client: httpx.AsyncClient, app_id: str, text: str, user: str | None = None,
                   headers: dict[str, str] = ADMIN) -> str:
    """One conversation of one message, ended once answered; the reply."""
    body = {"userId": user} if user is not None else None
    opened = await client.post(f"/apps/{app_id}/conversations", json=body, headers=headers)
    assert opened.status_code == 201, opened.text
    conversation_id = opened.json()["conversationId"]
    posted = await client.post(f"/conversations/{conversation_id}/messages?wait=30",
                               json={"content": text}, headers=headers)
    assert posted.status_code == 200, posted.text
    await client.post(f"/conversations/{conversation_id}/end", headers=headers)
    return str(posted.json()["reply"]["content"])


async def contents(client: httpx.AsyncClient, app_id: str, user: str | None = None) -> list[str]:
    params = {"userId": user} if user is not None else {}
    listed = await client.get(f"/apps/{app_id}/memories", params=params, headers=ADMIN)
    assert listed.status_code == 200, listed.text
    return [m["content"] for m in listed.json()["memories"]]


async def settled(client: httpx.AsyncClient, app_id: str) -> None:
    async def no_job_waiting() -> bool:
        jobs = (await client.get(f"/memory-jobs?appId={app_id}", headers=ADMIN)).json()["jobs"]
        return all(job["status"] not in ("pending", "running") for job in jobs)

    await eventually(no_job_waiting)


async def test_a_users_conversation_gets_their_memories_and_the_shared_ones_only(client):
    key = (await client.post("/apps", json={"appId": "desk", "name": "Desk"}, headers=ADMIN)
           ).json()["apiKey"]
    await converse(client, "desk", "The office opens at 9:00 every day")
    await converse(client, "desk", "My locker code is 1111", user="ana")
    await converse(client, "desk", "My locker code is 2222", user="ben")
    await settled(client, "desk")
    assert await contents(client, "desk") == [
        'The user said: "The office opens at 9:00 every day."']
    assert await contents(client, "desk", "ana") == ['The user said: "My locker code is 1111."']

    prompt = await converse(client, "desk", SHOW_PROMPT, user="ana")
    assert "1111" in prompt and "9:00" in prompt and "2222" not in prompt
    # The memories themselves, after the header of what changed since ana's last time.
    prompt = prompt[prompt.index("(memories for app"):]
    assert prompt.index("About this user:") < prompt.index("1111") < prompt.index(
        "Shared by everyone who uses this app:") < prompt.index("9:00")
    shared_only = await converse(client, "desk", SHOW_PROMPT)
    assert "9:00" in shared_only and "1111" not in shared_only and "2222" not in shared_only

    spaces = (await client.get("/apps/desk/spaces", headers={"Authorization": f"Bearer {key}"})
              ).json()["spaces"]
    assert [space["userId"] for space in spaces] == ["", "ana", "ben"]
    assert spaces[2]["memoryCount"] == 1
    bad = await client.get("/apps/desk/memories", params={"userId": "a/b"}, headers=ADMIN)
    assert bad.status_code == 400


async def test_the_cap_purge_and_history_work_per_space(client):
    await client.post("/apps", json={"appId": "gym", "name": "Gym"}, headers=ADMIN)
    await converse(client, "gym", "The pool closes at 20:00")
    for n in range(5):
        await converse(client, "gym", f"My friend {FRIENDS[n]} lives in {CITIES[n]}", user="cy")
        await settled(client, "gym")
    assert len(await contents(client, "gym", "cy")) == 3  # the cap (3 here), per space
    assert await contents(client, "gym") == ['The user said: "The pool closes at 20:00."']
    history = (await client.get("/apps/gym/history", params={"userId": "cy"}, headers=ADMIN)
               ).json()["events"]
    assert history and all("20:00" not in (e.get("contentAfter") or "") for e in history)

    purged = await client.delete("/apps/gym/memories", params={"userId": "cy"}, headers=ADMIN)
    assert purged.json()["deletedCount"] == 3
    assert await contents(client, "gym", "cy") == []
    assert len(await contents(client, "gym")) == 1  # the shared space is untouched


async def test_an_app_may_have_its_users_write_to_the_shared_space_too(client):
    await client.post("/apps", json={"appId": "club", "name": "Club", "usersWriteShared": True},
                      headers=ADMIN)
    await converse(client, "club", "Our club meets on Tuesdays at 19:30", user="dee")
    await settled(client, "club")
    await eventually(lambda: contents(client, "club"))
    assert await contents(client, "club") == await contents(client, "club", "dee") == [
        'The user said: "Our club meets on Tuesdays at 19:30."']
    changed = await client.patch("/apps/club", json={"usersWriteShared": False}, headers=ADMIN)
    assert changed.json()["usersWriteShared"] is False


async def test_erasing_a_person_takes_them_from_every_app_and_an_app_key_from_its_own(
    client, db_path, engine
):
    keys = {}
    for app_id in ("desk", "shop"):
        keys[app_id] = (await client.post("/apps", json={"appId": app_id, "name": app_id},
                                          headers=ADMIN)).json()["apiKey"]
        await converse(client, app_id, f"My passport number is QJX{app_id}4471", user="ana")
        await converse(client, app_id, "My parcel code is 5512", user="ben")
    for app_id in keys:
        await settled(client, app_id)
    # An app's key erases its own users only.
    own = await client.delete("/users/ana/memories",
                              headers={"Authorization": f"Bearer {keys['desk']}"})
    assert own.status_code == 200, own.text
    assert [a["appId"] for a in own.json()["apps"]] == ["desk"]
    assert own.json()["apps"][0]["memories"] == 1 and own.json()["apps"][0]["conversations"] == 1
    assert "QJXshop4471" in (await contents(client, "shop", "ana"))[0]

    everywhere = await client.delete("/users/ana/memories", headers=ADMIN)
    assert [a["appId"] for a in everywhere.json()["apps"]] == ["shop"]
    for app_id in keys:
        assert await contents(client, app_id, "ana") == []
        assert len(await contents(client, app_id, "ben")) == 1  # another user stays
    assert not [row for row in _every_text(db_path, engine) if "QJX" in row]
    if engine == "sqlite":
        for path in Path(db_path).parent.glob(Path(db_path).name + "*"):
            assert b"QJX" not in path.read_bytes(), path.name


def _every_text(db: Path | str, engine: str) -> list[str]:
    """Every row of every table, as text."""
    if engine == "sqlite":
        tables = [r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'"
                                          " AND name NOT LIKE 'memory_search_%'")]
        return [repr(row) for table in tables for row in query(db, f'SELECT * FROM "{table}"')]
    tables = [r[0] for r in query(db, "SELECT table_name FROM information_schema.tables"
                                      " WHERE table_schema = 'public'")]
    return [row[0] for table in tables for row in query(db, f'SELECT t::text FROM "{table}" t')]


async def test_fifty_users_of_one_app_stay_apart_over_instances(db_path, tmp_path, engine):
    """Interleaved conversations of 50 users on three instances (one on SQLite, whose file
    one process serves): no user's memory reaches another's conversation, and each space
    keeps within its cap."""
    users, per_user, cap = 50, 3, 2
    with fake_ollama(delay=0.005) as ollama:
        instances = Instances(db_path, ollama, tmp_path)
        try:
            urls = await instances.serve(3 if engine == "postgresql" else 1,
                                         memory_limit=str(cap))
            clients = [httpx.AsyncClient(base_url=u, headers=HEADERS, timeout=60) for u in urls]
            await clients[0].post("/apps", json={"appId": "tutor", "name": "Tutor"})

            async def writes(user: int) -> None:
                for turn in range(per_user):
                    await converse(clients[(user + turn) % len(clients)], "tutor",
                                   f"My locker code is {code(user, turn)}.", f"u{user}",
                                   HEADERS)

            async with anyio.create_task_group() as group:
                for user in range(users):
                    group.start_soon(writes, user)
            with anyio.fail_after(120):
                while query(db_path, "SELECT COUNT(*) FROM memory_jobs WHERE status IN"
                                     " ('pending', 'running')")[0][0]:
                    await anyio.sleep(0.1)
            prompts: dict[int, str] = {}

            async def reads(user: int) -> None:
                prompts[user] = await converse(clients[user % len(clients)], "tutor",
                                               SHOW_PROMPT, f"u{user}", HEADERS)

            async with anyio.create_task_group() as group:
                for user in range(users):
                    group.start_soon(reads, user)
            for client in clients:
                await client.aclose()
        finally:
            instances.stop()
    for user, prompt in prompts.items():
        seen = {int(c) for c in re.findall(r"\b(\d{5})\b", prompt)}
        assert seen and seen <= {code(user, turn) for turn in range(per_user)}, (user, prompt)
    rows = query(db_path, "SELECT user_id, content FROM app_memories WHERE app_id = 'tutor'")
    per_space: dict[str, int] = {}
    for user_id, content in rows:
        per_space[user_id] = per_space.get(user_id, 0) + 1
        owner = int(re.findall(r"\d{5}", content)[0]) // 10 - 1000
        assert user_id == f"u{owner}", (user_id, content)
    assert len(per_space) == users and max(per_space.values()) <= cap
    print(f"\n{len(rows)} memories in {len(per_space)} spaces over {len(urls)} instance(s)")


def code(user: int, turn: int) -> int:
    """A locker code that names its user: 1000 + user, then the turn."""
    return (1000 + user) * 10 + turn


async def test_metrics_give_memory_utilisation_and_the_context_injection_rate(client):
    await client.post("/apps", json={"appId": "inn", "name": "Inn"}, headers=ADMIN)
    await converse(client, "inn", "Breakfast is served from 7:30")  # nothing to inject yet
    await settled(client, "inn")
    await converse(client, "inn", "My room code is 5150", user="ana")  # the shared one goes in
    await settled(client, "inn")
    opened = await client.post("/apps/inn/conversations", json={"userId": "cy"}, headers=ADMIN)
    await client.post(f"/conversations/{opened.json()['conversationId']}/end", headers=ADMIN)
    await settled(client, "inn")
    text = (await client.get("/metrics", headers=ADMIN)).text
    # Spaces known: the shared one, ana's and cy's; holding memories: the shared one and ana's.
    assert 'mnemoloop_memory_utilisation{of="spaces"} 0.6666666666666666' in text
    assert 'mnemoloop_memory_utilisation{of="apps"} 1.0' in text
    assert "mnemoloop_context_injection_rate 0.5" in text
    assert 'mnemoloop_context_injections_total{with_memories="true"} 1.0' in text


async def test_an_export_goes_back_into_its_own_space_only(client):
    await client.post("/apps", json={"appId": "dojo", "name": "Dojo"}, headers=ADMIN)
    await converse(client, "dojo", "My locker code is 4242", user="eve")
    await settled(client, "dojo")
    exported = (await client.get("/apps/dojo/memories/export", params={"userId": "eve"},
                                 headers=ADMIN)).json()
    assert [m["userId"] for m in exported["memories"]] == ["eve"]
    into_shared = await client.post("/apps/dojo/memories/import", json=exported, headers=ADMIN)
    assert into_shared.status_code == 400 and "eve" in into_shared.json()["detail"]
    assert await contents(client, "dojo") == []
    back = await client.post("/apps/dojo/memories/import",
                             params={"userId": "eve", "replace": "true"}, json=exported,
                             headers=ADMIN)
    assert back.status_code == 201, back.text
    assert len(await contents(client, "dojo", "eve")) == 1
