"""A turn's memory block within its budget: every memory while they fit, else the ones the
turn's messages make relevant, whichever space they are in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_agent import (
    BlockBudget,
    Memory,
    StorageError,
    estimate_tokens,
    memory_block_within,
)
from memory_agent.storage.store import MemoryStore
from tests.fakes import FunctionModel
from tests.harness import conversation_calls, eventually, running, service

STORIES = Path(__file__).resolve().parent.parent / "scripts" / "eval_stories.json"


def memory(n: int, content: str, *, pinned: bool = False, importance: int = 5) -> Memory:
    day = f"2026-{1 + n // 28:02d}-{1 + n % 28:02d}T10:00:00.000000Z"
    return Memory(n, "app", content, day, day, metadata={"importance": importance},
                  pinned=pinned)


def block(memories, recent="", tokens=2000, count=None, **spaces):
    return memory_block_within(BlockBudget(tokens, count), estimate_tokens, "App", memories,
                               recent=recent, **spaces).text


# Filler that shares nothing with the turns below, and a pair of memories about one thing:
# the turn asks after the first in its words; the second shares none of them.
FILLER = [memory(n, f"The user's cousin number {n} lives far away and calls on Sundays.")
          for n in range(40, 0, -1)]
LOCKER = memory(41, "The user's locker code at the Riverside gym is 4471.")
TOWEL = memory(0, "Towels there cost two euros; bring a padlock for the cabinet.")
ASKED = "What was my locker code at the gym again?"


def test_every_memory_is_shown_while_they_fit():
    memories = [memory(n, f"The user keeps note {n}.") for n in range(10, 0, -1)]
    shown = block(memories, "anything")
    assert all(m.content in shown for m in memories)
    assert shown.index("note 10") < shown.index("note 1.")  # newest first, as before


def test_beyond_the_budget_the_memories_the_turn_is_about_are_shown():
    memories = [memory(n, f"The user's cousin number {n} lives far away and calls on"
                          f" Sundays about the garden.") for n in range(60, 0, -1)]
    oldest = memory(0, "The user's locker code at the Riverside gym is 4471.")
    shown = block([*memories, oldest], "What was my locker code at the gym again?", tokens=600)
    assert oldest.content in shown
    assert estimate_tokens(shown) <= 600
    assert sum(m.content in shown for m in memories) < len(memories)


def test_the_memories_linked_to_the_one_the_turn_is_about_come_next():
    memories = [TOWEL, LOCKER, *FILLER]
    alone = block(memories, ASKED, tokens=300)
    linked = memory_block_within(BlockBudget(300), estimate_tokens, "App", memories,
                                 recent=ASKED, related={LOCKER.id: [TOWEL.id]})
    assert LOCKER.content in alone and TOWEL.content not in alone
    assert LOCKER.content in linked.text and TOWEL.content in linked.text
    assert estimate_tokens(linked.text) <= 300
    assert len(linked.left_out) == len(memories) - len(linked.shown) > 0
    assert linked.relevant[0] == LOCKER.id


def test_at_most_two_linked_memories_and_only_those_of_relevant_ones():
    # The least important of all: only a link brings them in.
    others = [memory(43 + n, f"The sauna's door {n} opens from {n + 6} o'clock.", importance=1)
              for n in range(3)]
    every = [*others, LOCKER, *FILLER]

    def shown(related):
        return memory_block_within(BlockBudget(420), estimate_tokens, "App", every,
                                   recent=ASKED, related=related).shown

    assert LOCKER in shown({}) and not any(o in shown({}) for o in others)
    assert sum(o in shown({LOCKER.id: [o.id for o in others]}) for o in others) == 2
    # One slot left, and a link between two memories the turn is not about: not followed.
    one = shown({LOCKER.id: [others[0].id], FILLER[0].id: [others[1].id, FILLER[-1].id]})
    assert others[0] in one and others[1] not in one and FILLER[-1] not in one
    assert FILLER[0] in one


def test_a_word_every_memory_holds_decides_nothing():
    """'user' and 'the' are in every memory: the rarer word the turn shares decides."""
    memories = [memory(n, f"The user likes the colour {colour}.")
                for n, colour in enumerate(["red", "green", "blue", "amber", "teal"], 1)]
    shown = block(memories, "Does the user like amber?", tokens=220)
    assert "amber" in shown
    assert estimate_tokens(shown) <= 220
    assert shown.count("[Created:") == 2


def test_with_nothing_in_common_pinned_then_important_then_newer_go_first():
    memories = [memory(n, f"Plain note {n} about the weather.") for n in range(20, 0, -1)]
    pinned = memory(0, "Pinned: the user's name is Ilse.", pinned=True)
    important = memory(21, "Important: the user's flat is on the fourth floor.", importance=9)
    shown = block([*memories, pinned, important], "hello", count=3)
    assert pinned.content[8:] in shown and important.content[11:] in shown
    assert "Plain note 20" in shown and "Plain note 19" not in shown


def test_the_count_bounds_every_space_together():
    own = [memory(n, f"Own note {n}.") for n in range(1, 6)]
    shared = [memory(n, f"Shared note {n}.") for n in range(6, 11)]
    profile = [memory(n, f"Profile note {n}.") for n in range(11, 16)]
    shown = block(shared, "note", count=4, user_memories=own, profile=profile)
    assert shown.count(" note ") == 4


@pytest.mark.anyio
async def test_an_apps_hundred_memories_leave_the_turn_the_one_it_asks_about(db_path):
    """MNEMOLOOP_MEMORY_LIMIT=100 and 100 memories in an app's shared space: the block keeps
    within MNEMOLOOP_MEMORY_TOKENS, and a question about the oldest memory gets it."""
    facts = [fact for app in json.loads(STORIES.read_text())["apps"] for fact in app["facts"]]
    model = FunctionModel(lambda call: "Noted.")
    async with service(db_path, model, memory_limit=100, memory_tokens=800) as services, \
            running(services):
        await services.stores.registry.install("pantry", "Pantry")
        store = MemoryStore(services.database)
        for n, fact in enumerate(facts[:100]):
            await store.insert("pantry", f"The {fact['description']}.",
                               created_at=f"2026-0{1 + n // 28}-{1 + n % 28:02d}T00:00:00.000000Z")
        conversation = await services.stores.conversations.open("pantry")
        await services.stores.conversations.add_message(
            conversation, "user", "Any lunch ideas Theo would actually eat?")
        await eventually(lambda: _answered(model))
    prompt = conversation_calls(model)[0].messages[1].content
    assert "son is named Theo" in prompt  # the oldest of the hundred
    assert estimate_tokens(prompt) <= 800
    assert prompt.count("[Created:") < 100


@pytest.mark.anyio
async def test_a_turns_block_adds_the_memory_linked_to_the_one_it_asks_about(
    db_path, monkeypatch, caplog
):
    """Not every memory fits: the service reads the links of the memories the turn is about
    and the memory linked to the asked one follows it into the block; unlinked, it stays out.
    Links that cannot be read leave the block as it was without them, and say so."""
    model = FunctionModel(lambda call: "Noted.")
    async with service(db_path, model, memory_limit=100, memory_tokens=300) as services, \
            running(services):
        await services.stores.registry.install("gym", "Gym")
        store = MemoryStore(services.database)
        ids = {}
        for n, one in enumerate([TOWEL, *reversed(FILLER), LOCKER]):
            ids[one.content] = (await store.insert(
                "gym", one.content,
                created_at=f"2026-0{1 + n // 28}-{1 + n % 28:02d}T00:00:00.000000Z")).id
        prompts = []
        for turn, linked in enumerate((False, True, "unreadable"), 1):
            if linked is True:
                await services.database.run_transaction(lambda tx: store.within(tx).link(
                    ids[LOCKER.content], [(ids[TOWEL.content], 0.5)], "related",
                    "2026-03-01T00:00:00.000000Z"))
            if linked == "unreadable":
                monkeypatch.setattr(services.stores.agent, "linked_ids", _unreadable)
            conversation = await services.stores.conversations.open("gym")
            await services.stores.conversations.add_message(conversation, "user", ASKED)
            await eventually(lambda turn=turn: _answered(model, turn))
            prompts.append(conversation_calls(model)[-1].messages[1].content)
    assert LOCKER.content in prompts[0] and TOWEL.content not in prompts[0]
    assert LOCKER.content in prompts[1] and TOWEL.content in prompts[1]
    assert estimate_tokens(prompts[1]) <= 300
    assert LOCKER.content in prompts[2] and TOWEL.content not in prompts[2]
    assert "links among a block's memories could not be read" in caplog.text


async def _unreadable(memory_ids):
    raise StorageError("the database is out of reach")


async def _answered(model: FunctionModel, calls: int = 1) -> bool:
    return len(conversation_calls(model)) >= calls
