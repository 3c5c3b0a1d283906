"""Model faults on the real Ollama wire (respx): each ends in its documented outcome, is
counted in /metrics, is logged once, and the loop keeps answering other conversations."""

from __future__ import annotations

import json
import logging
import re

import anyio
import httpx
import pytest
import respx

from loop.llm.ollama import OllamaChatModel
from memory_agent.storage.store import MemoryStore
from tests.harness import eventually, http_client, running, service
from tests.ollama_wire import chat_body, show_body

pytestmark = [pytest.mark.fault, pytest.mark.anyio,
              pytest.mark.usefixtures("allow_model_requests")]
HOST = "http://ollama.fault:11434"
ADMIN = {"Authorization": "Bearer admin"}
# The model writer's answer, grounded in what the user says ("My friend Alice lives in Oslo.").
MEMORY = json.dumps({"sentences": [{"text": "The user's friend Alice lives in Oslo.",
                                    "quote": "My friend Alice lives in Oslo"}], "updates": []})


def first_id(prompt: str) -> int:
    return int(re.findall(r"\[id=(\d+)\]", prompt)[0])


async def slow(request: httpx.Request) -> httpx.Response:
    await anyio.sleep(3)
    return httpx.Response(200, json=chat_body(MEMORY))


# fault name -> (phase it hits, answer to that phase, expected job status, expected outcome)
FAULTS = {
    "slow-past-timeout": ("create", slow, "skipped", "creation_failure"),
    "http-500": ("create", lambda r: httpx.Response(500, json={"error": "boom"}), "skipped",
                 "creation_failure"),
    "connection-refused": ("create", httpx.ConnectError("refused"), "skipped",
                           "creation_failure"),
    "truncated-json": ("compact", lambda r: httpx.Response(200, json=chat_body(
        '{"action": "delete", "targetMem', done_reason="length")), "done", "fifo"),
    "wrong-types": ("compact", lambda r: httpx.Response(200, json=chat_body(json.dumps(
        {"action": "delete", "targetMemoryId": "3", "reason": 7}))), "done", "fifo"),
    "other-apps-id": ("compact", lambda r: httpx.Response(200, json=chat_body(json.dumps(
        {"action": "delete", "targetMemoryId": 1, "reason": "x"}))), "done", "fifo"),
    "think-block-first": ("compact", lambda r: httpx.Response(200, json=chat_body(
        "<think>the oldest is stale</think>" + json.dumps(
            {"action": "delete", "targetMemoryId": first_id(
                json.loads(r.content)["messages"][0]["content"]), "reason": "stale"}))),
        "done", "delete"),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_model_fault_ends_in_its_documented_outcome(db_path, caplog, fault):
    phase, answer, job_status, outcome = FAULTS[fault]

    def route(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        creating = prompt.startswith("You are a memory creation assistant.")
        compacting = prompt.startswith("You are a memory management assistant.")
        if (creating and phase == "create") or (compacting and phase == "compact"):
            if isinstance(answer, Exception):
                raise answer
            return answer(request)
        return httpx.Response(200, json=chat_body(MEMORY if creating else "Answered."))

    chat = OllamaChatModel("m", host=HOST, timeout=10)
    memory = OllamaChatModel("m", host=HOST, timeout=10)
    caplog.set_level(logging.INFO)
    with respx.mock:
        respx.post(f"{HOST}/api/chat").mock(side_effect=route)
        respx.post(f"{HOST}/api/show").respond(json=show_body())
        async with service(db_path, chat, memory_model=memory, llm_timeout=1.5,
                           memory_job_attempts=1) as services, \
                running(services):
            for app in ("other", "victim", "bystander"):
                await services.stores.registry.install(app, app.title())
            await MemoryStore(services.database).insert("other", "Other app fact. Not yours.",
                                              created_at="2025-09-01T00:00:00.000000Z")
            for n in range(10):
                await MemoryStore(services.database).insert(
                    "victim", f"The user chatted about the weather, part {chr(97 + n)}.",
                    created_at=f"2025-09-{n + 2:02d}T00:00:00.000000Z")

            conversation_id = await services.stores.conversations.open("victim")
            await services.stores.conversations.add_message(
                conversation_id, "user", "My friend Alice lives in Oslo.")
            await eventually(lambda: _last_role_is(services, conversation_id, "assistant"))
            await services.stores.conversations.end(conversation_id, "app")
            job = await eventually(lambda: _settled(services, conversation_id))
            assert job.status == job_status, job.last_error

            # The loop keeps answering other conversations.
            other = await services.stores.conversations.open("bystander")
            await services.stores.conversations.add_message(other, "user", "Still there?")
            await eventually(lambda: _last_role_is(services, other, "assistant"))

            async with http_client(services, "admin") as client:
                metrics = (await client.get("/metrics", headers=ADMIN)).text
            assert len(await MemoryStore(services.database).list_oldest_first("victim")) <= 10

    if outcome == "creation_failure":
        assert "mnemoloop_memory_creation_failures_total 1.0" in metrics
        failures = [r for r in caplog.records if r.getMessage().startswith("❌")]
        assert len(failures) == 1, [r.getMessage() for r in failures]
    else:
        by = "policy" if outcome == "fifo" else "model"
        labels = f'decided_by="{by}",outcome="{outcome}"'
        assert f"mnemoloop_compactions_total{{{labels}}} 1.0" in metrics
        compactions = [r for r in caplog.records if r.getMessage().startswith("🗜️")]
        assert len(compactions) == 1
        assert (outcome == "fifo") == ("(policy: " in compactions[0].getMessage())


async def _last_role_is(services, conversation_id: str, role: str) -> bool:
    conversation = await services.stores.conversations.get(conversation_id)
    return bool(conversation.messages) and conversation.messages[-1].role == role


async def _settled(services, conversation_id: str):
    job = await services.stores.jobs.for_conversation(conversation_id)
    return job if job and job.status in ("done", "skipped", "failed") else None
