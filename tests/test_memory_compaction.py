"""The cap of a memory space: when it is passed, the model DELETEs or EDITs (merges) one
memory, checked by the writer's rules, or the space falls back to FIFO with the reason."""

from __future__ import annotations

import anyio
import pytest

from memory_agent import ChatReply, MemorySubAgent
from memory_agent.core.errors import ChatModelResponseError
from memory_agent.storage.store import MemoryStore
from tests.conftest import install_app
from tests.fakes import (
    COMPACTION_PREFIX,
    FRIENDS,
    ModelCall,
    decision,
    fill_with_friends,
    friend_fact,
    friend_memories,
    friend_memory,
    friend_request,
    friends_agent,
    memory_lines,
    memory_model,
    quoted,
)

pytestmark = pytest.mark.anyio


async def contents(agent: MemorySubAgent, app_id: str = "app") -> list[str]:
    return [m.content for m in reversed(await agent.list_memories(app_id))]


def every_friend_kept(texts: list[str], upto: int = 11) -> bool:
    joined = " ".join(texts)
    return all(FRIENDS[n] in joined for n in range(1, upto + 1))


async def test_compaction_prompt_lists_memories_the_new_one_as_id_0_and_an_enum(database, clock):
    await install_app(database, "app")
    model = memory_model(friend_memories(), lambda call: decision("delete", 0))
    agent = MemorySubAgent(database, model, clock=clock)
    await fill_with_friends(agent, 11)

    [call] = model.calls_starting_with(COMPACTION_PREFIX)
    assert call.prompt.startswith(
        "You are a memory management assistant. You have 11 memories but can only keep 10."
    )
    existing, new = call.prompt.split("Existing memories:\n")[1].split("\n\nNew memory:\n")
    first = (await agent.list_memories("app"))[-1]
    assert existing.splitlines()[0] == f"[id={first.id}] (created 2025-10-01) {friend_memory(1)}"
    assert len(existing.splitlines()) == 10
    assert new.splitlines()[0] == f"[id=0] (created 2025-10-01) {friend_memory(11)}"
    delete, edit = call.json_schema["anyOf"]
    existing_ids = sorted(memory_lines(call))[1:]
    # A delete may name the new memory; an edit only an existing one, with its new text.
    assert delete["properties"]["action"]["enum"] == ["delete"]
    assert delete["properties"]["targetMemoryId"]["enum"] == [*existing_ids, 0]
    assert edit["properties"]["action"]["enum"] == ["edit"]
    assert edit["properties"]["targetMemoryId"]["enum"] == existing_ids
    assert "newContent" in edit["required"] and "newContent" not in delete["properties"]


async def test_a_delete_of_a_repeated_fact_is_applied(database, clock):
    """Memory 4 says again what the new memory says: the model may delete it."""
    await install_app(database, "app")

    def delete_the_repeat(call: ModelCall) -> str:
        lines = memory_lines(call)
        return decision("delete", next(i for i, t in lines.items() if i and FRIENDS[4] in t))

    agent = friends_agent(database, clock, delete_the_repeat)
    await fill_with_friends(agent, 10)
    created = await agent.create_memory(friend_request(4, text=friend_fact(4)))

    [step] = created.compactions
    assert (step.action, step.decided_by, step.outcome) == ("delete", "model", "delete")
    assert len(await contents(agent)) == 10
    assert created.memory is not None and (await contents(agent))[-1] == friend_memory(4)


@pytest.mark.parametrize("empty", [None, "", "   "])
async def test_an_edit_to_no_text_is_read_as_a_delete_and_checked_as_one(database, clock, empty):
    """Small models often answer an edit with no new text: that memory's delete, applied
    where a delete would be (memory 4 repeats the new one), overruled where it would not."""
    await install_app(database, "app")

    def edit_to_nothing(call: ModelCall) -> str:
        lines = memory_lines(call)
        repeat = next(i for i, t in lines.items() if i and FRIENDS[4] in t)
        return decision("edit", repeat, empty)

    agent = friends_agent(database, clock, edit_to_nothing)
    await fill_with_friends(agent, 10)
    created = await agent.create_memory(friend_request(4, text=friend_fact(4)))

    [step] = created.compactions
    assert (step.action, step.decided_by) == ("delete", "model")
    assert "an edit to no text" in step.reason
    assert len(await contents(agent)) == 10 and every_friend_kept(await contents(agent), 10)


