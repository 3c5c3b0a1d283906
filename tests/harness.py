"""Helpers to run the real service (real SQLite file, real loop and worker) in a test."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from httpx import ASGITransport, AsyncClient

from admin_api import create_app
from loop.service import Services, open_services
from loop.settings import Settings
from memory_agent import ChatModel, ChatReply, ToolCall
from mnemoloop.runner import http_server, listening_socket
from tests.fakes import COMPACTION_PREFIX, CREATION_PREFIX, FunctionModel, ModelCall, quoted


def http_client(services: Services, admin_token: str | None = None) -> AsyncClient:
    """httpx over ASGITransport: the app runs on the test's own event loop, where the service's
    aiosqlite connection and locks live (Litestar's AsyncTestClient would use another). Without
    `admin_token`, the service's own (configured, or generated and stored) is the admin token."""
    transport = ASGITransport(app=create_app(services, admin_token))
    return AsyncClient(transport=transport, base_url="http://mnemoloop.test")


def settings_for(db: Path, **overrides: Any) -> Settings:
    """The settings of a test's service. No scheduled consolidation pass unless a test asks
    for one (a pass at the worker's first look would change what a test seeds meanwhile), and
    a pass never rests between groups (its pace is `bench.py`'s figure)."""
    return Settings(**{"db": db, "llm": "local", "consolidation_every_seconds": 0,
                       "consolidation_rest_factor": 0, **overrides})


@asynccontextmanager
async def service(
    db: Path, model: ChatModel, *, memory_model: ChatModel | None = None, **overrides: Any
) -> AsyncIterator[Services]:
    async with open_services(
        settings_for(db, **overrides), chat_model=model, memory_model=memory_model or model
    ) as services:
        yield services


@asynccontextmanager
async def running(services: Services) -> AsyncIterator[Services]:
    """The central loop and the memory worker running in the background, as `serve` runs them."""
    worker = services.worker
    async with anyio.create_task_group() as group:
        group.start_soon(services.central.run)
        group.start_soon(worker.run)
        while not worker.running:
            await anyio.sleep(0.01)
        yield services
        group.cancel_scope.cancel()


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:  # noqa: ASYNC109
    """Poll until `check()` is truthy; fail with the last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await anyio.sleep(0.02)
    raise AssertionError(f"condition not met within {timeout} s (last value: {value!r})")


def assistant_model(
    reply: str = "Happy to help.",
    *,
    memory: str = 'The user said: "{topic}."',
    end_on: str | None = None,
    compaction: Callable[[ModelCall], str] | None = None,
    small_talk: str | None = None,
) -> FunctionModel:
    """Answers conversations with `reply` (calling end_conversation when the last user message
    contains `end_on`), writes memories naming the conversation's first user message, and
    finds nothing worth keeping where that message starts with `small_talk`."""

    def answer(call: ModelCall) -> str | ChatReply:
        if call.prompt.startswith(CREATION_PREFIX):
            topic = call.prompt.split("User: ", 1)[1].split("\n")[0].rstrip(".")
            if small_talk and topic.startswith(small_talk):
                return quoted("NOTHING", call)
            return quoted(memory.format(topic=topic), call)
        if call.prompt.startswith(COMPACTION_PREFIX):
            return compaction(call) if compaction else "no decision"
        last = call.messages[-1].content
        if end_on and end_on in last:
            return ChatReply("Goodbye!", tool_calls=(ToolCall("end_conversation"),))
        return reply

    return FunctionModel(answer)


def conversation_calls(model: FunctionModel) -> list[ModelCall]:
    return [c for c in model.calls if c.tools]


@asynccontextmanager
async def live_http(services: Services, admin_token: str) -> AsyncIterator[str]:
    """The service's HTTP app on a real uvicorn server on a free loopback port; yields its
    base URL."""
    sock = listening_socket("127.0.0.1", 0)
    server = http_server(create_app(services, admin_token), sock)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: server.serve(sockets=[sock]))
        while not server.started:
            await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        server.should_exit = True
    sock.close()


def csrf_in(html: str) -> str:
    """The CSRF token of the first form on a console page."""
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)
