"""The seed's scenarios at the service level: real database file, real loop and worker,
scripted model."""

from __future__ import annotations

import anyio
import pytest

from loop.errors import AppNotInstalled, ConversationEnded
from loop.jobs.store import MAX_INTERRUPTIONS
from memory_agent import ChatReply
from memory_agent.core.errors import ChatModelResponseError, ChatModelTimeout, ChatModelUnavailable
from tests.db_query import query
from tests.fakes import (
    CREATION_PREFIX,
    FRIENDS,
    FunctionModel,
    ModelCall,
    decision,
    friend_fact,
    ids_in_prompt,
    quoted,
)
from tests.harness import assistant_model, conversation_calls, eventually, running, service

pytestmark = pytest.mark.anyio


async def talk(services, app_id: str, text: str, *, end: bool = True) -> str:
    conversation_id = await services.stores.conversations.open(app_id)
    await services.stores.conversations.add_message(conversation_id, "user", text)
    await eventually(lambda: _answered(services, conversation_id))
    if end:
        await services.stores.conversations.end(conversation_id, "app")
    return conversation_id


async def _answered(services, conversation_id: str) -> bool:
    conversation = await services.stores.conversations.get(conversation_id)
    return conversation.status == "ended" or conversation.messages[-1].role == "assistant"


async def job_status(services, conversation_id: str) -> str | None:
    job = await services.stores.jobs.for_conversation(conversation_id)
    return job.status if job else None


async def settled(services, conversation_id: str) -> str | None:
    status = await job_status(services, conversation_id)
    return status if status in ("done", "skipped", "failed") else None


async def test_a_memory_is_created_when_the_app_ends_the_conversation(db_path):
    async with service(db_path, assistant_model()) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "Meetings after 2pm please.")
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        [memory] = await services.stores.agent.get_memories("cal")
        assert memory.content == 'The user said: "Meetings after 2pm please."'
        assert memory.source_conversation_id == conversation_id
        conversation = await services.stores.conversations.get(conversation_id)
        assert (conversation.status, conversation.end_reason) == ("ended", "app")


async def test_the_end_conversation_tool_call_ends_it_and_writes_the_memory(db_path):
    model = assistant_model(end_on="bye")
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "Thanks, bye", end=False)
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        conversation = await services.stores.conversations.get(conversation_id)
        assert conversation.end_reason == "end_conversation"
        assert conversation.messages[-1].content == "Goodbye!"
        assert conversation_calls(model)[0].tools[0].name == "end_conversation"


async def test_an_idle_conversation_is_ended_by_the_loop(db_path):
    async with service(db_path, assistant_model(), idle_end_seconds=0.3) as services, \
            running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "Hello there", end=False)
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        conversation = await services.stores.conversations.get(conversation_id)
        assert conversation.end_reason == "idle"


async def test_memories_are_in_the_context_of_the_same_app_only(db_path):
    model = assistant_model()
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        await services.stores.registry.install("food", "Recipes")
        first = await talk(services, "cal", "I work on project Phoenix")
        await eventually(lambda: settled(services, first))

        await talk(services, "cal", "What do you know?", end=False)
        await talk(services, "food", "Any dinner ideas?", end=False)

    calls = conversation_calls(model)
    same_app, other_app = calls[-2], calls[-1]
    assert [m.role for m in same_app.messages] == ["system", "system", "user"]
    # What changed since the app's last conversation (the memory written), then the block.
    header, block = same_app.messages[1].content.split("\n\n", 1)
    assert header.startswith("Memory updates since rev ") and "Phoenix" in header
    assert block.startswith("(memories for app: Calendar)\n")
    assert "I work on project Phoenix" in block
    assert [m.role for m in other_app.messages] == ["system", "user"]
    assert all("Phoenix" not in m.content for m in other_app.messages)