async def test_with_the_extractive_writer_a_delete_of_a_unique_fact_is_overruled(
    database, clock
):
    """The floor's policy checks the model's decision: a fact no other memory holds is not
    deleted while two memories can be merged without loss."""
    await install_app(database, "app")
    agent = friends_agent(
        database, clock, lambda call: decision("delete", sorted(memory_lines(call))[1]),
        writer="extractive",
    )
    for n in range(1, 12):
        text = f"{friend_fact(n)} Keep reminders short please."
        await agent.create_memory(friend_request(n, text=text))

    remaining = await contents(agent)
    assert len(remaining) == 10
    assert every_friend_kept(remaining)
    assert agent.stats.compactions["merge", "policy"] == 1
    assert agent.stats.fallbacks["overruled"] == 1


async def test_with_the_model_writer_the_models_delete_of_a_unique_fact_is_applied(
    database, clock
):
    """Which fact to give up is the model's decision: no rule overrules it."""
    await install_app(database, "app")
    agent = friends_agent(
        database, clock, lambda call: decision("delete", sorted(memory_lines(call))[1])
    )
    await fill_with_friends(agent, 11)

    remaining = await contents(agent)
    assert len(remaining) == 10
    assert FRIENDS[1] not in " ".join(remaining)  # the oldest memory, as the model chose
    assert agent.stats.compactions["delete", "model"] == 1
    assert agent.stats.fallbacks["overruled"] == 0


async def test_an_edit_that_keeps_both_facts_is_applied(database, clock):
    await install_app(database, "app")

    def merge(call: ModelCall) -> str:
        lines = memory_lines(call)
        target = sorted(lines)[2]
        return decision("edit", target, f"{lines[target]} {lines[0]}", "same kind of fact")

    agent = friends_agent(database, clock, merge)
    await fill_with_friends(agent, 10)
    target = (await agent.list_memories("app"))[-2]

    created = await agent.create_memory(friend_request(11))

    [step] = created.compactions
    assert (step.action, step.target_memory_id, step.decided_by) == ("edit", target.id, "model")
    assert created.memory is None and created.note == f"folded into memory {target.id}"
    edited = next(m for m in await agent.list_memories("app") if m.id == target.id)
    assert edited.content == f"{friend_memory(2)} {friend_memory(11)}"
    assert edited.updated_at > edited.created_at
    assert edited.metadata["relatedConversations"] == ["c2", "c11"]
    assert len(await contents(agent)) == 10


def _drops(lines: dict[int, str]) -> str:
    return lines[0]


def _invents(lines: dict[int, str]) -> str:
    return f"{lines[sorted(lines)[2]]} {lines[0]} They also went hiking in the Dolomites."


@pytest.mark.parametrize(
    ("new_content", "why"),
    [(_drops, "drops"), (_invents, "says what neither")],
    ids=["drops-a-fact", "invents"],
)
async def test_with_the_extractive_writer_an_edit_that_loses_or_invents_is_overruled(
    database, clock, new_content, why
):
    await install_app(database, "app")

    def edit(call: ModelCall) -> str:
        lines = memory_lines(call)
        return decision("edit", sorted(lines)[2], new_content(lines))

    agent = friends_agent(database, clock, edit, writer="extractive")
    await fill_with_friends(agent, 11)
    [step] = (await agent.create_memory(friend_request(12))).compactions
    assert step.decided_by == "policy" and why in (step.fallback_reason or "")
    assert every_friend_kept(await contents(agent), upto=12)


