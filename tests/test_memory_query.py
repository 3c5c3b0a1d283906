"""One query for agents (`POST /apps/{id}/memories/query`): the memories that answer it, scored,
filtered and cut to `topK` and a token budget, on a real service and either engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memory_agent import Memory
from memory_agent.recall.query import SCAN_LIMIT, scored
from tests.harness import assistant_model, http_client, service

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}


def memory(memory_id: int, content: str, *, pinned: bool = False, importance: int = 5,
           updated_at: str = "2026-11-01T10:00:00Z") -> Memory:
    return Memory(memory_id, "cal", content, updated_at, updated_at, None,
                  {"importance": importance}, "ana", pinned)


# -- the score -----------------------------------------------------------------------------


def test_a_memory_holding_the_rarer_word_comes_first():
    found = scored([
        memory(1, "The user has a dentist appointment on Friday."),
        memory(2, "The user prefers meetings on Friday afternoons."),
        memory(3, "Miso the cat sleeps all day."),
    ], "When is my dentist appointment on Friday?")
    assert [m.id for m, _ in found] == [1, 2, 3]
    scores = [score for _, score in found]
    assert scores[0] == 1.0 and 0 < scores[1] < scores[0] and scores[2] == 0


def test_a_word_no_memory_holds_lowers_no_score():
    found = scored([memory(1, "Ana's locker code is 4417.")], "what is the locker code again")
    assert found[0][1] == 1.0


def test_words_inflected_at_their_end_are_held():
    found = scored([memory(1, "The user chairs two meetings weekly.")], "meeting")
    assert found[0][1] == 1.0
    # Three letters are too few to tell a stem: "cat" does not hold "category".
    assert scored([memory(1, "a cat")], "category")[0][1] == 0


def test_a_script_written_without_spaces_is_compared_by_character():
    found = scored(
        [memory(1, "ユーザーは東京に住んでいる。"), memory(2, "ユーザーは猫が好き。")], "東京"
    )
    assert found[0][0].id == 1 and found[0][1] == 1.0 and found[1][1] == 0


def test_at_the_same_score_pinned_then_important_then_newer_first():
    found = scored([
        memory(1, "Tea at noon.", updated_at="2026-11-03T10:00:00Z"),
        memory(2, "Tea at five.", importance=9),
        memory(3, "Tea, green.", pinned=True),
        memory(4, "Tea with lemon.", updated_at="2026-11-02T10:00:00Z"),
    ], "tea")
    assert [m.id for m, _ in found] == [3, 2, 1, 4]


# -- the endpoint --------------------------------------------------------------------------


@pytest.fixture
async def client(db_path) -> AsyncIterator:
    async with service(db_path, assistant_model(), memory_limit=1000) as services, \
            http_client(services, "admin-secret") as client:
        yield client


async def install(client, app_id: str = "cal", *, shares_profile: bool = True) -> str:
    response = await client.post(
        "/apps", json={"appId": app_id, "name": app_id.title(), "sharesProfile": shares_profile},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    return response.json()["apiKey"]


async def store(client, path: str, *memories: dict) -> None:
    document = {"memories": [{"createdAt": "2026-11-01T10:00:00Z", **m} for m in memories]}
    response = await client.post(path, json=document, headers=ADMIN)
    assert response.status_code == 201, response.text


async def seeded(client) -> None:
    await install(client)
    await store(client, "/apps/cal/memories/import?userId=ana",
                {"content": "Ana's dentist is Dr. Ruiz, on Calle Mayor 12."},
                {"content": "Ana takes her dentist appointments on Friday mornings.",
                 "metadata": {"importance": 8}, "pinned": True,
                 "updatedAt": "2026-11-20T10:00:00Z"},
                {"content": "Ana's dentist bill was 240 euros.", "private": True},
                {"content": "Ana's sister lives in Lyon."})
    await store(client, "/apps/cal/memories/import",
                {"content": "The clinic's dentist hours are 9 to 5."})
    await store(client, "/users/ana/profile/import",
                {"content": "Ana is afraid of the dentist."})


async def query(client, body: dict, app_id: str = "cal", headers=ADMIN):
    return await client.post(f"/apps/{app_id}/memories/query", json=body, headers=headers)


async def test_bullets_from_the_users_spaces_the_best_first_never_a_private_one(client):
    await seeded(client)
    response = await query(client, {"query": "What is the address of Dr. Ruiz, Ana's dentist?",
                                    "filters": {"userId": "ana"}, "topK": 10})
    assert response.status_code == 200, response.text
    body = response.json()
    texts = [r["text"] for r in body["results"]]
    assert texts[0] == "[fact] Ana's dentist is Dr. Ruiz, on Calle Mayor 12."
    assert "[fact] Ana's dentist bill was 240 euros." not in texts  # private
    # Holding only the name every one of them holds, it comes last.
    assert texts[-1] == "[fact] Ana's sister lives in Lyon."
    assert {r["space"] for r in body["results"]} == {"user", "shared", "profile"}
    assert all(set(r) == {"id", "text", "score", "space", "kind"} for r in body["results"])
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and 0 < scores[-1] <= scores[0] <= 1
    assert body["omitted"] == 0 and 0 < body["tokens"] <= 2000


async def test_without_a_user_only_the_apps_shared_space(client):
    await seeded(client)
    body = (await query(client, {"query": "dentist"})).json()
    assert [r["text"] for r in body["results"]] == [
        "[fact] The clinic's dentist hours are 9 to 5."]


async def test_top_k_threshold_and_budget_leave_the_rest_counted(client):
    await seeded(client)
    every = (await query(client, {"query": "dentist Ruiz", "filters": {"userId": "ana"},
                                  "topK": 100})).json()
    assert len(every["results"]) == 4
    best = (await query(client, {"query": "dentist Ruiz", "filters": {"userId": "ana"},
                                 "topK": 1})).json()
    assert [r["id"] for r in best["results"]] == [every["results"][0]["id"]]
    assert best["omitted"] == 3
    high = (await query(client, {"query": "dentist Ruiz", "filters": {"userId": "ana"},
                                 "threshold": 0.9})).json()
    assert [r["text"] for r in high["results"]] == [
        "[fact] Ana's dentist is Dr. Ruiz, on Calle Mayor 12."]
    tight = (await query(client, {"query": "dentist Ruiz", "filters": {"userId": "ana"},
                                  "budgetTokens": 30})).json()
    assert 1 <= len(tight["results"]) < 4 and tight["tokens"] <= 30
    assert tight["omitted"] == 4 - len(tight["results"])


async def test_full_memories_carry_their_metadata(client):
    await seeded(client)
    body = (await query(client, {"query": "dentist appointments", "return": "full",
                                 "filters": {"userId": "ana", "pinned": True}})).json()
    [hit] = body["results"]
    assert hit["memory"]["pinned"] is True and hit["memory"]["importance"] == 8
    assert hit["memory"]["content"] == hit["text"] and hit["memory"]["userId"] == "ana"


async def test_filters_on_importance_and_update_time(client):
    await seeded(client)
    important = (await query(client, {"query": "dentist", "filters": {
        "userId": "ana", "importanceMin": 7}})).json()
    assert [r["text"] for r in important["results"]] == [
        "[fact] Ana takes her dentist appointments on Friday mornings."]
    recent = (await query(client, {"query": "dentist", "filters": {
        "userId": "ana", "updatedAfter": "2026-11-10T00:00:00Z"}})).json()
    assert [r["text"] for r in recent["results"]] == [
        "[fact] Ana takes her dentist appointments on Friday mornings."]
    older = (await query(client, {"query": "dentist", "filters": {
        "userId": "ana", "updatedBefore": "2026-11-10T00:00:00+01:00", "pinned": False}})).json()
    assert "[fact] Ana takes her dentist appointments on Friday mornings." not in [
        r["text"] for r in older["results"]]
    assert len(older["results"]) == 3


async def test_an_app_without_shared_profiles_gets_no_profile(client):
    await seeded(client)
    await install(client, "notes", shares_profile=False)
    await store(client, "/apps/notes/memories/import?userId=ana",
                {"content": "Ana writes notes about her dentist visits."})
    body = (await query(client, {"query": "dentist", "filters": {"userId": "ana"}},
                        "notes")).json()
    assert [r["space"] for r in body["results"]] == ["user"]


async def test_a_large_space_is_searched_by_the_engine(client):
    await install(client)
    filler = [{"content": f"Ana noted item number {n} of the inventory."}
              for n in range(SCAN_LIMIT + 100)]
    # The oldest of them: a read of the newest SCAN_LIMIT would not hold it.
    await store(client, "/apps/cal/memories/import?userId=ana",
                {"content": "Ana's passport expires in March 2031."}, *filler)
    body = (await query(client, {"query": "When does my passport expire?",
                                 "filters": {"userId": "ana"}})).json()
    assert body["results"][0]["text"] == "[fact] Ana's passport expires in March 2031."


async def test_an_app_key_queries_its_own_app_only(client):
    key = await install(client)
    other = await install(client, "mail")
    mine = await query(client, {"query": "dentist"}, headers={"Authorization": f"Bearer {key}"})
    assert mine.status_code == 200 and mine.json() == {"results": [], "tokens": 0, "omitted": 0}
    theirs = await query(client, {"query": "dentist"},
                         headers={"Authorization": f"Bearer {other}"})
    assert theirs.status_code == 403
    assert (await query(client, {"query": "dentist"}, "nope")).status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"query": "dentist", "filters": {"colour": "red"}}, "colour"),
    ({"query": "dentist", "categories": ["tasks"]}, "categories"),
    ({"query": "dentist", "topK": -1}, "topK"),
    ({"query": "dentist", "topK": 0}, "topK"),
    ({"query": "dentist", "threshold": 1.5}, "threshold"),
    ({"query": "dentist", "budgetTokens": 5}, "budgetTokens"),
    ({"query": "dentist", "return": "everything"}, "return"),
    ({"query": "dentist", "filters": {"importanceMin": 8, "importanceMax": 2}}, "importanceMin"),
    ({"query": "dentist", "filters": {"importanceMax": 11}}, "importanceMax"),
    ({"query": "dentist", "filters": {"updatedAfter": "last week"}}, "updatedAfter"),
    ({"query": "dentist", "filters": {"pinned": "yes"}}, "pinned"),
    ({"query": "dentist", "filters": {"userId": "a/b"}}, "userId"),
    ({"query": "?!"}, "query"),
    ({"query": ""}, "query"),
    ({"topK": 3}, "query"),
])
async def test_bad_input_is_refused_naming_the_field(client, body, field):
    await seeded(client)
    response = await query(client, body)
    assert response.status_code == 400, response.text
    assert field in response.text
