"""Replies for apps: the posted message's id, `?wait=`, and the reply streamed as
Server-Sent Events, on a real HTTP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from loop.conversations.answer_claims import AnswerClaims
from loop.conversations.replies import ask
from memory_agent.core.errors import ChatModelResponseError, ChatModelTimeout
from tests.fakes import PIECES, FunctionModel, ModelCall, PieceByPieceModel
from tests.harness import assistant_model, eventually, live_http, running, service

pytestmark = pytest.mark.anyio
ADMIN = {"Authorization": "Bearer admin-secret"}


def failing_model(error: Exception) -> FunctionModel:
    def answer(call: ModelCall) -> str:
        if call.tools:
            raise error
        return "no memory"

    return FunctionModel(answer)


def slow_model(seconds: float) -> FunctionModel:
    async def answer(call: ModelCall) -> str:
        await anyio.sleep(seconds)
        return "Late, but here."

    return FunctionModel(answer)


@pytest.fixture
async def server(request, db_path) -> AsyncIterator[tuple[str, object]]:
    model = getattr(request, "param", None) or assistant_model("Booked after 2pm.")
    async with service(db_path, model, answer_attempts=2) as services, running(services):
        async with live_http(services, "admin-secret") as url:
            yield url, services


@pytest.fixture
async def conversation(server) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    url, _ = server
    async with httpx.AsyncClient(base_url=url, headers=ADMIN, timeout=30) as client:
        installed = await client.post("/apps", json={"appId": "cal", "name": "Calendar"})
        assert installed.status_code == 201, installed.text
        opened = await client.post("/apps/cal/conversations")
        yield client, opened.json()["conversationId"]


def sse_events(body: str) -> list[tuple[str, dict]]:
    events = []
    for block in body.strip().split("\r\n\r\n" if "\r\n" in body else "\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def test_a_posted_message_answers_with_its_id(conversation) -> None:
    client, conversation_id = conversation
    posted = await client.post(f"/conversations/{conversation_id}/messages",
                               json={"content": "Book my meetings after 2pm."})
    assert posted.status_code == 202, posted.text
    body = posted.json()
    assert isinstance(body["messageId"], int)
    assert body["state"] in ("open", "answering") and body["reply"] is None

    shown = await client.get(f"/conversations/{conversation_id}")
    assert shown.json()["messages"][0]["id"] == body["messageId"]


async def test_wait_returns_the_reply_when_it_comes_in_time(conversation) -> None:
    client, conversation_id = conversation
    posted = await client.post(f"/conversations/{conversation_id}/messages?wait=20",
                               json={"content": "Book my meetings after 2pm."})
    assert posted.status_code == 200, posted.text
    body = posted.json()
    assert body["reply"]["content"] == "Booked after 2pm."
    assert body["reply"]["role"] == "assistant" and body["reply"]["id"] > body["messageId"]
    assert body["state"] == "open" and body["conversationEnded"] is False

    # The second question waits for its own reply, not the first one's.
    again = await client.post(f"/conversations/{conversation_id}/messages?wait=20",
                              json={"content": "And on Fridays?"})
    assert again.status_code == 200
    assert again.json()["reply"]["id"] > again.json()["messageId"] > body["reply"]["id"]


def numbered_slow_model() -> FunctionModel:
    """Answers each question after a second, naming the user message it saw last."""

    async def answer(call: ModelCall) -> str:
        if not call.tools:
            return "memory"
        await anyio.sleep(1)
        return f"Reply to: {call.messages[-1].content}"

    return FunctionModel(answer)


@pytest.mark.parametrize("server", [numbered_slow_model()], indirect=True)
async def test_a_message_posted_while_an_answer_is_written_gets_its_own(conversation) -> None:
    client, conversation_id = conversation
    first = await client.post(f"/conversations/{conversation_id}/messages",
                              json={"content": "first"})

    async def answering() -> bool:
        shown = await client.get(f"/conversations/{conversation_id}")
        return shown.json()["state"] == "answering"

    await eventually(answering)
    second = await client.post(f"/conversations/{conversation_id}/messages?wait=20",
                               json={"content": "second"})
    assert second.status_code == 200, second.text
    assert second.json()["reply"]["content"] == "Reply to: second"

    messages = (await client.get(f"/conversations/{conversation_id}")).json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "first"), ("assistant", "Reply to: first"),
        ("user", "second"), ("assistant", "Reply to: second"),
    ]
    assert messages[0]["id"] == first.json()["messageId"]


@pytest.mark.parametrize("server", [slow_model(3)], indirect=True)
async def test_wait_gives_up_with_202_when_the_reply_is_late(conversation) -> None:
    client, conversation_id = conversation
    started = anyio.current_time()
    posted = await client.post(f"/conversations/{conversation_id}/messages?wait=0.5",
                               json={"content": "Hello?"})
    assert posted.status_code == 202
    assert posted.json()["reply"] is None and posted.json()["state"] in ("open", "answering")
    assert anyio.current_time() - started < 2.5


@pytest.mark.parametrize(
    "server", [failing_model(ChatModelResponseError("model 'x' not found", status_code=404))],
    indirect=True,
)
async def test_wait_returns_at_once_when_the_answer_fails_for_good(conversation) -> None:
    client, conversation_id = conversation
    started = anyio.current_time()
    posted = await client.post(f"/conversations/{conversation_id}/messages?wait=60",
                               json={"content": "Hello?"})
    assert anyio.current_time() - started < 30  # not the whole minute
    assert posted.status_code == 202
    body = posted.json()
    assert body["state"] == "failed" and "not found" in body["error"]


@pytest.mark.parametrize("server", [PieceByPieceModel(lambda call: "memory")], indirect=True)
async def test_the_reply_streams_as_server_sent_events(conversation) -> None:
    client, conversation_id = conversation
    arrivals: list[tuple[float, str]] = []
    async with client.stream(
        "POST", f"/conversations/{conversation_id}/messages",
        json={"content": "When is the meeting?"}, headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = ""
        async for chunk in response.aiter_text():
            arrivals.append((anyio.current_time(), chunk))
            body += chunk
    events = sse_events(body)
    assert [name for name, _ in events] == ["delta"] * len(PIECES) + ["done"]
    assert "".join(data["text"] for _, data in events[:-1]) == "".join(PIECES)
    # The pieces arrived as they were written, not all at once at the end.
    assert arrivals[-1][0] - arrivals[0][0] >= 0.08
    done = events[-1][1]
    shown = (await client.get(f"/conversations/{conversation_id}")).json()
    assert shown["messages"][-1] == {**shown["messages"][-1], "id": done["messageId"],
                                     "content": "".join(PIECES)}
    assert done["conversationEnded"] is False


@pytest.mark.parametrize(
    "server", [failing_model(ChatModelResponseError("model 'x' not found", status_code=404))],
    indirect=True,
)
async def test_a_stream_ends_with_an_error_when_the_answer_fails_for_good(conversation) -> None:
    client, conversation_id = conversation
    response = await client.post(f"/conversations/{conversation_id}/messages",
                                 json={"content": "Hi"}, headers={"Accept": "text/event-stream"})
    [(name, problem)] = sse_events(response.text)
    assert name == "error" and problem["status"] == 502 and "not found" in problem["detail"]


@pytest.mark.parametrize("server", [failing_model(ChatModelTimeout("slow"))], indirect=True)
async def test_a_stream_says_when_the_answer_will_be_tried_again(conversation) -> None:
    client, conversation_id = conversation
    response = await client.post(f"/conversations/{conversation_id}/messages",
                                 json={"content": "Hi"}, headers={"Accept": "text/event-stream"})
    [(name, problem)] = sse_events(response.text)
    assert name == "error" and problem["status"] == 503
    assert "tried again" in problem["detail"]


async def test_an_ended_conversation_refuses_a_stream_with_409(conversation) -> None:
    client, conversation_id = conversation
    await client.post(f"/conversations/{conversation_id}/end", json={"reason": "done"})
    response = await client.post(f"/conversations/{conversation_id}/messages",
                                 json={"content": "Hi"}, headers={"Accept": "text/event-stream"})
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"


async def test_a_reply_written_by_another_instance_comes_as_one_piece(db_path) -> None:
    """This instance's loop does not run: another (a second store with its own owner name)
    answers, and the waiting question finds the reply in the database."""
    async with service(db_path, assistant_model()) as services:
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await services.stores.conversations.open("cal")
        other = AnswerClaims(services.database, services.clock, owner="other-instance",
                             job_queued=services.stores.conversations.job_queued)
        question = await ask(services.stores.conversations, conversation_id, "Hello")

        async def answer_elsewhere() -> None:
            await anyio.sleep(0.2)
            assert await other.claim(conversation_id)
            await other.store(conversation_id, "Hi from elsewhere.", None,
                               answers_up_to=question.message_id)

        events = []
        async with anyio.create_task_group() as group:
            group.start_soon(answer_elsewhere)
            with anyio.fail_after(10):
                events = [event async for event in question.events()]
        assert events[0] == "Hi from elsewhere."
        assert events[1].reply.content == "Hi from elsewhere." and not events[1].ended
        assert len(events) == 2