async def test_with_the_model_writer_an_edit_that_drops_a_fact_is_the_models_call(
    database, clock
):
    await install_app(database, "app")
    agent = friends_agent(
        database, clock, lambda call: decision("edit", sorted(memory_lines(call))[2],
                                               _drops(memory_lines(call)))
    )
    await fill_with_friends(agent, 11)
    [step] = (await agent.create_memory(friend_request(12))).compactions
    assert (step.action, step.decided_by, step.fallback_reason) == ("edit", "model", None)


async def test_with_the_model_writer_an_edit_grounded_in_neither_memory_falls_back_to_fifo(
    database, clock
):
    await install_app(database, "app")
    agent = friends_agent(
        database, clock, lambda call: decision("edit", sorted(memory_lines(call))[2],
                                               _invents(memory_lines(call)))
    )
    await fill_with_friends(agent, 11)
    oldest = (await agent.list_memories("app"))[-1]
    [step] = (await agent.create_memory(friend_request(12))).compactions
    assert (step.action, step.target_memory_id, step.decided_by) == ("delete", oldest.id, "policy")
    assert step.fallback_cause == "invalid_decision"
    assert '"They also went hiking in the Dolomites." is grounded in neither memory' in (
        step.fallback_reason
    )


def unknown_action(call: ModelCall) -> str:
    return decision("archive", sorted(memory_lines(call))[1])


def missing_id(call: ModelCall) -> str:
    return decision("delete", 999_999)


def string_id(call: ModelCall) -> str:
    return decision("delete", str(sorted(memory_lines(call))[1]))


def long_edit(call: ModelCall) -> str:
    too_long = "This " + "very " * 90 + "long. It ends."
    return decision("edit", sorted(memory_lines(call))[1], too_long)


def edit_of_new(call: ModelCall) -> str:
    return decision("edit", 0, "Merged text is here. It is fine.")


def llm_error(call: ModelCall) -> str:
    raise ChatModelResponseError("boom", status_code=500)


def truncated(call: ModelCall) -> ChatReply:
    return ChatReply('{"action": "delete", "targetMem', truncated=True)


async def too_slow(call: ModelCall) -> str:
    await anyio.sleep(5)
    return decision("delete", 0)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (lambda call: "I would delete the oldest one.", "no JSON object"),
        (lambda call: '{"action": "delete", "targetMemoryId": [3}', "not valid JSON"),
        (lambda call: '{"action": "delete", "targetMemoryId": 0, "reason": "a\nb"}', None),
        (unknown_action, "action"),
        (missing_id, "not one of those shown"),
        (string_id, "targetMemoryId"),
        (long_edit, "newContent is 469 characters, the limit is 400"),
        (edit_of_new, "existing memory"),
        (llm_error, "LLM error"),
        (truncated, "cut off"),
        (too_slow, "no answer within"),
    ],
    ids=[
        "prose",
        "broken-json",
        "raw-newline-is-valid",
        "unknown-action",
        "missing-id",
        "string-id",
        "long-edit",
        "edit-of-new",
        "llm-error",
        "truncated",
        "timeout",
    ],
)
async def test_a_failed_decision_falls_back_to_fifo_with_its_reason(database, clock, answer, why):
    await install_app(database, "other")
    await install_app(database, "app")
    agent = friends_agent(database, clock, answer, llm_timeout=0.3)
    await agent.create_memory(friend_request(0, "other"))
    await fill_with_friends(agent, 10)
    oldest = (await agent.list_memories("app"))[-1]

    created = await agent.create_memory(friend_request(11))

    [outcome] = created.compactions
    remaining = await contents(agent)
    assert len(remaining) == 10
    if why is None:  # a line break inside a JSON string is read, not rejected
        assert (outcome.decided_by, outcome.target_memory_id) == ("model", 0)
    else:
        assert (outcome.decided_by, outcome.outcome) == ("policy", "fifo")
        assert outcome.target_memory_id == oldest.id
        assert why in (outcome.fallback_reason or "")
        assert agent.stats.compactions["fifo", "policy"] == 1
        assert FRIENDS[1] not in " ".join(remaining) and FRIENDS[11] in " ".join(remaining)
        events = await agent.history("app", memory_id=oldest.id)
        assert why in (events[-1].reason or "")
    assert await agent.get_memory_count("other") == 1


