"""The consolidation pass below the API, with each writer: the pairs found without a model (in
any script), the model writer's merge and update applied only under its EDIT's grounding rules,
the extractive writer's retention rules, a model that fails, and a memory that changes while
the writer decides. Every change is in one transaction, in the history as consolidated."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from memory_agent import (
    PROFILE_APP,
    ChatReply,
    ImportedMemory,
    Memory,
    MemoryChange,
    MemorySubAgent,
    PassFigures,
    ProposalNotPending,
)
from memory_agent.consolidation.pairs import candidate_pairs
from memory_agent.core.errors import ChatModelResponseError
from tests.conftest import install_app
from tests.db_query import query
from tests.fakes import FunctionModel, ModelCall

pytestmark = pytest.mark.anyio

PAIR_PREFIX = "You keep a memory store tidy."


def verdict(action: str, content: str = "", reason: str = "said") -> str:
    return json.dumps({"action": action, "newContent": content, "reason": reason})


def pair_model(answer: Callable[[ModelCall], str | ChatReply]) -> FunctionModel:
    def respond(call: ModelCall) -> str | ChatReply:
        assert call.prompt.startswith(PAIR_PREFIX), call.prompt
        return answer(call)

    return FunctionModel(respond)


async def stored(agent: MemorySubAgent, app_id: str, user_id: str, *texts: str) -> list[Memory]:
    """Import `texts` into the space, a day apart, the first the oldest."""
    await agent.import_memories(app_id, [
        ImportedMemory(text, f"2025-10-0{n + 1}T09:00:00.000000Z") for n, text in enumerate(texts)
    ], user_id=user_id)
    return list(reversed(await agent.list_memories(app_id, user_id=user_id)))


async def run_pass(
    agent: MemorySubAgent, *, app_id: str | None = None, user_id: str | None = None,
    shares: bool = True,
) -> PassFigures:
    figures = PassFigures()

    async def wanted(tx: object, spaces: object) -> bool:
        return True

    for group in await agent.consolidation_groups(app_id, user_id, lambda app: shares):
        await agent.consolidate(group, figures, pairs_per_space=5, wanted=wanted)
    return figures


async def texts(agent: MemorySubAgent, app_id: str, user_id: str) -> list[str]:
    return [m.content for m in reversed(await agent.list_memories(app_id, user_id=user_id))]


def memory(memory_id: int, content: str, app_id: str = "app", user_id: str = "") -> Memory:
    return Memory(memory_id, app_id, content, f"2025-10-0{memory_id}T00:00:00.000000Z",
                  f"2025-10-0{memory_id}T00:00:00.000000Z", None, {}, user_id)


def test_pairs_are_found_by_what_the_texts_share_in_any_script():
    space = [
        memory(1, "用户是素食者，伴侣叫山姆。"),
        memory(2, "用户是素食者，她的伴侣叫山姆。"),
        memory(3, "用户下周二下午三点去看牙医。"),
        memory(4, "Η χρήστρια ζει στη Λισαβόνα."),
        memory(5, "Η χρήστρια ζει πλέον στο Πόρτο."),
    ]
    pairs = candidate_pairs([space], [])
    assert [(p.older.id, p.newer.id) for p in pairs] == [(1, 2), (4, 5)]
    # A person's profile meets their memories in an app only where the caller crosses them;
    # the same text in two spaces is a copy made on purpose.
    profile = [memory(6, "用户是素食者，伴侣叫山姆。", "", "ana")]
    own = [memory(7, "用户是素食者，伴侣叫山姆。", "app", "ana"),
           memory(8, "用户是素食者，她的伴侣叫山姆。", "app", "ana")]
    assert [(p.older.id, p.newer.id) for p in candidate_pairs([profile, own], [])] == [(7, 8)]
    crossed = candidate_pairs([profile, own], [(0, 1)])
    assert {(p.older.id, p.newer.id) for p in crossed} == {(7, 8), (6, 8)}


async def test_the_model_writers_grounded_merge_is_applied_and_recorded(database, clock):
    await install_app(database, "app")
    model = pair_model(lambda call: verdict(
        "merge", "The user is vegetarian and her partner is called Sam, who cooks."
    ))
    agent = MemorySubAgent(database, model, clock=clock)
    older, newer = await stored(
        agent, "app", "ana", "The user is vegetarian and her partner is Sam.",
        "The user's partner is called Sam, who cooks; she is vegetarian.",
    )
    figures = await run_pass(agent, app_id="app")
    assert (figures.pairs_asked, figures.changes, figures.model_calls) == (1, 1, 1)
    assert await texts(agent, "app", "ana") == [
        "The user is vegetarian and her partner is called Sam, who cooks."
    ]
    [kept] = await agent.list_memories("app", user_id="ana")
    assert kept.id == older.id
    events = await agent.history("app", user_id="ana")
    consolidated = [(e.memory_id, e.event, e.actor) for e in events
                    if (e.reason or "").startswith("consolidated: ")]
    assert consolidated == [(older.id, "edited", "model"), (newer.id, "deleted", "model")]
    # The pair (of the texts it was asked about) is not asked again; the new text alone is
    # in no pair.
    assert (await run_pass(agent, app_id="app")).pairs_asked == 0


@pytest.mark.parametrize("answer", [
    verdict("merge", "The user loves opera and lives in Oslo."),  # grounded in neither
    verdict("merge", "The user is vegetarian."),  # leaves out the partner
    verdict("update", "The user collects stamps."),  # not what the older memory says
    verdict("merge", "The user is vegetarian and her partner Sam is 31."),  # a number lost
    "not a verdict at all",
])
async def test_a_verdict_that_would_lose_or_invent_something_keeps_both(database, clock, answer):
    await install_app(database, "app")
    agent = MemorySubAgent(database, pair_model(lambda call: answer), clock=clock)
    await stored(agent, "app", "ana", "The user is vegetarian and her partner Sam is 34.",
                 "The user's partner is called Sam; she is vegetarian.")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes) == (1, 0)
    assert len(await texts(agent, "app", "ana")) == 2


async def test_a_failing_model_keeps_both_and_the_pass_goes_on(database, clock):
    await install_app(database, "app")

    def fail(call: ModelCall) -> str:
        raise ChatModelResponseError("the server answered 500", status_code=500, model="m")

    agent = MemorySubAgent(database, pair_model(fail), clock=clock)
    await stored(agent, "app", "ana", "The user lives in Lisbon, near the river.",
                 "The user lives in Lisbon, by the river.")
    await stored(agent, "app", "ben", "Ben lives in Oslo, near the fjord.",
                 "Ben lives in Oslo, by the fjord.")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes, figures.model_calls) == (2, 0, 2)
    assert figures.unjudged == 2 and "500" in (figures.last_failure or "")
    assert len(await texts(agent, "app", "ana")) == 2
    # Not judged is not checked: the next pass asks again.
    assert (await run_pass(agent)).pairs_asked == 2


async def test_the_model_writer_never_merges_two_kinds_or_two_expiries(database, clock):
    await install_app(database, "app")
    merged = "The user is vegetarian and her partner is Sam."
    agent = MemorySubAgent(database, pair_model(lambda call: verdict("merge", merged)),
                           clock=clock)
    await agent.import_memories("app", [
        ImportedMemory(merged, "2025-10-01T09:00:00.000000Z", kind="preference"),
        ImportedMemory("The user's partner is Sam; she is vegetarian.",
                       "2025-10-02T09:00:00.000000Z", kind="profile"),
    ], user_id="ana")
    await agent.import_memories("app", [
        ImportedMemory(merged, "2025-10-01T09:00:00.000000Z"),
        ImportedMemory("The user's partner is Sam; she is vegetarian.",
                       "2025-10-02T09:00:00.000000Z", expires_at="2099-01-01T00:00:00Z"),
    ], user_id="ben")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes) == (2, 0)
    assert len(await texts(agent, "app", "ana")) == len(await texts(agent, "app", "ben")) == 2


async def test_a_person_erased_while_the_model_decides_is_not_written_back(
    database, clock, db_path
):
    await install_app(database, "app")
    agent: MemorySubAgent

    async def erase_then_merge(call: ModelCall) -> str:
        async with database.transaction() as tx:
            await agent.lock_space("", "ana", tx=tx)
            await agent.erase_space("", "ana", tx=tx)
            await tx.execute("DELETE FROM profiles WHERE user_id = 'ana'")
        return verdict("merge", "The user is vegetarian and her partner is Sam.")

    agent = MemorySubAgent(database, FunctionModel(erase_then_merge), clock=clock)
    await stored(agent, "", "ana", "The user is vegetarian and her partner is Sam.",
                 "The user's partner is Sam; she is vegetarian.")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes) == (1, 0)
    assert await texts(agent, "", "ana") == []
    assert query(db_path, "SELECT COUNT(*) FROM profiles WHERE user_id = 'ana'") == [(0,)]
    assert query(db_path, "SELECT COUNT(*) FROM consolidation_checks") == [(0,)]


async def moved_from_lisbon(database: Any, clock: Any) -> MemorySubAgent:
    """An agent whose model judges every pair an update, with ana's profile city and her
    newer one in an app's space."""
    await install_app(database, "app")
    agent = MemorySubAgent(database, pair_model(lambda call: verdict("update")), clock=clock)
    await stored(agent, "", "ana", "The user lives in Lisbon, in Alfama.")
    await agent.import_memories("app", [ImportedMemory(
        "The user now lives in Porto, in Ribeira.", "2025-10-05T09:00:00.000000Z"
    )], user_id="ana")
    return agent