async def test_the_eleventh_memory_compacts_the_app_back_to_ten_as_the_model_decides(db_path):
    model = assistant_model(compaction=lambda call: decision("delete", ids_in_prompt(call)[0]))
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        ids = [await talk(services, "cal", friend_fact(n)) for n in range(11)]
        for conversation_id in ids:
            await eventually(lambda c=conversation_id: settled(services, c))
        assert await services.stores.agent.get_memory_count("cal") == 10
        assert services.stores.agent.stats.compactions["delete", "model"] == 1
        contents = " ".join(m.content for m in await services.stores.agent.get_memories("cal"))
        assert FRIENDS[0] not in contents  # the first memory shown, as the model chose
        assert all(FRIENDS[n] in contents for n in range(1, 11))


async def test_with_the_extractive_writer_the_policy_keeps_every_fact(db_path):
    # Deleting a friend's only record would lose a fact: the policy merges two instead.
    model = assistant_model(compaction=lambda call: decision("delete", ids_in_prompt(call)[0]))
    async with service(db_path, model, memory_writer="extractive") as services, \
            running(services):
        await services.stores.registry.install("cal", "Calendar")
        ids = [await talk(services, "cal", friend_fact(n)) for n in range(11)]
        for conversation_id in ids:
            await eventually(lambda c=conversation_id: settled(services, c))
        assert await services.stores.agent.get_memory_count("cal") == 10
        assert services.stores.agent.stats.compactions["merge", "policy"] == 1
        contents = " ".join(m.content for m in await services.stores.agent.get_memories("cal"))
        assert all(FRIENDS[n] in contents for n in range(11))


async def test_uninstall_keeps_memories_purge_removes_them_and_reinstall_restores(db_path):
    async with service(db_path, assistant_model()) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "Remember my locker code is 4417.")
        await eventually(lambda: settled(services, conversation_id))

        assert await services.stores.registry.uninstall("cal") == 0
        assert await services.stores.agent.get_memory_count("cal") == 1
        with pytest.raises(AppNotInstalled):
            await services.stores.conversations.open("cal")

        await services.stores.registry.install("cal", "Calendar")
        assert await services.stores.agent.get_memory_count("cal") == 1

        assert await services.stores.registry.uninstall("cal", purge_memories=True) == 1
        assert await services.stores.agent.get_memory_count("cal") == 0


async def test_memories_and_energy_persist_across_a_restart(db_path):
    async with service(db_path, assistant_model()) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "My budget is 500 dollars a month.")
        await eventually(lambda: settled(services, conversation_id))
        spent = await services.stores.energy.report()

    async with service(db_path, assistant_model()) as services:
        memories = await services.stores.agent.get_memories("cal")
        assert [m.source_conversation_id for m in memories] == [conversation_id]
        after = await services.stores.energy.report()
        assert (after.memory_spent, after.conversation_spent) == (
            spent.memory_spent, spent.conversation_spent)
        assert spent.memory_spent > 0 and spent.conversation_spent > 0


async def test_jobs_below_the_energy_floor_wait_deferred_and_run_when_it_recovers(db_path):
    async with service(db_path, assistant_model(), energy_capacity=100,
                       energy_refill_per_second=0) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        await services.stores.energy.set_level(10)  # below the 20 % floor; no refill
        conversation_id = await talk(services, "cal", "My gym is on Baker Street.")
        assert await eventually(
            lambda: _is(job_status(services, conversation_id), "deferred"))
        assert await services.stores.agent.get_memory_count("cal") == 0

        await services.stores.energy.set_level(100)
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        assert await services.stores.agent.get_memory_count("cal") == 1


async def _is(status, wanted: str) -> bool:
    return await status == wanted


async def test_a_job_interrupted_by_a_crash_is_completed_after_restart(db_path):
    stuck = anyio.Event()

    async def hangs_on_memory(call: ModelCall) -> str:
        if call.prompt.startswith("You are a memory creation assistant."):
            stuck.set()
            await anyio.sleep_forever()
        return "Hi."

    # On PostgreSQL the job is taken over when the dead worker's lease runs out (on SQLite,
    # at once: the restarted process is the only one on the file).
    async with service(db_path, FunctionModel(hangs_on_memory), lease_seconds=1) as services:
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await services.stores.conversations.open("cal")
        await services.stores.conversations.add_message(conversation_id, "user", friend_fact(1))
        await services.stores.conversations.end(conversation_id, "app")
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(services.worker.run)
                await stuck.wait()
                group.cancel_scope.cancel()  # the worker dies mid-job
        assert await job_status(services, conversation_id) == "running"

    async with service(db_path, assistant_model(), lease_seconds=1) as services, \
            running(services):
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None and job.attempts == 2
        assert await services.stores.agent.get_memory_count("cal") == 1


