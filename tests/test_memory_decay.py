"""A memory's decay within a conversation (the seed's table): in full for its first three
turns, then its digest, then from its eleventh a stub the model can `recall` whole; pinned
memories and what the turn asks after stay whole, a week unseen decays twice as fast, and the
relevance tags collapse or restart it."""

from __future__ import annotations

import pytest

from loop.conversations.recall_tool import RECALL_TOOL
from memory_agent import (
    BlockBudget,
    ChatReply,
    Given,
    Memory,
    ToolCall,
    estimate_tokens,
    memory_block_within,
)
from memory_agent.models import TAGGED
from memory_agent.recall.decay import digest_of, title_of, view_of
from memory_agent.storage.store import MemoryStore
from tests.fakes import FunctionModel, ModelCall
from tests.harness import eventually, running, service

pytestmark = pytest.mark.anyio

LOCKER = ("The user's gym locker is number 4417 on the second floor. They go on Tuesday and"
          " Thursday evenings after work. They keep a spare towel and a padlock in it.")
TRAIN = ("The user commutes by the 7:42 train from Almada to Cais do Sodré. They buy a monthly"
         " pass on the first working day. The train is often late on Mondays.")


def memory(memory_id: int = 1, content: str = LOCKER, **fields) -> Memory:
    return Memory(memory_id, "app", content, "2026-12-01T00:00:00.000000Z",
                  "2026-12-01T00:00:00.000000Z", **fields)


@pytest.mark.parametrize(("times", "stale", "view"), [
    (0, False, "full"), (2, False, "full"), (3, False, "digest"), (9, False, "digest"),
    (10, False, "stub"), (40, False, "stub"),
    # A week unseen: the count weighs double.
    (1, True, "full"), (2, True, "digest"), (4, True, "digest"), (5, True, "stub"),
])
def test_the_seeds_table_by_how_often_the_conversation_was_given_it(times, stale, view):
    assert view_of(memory(), Given(times, stale), kept_whole=False) == view


def test_pinned_asked_after_and_tagged_memories():
    assert view_of(memory(pinned=True), Given(30), kept_whole=False) == "full"
    assert view_of(memory(), Given(30), kept_whole=True) == "full"
    assert view_of(memory(), None, kept_whole=False) == "full"
    irrelevant = memory(metadata={TAGGED: "irrelevant"})
    assert view_of(irrelevant, None, kept_whole=True) == "stub"
    # Pinned outweighs the tag: a pinned memory is never faded.
    pinned = memory(pinned=True, metadata={TAGGED: "irrelevant"})
    assert view_of(pinned, Given(30), kept_whole=False) == "full"
    assert view_of(memory(metadata={TAGGED: "relevant"}), Given(3), kept_whole=False) == "digest"


def test_a_digest_is_the_first_sentence_and_a_title_its_first_words():
    assert digest_of(LOCKER) == "The user's gym locker is number 4417 on the second floor."
    assert title_of(LOCKER) == "The user's gym locker is number…"
    assert digest_of("ユーザーは毎朝七時に走る。週末は休む。") == "ユーザーは毎朝七時に走る。"
    assert title_of("One sentence only.") == "One sentence only"
    long = "word " * 100
    assert len(digest_of(long)) <= 200 and digest_of(long).endswith("…")


def block(given: dict[int, Given], recent: str = "", memories=None):
    return memory_block_within(
        BlockBudget(2000), estimate_tokens, "Gym", memories or [memory(1), memory(2, TRAIN)],
        recent=recent, given=given,
    )


def test_the_block_shows_each_memory_as_its_count_says_and_names_it_for_recall():
    full = block({})
    digest = block({1: Given(3), 2: Given(3)})
    stub = block({1: Given(10), 2: Given(10)})
    assert LOCKER in full.text and not full.recallable
    assert "4417 on the second floor. [a digest: use recall with id 1" in digest.text
    assert "Tuesday" not in digest.text
    # (NFKC, as every injected text is: "…" is "...")
    assert ("[Memory available (id 1): The user's gym locker is number... - use recall with id 1"
            in stub.text)
    assert stub.views == {1: "stub", 2: "stub"} and stub.recallable
    tokens = [estimate_tokens(b.text) for b in (full, digest, stub)]
    assert tokens[0] > tokens[1] > tokens[2]


