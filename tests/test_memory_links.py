"""Links between memories of one space: written when a memory is created, merged or
consolidated, to the memories it shares the most with; gone with either memory; given by the
API to the callers who may read both; named by the loop's `recall` tool for the memories of
the block a recalled one is linked to."""

from __future__ import annotations

import pytest

from loop.conversations.recall_tool import recall_turns
from memory_agent import (
    ChatMessage,
    ImportedMemory,
    Memory,
    MemoryCreationRequest,
    MemorySubAgent,
    PassFigures,
    ToolCall,
)
from memory_agent.core.tokens import estimate_tokens
from memory_agent.links.linking import MIN_LINK, links_for
from tests import test_consolidation
from tests.conftest import install_app
from tests.db_query import query
from tests.fakes import memory_model
from tests.harness import csrf_in
from tests.test_user_spaces import ADMIN, converse, settled

pytestmark = pytest.mark.anyio
# The consolidation tests' service: the extractive writer, no scheduled pass.
client = test_consolidation.client

SAM = "The user's partner is Sam, a nurse at the Lisbon hospital."
SAM_AGAIN = "Sam, the user's partner, works nights at the Lisbon hospital."
DENTIST = "The user has a dentist appointment on Tuesday at 15:00."


def request(n: int, text: str) -> MemoryCreationRequest:
    return MemoryCreationRequest("app", f"c{n}", [ChatMessage("user", text),
                                                  ChatMessage("assistant", "Noted.")])


def test_a_memory_links_to_those_it_shares_the_most_with_in_any_script():
    space = {1: SAM, 2: SAM_AGAIN, 3: DENTIST, 4: "用户的伴侣是山姆，在医院工作。",
             5: "山姆是用户的伴侣，晚上在医院上班。"}
    assert [i for i, _ in links_for(2, space)] == [1]
    assert [i for i, _ in links_for(5, space)] == [4]
    assert all(strength >= MIN_LINK for _, strength in links_for(2, space))
    assert links_for(3, space) == []
    assert links_for(9, space) == []  # not of the space


async def test_a_written_memory_is_linked_and_the_link_goes_with_it(database, clock, db_path):
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(lambda call: call.messages[0].content.split(
        "User: ")[1].split("\n")[0]), clock=clock)
    for n, text in enumerate((SAM, DENTIST, SAM_AGAIN)):
        await agent.create_memory(request(n, text))
    sam, dentist, again = list(reversed(await agent.list_memories("app")))
    links = await agent.links_of("app", again.id)
    assert [(m.id, kind) for m, kind, _ in links] == [(sam.id, "related")]
    assert [m.id for m, _, _ in await agent.links_of("app", sam.id)] == [again.id]
    assert await agent.links_of("app", dentist.id) == []
    assert await agent.linked_ids([sam.id, dentist.id]) == {sam.id: [again.id]}

    await agent.delete_app_memories("app")
    assert query(db_path, "SELECT COUNT(*) FROM relations") == [(0,)]


async def test_a_memory_a_consolidation_pass_merges_into_is_linked_anew(database, clock):
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(), clock=clock, writer="extractive")
    # Imported: no links yet.
    await agent.import_memories("app", [
        ImportedMemory(text, f"2025-10-0{n}T09:00:00.000000Z")
        for n, text in enumerate((SAM, DENTIST, SAM_AGAIN, SAM), start=1)
    ])
    sam, _, again, repeated = list(reversed(await agent.list_memories("app")))
    assert await agent.links_of("app", sam.id) == []
    figures = PassFigures()

    async def wanted(tx: object, spaces: object) -> bool:
        return True

    for group in await agent.consolidation_groups("app", None, lambda app: True):
        await agent.consolidate(group, figures, pairs_per_space=5, wanted=wanted)
    assert figures.changes == 1  # the repeat folded into the first
    assert repeated.id not in [m.id for m in await agent.list_memories("app")]
    assert [m.id for m, _, _ in await agent.links_of("app", sam.id)] == [again.id]


async def test_the_api_gives_a_memorys_links_to_who_may_read_them(client):
    installed = await client.post("/apps", json={"appId": "cal", "name": "Cal",
                                                 "allowedKinds": ["event"]}, headers=ADMIN)
    key = {"Authorization": f"Bearer {installed.json()['apiKey']}"}
    for said in ("My partner Sam works nights at the Lisbon hospital as a nurse.",
                 "I have a dentist appointment on Tuesday at 15:00.",
                 "Sam, my partner, is a nurse at the Lisbon hospital and works nights."):
        await converse(client, "cal", said)
    await settled(client, "cal")
    memories = (await client.get("/apps/cal/memories", headers=ADMIN)).json()["memories"]
    newest = memories[0]
    answer = await client.get(f"/apps/cal/memories/{newest['id']}/links", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    links = answer.json()["links"]
    assert [link["memoryId"] for link in links] == [memories[2]["id"]], (memories, links)
    assert links[0]["type"] == "related" and 0.3 <= links[0]["strength"] <= 1
    assert "Sam" in links[0]["content"]
    # A key that may read events only reads no fact, nor its links.
    hidden = await client.get(f"/apps/cal/memories/{newest['id']}/links", headers=key)
    assert hidden.status_code == 404
    missing = await client.get("/apps/cal/memories/999999/links", headers=ADMIN)
    assert missing.status_code == 404

    # The console's app page says which memories each is linked to.
    form = await client.get("/console/sign-in")
    await client.post("/console/sign-in", data={
        "csrf": csrf_in(form.text), "token": "admin-secret", "next": "/console"})
    page = (await client.get("/console/apps/cal")).text
    assert f'Linked to <a href="#memory-{memories[2]["id"]}">#{memories[2]["id"]}</a>' in page


def test_recall_names_the_linked_memories_the_block_holds():
    block = [Memory(n, "app", text, "2025-10-01T00:00:00.000000Z",
                    "2025-10-01T00:00:00.000000Z", None, {}, "")
             for n, text in ((1, SAM), (2, SAM_AGAIN), (3, DENTIST))]
    turns, recalled, _ = recall_turns(
        "", [ToolCall("recall", {"id": 1}, "call-1")], block, 1000,
        lambda m: estimate_tokens(m.content), {1: [7, 2], 3: []},
    )
    assert [m.id for m in recalled] == [1]
    # Memory 7 is linked too, but not in the block: the tool names nothing it was not given.
    assert turns[1].content.endswith("Related memories in the block: 2 (recall them by id).")