async def test_a_job_whose_claims_keep_running_out_is_failed_not_tried_forever(db_path):
    # It killed or froze each instance that took it: its lease ran out MAX_INTERRUPTIONS
    # times. Found by the restarted instance (SQLite) or by a poll once the lease is gone
    # (PostgreSQL), it ends `failed`, saying why, and no model is asked again.
    model = assistant_model()
    async with service(db_path, model, lease_seconds=1) as services:
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await services.stores.conversations.open("cal")
        await services.stores.conversations.add_message(conversation_id, "user", friend_fact(1))
        await services.stores.conversations.end(conversation_id, "app")
    query(
        db_path,
        "UPDATE memory_jobs SET status = 'running', attempts = ?, lease_owner = 'gone',"
        " lease_until = '2000-01-01T00:00:00.000000Z' WHERE conversation_id = ?",
        (MAX_INTERRUPTIONS, conversation_id),
    )
    async with service(db_path, model, lease_seconds=1) as services, running(services):
        assert await eventually(lambda: settled(services, conversation_id)) == "failed"
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None
        assert (job.attempts, job.last_error) == (
            MAX_INTERRUPTIONS, f"interrupted {MAX_INTERRUPTIONS} times")
        assert await services.stores.agent.get_memory_count("cal") == 0
    assert model.calls_starting_with(CREATION_PREFIX) == []


async def test_the_worker_looks_for_exhausted_jobs_a_few_times_a_lease_not_every_poll(db_path):
    # A claim runs out a whole lease after it was last renewed: looking every lease/3 is
    # enough, and each look is a write.
    async with service(db_path, assistant_model(), lease_seconds=3) as services:
        jobs, energy, worker = services.stores.jobs, services.stores.energy, services.worker
        looks, polls = [], []
        fail_exhausted, refresh = jobs.fail_exhausted, energy.refresh

        async def counted_look() -> None:
            looks.append(anyio.current_time())
            await fail_exhausted()

        async def counted_poll() -> None:
            polls.append(anyio.current_time())
            await refresh()

        jobs.fail_exhausted, energy.refresh = counted_look, counted_poll  # type: ignore[method-assign]
        worker._poll_interval = 0.01  # many polls in a short test
        with anyio.move_on_after(0.5):
            await worker.run()
    assert len(polls) >= 5
    assert len(looks) == 1 and polls[0] <= looks[0] < polls[1]  # at the first poll only


async def test_answering_never_waits_for_memory_work(db_path):
    release = anyio.Event()

    async def slow_memory(call: ModelCall) -> str | ChatReply:
        if call.prompt.startswith("You are a memory creation assistant."):
            await release.wait()
            return quoted("A slow memory was written. It took a while.", call)
        return "Quick answer."

    model = FunctionModel(slow_memory)
    async with service(db_path, model) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        first = await talk(services, "cal", friend_fact(1))
        await eventually(lambda: _is(job_status(services, first), "running"))

        with anyio.fail_after(5):
            second = await talk(services, "cal", "Second", end=False)
        conversation = await services.stores.conversations.get(second)
        assert conversation.messages[-1].content == "Quick answer."
        assert await job_status(services, first) == "running"
        release.set()
        assert await eventually(lambda: settled(services, first)) == "done"


async def test_ending_twice_queues_one_job_and_messages_after_end_are_refused(db_path):
    async with service(db_path, assistant_model()) as services:
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await services.stores.conversations.open("cal")
        assert await services.stores.conversations.end(conversation_id, "app") is True
        assert await services.stores.conversations.end(conversation_id, "app") is False
        assert len(await services.stores.jobs.list(app_id="cal")) == 1
        with pytest.raises(ConversationEnded):
            await services.stores.conversations.add_message(conversation_id, "user", "late")