async def test_an_update_crosses_from_an_app_into_the_profile_only_where_it_is_shared(
    database, clock
):
    agent = await moved_from_lisbon(database, clock)
    assert (await run_pass(agent, user_id="ana", shares=False)).pairs_asked == 0
    figures = await run_pass(agent, user_id="ana")
    # The profile's city is a sensitive fact: its change waits for the person's consent.
    assert (figures.pairs_asked, figures.changes) == (1, 0)
    [held] = await agent.proposals.proposals("ana", "pending")
    assert (held.origin, held.fields, held.app_id) == ("consolidation", ("city",), "app")
    assert held.content is None and held.before == "The user lives in Lisbon, in Alfama."
    assert await texts(agent, "", "ana") == ["The user lives in Lisbon, in Alfama."]
    accepted = await agent.proposals.answer("ana", held.id, accept=True, through="api")
    assert accepted.status == "accepted"
    assert await texts(agent, "", "ana") == []  # the profile's stale city went
    assert await texts(agent, "app", "ana") == ["The user now lives in Porto, in Ribeira."]


async def test_a_held_change_is_superseded_when_its_memory_is_steered_meanwhile(
    database, clock
):
    agent = await moved_from_lisbon(database, clock)
    await run_pass(agent, user_id="ana")
    [held] = await agent.proposals.proposals("ana", "pending")
    [city] = await agent.list_memories(PROFILE_APP, user_id="ana")
    await agent.steer_memory(PROFILE_APP, city.id, MemoryChange(pinned=True))
    with pytest.raises(ProposalNotPending, match="superseded"):
        await agent.proposals.answer("ana", held.id, accept=True, through="api")
    [superseded] = await agent.proposals.proposals("ana")
    assert superseded.status == "superseded"
    assert await texts(agent, "", "ana") == ["The user lives in Lisbon, in Alfama."]


