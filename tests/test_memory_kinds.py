"""Kinds of memory and who may read them: the kinds file (the seed's categories and agents'
allow-lists), the kind each writer gives, the kind an export carries, and an app's
`allowedKinds` held on every read: its key's listing, search, export and query, an agent's
query, and its conversations' memory block."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from loop.settings import Settings
from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent, load_kinds
from tests.conftest import install_app
from tests.fake_ollama import SHOW_PROMPT
from tests.fakes import (
    EXTRACTION_NOW,
    FunctionModel,
    ModelCall,
    extractive_writer,
    memory_model,
    quoted,
)
from tests.harness import http_client, running, service

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}


# -- the kinds file ------------------------------------------------------------------------


def test_the_bundled_kinds_and_a_file_of_ones_own(tmp_path):
    bundled = load_kinds()
    assert bundled.names == ("profile", "preference", "event", "task", "fact")
    assert bundled.default == "fact" and bundled.allowlists["planner"] == ("task", "event")
    own = tmp_path / "kinds.toml"
    own.write_text('default = "note"\n[kinds]\nnote = "anything"\nrecipe = "a dish"\n'
                   'fact = "what was kept before kinds"\n')
    assert load_kinds(own).names == ("note", "recipe", "fact")
    assert load_kinds(own).default == "note" and load_kinds(own).allowlists == {}


@pytest.mark.parametrize(("text", "fragment"), [
    ('default = "x"\n[kinds]\nfact = "anything"\n', "default 'x'"),
    ('default = "fact"\n[kinds]\nfact = "a"\nNote = "anything"\n', "kind 'Note'"),
    ('default = "fact"\n[kinds]\nfact = "a"\n[allowlists]\nbot = ["recipe"]\n',
     "allowlists.bot"),
    ('default = "note"\n[kinds]\nnote = "anything"\n', "must keep 'fact'"),
    ('default = "note"\n', "[kinds]"),
    ("default = ", "kinds.toml"),
])
def test_a_bad_kinds_file_is_refused_at_start_saying_what_is_wrong(tmp_path, text, fragment):
    path = tmp_path / "kinds.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match="memory_kinds") as raised:
        Settings(db=tmp_path / "x.db", memory_kinds=path)
    assert fragment in str(raised.value)


# -- the writers ---------------------------------------------------------------------------

BOOKED = [ChatMessage("user", "Book the dentist for Tuesday at 15:00, please."),
          ChatMessage("assistant", "Booked: Tuesday at 15:00.")]


@pytest.mark.parametrize(
    ("given", "kind"), [("event", "event"), ("recipe", "fact"), (None, "fact")]
)
async def test_the_model_writer_gives_the_kind_it_is_asked_for(database, clock, given, kind):
    await install_app(database, "cal")

    def write(call: ModelCall) -> str:
        answer = json.loads(quoted("The user has a dentist appointment on Tuesday at 15:00.",
                                   call))
        return json.dumps({**answer, **({"kind": given} if given else {})})

    model = memory_model(write)
    agent = MemorySubAgent(database, model, clock=clock)
    created = await agent.create_memory(MemoryCreationRequest("cal", "c1", BOOKED))
    assert created.memory is not None and created.memory.kind == kind
    [call] = model.calls
    assert "event (something at a time" in call.prompt
    assert call.json_schema["properties"]["kind"]["enum"] == list(agent.kinds.names)


async def test_the_extractive_writer_gives_the_persons_own_facts_the_profile_kind():
    writer = extractive_writer()
    personal = await writer.write([ChatMessage("user", "I'm vegetarian and allergic to nuts.")],
                                  [], EXTRACTION_NOW)
    booking = await writer.write(BOOKED, [], EXTRACTION_NOW)
    assert getattr(personal, "kind", None) == "profile"
    assert getattr(booking, "kind", None) == "fact"


# -- who may read which --------------------------------------------------------------------


@pytest.fixture
async def client(db_path) -> AsyncIterator:
    async with service(db_path, _echoing(), memory_limit=100) as services, running(services), \
            http_client(services, "admin-secret") as client:
        yield client


def _echoing() -> FunctionModel:
    """Answers `SHOW_PROMPT` with the system messages it was given."""

    def answer(call: ModelCall) -> str:
        if call.messages[-1].content == SHOW_PROMPT:
            return "\n".join(m.content for m in call.messages if m.role == "system")
        return "Noted."

    return FunctionModel(answer)


async def seeded(client) -> str:
    installed = await client.post("/apps", json={"appId": "cal", "name": "Calendar"},
                                  headers=ADMIN)
    assert installed.status_code == 201, installed.text
    document = {"memories": [
        {"content": "The dentist appointment is on Tuesday at 15:00.", "kind": "event",
         "createdAt": "2026-11-01T10:00:00Z"},
        {"content": "Call the dentist back about the bill.", "kind": "task",
         "createdAt": "2026-11-02T10:00:00Z"},
        {"content": "The dentist is Dr. Ruiz on Calle Mayor.",
         "createdAt": "2026-11-03T10:00:00Z"},
    ]}
    imported = await client.post("/apps/cal/memories/import", json=document, headers=ADMIN)
    assert imported.status_code == 201, imported.text
    return installed.json()["apiKey"]


def kinds_of(body: dict) -> list[str]:
    return sorted(m["kind"] for m in body["memories"])


async def test_an_apps_allowed_kinds_bound_what_its_key_reads(client):
    key = await seeded(client)
    as_app = {"Authorization": f"Bearer {key}"}
    kinds = (await client.get("/kinds", headers=as_app)).json()
    assert [k["name"] for k in kinds["kinds"]][:3] == ["profile", "preference", "event"]
    assert kinds["default"] == "fact" and kinds["allowlists"]["planner"] == ["task", "event"]

    changed = await client.patch("/apps/cal", json={"allowedKinds": ["event", "task"]},
                                 headers=ADMIN)
    assert changed.status_code == 200 and changed.json()["allowedKinds"] == ["event", "task"]
    listed = (await client.get("/apps/cal/memories", headers=as_app)).json()
    assert kinds_of(listed) == ["event", "task"]
    assert kinds_of((await client.get("/apps/cal/memories", headers=ADMIN)).json()) == [
        "event", "fact", "task"]  # the operator reads every kind
    found = (await client.get("/apps/cal/memories", params={"q": "dentist"},
                              headers=as_app)).json()
    assert kinds_of(found) == ["event", "task"]
    exported = (await client.get("/apps/cal/memories/export", headers=as_app)).json()
    assert kinds_of(exported) == ["event", "task"]
    fact_id = next(m["id"] for m in (await client.get("/apps/cal/memories", headers=ADMIN))
                   .json()["memories"] if m["kind"] == "fact")
    assert (await client.get(f"/apps/cal/memories/{fact_id}", headers=as_app)).status_code == 404

    async def query(body: dict, headers: dict) -> tuple[int, dict]:
        answered = await client.post("/apps/cal/memories/query",
                                     json={"query": "dentist", "topK": 10, **body},
                                     headers=headers)
        return answered.status_code, answered.json()

    status, body = await query({}, as_app)
    assert status == 200 and sorted(r["kind"] for r in body["results"]) == ["event", "task"]
    assert all(r["text"].startswith(f"[{r['kind']}] ") for r in body["results"])
    status, body = await query({"categories": ["event"]}, as_app)
    assert [r["kind"] for r in body["results"]] == ["event"]
    status, body = await query({"categories": ["fact"]}, as_app)
    assert status == 403 and "'fact' may not be read" in body["detail"]
    status, body = await query({"categories": ["recipe"]}, as_app)
    assert status == 400 and "categories" in body["detail"]
    status, body = await query({"agent": "planner"}, ADMIN)
    assert sorted(r["kind"] for r in body["results"]) == ["event", "task"]
    status, body = await query({"agent": "planner", "categories": ["fact"]}, ADMIN)
    assert status == 403
    status, body = await query({"agent": "stranger"}, as_app)
    assert status == 400 and "agent" in body["detail"]

    # The history: the texts of a kind the key may not read are left out, and a memory of
    # that kind has no history for it.
    events = (await client.get("/apps/cal/history", headers=as_app)).json()["events"]
    texts = [e["contentAfter"] for e in events if e["event"] == "created"]
    assert sorted(t is None for t in texts) == [False, False, True]
    assert not [t for t in texts if t and "Ruiz" in t]
    assert (await client.get(f"/apps/cal/memories/{fact_id}/history",
                             headers=as_app)).status_code == 404
    assert (await client.get(f"/apps/cal/memories/{fact_id}/history",
                             headers=ADMIN)).status_code == 200

    # Nor may the key change a memory of that kind, or learn that it is there.
    for method, path, body in [
        ("PATCH", "", {"importance": 5}), ("POST", "/relevance", {"relevant": True, "reason": "x"}),
        ("POST", "/restore", {}),
    ]:
        answered = await client.request(method, f"/apps/cal/memories/{fact_id}{path}",
                                        json=body, headers=as_app)
        assert answered.status_code == 404, (path, answered.text)

    refused = await client.patch("/apps/cal", json={"allowedKinds": ["recipe"]}, headers=ADMIN)
    assert refused.status_code == 400 and "allowedKinds" in refused.text
    cleared = await client.patch("/apps/cal", json={"allowedKinds": None}, headers=ADMIN)
    assert cleared.json()["allowedKinds"] is None
    assert kinds_of((await client.get("/apps/cal/memories", headers=as_app)).json()) == [
        "event", "fact", "task"]


async def test_an_app_installed_with_an_unknown_kind_is_not_installed(client):
    refused = await client.post("/apps", json={"appId": "x", "name": "X",
                                               "allowedKinds": ["recipe"]}, headers=ADMIN)
    assert refused.status_code == 400 and "allowedKinds" in refused.text
    assert (await client.get("/apps/x", headers=ADMIN)).status_code == 404


def test_memories_of_two_kinds_are_never_merged():
    from memory_agent.writers.steps import Candidate, mergeable

    assert mergeable(Candidate(1, "a", kind="event"), Candidate(2, "b", kind="event"))
    assert not mergeable(Candidate(1, "a", kind="event"), Candidate(2, "b", kind="fact"))


async def test_an_import_carries_the_kind_and_refuses_an_unknown_one(client):
    await seeded(client)
    exported = (await client.get("/apps/cal/memories/export", headers=ADMIN)).json()
    assert kinds_of(exported) == ["event", "fact", "task"]
    bad = {"memories": [{"content": "x", "kind": "recipe", "createdAt": "2026-11-01T10:00:00Z"}]}
    refused = await client.post("/apps/cal/memories/import", json=bad, headers=ADMIN)
    assert refused.status_code == 400 and "memories[0].kind" in refused.text
    again = await client.post("/apps/cal/memories/import?replace=true", json=exported,
                              headers=ADMIN)
    assert again.status_code == 201, again.text
    assert kinds_of((await client.get("/apps/cal/memories", headers=ADMIN)).json()) == [
        "event", "fact", "task"]


async def converse(client, text: str) -> str:
    opened = await client.post("/apps/cal/conversations", json={"userId": "ana"},
                               headers=ADMIN)
    conversation = opened.json()["conversationId"]
    posted = await client.post(f"/conversations/{conversation}/messages?wait=10",
                               json={"content": text}, headers=ADMIN)
    assert posted.status_code == 200, posted.text
    await client.post(f"/conversations/{conversation}/end", json={}, headers=ADMIN)
    return posted.json()["reply"]["content"]


async def test_the_apps_conversations_are_given_the_kinds_it_allows(client):
    await seeded(client)
    await client.patch("/apps/cal", json={"allowedKinds": ["event"]}, headers=ADMIN)
    block = await converse(client, SHOW_PROMPT)
    assert "Tuesday at 15:00" in block
    assert "Dr. Ruiz" not in block and "bill" not in block
    # Nor does the delta header name a change of another kind.
    document = {"memories": [
        {"content": "The new dentist is Dr. Vidal.", "createdAt": "2026-11-04T10:00:00Z"},
        {"content": "The cleaning is on Friday at 9:00.", "kind": "event",
         "createdAt": "2026-11-05T10:00:00Z"}]}
    imported = await client.post("/apps/cal/memories/import", json=document, headers=ADMIN)
    assert imported.status_code == 201, imported.text
    block = await converse(client, SHOW_PROMPT)
    assert "Memory updates since rev" in block and "Friday at 9:00" in block
    assert "Vidal" not in block
