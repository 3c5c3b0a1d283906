"""A long conversation's memory is of all of it: a transcript too long for one memory prompt
is read in parts that fit, each part's sentences grounded in its own turns, then one memory of
at most four sentences is written from all of them. The calls are bounded and charged."""

from __future__ import annotations

import json
import re

import pytest

from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent, estimate_tokens
from memory_agent.core.errors import ChatModelUnavailable
from memory_agent.writers.model.parts import MAX_PARTS, transcript_parts
from tests.conftest import install_app
from tests.fakes import CREATION_PREFIX, FRIENDS, FunctionModel, ModelCall, friend_fact

pytestmark = pytest.mark.anyio

FILLER = "We went over the plan for the week and the order of the errands once more. " * 6


def lines(count: int, *, long_at: int | None = None) -> list[str]:
    return [
        f"User: turn {n}. " + (FILLER * 30 if n == long_at else FILLER)
        for n in range(count)
    ]


def test_a_transcript_that_fits_is_one_part():
    parts = transcript_parts(lines(3), 10_000, estimate_tokens)
    assert len(parts) == 1 and parts[0].turns == (0, 1, 2)


def test_parts_are_cut_between_turns_each_within_the_room():
    shown = lines(20)
    parts = transcript_parts(shown, 1500, estimate_tokens)
    assert 1 < len(parts) <= MAX_PARTS
    assert [i for part in parts for i in part.turns] == list(range(20))  # each turn once
    for part in parts:
        assert estimate_tokens(part.text) <= 1500
        assert list(part.lines) == [shown[i] for i in part.turns]


def test_turns_of_just_over_half_a_part_still_keep_to_the_bound():
    """Each turn too long to share a part: packed one a part they would make 37 parts; they
    are shortened until they pack into the bound, every turn still read."""
    shown = [f"User: turn {n}. {'x' * 95}" for n in range(37)]
    parts = transcript_parts(shown, 200, len)
    assert len(parts) <= MAX_PARTS
    assert [i for part in parts for i in part.turns] == list(range(37))
    assert all(len(part.text) <= 200 for part in parts)


def test_a_conversation_longer_than_the_parts_hold_has_its_longest_turns_shortened():
    shown = lines(12, long_at=5)
    parts = transcript_parts(shown, 1200, estimate_tokens, max_parts=3)
    assert len(parts) <= 3
    assert [i for part in parts for i in part.turns] == list(range(12))
    for part in parts:
        assert estimate_tokens(part.text) <= 1200
    long_turn = next(line for part in parts for line in part.lines if "turn 5." in line)
    assert "[…]" in long_turn
    # Its beginning and its end are kept.
    assert long_turn.startswith("User: turn 5. We went over")
    assert long_turn.endswith(shown[5][-40:])


def test_a_turn_longer_than_a_part_is_shortened_to_fit_one():
    shown = lines(2, long_at=1)
    parts = transcript_parts(shown, 800, estimate_tokens)
    assert all(estimate_tokens(part.text) <= 800 for part in parts)
    assert [i for part in parts for i in part.turns] == [0, 1]


def _shown_turns(prompt: str) -> list[str]:
    shown = prompt.split("<<<CONVERSATION\n", 1)[-1].split("\nCONVERSATION>>>", 1)[0]
    return [re.sub(r"^(User|Assistant): ", "", line) for line in shown.splitlines()]


def reader(*, steal_from_other_parts: bool = False, combine: str | None = None,
           garbled_part: int | None = None, combining_fails: bool = False):
    """A model that writes, for each part, a sentence per friend its turns name (quoting the
    turn), and, asked to put the parts together, keeps every note (quote as given);
    `garbled_part` answers that part with no JSON, `combining_fails` is a model gone away
    when the parts are put together."""

    def answer(call: ModelCall) -> str:
        prompt = call.prompt
        if not prompt.startswith(CREATION_PREFIX):
            return "Sure."
        if garbled_part is not None and f"this is part {garbled_part} " in prompt:
            return "I cannot answer in JSON today."
        if "was read in" in prompt:  # the parts put together
            if combining_fails:
                raise ChatModelUnavailable("connection refused")
            if combine is not None:
                return combine
            notes = re.findall(r'^\d+\. (.*) \(quote: "(.*)"\)$', prompt, re.M)
            return json.dumps({"sentences": [{"text": t, "quote": q} for t, q in notes],
                               "updates": []})
        sentences = []
        for turn in _shown_turns(prompt):
            for name, city in re.findall(r"My friend (\w+) lives in (\w+)", turn):
                sentences.append({"text": f"The user's friend {name} lives in {city}.",
                                  "quote": f"My friend {name} lives in {city}"})
        if steal_from_other_parts and "part 1." in prompt:
            # A quote of a turn this part does not hold: not grounded here.
            sentences.append({"text": "The user's friend Zora lives in Wells.",
                              "quote": "My friend Zora lives in Wells"})
        return json.dumps({"sentences": sentences, "updates": []})

    return FunctionModel(answer)