async def test_a_permanent_model_error_skips_the_job_with_the_reason(db_path):
    def no_memory(call: ModelCall) -> str:
        if call.prompt.startswith("You are a memory creation assistant."):
            raise ChatModelResponseError("model 'x' not found", status_code=404)
        return "Fine."

    async with service(db_path, FunctionModel(no_memory)) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", friend_fact(1))
        assert await eventually(lambda: settled(services, conversation_id)) == "skipped"
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None and job.attempts == 1
        assert "ChatModelResponseError: model 'x' not found" in (job.last_error or "")
        conversation = await services.stores.conversations.get(conversation_id)
        assert conversation.status == "ended"


async def test_a_slow_or_unreachable_model_is_retried_with_back_off_then_writes(db_path):
    failures = 2

    def flaky(call: ModelCall) -> str:
        nonlocal failures
        if call.prompt.startswith("You are a memory creation assistant.") and failures:
            failures -= 1
            raise ChatModelTimeout("no answer within 30 s")
        if call.prompt.startswith("You are a memory creation assistant."):
            return quoted("The user's friend Bruno lives in Porto.", call)
        return "Fine."

    async with service(db_path, FunctionModel(flaky), memory_retry_base_seconds=0.2) as services, \
            running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", friend_fact(1))
        pending = await eventually(lambda: services.stores.jobs.for_conversation(conversation_id))
        assert await eventually(lambda: settled(services, conversation_id)) == "done"
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None and job.attempts == 3 and job.last_error is None
        assert pending.status in ("pending", "running")
        assert await services.stores.agent.get_memory_count("cal") == 1


async def test_a_job_that_stays_unreachable_is_skipped_after_its_attempts(db_path):
    def down(call: ModelCall) -> str:
        if call.prompt.startswith("You are a memory creation assistant."):
            raise ChatModelUnavailable("connection refused")
        return "Fine."

    async with service(db_path, FunctionModel(down), memory_job_attempts=3,
                       memory_retry_base_seconds=0.05) as services, running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", friend_fact(1))
        assert await eventually(lambda: settled(services, conversation_id)) == "skipped"
        job = await services.stores.jobs.for_conversation(conversation_id)
        assert job is not None and job.attempts == 3
        assert "connection refused" in (job.last_error or "")


async def test_conversation_and_memory_spending_are_charged_separately(db_path):
    def costed(call: ModelCall) -> ChatReply:
        from memory_agent import TokenUsage

        if call.prompt.startswith("You are a memory creation assistant."):
            return ChatReply(quoted("Memory one is here. It is short.", call),
                             usage=TokenUsage(250, 50))
        return ChatReply("Answer.", usage=TokenUsage(90, 20))

    async with service(db_path, FunctionModel(costed), tokens_per_energy_unit=100) as services, \
            running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", friend_fact(1))
        await eventually(lambda: settled(services, conversation_id))
        report = await services.stores.energy.report()
        assert (report.conversation_spent, report.memory_spent) == (2, 3)
        assert report.level == pytest.approx(1000 - 5, abs=2)


@pytest.mark.parametrize("bundled", [True, False])
async def test_a_reply_of_the_bundled_model_is_never_kept_as_a_confirmation(db_path, bundled):
    from loop.llm.local import BUNDLED_MODEL

    reply = "I booked your table at Chez Marcel for Friday 19:00, reference CM-4471."
    model = assistant_model(reply)
    model.name = BUNDLED_MODEL if bundled else "qwen2.5:7b"
    async with service(db_path, model, memory_writer="extractive") as services, \
            running(services):
        await services.stores.registry.install("cal", "Calendar")
        conversation_id = await talk(services, "cal", "Can you book us a table?")
        await eventually(lambda: settled(services, conversation_id))
        [(written_by,)] = query(
            db_path, "SELECT written_by FROM messages WHERE role = 'assistant'"
        )
        assert written_by == model.name
        memories = await services.stores.agent.get_memories("cal")
        assert [m.content for m in memories] == (
            [] if bundled else [f'The assistant confirmed: "{reply}"']
        )
