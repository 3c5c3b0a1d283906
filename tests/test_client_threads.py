"""Which stored conversation a dialect client's request continues
(loop/conversations/client_threads.py), on both engines."""

from __future__ import annotations

from datetime import timedelta

import pytest

from loop.conversations.answer_claims import AnswerClaims
from loop.conversations.client_threads import ClientRequest, ClientThreads, thread_key
from loop.conversations.reply_feed import AnswerSettled, AnswerText, ReplyFeed
from loop.conversations.store import ConversationStore
from loop.jobs.store import MemoryJob
from memory_agent import ChatMessage
from tests.conftest import install_app

pytestmark = pytest.mark.anyio
THREAD = thread_key(None, None)


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage("assistant", text)


@pytest.fixture
async def parts(database, clock):
    await install_app(database, "desk")
    conversations = ConversationStore(database, clock)
    answers = AnswerClaims(database, clock, job_queued=conversations.job_queued, owner="test")
    return ClientThreads(database, clock, conversations), conversations, answers


async def answered(answers: AnswerClaims, conversation_id: str, message_id: int, text: str):
    assert await answers.claim(conversation_id)
    assert await answers.store(conversation_id, text, None, answers_up_to=message_id)


async def test_a_request_that_extends_the_history_continues_its_conversation(parts):
    threads, conversations, answers = parts
    first = await threads.post(ClientRequest("desk", THREAD, [user("Hi")], "Be brief."))
    assert first.opened
    await answered(answers, first.conversation_id, first.message_id, "Hello!")
    second = await threads.post(
        ClientRequest("desk", THREAD, [user("Hi"), assistant(" Hello! "), user("More")]))
    assert second.conversation_id == first.conversation_id and not second.opened
    stored = await conversations.get(first.conversation_id)
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", "Hi"), ("assistant", "Hello!"), ("user", "More")]
    assert stored.system_prompt is None  # the latest request's own (it sent none)


async def test_earlier_turns_the_client_holds_are_stored_as_answered(parts, database):
    threads, conversations, answers = parts
    posted = await threads.post(ClientRequest(
        "desk", THREAD, [user("Example question"), assistant("Example answer"), user("Now")],
        "Answer like the example.", model="other:7b"))
    stored = await conversations.get(posted.conversation_id)
    assert [m.content for m in stored.messages] == ["Example question", "Example answer", "Now"]
    assert (stored.system_prompt, stored.model) == ("Answer like the example.", "other:7b")
    waiting = await answers.unanswered()
    assert [w.conversation_id for w in waiting] == [posted.conversation_id]
    row = await database.fetch_one(
        "SELECT answered_up_to FROM conversations WHERE conversation_id = ?",
        (posted.conversation_id,))
    assert row[0] == stored.messages[1].id  # only the new question waits for its answer


async def test_the_same_question_follows_the_first_and_another_history_is_another_conversation(
    parts,
):
    threads, conversations, answers = parts
    first = await threads.post(ClientRequest("desk", THREAD, [user("Slow one")]))
    again = await threads.post(ClientRequest("desk", THREAD, [user("Slow one")]))
    assert (again.conversation_id, again.message_id) == (first.conversation_id, first.message_id)
    # Another person behind the same key, while the first answer is being written: not
    # refused, not held up, a conversation of its own, answered beside the first.
    other = await threads.post(ClientRequest("desk", THREAD, [user("Something else")]))
    assert other.opened and other.conversation_id != first.conversation_id
    assert len((await conversations.get(first.conversation_id)).messages) == 1
    waiting = {w.conversation_id for w in await answers.unanswered()}
    assert waiting == {first.conversation_id, other.conversation_id}
    # Each continues its own.
    await answered(answers, first.conversation_id, first.message_id, "Done.")
    await answered(answers, other.conversation_id, other.message_id, "Sure.")
    on = await threads.post(ClientRequest(
        "desk", THREAD, [user("Something else"), assistant("Sure."), user("Thanks")]))
    assert on.conversation_id == other.conversation_id and not on.opened


async def test_a_failed_answer_is_tried_again_when_the_question_comes_again(parts, database):
    threads, _, answers = parts
    first = await threads.post(ClientRequest("desk", THREAD, [user("Hi")]))
    assert await answers.claim(first.conversation_id)
    await answers.release(first.conversation_id, failed=True, error="the model is gone")
    again = await threads.post(ClientRequest("desk", THREAD, [user("Hi")]))
    assert again.message_id == first.message_id
    row = await database.fetch_one(
        "SELECT answer_state FROM conversations WHERE conversation_id = ?",
        (first.conversation_id,))
    assert row[0] is None
    assert [w.conversation_id for w in await answers.unanswered()] == [first.conversation_id]