def conversation(facts_at: dict[int, int], turns: int = 20) -> list[ChatMessage]:
    messages = []
    for n in range(turns):
        said = friend_fact(facts_at[n]) + " " if n in facts_at else ""
        messages += [ChatMessage("user", said + FILLER), ChatMessage("assistant", "Noted.")]
    return messages


async def _write(database, model, messages, prompt_tokens=2000):
    await install_app(database, "app")
    agent = MemorySubAgent(database, model, prompt_tokens=prompt_tokens, writer="model")
    return agent, await agent.create_memory(
        MemoryCreationRequest("app", "long-1", messages))


async def test_facts_at_the_start_middle_and_end_all_reach_the_memory(database):
    model = reader()
    facts = {0: 0, 10: 1, 19: 2}
    agent, created = await _write(database, model, conversation(facts))

    for n in facts.values():
        assert FRIENDS[n] in created.content, created.content
    part_calls = [c for c in model.calls if "this is part" in c.prompt]
    combining = [c for c in model.calls if "was read in" in c.prompt]
    assert 2 <= len(part_calls) <= MAX_PARTS and len(combining) == 1
    assert len(model.calls) == len(part_calls) + 1
    # Every prompt fits; each part is a stretch of the conversation shown once.
    assert all(estimate_tokens(c.prompt) <= 2000 for c in model.calls)
    assert f"read in {len(part_calls)} parts of 40 turns" in created.note, created.note
    # Nothing was shortened: the parts hold every turn whole.
    assert not any("[…]" in c.prompt for c in part_calls)
    # Every call is charged to the memory's energy (FunctionModel: a token per 4 characters).
    charged = sum(len(c.prompt) // 4 for c in model.calls) // 100
    assert agent.get_energy_consumed_since_last_poll() >= charged


async def test_a_parts_sentence_is_grounded_in_its_own_turns_only(database):
    model = reader(steal_from_other_parts=True)
    # Zora is said in the last turn, which part 1 does not hold.
    facts = {0: 0, 19: FRIENDS.index("Zora")}
    _, created = await _write(database, model, conversation(facts))
    retries = [c for c in model.calls if "could not be checked" in c.messages[-1].content]
    assert len(retries) == 1
    assert "not in the conversation" in retries[0].messages[-1].content
    # Zora still reaches the memory, from the part that holds her turn.
    assert "Zora" in created.content and FRIENDS[0] in created.content


async def test_when_putting_the_parts_together_fails_their_sentences_stand(database):
    model = reader(combine="this is not JSON at all")
    facts = {0: 0, 19: 1}
    _, created = await _write(database, model, conversation(facts))
    assert FRIENDS[0] in created.content and FRIENDS[1] in created.content


async def test_a_part_whose_answer_is_not_json_is_passed_over_and_the_others_stand(database):
    model = reader(garbled_part=1)
    facts = {0: 0, 10: 1, 19: 2}
    _, created = await _write(database, model, conversation(facts))
    # The first part's fact is lost with its answer; the others reach the memory.
    assert FRIENDS[1] in created.content and FRIENDS[2] in created.content, created.content


async def test_when_the_model_fails_putting_the_parts_together_their_sentences_stand(database):
    model = reader(combining_fails=True)
    facts = {0: 0, 19: 1}
    _, created = await _write(database, model, conversation(facts))
    assert FRIENDS[0] in created.content and FRIENDS[1] in created.content


async def test_more_sentences_than_one_prompt_holds_are_put_together_in_stages(database):
    """A fact in every turn: the parts' sentences are too many for one combining prompt, so
    halves are made one memory's sentences first; every prompt still fits."""
    model = reader()
    facts = {n: n % len(FRIENDS) for n in range(40)}
    _, created = await _write(database, model, conversation(facts, turns=40), prompt_tokens=1600)
    combining = [c for c in model.calls if "was read in" in c.prompt]
    assert len(combining) > 1
    assert all(estimate_tokens(c.prompt) <= 1600 for c in model.calls)
    assert created.memory is not None and FRIENDS[0] in created.content


async def test_a_long_conversation_with_nothing_worth_keeping_asks_no_combining(database):
    model = reader()
    agent, created = await _write(database, model, conversation({}))
    assert created.memory is None
    assert not [c for c in model.calls if "was read in" in c.prompt]
    assert agent.stats.nothing_worth_keeping == 1
