"""Search over an app's memories: ranked, scoped to the app, kept in the memories' own
transactions, safe for any query, on both engines."""

from __future__ import annotations

import pytest

from memory_agent.storage.store import MemoryStore
from tests.harness import assistant_model, http_client, service
from tests.test_cli import mnemoloop

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin"}
STAMP = "2025-10-10T10:00:00.000000Z"

MEMORIES = {
    "cal": [
        "The user's daughter Mia has a peanut allergy.",
        "The user plays tennis on Saturday mornings.",
        "The user's daughter Mia starts school in September; her peanut allergy is on file.",
        "The user's rent is 1650 a month.",
    ],
    "notes": ["The user's daughter Zoe plays the violin."],
}


async def seeded(services) -> dict[str, int]:
    """Install the apps and store the memories; returns each memory's id by its text."""
    ids = {}
    for app_id, texts in MEMORIES.items():
        await services.stores.registry.install(app_id, app_id.title())
        store = MemoryStore(services.database)
        for text in texts:
            ids[text] = (await store.insert(app_id, text, created_at=STAMP)).id
    return ids


async def test_search_ranks_by_relevance_within_the_app_only(db_path):
    async with service(db_path, assistant_model()) as services, \
            http_client(services, "admin") as client:
        await seeded(services)
        found = await client.get("/apps/cal/memories", params={"q": "Mia peanut allergy"},
                                 headers=ADMIN)
        assert found.status_code == 200, found.text
        contents = [m["content"] for m in found.json()["memories"]]
        # Both memories holding every word come first; the tennis and rent ones not at all.
        assert set(contents[:2]) == {MEMORIES["cal"][0], MEMORIES["cal"][2]}
        assert len(contents) == 2

        daughters = await client.get("/apps/cal/memories", params={"q": "daughter"},
                                     headers=ADMIN)
        texts = [m["content"] for m in daughters.json()["memories"]]
        assert texts and all("Zoe" not in t for t in texts)  # never another app's memory

        stemmed = await client.get("/apps/cal/memories", params={"q": "allergies"},
                                   headers=ADMIN)
        assert len(stemmed.json()["memories"]) == 2

        limited = await client.get("/apps/cal/memories", params={"q": "user", "limit": 1},
                                   headers=ADMIN)
        assert len(limited.json()["memories"]) == 1


@pytest.mark.parametrize("query", ['"peanut', "peanut*", "peanut AND (", "NEAR(mia peanut)",
                                   "mia -peanut", "peanut:allergy", "peanut'; DROP TABLE apps; --",
                                   "^peanut", "allergy!!!"])
async def test_query_syntax_is_plain_words_never_an_error(db_path, query):
    async with service(db_path, assistant_model()) as services, \
            http_client(services, "admin") as client:
        await seeded(services)
        found = await client.get("/apps/cal/memories", params={"q": query}, headers=ADMIN)
        assert found.status_code == 200, found.text
        assert found.json()["memories"], f"{query!r} found nothing"


@pytest.mark.parametrize(("query", "says"), [
    ("", "q: Expected `str` of length >= 1"),
    ("   ", "q: Expected `str` matching regex"),
    ('"*()-:^', "q: Expected `str` matching regex"),
    ("word " * 101, "q: Expected `str` of length <= 500"),
])
async def test_empty_wordless_and_long_queries_are_400_saying_why(db_path, query, says):
    async with service(db_path, assistant_model()) as services, \
            http_client(services, "admin") as client:
        await seeded(services)
        found = await client.get("/apps/cal/memories", params={"q": query}, headers=ADMIN)
        assert found.status_code == 400, found.text
        assert found.headers["content-type"].startswith("application/problem+json")
        assert says in found.json()["detail"]
        unknown = await client.get("/apps/nope/memories", params={"q": "x"}, headers=ADMIN)
        assert unknown.status_code == 404


async def test_the_index_follows_edits_deletes_and_purges_in_their_transactions(db_path):
    async with service(db_path, assistant_model()) as services:
        ids = await seeded(services)
        agent, store = services.stores.agent, MemoryStore(services.database)
        tennis = ids[MEMORIES["cal"][1]]
        async with services.database.transaction() as tx:
            await store.within(tx).update_content(
                "cal", tennis, "The user plays squash on Sundays.", updated_at=STAMP,
                metadata={})
        assert [m.id for m in await agent.search_memories("cal", "squash")] == [tennis]
        assert await agent.search_memories("cal", "tennis") == []

        assert await agent.delete_memory("cal", tennis)
        assert await agent.search_memories("cal", "squash") == []

        # A transaction that fails leaves the index as it was.
        with pytest.raises(RuntimeError):
            async with services.database.transaction() as tx:
                await store.within(tx).insert("cal", "The user keeps bees.", created_at=STAMP)
                raise RuntimeError("rolled back")
        assert await agent.search_memories("cal", "bees") == []

        assert await services.stores.registry.purge_memories("cal") == 3
        # The deleted memory (restorable until its grace period ends) went with the three.
        assert await agent.list_memories("cal", state="all") == []
        assert await agent.search_memories("cal", "daughter peanut rent") == []
        assert len(await agent.search_memories("notes", "daughter")) == 1


@pytest.mark.parametrize(("query", "says"), [
    ("", "the query is empty"),
    ("   ", "the query is empty"),
    ('"*()-:^_', "holds no words"),
    ("word " * 101, "at most 500"),
])
async def test_the_agent_refuses_queries_it_cannot_search_saying_why(db_path, query, says):
    from memory_agent.core.errors import InvalidSearchQuery

    async with service(db_path, assistant_model()) as services:
        await seeded(services)
        with pytest.raises(InvalidSearchQuery, match=says):
            await services.stores.agent.search_memories("cal", query)


def test_the_cli_searches_an_apps_memories(db_path):
    assert mnemoloop(db_path, "migrate").returncode == 0
    assert mnemoloop(db_path, "apps", "install", "cal").returncode == 0
    from tests.db_query import query
    for text in MEMORIES["cal"]:
        query(db_path, "INSERT INTO app_memories (app_id, content, created_at, updated_at,"
                       " metadata) VALUES ('cal', ?, ?, ?, '{}')", (text, STAMP, STAMP))
    found = mnemoloop(db_path, "memories", "search", "cal", "peanut allergy")
    assert found.returncode == 0, found.stderr
    assert len(found.stdout.splitlines()) == 2 and "peanut" in found.stdout
    nothing = mnemoloop(db_path, "memories", "search", "cal", "violin")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "no memory of cal matches 'violin'" in nothing.stderr
    bad = mnemoloop(db_path, "memories", "search", "cal", "***")
    assert bad.returncode == 2 and "holds no words" in bad.stderr
