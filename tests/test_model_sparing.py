"""A model whose memories or decisions the checks nearly always set aside is asked one time in
ten: the statements and the policy did the work anyway, and the calls were most of the memory
work's energy. What is written and kept does not change."""

from __future__ import annotations

import pytest

from memory_agent import ChatMessage, ChatReply, MemoryCreationRequest, MemorySubAgent
from tests.conftest import install_app
from tests.fakes import (
    COMPACTION_PREFIX,
    CREATION_PREFIX,
    FRIENDS,
    decision,
    friend_fact,
    memory_lines,
    memory_model,
)

pytestmark = pytest.mark.anyio

# What a small model writes: nothing the conversation says.
GARBLED = "The user is 25 years old. They like to travel. They enjoy reading books."


def request(n: int) -> MemoryCreationRequest:
    messages = [ChatMessage("user", friend_fact(n)), ChatMessage("assistant", "Noted.")]
    return MemoryCreationRequest("app", f"c{n}", messages)


async def test_a_model_whose_memories_are_never_kept_is_asked_one_time_in_ten(database, clock):
    await install_app(database, "app")
    model = memory_model(GARBLED)
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=40)

    for n in range(1, 31):
        await agent.create_memory(request(n))

    # Two memories of three sentences each fill the record (six sentences), then one
    # write in ten asks the model.
    asked = len(model.calls_starting_with(CREATION_PREFIX))
    assert asked == 2 + 28 // 10
    assert agent.stats.written_without_model == 30 - asked
    texts = [m.content for m in await agent.list_memories("app")]
    assert len(texts) == 30
    assert all(FRIENDS[n] in " ".join(texts) for n in range(1, 31))  # no fact lost
    assert not any("25 years" in t for t in texts)


async def test_a_model_that_only_repeats_the_statements_is_spared_too(database, clock):
    """Half its sentences pass, but only by saying what the statements say: it is not
    trusted and adds nothing to them, so it is asked for one memory in ten."""
    await install_app(database, "app")

    def repeats(call) -> str:
        name = call.prompt.split("User: My friend ")[1].split()[0]
        return f'The user said: "{friend_fact(FRIENDS.index(name))}" {GARBLED}'

    model = memory_model(repeats)
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=40)
    for n in range(1, 31):
        await agent.create_memory(request(n))

    # Two memories of four sentences fill the record, then one write in ten asks.
    asked = len(model.calls_starting_with(CREATION_PREFIX))
    assert asked == 2 + 28 // 10
    texts = [m.content for m in await agent.list_memories("app")]
    assert all(FRIENDS[n] in " ".join(texts) for n in range(1, 31))


async def compact_twenty_times(database, clock, writes) -> tuple[list, int, MemorySubAgent]:
    """Twenty compactions with a cap of 3, by a model that writes `writes` and answers every
    decision with prose: the steps, how many decisions it was asked, and the agent."""
    await install_app(database, "app")
    model = memory_model(writes, "I would delete the oldest one.")
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=3)
    steps = []
    for n in range(1, 24):
        steps += (await agent.create_memory(request(n))).compactions
    assert len(steps) == 20
    assert len(await agent.list_memories("app")) == 3
    return steps, len(model.calls_starting_with(COMPACTION_PREFIX)), agent


async def test_a_model_whose_decisions_are_never_usable_is_asked_one_time_in_ten(
    database, clock
):
    """Its memories are faithful but its decisions are not JSON; after five of them the
    policy decides alone, and says why, except for one decision in ten. What is kept is the
    policy's either way."""
    from tests.fakes import friend_memories

    steps, asked, agent = await compact_twenty_times(database, clock, friend_memories())

    assert asked == 5 + 15 // 10
    causes = [s.fallback_cause for s in steps]
    assert causes.count("invalid_decision") == asked
    assert causes.count("not_asked") == 20 - asked
    not_asked = next(s for s in steps if s.fallback_cause == "not_asked")
    assert "the model was not asked" in (not_asked.fallback_reason or "")
    assert agent.stats.fallbacks["not_asked"] == 20 - asked


async def test_a_model_whose_memories_are_set_aside_is_not_first_asked_five_decisions(
    database, clock
):
    """Before its decisions say anything, the record of its memories speaks for it: a model
    that adds nothing to the memories it writes is asked one decision in ten from the
    first."""
    steps, asked, _ = await compact_twenty_times(database, clock, GARBLED)

    # The writer's record is known (twelve sentences, none kept) by the first compaction.
    assert asked == 20 // 10
    causes = [s.fallback_cause for s in steps]
    assert causes.count("not_asked") == 20 - asked
    assert causes.count("invalid_decision") == asked


async def test_a_model_some_of_whose_decisions_stand_is_asked_again(database, clock):
    """Overruled at first (a merge was there), its delete stands once nothing goes without
    loss: one decision in ten applied is enough to be asked every time again."""
    await install_app(database, "app")
    model = memory_model(GARBLED, lambda call: decision("delete", sorted(memory_lines(call))[1]))
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=3)

    steps = []
    for n in range(1, 24):
        steps += (await agent.create_memory(request(n))).compactions

    applied = [i for i, s in enumerate(steps) if s.decided_by == "model"]
    assert applied and any(s.fallback_cause == "not_asked" for s in steps[: applied[0]])
    assert all(s.fallback_cause != "not_asked" for s in steps[applied[0] :])