def test_what_the_turn_asks_after_is_shown_whole_and_a_short_memory_never_decays():
    asked = block({1: Given(12), 2: Given(12)}, recent="Which train do I take from Almada?")
    assert asked.views == {1: "stub", 2: "full"}
    short = memory(3, "The user likes tea.")
    assert block({3: Given(20)}, memories=[short]).views == {3: "full"}


async def test_a_twelve_turn_conversation_decays_and_the_model_recalls_a_stub(tmp_path):
    """Through the running service: the block of the 4th turn holds digests, of the 11th
    stubs; the model is offered `recall` then, and its call is answered with the memory whole,
    which it answers from."""

    def chat(call: ModelCall) -> str | ChatReply:
        last = call.messages[-1]
        if last.role == "tool":
            return f"From the memory: {last.content}"
        if last.content == "Where is it?" and any(t.name == RECALL_TOOL.name for t in call.tools):
            return ChatReply("", tool_calls=(ToolCall("recall", {"id": locker_id}),))
        if last.content == "Bye. Where was it?":
            return ChatReply("Let me look.", tool_calls=(
                ToolCall("recall", {"id": locker_id}), ToolCall("end_conversation")))
        return "Noted."

    model = FunctionModel(chat)
    async with service(tmp_path / "decay.db", model) as services, running(services):
        await services.stores.registry.install("app", "Gym")
        store = MemoryStore(services.database)
        now = services.stores.agent.now()
        locker_id = (await store.insert("app", LOCKER, created_at=now)).id
        await store.insert("app", TRAIN, created_at=now)
        conversation = await services.stores.conversations.open("app")
        for turn in range(1, 12):
            await services.stores.conversations.add_message(
                conversation, "user", f"Here is note {turn} about my week.")
            await eventually(lambda: _answered(services, conversation))
        blocks = [c.messages[1].content for c in model.calls if c.tools]
        assert LOCKER in blocks[2] and "[a digest" not in blocks[2]
        assert "[a digest: use recall with id" in blocks[3] and "Tuesday" not in blocks[3]
        assert f"[Memory available (id {locker_id}): The user's gym locker" in blocks[10]
        offered = [[t.name for t in c.tools] for c in model.calls if c.tools]
        assert offered[0] == ["end_conversation"] and "recall" in offered[3]

        # Words the memory does not hold: it stays a stub, and the model recalls it.
        await services.stores.conversations.add_message(conversation, "user", "Where is it?")
        await eventually(lambda: _answered(services, conversation))
        recalled = model.calls[-1]
        assert recalled.messages[-2].tool_calls[0].name == "recall"
        assert LOCKER in recalled.messages[-1].content
        reply = (await services.stores.conversations.get(conversation)).messages[-1]
        assert reply.content.startswith("From the memory:") and "Tuesday" in reply.content

        # Tagged relevant, its counts start again: whole in the next turn's block.
        await services.stores.agent.tag_memory("app", locker_id, relevant=True, reason="used")
        await services.stores.conversations.add_message(conversation, "user", "Thanks.")
        await eventually(lambda: _answered(services, conversation))
        last_block = [c.messages[1].content for c in model.calls if c.tools][-1]
        assert LOCKER in last_block and "[Memory available (id 2): The user commutes" in last_block

        # Where the model could not recall (a client's own tools, a structured answer),
        # nothing fades.
        app = await services.stores.registry.require("app")
        unfaded = await services.central.contexts.build(
            app, [], conversation_id=conversation, fading=False)
        assert TRAIN in unfaded.messages[1].content and not unfaded.recallable

        # Tagged irrelevant: a stub at once, in a new conversation too.
        await services.stores.agent.tag_memory("app", locker_id, relevant=False, reason="no")
        other = await services.stores.conversations.open("app")
        await services.stores.conversations.add_message(other, "user", "Hello.")
        await eventually(lambda: _answered(services, other))
        fresh = [c.messages[1].content for c in model.calls if c.tools][-1]
        assert f"[Memory available (id {locker_id}): The user's gym locker" in fresh
        assert TRAIN in fresh

        # What the model said before recalling is kept before the rest, and an end asked for
        # with the recall ends the conversation.
        await services.stores.conversations.add_message(other, "user", "Bye. Where was it?")
        await eventually(lambda: _answered(services, other))
        ended = await services.stores.conversations.get(other)
        assert ended.messages[-1].content.startswith("Let me look.\n\nFrom the memory: Memory")
        assert not await services.stores.conversations.is_open(other)


async def _answered(services, conversation_id):
    messages = (await services.stores.conversations.get(conversation_id)).messages
    return messages and messages[-1].role == "assistant"