async def test_memories_changed_while_the_model_decided_are_decided_again(database, clock):
    await install_app(database, "app")
    agent: MemorySubAgent
    calls = 0

    async def admin_deletes_meanwhile(call: ModelCall) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await agent.delete_memory("app", sorted(memory_lines(call))[1])
        return decision("delete", sorted(memory_lines(call))[1])

    agent = friends_agent(database, clock, admin_deletes_meanwhile)
    await fill_with_friends(agent, 10)
    created = await agent.create_memory(friend_request(11))

    assert calls == 1  # the admin delete made room: the second look needs no decision
    assert created.compactions == []
    assert len(await contents(agent)) == 10


async def test_the_cap_holds_when_many_memories_are_created_at_once(database, clock):
    await install_app(database, "app")

    async def slow_decision(call: ModelCall) -> str:
        await anyio.sleep(0.01)
        return decision("delete", sorted(memory_lines(call))[1])

    agent = friends_agent(database, clock, slow_decision)
    async with anyio.create_task_group() as tg:
        for n in range(1, 31):
            tg.start_soon(agent.create_memory, friend_request(n))

    assert await agent.get_memory_count("app") == 10
    assert sum(agent.stats.compactions.values()) == 20


async def test_with_the_extractive_writer_a_newer_value_retires_the_old_one_below_the_cap(
    database, clock
):
    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(""), clock=clock, writer="extractive")
    await agent.create_memory(friend_request(1, text="My rent is 1650 dollars a month."))
    await agent.create_memory(friend_request(2, text="I work as a nurse at St Mary's."))
    created = await agent.create_memory(
        friend_request(3, text="The landlord raised the rent. It is 1900 dollars a month now.")
    )

    [step] = created.compactions
    assert (step.action, step.outcome, step.decided_by) == ("delete", "update", "policy")
    remaining = " ".join(await contents(agent))
    assert "1900" in remaining and "1650" not in remaining and "nurse" in remaining
    events = await agent.history("app")
    assert [(e.event, e.actor) for e in events][-2:] == [("created", "job"), ("deleted", "policy")]
    assert "1650" in (events[-1].content_before or "")


async def test_with_the_extractive_writer_a_memory_without_facts_goes_before_any_fact(
    database, clock
):
    await install_app(database, "app")
    store = MemoryStore(database)
    await store.insert("app", "The user said hello.", created_at="2025-09-01T00:00:00.000000Z")
    agent = friends_agent(database, clock, lambda call: "not json", writer="extractive")
    await fill_with_friends(agent, 10)

    remaining = await contents(agent)
    assert "The user said hello." not in remaining
    assert every_friend_kept(remaining, upto=10)


async def test_with_the_model_writer_no_rule_retires_a_memory_below_the_cap(database, clock):
    """Memories a rule would read as updates of each other ("The user shared the facts f00.",
    "… f01.") all stay until the cap: then the model's DELETE is applied."""
    await install_app(database, "app")
    model = memory_model(
        lambda call: quoted(f"The user shared the facts f{len(model.calls):02d}.", call),
        lambda call: decision("delete", sorted(memory_lines(call))[1], reason="oldest"),
    )
    agent = MemorySubAgent(database, model, clock=clock)
    for n in range(10):
        created = await agent.create_memory(friend_request(n))
        assert created.compactions == []
    assert await agent.get_memory_count("app") == 10

    created = await agent.create_memory(friend_request(10))

    [step] = created.compactions
    assert (step.action, step.decided_by, step.outcome) == ("delete", "model", "delete")
    assert await agent.get_memory_count("app") == 10

