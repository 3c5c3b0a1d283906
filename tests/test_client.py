"""The typed client (`mnemoloop.client`), async and blocking, against a real HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest

from admin_api.replies import MemoryOut
from admin_api.throttle import MAX_WRONG
from memory_agent.core.errors import ChatModelResponseError
from mnemoloop.client import (
    ApiError,
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    Forbidden,
    NotFound,
    ReplyDelta,
    ReplyDone,
    ReplyError,
    TooManyRequests,
    Unauthorized,
)
from tests.fakes import PIECES, FunctionModel, ModelCall, PieceByPieceModel
from tests.harness import assistant_model, eventually, live_http, running, service

pytestmark = pytest.mark.anyio
ADMIN_TOKEN = "admin-secret"
REPLY = "Booked after 2pm."


def fails_once_model() -> FunctionModel:
    """Fails its first conversation answer for good, then answers."""
    failures: list[ModelCall] = []

    def answer(call: ModelCall) -> str:
        if call.tools and not failures:
            failures.append(call)
            raise ChatModelResponseError("model 'x' not found", status_code=404)
        return REPLY

    return FunctionModel(answer)


@pytest.fixture
async def server(request, db_path) -> AsyncIterator[str]:
    make_model = getattr(request, "param", None)  # a fresh model for each engine's run
    model = make_model() if make_model else assistant_model(REPLY)
    async with service(db_path, model, answer_attempts=2) as services, running(services):
        async with live_http(services, ADMIN_TOKEN) as url:
            yield url


@pytest.fixture
async def admin(server) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(server, ADMIN_TOKEN) as client:
        yield client


async def remembered(admin: AsyncClient, app_id: str, said: str) -> MemoryOut:
    """Install `app_id`, hold a conversation in which the user says `said`, end it, and
    return the memory written of it."""
    await admin.apps.install(app_id, app_id.title())
    conversation_id = await admin.conversations.open(app_id)
    await admin.conversations.send(conversation_id, said, wait=20)
    await admin.conversations.end(conversation_id, reason="done")
    [memory] = await eventually(lambda: admin.memories.list(app_id))
    return memory


async def test_wait_returns_the_reply_to_the_apps_own_key(server, admin) -> None:
    installed = await admin.apps.install("cal", "Calendar")
    assert installed.installed and installed.api_key
    async with AsyncClient(server, installed.api_key) as app:
        conversation_id = await app.conversations.open("cal")
        posted = await app.conversations.send(conversation_id, "Book it after 2pm.", wait=20)
    assert posted.reply is not None and posted.reply.content == REPLY
    assert posted.reply.id > posted.message_id
    assert posted.state == "open" and not posted.conversation_ended


@pytest.mark.parametrize(
    "server", [lambda: PieceByPieceModel(lambda call: "memory")], indirect=True
)
async def test_a_streamed_reply_is_deltas_then_done_naming_the_stored_reply(admin) -> None:
    await admin.apps.install("cal", "Calendar")
    conversation_id = await admin.conversations.open("cal")

    events = [e async for e in admin.conversations.stream(conversation_id, "When is it?")]

    *deltas, done = events
    assert [d.text for d in deltas if isinstance(d, ReplyDelta)] == list(PIECES)
    assert isinstance(done, ReplyDone) and not done.conversation_ended
    shown = await admin.conversations.get(conversation_id)
    assert shown.messages[-1].id == done.message_id
    assert shown.messages[-1].content == "".join(PIECES)


@pytest.mark.parametrize("server", [fails_once_model], indirect=True)
async def test_a_failed_answer_streams_an_error_and_retry_answers_again(admin) -> None:
    await admin.apps.install("cal", "Calendar")
    conversation_id = await admin.conversations.open("cal")

    [event] = [e async for e in admin.conversations.stream(conversation_id, "Hi")]
    assert isinstance(event, ReplyError)
    assert event.problem.status == 502 and "not found" in event.problem.detail
    failed = await admin.conversations.get(conversation_id)
    assert failed.state == "failed" and failed.error is not None

    await admin.conversations.retry(conversation_id)

    async def answered() -> bool:
        shown = await admin.conversations.get(conversation_id)
        return shown.messages[-1].role == "assistant"

    await eventually(answered)
    assert (await admin.conversations.get(conversation_id)).messages[-1].content == REPLY


async def test_an_ended_conversation_leaves_a_memory_to_list_and_search(admin) -> None:
    memory = await remembered(admin, "cal", "Book my meetings after 2pm.")
    assert "Book my meetings after 2pm" in memory.content

    conversation = await admin.conversations.get(memory.source_conversation_id or "")
    assert conversation.status == "ended" and conversation.end_reason == "done"
    found = await admin.memories.search("cal", "meetings", limit=5)
    assert [m.id for m in found] == [memory.id]
    assert await admin.memories.search("cal", "zebra") == []
    asked = await admin.memories.query("cal", "which meetings?", top_k=3, full=True)
    assert [(hit.id, hit.space) for hit in asked.results] == [(memory.id, "shared")]
    assert asked.results[0].memory is not None and asked.results[0].memory.id == memory.id
    with pytest.raises(BadRequest, match="threshold"):
        await admin.memories.query("cal", "meetings", threshold=2.0)
    # Kinds: what its key may read, by the app's allowed kinds and an agent's allow-list.
    kind = asked.results[0].kind
    assert (await admin.memories.query("cal", "meetings", categories=[kind])).results
    assert (await admin.apps.change("cal", allowed_kinds=[kind])).allowed_kinds == [kind]
    with pytest.raises(BadRequest, match="categories"):
        await admin.memories.query("cal", "meetings", categories=["recipe"])
    with pytest.raises(Forbidden, match="may not be read"):
        await admin.memories.query("cal", "meetings", agent="planner", categories=["fact"])
    assert (await admin.apps.change("cal", allowed_kinds=None)).allowed_kinds is None


async def test_a_deleted_memory_is_gone_and_the_history_tells_of_it(admin) -> None:
    memory = await remembered(admin, "cal", "Book my meetings after 2pm.")

    await admin.memories.delete("cal", memory.id)

    assert await admin.memories.list("cal") == []
    history = await admin.memories.history("cal", memory.id)
    assert [e.event for e in history.events] == ["created", "deleted"]
    first_page = await admin.memories.history("cal", limit=1)
    assert [e.event for e in first_page.events] == ["created"]
    assert first_page.next_cursor is not None
    rest = await admin.memories.history("cal", since=first_page.next_cursor)
    assert [e.event for e in rest.events] == ["deleted"] and rest.next_cursor is None


async def test_an_export_imports_into_another_app_as_it_was(admin) -> None:
    memory = await remembered(admin, "cal", "Book my meetings after 2pm.")
    await admin.apps.install("copy", "Copy")

    document = await admin.memories.export("cal")
    imported = await admin.memories.import_("copy", document)

    assert (imported.imported, imported.memory_count) == (1, 1)
    [copied] = await admin.memories.list("copy")
    assert (copied.content, copied.created_at, copied.metadata) == (
        memory.content, memory.created_at, memory.metadata)
    with pytest.raises(Conflict, match="above its limit"):
        await admin.memories.import_("copy", msgspec.structs.replace(
            document, memories=document.memories * 10))
    replaced = await admin.memories.import_("copy", document, replace=True)
    assert replaced.memory_count == 1


async def test_memory_jobs_and_energy_show_the_work_done(admin) -> None:
    memory = await remembered(admin, "cal", "Book my meetings after 2pm.")

    [job] = await admin.jobs(app_id="cal")
    assert job.status == "done" and job.memory_id == memory.id
    assert job.conversation_id == memory.source_conversation_id
    assert await admin.jobs(app_id="cal", status="failed") == []
    energy = await admin.energy()
    assert energy.capacity > 0 and energy.memory_spent > 0 and energy.conversation_spent > 0


async def test_purge_then_uninstall_leaves_the_app_listed_and_closed(admin) -> None:
    await remembered(admin, "cal", "Book my meetings after 2pm.")
    await admin.apps.install("notes", "Notes")

    assert (await admin.memories.purge("cal")).deleted_count == 1
    uninstalled = await admin.apps.uninstall("cal", purge_memories=True)

    assert uninstalled.success and uninstalled.purged_memories == 0
    apps = {a.app_id: a for a in await admin.apps.list()}
    assert not apps["cal"].installed and apps["cal"].memory_count == 0
    assert apps["notes"].installed
    with pytest.raises(Conflict) as refused:
        await admin.conversations.open("cal")
    assert refused.value.status == 409


async def test_an_unknown_conversation_raises_not_found_with_the_problem(admin) -> None:
    with pytest.raises(NotFound) as missing:
        await admin.conversations.get("no-such-conversation")

    error = missing.value
    assert isinstance(error, ApiError) and error.status == 404
    assert "no-such-conversation" in error.detail
    assert error.problem.title == "Not Found" and error.problem.status == 404


async def test_an_app_key_opens_nothing_of_another_app(server, admin) -> None:
    key = (await admin.apps.install("cal", "Calendar")).api_key
    await admin.apps.install("notes", "Notes")
    notes_conversation = await admin.conversations.open("notes")

    async with AsyncClient(server, key) as cal:
        with pytest.raises(Forbidden) as forbidden:
            await cal.conversations.open("notes")
        assert forbidden.value.status == 403
        with pytest.raises(NotFound):
            await cal.conversations.get(notes_conversation)
        assert await cal.memories.list("cal") == []  # its own app's memories it may read
        with pytest.raises(Forbidden):
            await cal.memories.list("notes")
        with pytest.raises(Forbidden):
            await cal.memories.purge("cal")  # deleting needs the admin token
    async with AsyncClient(server, "not-a-token") as stranger:
        with pytest.raises(Unauthorized):
            await stranger.apps.list()


async def test_guessing_tokens_raises_too_many_requests_with_the_wait(server) -> None:
    async with AsyncClient(server, "a-guess") as guesser:
        for _ in range(MAX_WRONG):
            with pytest.raises(Unauthorized):
                await guesser.apps.list()
        with pytest.raises(TooManyRequests) as refused:
            await guesser.apps.list()
    assert refused.value.status == 429
    assert refused.value.retry_after is not None and 0 < refused.value.retry_after <= 60
    assert "too many wrong tokens" in refused.value.detail


async def test_the_blocking_client_talks_to_the_same_api(server) -> None:
    def use_the_api() -> None:
        with Client(server, ADMIN_TOKEN) as client:
            assert client.health().status == "ok"
            client.apps.install("cal", "Calendar")
            conversation_id = client.conversations.open("cal")
            posted = client.conversations.send(conversation_id, "Book it.", wait=20)
            assert posted.reply is not None and posted.reply.content == REPLY
            *deltas, done = client.conversations.stream(conversation_id, "And Friday?")
            assert "".join(d.text for d in deltas if isinstance(d, ReplyDelta)) == REPLY
            assert isinstance(done, ReplyDone)
            assert client.conversations.get(conversation_id).messages[-1].id == done.message_id
            with pytest.raises(NotFound):
                client.memories.list("no-such-app")

    # In a worker thread, so that the server on this event loop keeps serving.
    await anyio.to_thread.run_sync(use_the_api)


async def test_steering_a_memory_from_the_client(server, admin) -> None:
    memory = await remembered(admin, "desk", "My gate code is 4455.")
    pinned = await admin.memories.steer("desk", memory.id, pinned=True, importance=8,
                                        expires_at="2099-01-01T00:00:00Z", reason="daily")
    assert (pinned.pinned, pinned.importance, pinned.expires_at) == (
        True, 8, "2099-01-01T00:00:00.000000Z")
    # Left unset, a field is not sent and does not change; None removes the expiry.
    cleared = await admin.memories.steer("desk", memory.id, expires_at=None)
    assert cleared.pinned and cleared.importance == 8 and cleared.expires_at is None
    tagged = await admin.memories.tag("desk", memory.id, relevant=False, reason="unused")
    assert tagged.importance == 6
    await admin.memories.delete("desk", memory.id)
    assert await admin.memories.list("desk") == []
    assert [m.state for m in await admin.memories.list("desk", state="retired")] == ["deleted"]
    restored = await admin.memories.restore("desk", memory.id)
    assert restored.state == "live" and (await admin.memories.get("desk", memory.id)).pinned
    app = await admin.apps.change("desk", memory_ttl_seconds=600)
    assert app.memory_ttl_seconds == 600 and app.users_write_shared is False
    assert (await admin.apps.change("desk", memory_ttl_seconds=None)).memory_ttl_seconds is None
    with pytest.raises(BadRequest, match="importance"):
        await admin.memories.steer("desk", memory.id, importance=11)


async def test_an_apps_profile_setting_and_a_persons_profile(admin, db_path) -> None:
    from tests.db_query import query

    await admin.apps.install("cal", "Calendar", shares_profile=True)
    assert (await admin.apps.get("cal")).shares_profile
    changed = await admin.apps.change("cal", shares_profile=False)
    assert not changed.shares_profile and not (await admin.apps.get("cal")).shares_profile
    query(db_path, "INSERT INTO app_memories (app_id, user_id, content, created_at, updated_at,"
                   " metadata) VALUES ('', 'ana', 'The user is vegetarian.',"
                   " '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '{}')")
    [memory] = await admin.users.profile("ana")
    assert memory.content == "The user is vegetarian." and memory.user_id == "ana"
    assert await admin.users.profile("ana", query="vegetarian")
    assert (await admin.users.profile_history("ana")).events == []
    exported = await admin.users.export_profile("ana")
    erased = await admin.users.erase_profile("ana")
    assert erased.profile_memories == 1 and await admin.users.profile("ana") == []
    assert (await admin.users.import_profile("ana", exported)).memory_count == 1
