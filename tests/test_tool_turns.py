"""Tool turns of a dialect client's conversation, below the HTTP routes: how the memory
writers read a tool's result, how the model's prompt shows the turns, how a client's history
with tool turns continues its stored conversation, and what a backend is sent."""

from __future__ import annotations

import json

import pytest

from admin_api.dialects.common import client_turns
from admin_api.dialects.errors import DialectError
from admin_api.dialects.tools import offered_tools
from loop.conversations.answer_claims import AnswerClaims
from loop.conversations.client_threads import ClientRequest, ClientThreads, thread_key
from loop.conversations.client_tools import (
    NONE,
    ClientTools,
    calls_from_json,
    calls_to_json,
    with_ids,
)
from loop.conversations.store import ConversationStore
from loop.llm.ollama import _messages_payload
from memory_agent import ChatMessage, ToolCall, ToolSpec
from memory_agent.writers.extractive.writer import ExtractiveWriter
from memory_agent.writers.model.prompts import format_transcript
from memory_agent.writers.written import WrittenMemory
from tests.conftest import install_app
from tests.fakes import EXTRACTION_NOW as NOW
from tests.fakes import extractive_writer

BOOK = ToolSpec("book_table", "Book a table.", {"type": "object", "properties": {
    "party": {"type": "integer"}, "time": {"type": "string"}}})
CALL = ToolCall("book_table", {"party": 4, "time": "19:30"}, "call_1")
RESULT = json.dumps({"booking": {"confirmation": "LUI-2231", "status": "confirmed"}})


def booking(result: str = RESULT) -> list[ChatMessage]:
    return [
        ChatMessage("user", "Can you get us a table for four tonight?"),
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", result, tool_call_id="call_1", tool_name="book_table"),
        ChatMessage("assistant", "All set for tonight."),
    ]


def writer() -> ExtractiveWriter:
    return extractive_writer()


@pytest.mark.anyio
async def test_the_extractive_writer_keeps_what_a_tool_did_with_its_reference():
    written = await writer().write(booking(), [], NOW)
    assert isinstance(written, WrittenMemory), written
    assert "book_table returned: booking confirmation LUI-2231" in written.content


@pytest.mark.anyio
async def test_a_tool_result_that_is_not_json_is_read_as_it_came():
    written = await writer().write(
        booking("Booked for 4 at 19:30, reference LUI-2231."), [], NOW
    )
    assert isinstance(written, WrittenMemory), written
    assert "LUI-2231" in written.content


def test_the_transcript_shows_a_call_and_the_result_with_its_tool():
    transcript = format_transcript(booking())
    assert 'Assistant:  [calls book_table({"party": 4, "time": "19:30"})]' in transcript
    assert "Tool book_table returned: " + RESULT in transcript


def test_ollama_is_sent_the_calls_and_each_results_tool_name():
    payload = _messages_payload(booking())
    assert payload[1]["tool_calls"] == [
        {"function": {"name": "book_table", "arguments": {"party": 4, "time": "19:30"}}}
    ]
    assert payload[2] == {"role": "tool", "content": RESULT, "tool_name": "book_table"}
    assert "tool_calls" not in payload[0] and "tool_name" not in payload[3]


def test_a_result_naming_no_tool_is_given_its_calls_name():
    by_order = client_turns([
        ChatMessage("user", "Weather in Lisbon and Porto?"),
        ChatMessage("assistant", "", tool_calls=(ToolCall("weather", {"city": "Lisbon"}),
                                                 ToolCall("tides", {"city": "Porto"}))),
        ChatMessage("tool", "21 C"),
        ChatMessage("tool", "low at 14:05"),
    ])
    assert [t.tool_name for t in by_order.turns[2:]] == ["weather", "tides"]
    by_id = client_turns([
        ChatMessage("user", "Book it."),
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", RESULT, tool_call_id="call_1"),
    ])
    assert by_id.turns[-1].tool_name == "book_table"


def test_a_history_must_end_with_the_users_message_or_a_tools_result():
    with pytest.raises(DialectError, match="the user's or a tool's result"):
        client_turns([ChatMessage("user", "Book it."), ChatMessage("assistant", "",
                                                                   tool_calls=(CALL,))])


def test_tool_choice_narrows_what_is_offered():
    both = [BOOK, ToolSpec("cancel", "Cancel a booking.")]
    assert offered_tools(both) == ClientTools(tuple(both))
    assert offered_tools(both, "cancel").offered() == [both[1]]  # type: ignore[union-attr]
    assert offered_tools(both, NONE).offered() == []  # type: ignore[union-attr]
    assert offered_tools([]) is None
    with pytest.raises(DialectError, match="tool_choice"):
        offered_tools(both, "refund")
    with pytest.raises(DialectError, match="each tool's name once"):
        offered_tools([BOOK, BOOK])
    stored = offered_tools(both, "cancel")
    assert stored is not None and ClientTools.from_json(stored.to_json()) == stored


def test_calls_get_ids_and_survive_storage():
    [given] = with_ids([ToolCall("book_table", {"party": 2})])
    assert given.id.startswith("call_") and with_ids([CALL]) == (CALL,)
    assert calls_from_json(calls_to_json([CALL, given])) == (CALL, given)
    assert calls_to_json([]) is None and calls_from_json(None) == ()


@pytest.fixture
async def parts(database, clock):
    await install_app(database, "bistro")
    conversations = ConversationStore(database, clock)
    answers = AnswerClaims(database, clock, job_queued=conversations.job_queued, owner="test")
    return ClientThreads(database, clock, conversations), conversations, answers