async def test_a_model_that_writes_well_is_always_asked(database, clock):
    from tests.fakes import friend_memories, friend_memory

    await install_app(database, "app")
    model = memory_model(friend_memories())
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=40)
    for n in range(1, 21):
        await agent.create_memory(request(n))
    assert len(model.calls_starting_with(CREATION_PREFIX)) == 20
    assert agent.stats.written_without_model == 0
    # Its own words every time, the tenth too (when its record first says anything).
    texts = {m.content for m in await agent.list_memories("app")}
    assert texts == {friend_memory(n) for n in range(1, 21)}


def test_the_metrics_say_how_often_the_model_was_spared():
    from collections import Counter

    from loop.metrics import Metrics
    from memory_agent.agent import AgentStats

    stats = AgentStats(written_without_model=7, fallbacks=Counter(not_asked=3))
    text = Metrics().render(
        stats=stats, jobs_by_status={}, energy_spent={}, apps_with_memories=0, apps=0
    ).decode()
    assert "mnemoloop_memories_written_without_model_total 7.0" in text
    assert 'mnemoloop_compaction_fallbacks_total{cause="not_asked"} 3.0' in text


async def test_the_speakers_words_outrank_a_doubted_models_paraphrase(database, clock):
    """A model two thirds of whose sentences pass, one of them saying what no statement says,
    is neither spared nor trusted: once its record shows that, the statement is kept in the
    speaker's words, not in the model's, and its own sentence only for what it adds."""
    from tests.fakes import friend_memories

    def mixed(call):
        return (
            f"{friend_memories()(call)} The user wants reminders short. "
            "The user is 25 years old."
        )

    def asking(n: int) -> MemoryCreationRequest:
        said = f"{friend_fact(n)} keep reminders short please"
        messages = [ChatMessage("user", said), ChatMessage("assistant", "Noted.")]
        return MemoryCreationRequest("app", f"c{n}", messages)

    await install_app(database, "app")
    agent = MemorySubAgent(database, memory_model(mixed), clock=clock, memory_limit=40)
    first = await agent.create_memory(asking(1))
    for n in range(2, 6):
        last = await agent.create_memory(asking(n))

    assert first.memory is not None and first.memory.content.startswith("The user's friend")
    assert last.memory is not None
    assert last.memory.content == (
        f'The user wants reminders short. The user said: "{friend_fact(5)}"'
    )
    assert agent.stats.written_without_model == 0


def test_a_doubted_models_sentence_that_adds_something_stays_and_no_statement_is_lost():
    """Its sentence says what the statements do not: it stays, every statement is quoted
    beside it (even one it carries too), and when something must be cut it goes first, never
    a statement."""
    from memory_agent.creation import MemoryWriter
    from memory_agent.facts import Statement

    async def never_asked(messages: list[ChatMessage]) -> ChatReply:
        raise AssertionError("composing asks no model")

    writer = MemoryWriter(never_asked, max_chars=400, max_transcript_chars=6000)
    said = [Statement("user", f"My friend {FRIENDS[n]} lives in Oslo.", 2) for n in range(4)]
    extra = f"The user's sister Anna moved to Denver; {FRIENDS[0]} lives in Oslo."
    written = writer._compose([extra], said, model_first=False)
    assert written.content.count("The user said:") == 4
    assert extra not in written.content  # five pieces: the model's sentence went first
    written = writer._compose([extra], said[:2], model_first=False)
    assert extra in written.content and written.content.count("The user said:") == 2


def test_a_greeting_goes_first_when_a_memory_must_be_cut():
    """"Hello Hannah, that sounds like a lovely trip" names only whom the other quotes name:
    it goes before "Esme is 9 and Felix is 6" when four sentences must be cut to fit. A
    confirmation that names what no other quote holds stays ("You and Hannah are at Chez
    Marcel", after a question)."""
    from memory_agent.creation import MemoryWriter
    from memory_agent.facts import key_statements

    async def never_asked(messages: list[ChatMessage]) -> ChatReply:
        raise AssertionError("composing asks no model")

    writer = MemoryWriter(never_asked, max_chars=400, max_transcript_chars=6000)

    def composed(turns: list[tuple[str, str]]) -> str:
        return writer._compose([], key_statements(turns)).content

    trip = [
        ("user", "Hi! I'm Hannah Ashdown and I'm planning our family summer holiday in the "
                 "south of France in July: me, my husband Rob and the two kids. Esme is 9 and "
                 "Felix is 6, and Felix still needs a booster seat in the car."),
        ("assistant", "Hello Hannah, that sounds like a lovely trip. I've noted the four of "
                      "you: you, Rob, Esme and Felix, with a booster seat needed for Felix "
                      "whenever there's a car involved."),
    ]
    written = composed(trip)
    assert "Esme is 9 and Felix is 6" in written
    assert "Hello Hannah" not in written
    anniversary = [
        ("user", "I'd love to take my wife Hannah to Chez Marcel on Friday for our 10th "
                 "anniversary, around 8 pm. She is allergic to shellfish, and I use a "
                 "wheelchair."),
        ("assistant", "Booked! You and Hannah are at Chez Marcel on Friday. Happy 10 years, "
                      "Hannah will love it. The table is at 20:00, step-free, and the kitchen "
                      "knows about the shellfish. Your booking code is CM-48213."),
    ]
    written = composed(anniversary)
    assert "You and Hannah are at Chez Marcel on Friday" in written