async def test_another_history_opens_a_conversation_beside_the_first_which_ends_when_idle(
    parts, database
):
    threads, conversations, answers = parts
    first = await threads.post(ClientRequest("desk", THREAD, [user("My code is 4821")]))
    await answered(answers, first.conversation_id, first.message_id, "Noted.")
    fresh = await threads.post(ClientRequest("desk", THREAD, [user("A new chat")]))
    assert fresh.opened and fresh.conversation_id != first.conversation_id
    assert (await conversations.get(first.conversation_id)).status == "open"
    assert await database.fetch_all("SELECT conversation_id FROM memory_jobs") == []
    assert await threads.end(fresh.conversation_id)
    assert (await conversations.get(fresh.conversation_id)).end_reason == "client"


async def test_a_request_must_end_with_the_users_message(parts):
    threads, _, _ = parts
    with pytest.raises(ValueError):
        await threads.post(ClientRequest("desk", THREAD, [user("Hi"), assistant("Hello")]))


async def test_a_question_whose_reply_was_lost_gets_the_stored_reply(parts):
    threads, conversations, answers = parts
    first = await threads.post(ClientRequest("desk", THREAD, [user("Hi")]))
    await answered(answers, first.conversation_id, first.message_id, "Hello!")
    again = await threads.post(ClientRequest("desk", THREAD, [user("Hi")]))
    assert (again.conversation_id, again.message_id, again.asked_before) == (
        first.conversation_id, first.message_id, True)
    status = await conversations.reply_status(again.conversation_id, again.message_id)
    assert status.reply is not None and status.reply.content == "Hello!"
    assert len((await conversations.get(first.conversation_id)).messages) == 2


async def test_the_memory_job_leaves_out_the_turns_carried_from_a_clients_history(parts):
    threads, conversations, answers = parts
    posted = await threads.post(ClientRequest(
        "desk", THREAD, [user("Old fact 1"), assistant("Old reply"), user("New fact")]))
    await answered(answers, posted.conversation_id, posted.message_id, "Got it.")
    assert await threads.end(posted.conversation_id)

    async def take_job(tx):
        row = await tx.fetch_one("SELECT * FROM memory_jobs WHERE conversation_id = ?",
                                 (posted.conversation_id,))
        return MemoryJob.from_row(row)

    claimed = await conversations.claim_job(take_job)
    assert [(m.role, m.content) for m in claimed.messages] == [
        ("user", "New fact"), ("assistant", "Got it.")]
    # The model that answers is given them all.
    assert len((await conversations.get(posted.conversation_id)).chat_messages()) == 4


async def test_an_idle_end_does_not_end_a_conversation_that_had_a_message_meanwhile(parts):
    threads, conversations, answers = parts
    posted = await threads.post(ClientRequest("desk", THREAD, [user("Hi")]))
    # Answered: a question still waiting for its answer is never idle.
    await answered(answers, posted.conversation_id, posted.message_id, "Hello!")
    cutoff = conversations.idle_cutoff(timedelta(seconds=0))
    assert await conversations.idle_since(cutoff) == [posted.conversation_id]
    # A message comes between the idle conversations' reading and their ending.
    await conversations.add_message(posted.conversation_id, "user", "Still here")
    assert not await conversations.end(posted.conversation_id, "idle", idle_since=cutoff)
    assert (await conversations.get(posted.conversation_id)).status == "open"


async def test_a_late_subscriber_is_handed_the_answer_under_way_from_its_start():
    feed = ReplyFeed()
    early = feed.subscribe("c")
    feed.publish("c", AnswerText("Hello ", 1))
    late = feed.subscribe("c")
    feed.publish("c", AnswerText("world", 1))
    for subscription in (early, late):
        pieces = [await subscription.next(0.1), await subscription.next(0.1)]
        assert [p.text for p in pieces if isinstance(p, AnswerText)] == ["Hello ", "world"]
    feed.publish("c", AnswerSettled(1))
    after = feed.subscribe("c")
    assert await after.next(0.01) is None  # a settled answer is not handed on again
    for subscription in (early, late, after):
        subscription.close()