@pytest.mark.anyio
async def test_a_history_with_tool_turns_continues_its_conversation(parts):
    """The model's call is stored with the reply; the client resends it (with our id, or
    with none in Ollama's dialect) and its result: the same conversation, the result waiting
    for the next answer."""
    threads, conversations, answers = parts
    tools = ClientTools((BOOK,))
    thread = thread_key("", "")
    asked = await threads.post(ClientRequest("bistro", thread, booking()[:1], tools=tools))
    assert await answers.claim(asked.conversation_id)
    assert await answers.store(asked.conversation_id, "", None, answers_up_to=asked.message_id,
                               tool_calls=[CALL])
    assert await answers.unanswered() == []
    without_id = ChatMessage("assistant", "", tool_calls=(ToolCall(CALL.name, CALL.arguments),))
    result = ChatMessage("tool", RESULT, tool_name="book_table")
    posted = await threads.post(
        ClientRequest("bistro", thread, [booking()[0], without_id, result], tools=tools)
    )
    assert posted.conversation_id == asked.conversation_id and not posted.opened
    assert [w.conversation_id for w in await answers.unanswered()] == [asked.conversation_id]
    conversation = await conversations.get(posted.conversation_id)
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool"]
    assert conversation.messages[1].tool_calls == (CALL,)
    assert conversation.messages[2].tool_name == "book_table"
    assert conversation.tools == tools
    assert conversation.chat_messages()[1:] == [
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", RESULT, tool_name="book_table"),
    ]
    # Other arguments are another history: another conversation.
    other = ChatMessage("assistant", "", tool_calls=(ToolCall(CALL.name, {"party": 9}),))
    elsewhere = await threads.post(
        ClientRequest("bistro", thread, [booking()[0], other, result], tools=tools)
    )
    assert elsewhere.opened


@pytest.mark.anyio
async def test_results_of_several_calls_are_all_read_by_the_memory_job(parts, database):
    """The client answers two calls at once: both results are what the app did in this
    conversation (the last is the question, the other stored before it), none carried."""
    threads, _, answers = parts
    thread = thread_key("", "")
    calls = (ToolCall("weather", {"city": "Lisbon"}, "c1"), ToolCall("tides", {}, "c2"))
    asked = await threads.post(ClientRequest("bistro", thread, booking()[:1],
                                             tools=ClientTools((BOOK,))))
    assert await answers.claim(asked.conversation_id)
    assert await answers.store(asked.conversation_id, "", None,
                               answers_up_to=asked.message_id, tool_calls=calls)
    history = client_turns([
        booking()[0], ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", "21 C", tool_call_id="c1"),
        ChatMessage("tool", "low at 14:05", tool_call_id="c2"),
    ])
    await threads.post(ClientRequest("bistro", thread, history.turns,
                                     tools=ClientTools((BOOK,))))
    rows = await database.fetch_all(
        "SELECT role, tool_name, carried FROM messages WHERE conversation_id = ? ORDER BY id",
        (asked.conversation_id,))
    assert [tuple(row) for row in rows] == [
        ("user", None, 0), ("assistant", None, 0), ("tool", "weather", 0), ("tool", "tides", 0)]


@pytest.mark.anyio
async def test_a_secret_in_a_calls_arguments_is_redacted_once_read(parts, database):
    threads, conversations, answers = parts
    card = "4111 1111 1111 1111"
    thread = thread_key("", "")
    asked = await threads.post(ClientRequest("bistro", thread, booking()[:1]))
    paid = ToolCall("pay", {"card": card, "amount": 40}, "c1")
    assert await answers.claim(asked.conversation_id)
    assert await answers.store(asked.conversation_id, "", None,
                               answers_up_to=asked.message_id, tool_calls=[paid])
    assert await conversations.redact_messages(asked.conversation_id) == 1
    [row] = await database.fetch_all(
        "SELECT tool_calls FROM messages WHERE tool_calls IS NOT NULL")
    [stored] = json.loads(row[0])
    assert card not in row[0] and stored["arguments"]["amount"] == 40


@pytest.mark.anyio
async def test_the_memory_writer_never_reads_a_secret_in_a_calls_arguments(database):
    """The model writer's transcript shows a call's arguments with their secrets replaced,
    and what the model says is the person's is redacted too."""
    from memory_agent import MemoryCreationRequest, MemorySubAgent
    from tests.fakes import FunctionModel, ModelCall

    card = "4111 1111 1111 1111"
    seen: list[str] = []

    def answer(call: ModelCall) -> str:
        seen.append(call.prompt)
        return json.dumps({"sentences": [{
            "quote": "Pay for the table", "text": f"The user paid with card {card}.",
            "aboutPerson": True}], "updates": []})

    await install_app(database, "bistro")
    agent = MemorySubAgent(database, FunctionModel(answer))
    paid = ToolCall("pay", {"card": card, "amount": 40}, "c1")
    created = await agent.create_memory(MemoryCreationRequest("bistro", "c-1", [
        ChatMessage("user", "Pay for the table, please."),
        ChatMessage("assistant", "", tool_calls=(paid,)),
        ChatMessage("tool", '{"paid": true}', tool_call_id="c1", tool_name="pay"),
    ], user_id="ana", to_profile=True))
    assert created.memory is not None and card not in created.memory.content
    assert seen and card not in seen[0] and '"amount": 40' in seen[0]
    profile = await agent.get_profile("ana")
    assert profile and all(card not in m.content for m in profile)
