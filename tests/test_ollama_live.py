"""Against a real Ollama server, when one answers at OLLAMA_HOST; skipped, saying why, when not."""

from __future__ import annotations

import os

import httpx
import pytest

from loop.llm.ollama import OllamaChatModel
from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent
from tests.conftest import install_app

pytestmark = [pytest.mark.anyio, pytest.mark.ollama_live,
              pytest.mark.usefixtures("allow_model_requests")]

HOST = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434")
MODEL = os.environ.get("MNEMOLOOP_OLLAMA_MODEL", "llama3.2:1b")


def live_model_or_skip() -> str:
    base = HOST if "://" in HOST else f"http://{HOST}"
    try:
        tags = httpx.get(f"{base}/api/tags", timeout=2).json()
    except (httpx.HTTPError, ValueError) as error:
        pytest.skip(f"no Ollama answers at {HOST} ({type(error).__name__}); "
                    "start one to run this test")
    names = {m.get("name") for m in tags.get("models", [])} | {
        m.get("model") for m in tags.get("models", [])}
    if MODEL not in names:
        pytest.skip(f"Ollama at {HOST} does not have {MODEL}; run `ollama pull {MODEL}`")
    return MODEL


async def test_memory_creation_and_compaction_with_a_live_ollama(database):
    model = OllamaChatModel(live_model_or_skip(), host=HOST, timeout=60)
    await install_app(database, "app")
    agent = MemorySubAgent(database, model, llm_timeout=60)
    try:
        for n in range(11):
            request = MemoryCreationRequest("app", f"c{n}", [
                ChatMessage("user", f"Remember that my locker number is {n}."),
                ChatMessage("assistant", f"Noted, your locker is number {n}."),
            ])
            try:
                await agent.create_memory(request)
            except Exception as error:  # a weak model may fail one; the cap must still hold
                print(f"creation {n} failed: {error}")
        assert await agent.get_memory_count("app") <= 10
        assert agent.stats.memories_created >= 1
    finally:
        await model.aclose()