async def test_a_memory_changed_while_the_model_decides_is_left_as_it_is(database, clock):
    await install_app(database, "app")
    agent: MemorySubAgent

    async def pin_then_merge(call: ModelCall) -> str:
        [first, _] = await agent.list_memories("app", user_id="ana")
        await agent.steer_memory("app", first.id, MemoryChange(pinned=True))
        return verdict("merge", "The user is vegetarian and her partner is Sam.")

    agent = MemorySubAgent(database, FunctionModel(pin_then_merge), clock=clock)
    await stored(agent, "app", "ana", "The user is vegetarian and her partner is Sam.",
                 "The user's partner is Sam; she is vegetarian.")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes) == (1, 0)
    assert len(await texts(agent, "app", "ana")) == 2


async def test_the_extractive_writer_folds_a_repeat_and_retires_an_old_value(database, clock):
    await install_app(database, "app")
    model = FunctionModel(lambda call: pytest.fail("the extractive writer asks no model"))
    agent = MemorySubAgent(database, model, clock=clock, writer="extractive")
    await stored(agent, "app", "ana", "My budget for the trip is 120 euros.",
                 "My budget for the trip is now 150 euros.")
    await stored(agent, "app", "ben", "I'm vegetarian and my partner is Sam.",
                 "I'm vegetarian and my partner is Sam. We met in Lisbon.")
    figures = await run_pass(agent)
    assert (figures.pairs_asked, figures.changes, figures.model_calls) == (2, 2, 0)
    assert await texts(agent, "app", "ana") == ["My budget for the trip is now 150 euros."]
    assert await texts(agent, "app", "ben") == [
        "I'm vegetarian and my partner is Sam. We met in Lisbon."
    ]
