"""The OpenAI-compatible backend against a real server: llama.cpp's own (`python -m
llama_cpp.server`, from `llama-cpp-python[server]`) serving the bundled SmolLM2 model. Chat,
streaming, the writer `auto` chooses for it, and a memory written and compacted through it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loop.llm.local import bundled_model_path
from loop.llm.openai import OpenAIChatModel
from loop.service import open_services
from memory_agent import ChatMessage
from memory_agent.storage.store import MemoryStore
from tests.harness import eventually, http_client, running, settings_for
from tests.live_service import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.real_model,
              pytest.mark.usefixtures("allow_model_requests")]
ADMIN = {"Authorization": "Bearer admin"}
WINDOW = 4096


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server on a free loopback port; its /v1 URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_model_path()),
             "--model_alias", "smollm2", "--n_ctx", str(WINDOW), "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_chat_and_stream_through_a_real_openai_compatible_server(llama_server):
    model = OpenAIChatModel("smollm2", base_url=llama_server, timeout=120)
    try:
        assert await model.unready_reason() is None
        reply = await model.chat([ChatMessage("user", "Say hello.")], answer_tokens=24)
        assert reply.text.strip()
        assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 24

        pieces: list[str] = []
        streamed = await model.chat_streaming(
            [ChatMessage("user", "Name three colours.")], on_text=pieces.append)
        assert len(pieces) > 1 and "".join(pieces) == streamed.text

        # llama-cpp-python's server takes no json_schema: a JSON object held to the schema.
        answer = await model.chat(
            [ChatMessage("user", "Give a city and its country.")], answer_tokens=60,
            json_schema={"type": "object", "properties": {"city": {"type": "string"},
                         "country": {"type": "string"}}, "required": ["city", "country"]})
        assert answer.text.lstrip().startswith("{")

        unknown = OpenAIChatModel("gpt-9", base_url=llama_server)
        reason = await unknown.unready_reason()
        assert reason is not None and "has no model gpt-9" in reason and "smollm2" in reason
        await unknown.aclose()
    finally:
        await model.aclose()


async def test_a_memory_written_and_compacted_through_a_real_server(
    llama_server, db_path: Path, monkeypatch
):
    """MNEMOLOOP_LLM=openai:smollm2: `auto` tries the model and gives it the extractive
    writer (a 135M model's memories do not hold the facts); the drop-in is answered by the
    server; the memory job writes the memory and asks the server what to compact."""
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server)
    monkeypatch.setenv("OPENAI_API_KEY", "no-key")
    settings = settings_for(db_path, llm="openai:smollm2", memory_writer="auto",
                            model_context=WINDOW, llm_timeout=120, admin_token="admin")
    async with open_services(settings) as services, running(services), \
            http_client(services, "admin") as client:
        assert services.models.chat_window.tokens == WINDOW
        await services.writer_choice.settle()
        assert services.stores.agent.writer == "extractive"
        assert "trial conversations" in services.writer_choice.why
        assert services.stores.agent.get_energy_consumed_since_last_poll() > 0

        await services.stores.registry.install("desk", "Desk")
        store = MemoryStore(services.database)
        for n in range(10):
            await store.insert("desk", f"The user chatted about the weather, part {n}.",
                               created_at=f"2026-11-{n + 1:02d}T00:00:00.000000Z")
        headers = {**ADMIN, "X-Mnemoloop-App": "desk"}
        answered = await client.post("/v1/chat/completions", headers=headers, timeout=180, json={
            "model": "smollm2", "max_tokens": 40,
            "messages": [{"role": "user", "content": "My locker code is 4411. Thanks!"}]})
        assert answered.status_code == 200, answered.text
        assert answered.json()["choices"][0]["message"]["content"].strip()
        conversation_id = answered.headers["x-mnemoloop-conversation-id"]
        await client.post(f"/conversations/{conversation_id}/end", headers=ADMIN)

        async def settled():
            job = await services.stores.jobs.for_conversation(conversation_id)
            return job if job and job.status not in ("pending", "running") else None

        job = await eventually(settled, timeout=300)
        assert job.status == "done", job.last_error
        kept = [m.content for m in await store.list_oldest_first("desk")]
        # The cap holds (a 135M model's reply may repeat the memory block back, which can
        # retire old memories as updated: what is kept is not this test's to say).
        assert 1 <= len(kept) <= 10
        steps = (await client.get("/memory-jobs?appId=desk", headers=ADMIN)).json()["jobs"][0]
        # The server was asked which memory goes: its answer applied, or FIFO with the reason.
        assert steps["steps"], steps
