"""The OpenAI dialect against the native routes, on a real HTTP server in this process:

- `dropin_added_p50_ms`: what a `POST /v1/chat/completions` that continues a conversation
  takes over the native `POST /conversations/{id}/messages?wait=` of the same turn, at the
  median, with a model that answers at once (the two kinds of request alternate, so both see
  the same machine);
- `dropin_ttft_p50_ms` against `model_ttft_p50_ms`: streamed time to first token through the
  dialect, and the model's own (a model that writes its answer in pieces, the first after
  `PIECE_SECONDS`);
- `responses_added_p50_ms`: a new chat's question through `/v1/responses` over
  `/v1/chat/completions`;
- `tool_round_trip_added_p50_ms`: a tool round trip (the question with tools, answered by a
  call; the call's result, answered in text) over two plain turns of the same shape;
- `unnamed_concurrent_errors`: of 50 unrelated prompts of one app at once, naming no user,
  to a model that takes `SLOW_MODEL_SECONDS` with an idle time of `SHORT_IDLE_SECONDS` (most
  wait in the queue for an answer slot longer than that): those not answered 200 with text.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from scripted_models import ScriptedModel

from admin_api import create_app
from loop.service import open_services
from loop.settings import Settings
from memory_agent import (
    ChatModel,
)
from mnemoloop.runner import http_server, listening_socket

TOKEN = "bench-dialects"
PIECES = 8
PIECE_SECONDS = 0.05
SLOW_MODEL_SECONDS = 1.5
SHORT_IDLE_SECONDS = 4.0


BOOK = {"type": "function", "function": {"name": "book_table", "description": "Book a table.",
        "parameters": {"type": "object", "properties": {"party": {"type": "integer"}}}}}


async def _serving(db: Path, model: ChatModel,
                   work: Callable[[httpx.AsyncClient], Awaitable[None]],
                   idle_end_seconds: float = 3600) -> None:
    settings = Settings(db=db, llm="local", admin_token=TOKEN, idle_end_seconds=idle_end_seconds)
    async with open_services(settings, chat_model=model, memory_model=ScriptedModel()) as services:
        sock = listening_socket("127.0.0.1", 0)
        server = http_server(create_app(services), sock)
        port = sock.getsockname()[1]
        stopped = anyio.Event()

        async def serve() -> None:
            await server.serve(sockets=[sock])
            stopped.set()

        async with anyio.create_task_group() as group:
            group.start_soon(services.central.run)
            group.start_soon(services.worker.run)
            group.start_soon(serve)
            while not server.started:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            headers = {"Authorization": f"Bearer {TOKEN}", "X-Mnemoloop-App": "bench"}
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers,
                                         timeout=60) as client:
                assert (await client.post("/apps", json={"appId": "bench", "name": "Bench"})
                        ).status_code == 201
                await work(client)
            server.should_exit = True
            await services.central.drain(5)
            with anyio.move_on_after(5):
                await stopped.wait()
            group.cancel_scope.cancel()


async def _added_latency(client: httpx.AsyncClient, chats: int, turns: int,
                         native: list[float], dropin: list[float]) -> None:
    for chat in range(chats):
        opened = await client.post("/apps/bench/conversations")
        conversation_id = opened.json()["conversationId"]
        history: list[dict[str, Any]] = []
        for turn in range(turns):
            said = f"chat {chat} turn {turn}: the weather is fine"
            started = time.perf_counter()
            reply = await client.post(f"/conversations/{conversation_id}/messages?wait=30",
                                      json={"content": said})
            native.append(time.perf_counter() - started)
            assert reply.status_code == 200, reply.text
            history.append({"role": "user", "content": said})
            started = time.perf_counter()
            completion = await client.post(
                "/v1/chat/completions", json={"model": "any", "messages": history,
                                              "user": f"chat{chat}"})
            dropin.append(time.perf_counter() - started)
            assert completion.status_code == 200, completion.text
            history.append(completion.json()["choices"][0]["message"])


async def _first_tokens(client: httpx.AsyncClient, requests: int, seen: list[float]) -> None:
    for number in range(requests):
        body = {"model": "any", "stream": True, "user": f"ttft{number}",
                "messages": [{"role": "user", "content": f"question {number}"}]}
        started = time.perf_counter()
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            first = True
            async for line in response.aiter_lines():
                if first and '"content": "word' in line:
                    seen.append(time.perf_counter() - started)
                    first = False


async def _responses_latency(client: httpx.AsyncClient, requests: int,
                             chat: list[float], responses: list[float]) -> None:
    """A new chat of one question through `/v1/chat/completions` and through `/v1/responses`,
    alternately, each a user of its own."""
    for number in range(requests):
        started = time.perf_counter()
        reply = await client.post("/v1/chat/completions", json={
            "model": "any", "user": f"c{number}",
            "messages": [{"role": "user", "content": f"question {number}"}]})
        chat.append(time.perf_counter() - started)
        assert reply.status_code == 200, reply.text
        started = time.perf_counter()
        reply = await client.post("/v1/responses", json={
            "model": "any", "user": f"r{number}", "input": f"question {number}"})
        responses.append(time.perf_counter() - started)
        assert reply.status_code == 200, reply.text


async def _tool_round_trips(client: httpx.AsyncClient, requests: int,
                            plain: list[float], tools: list[float]) -> None:
    """Two plain turns of a new chat, and a tool round trip, alternately, each a user of its
    own: the seconds each pair of requests took."""

    async def completion(body: dict[str, Any]) -> dict[str, Any]:
        reply = await client.post("/v1/chat/completions", json={"model": "any", **body})
        assert reply.status_code == 200, reply.text
        message: dict[str, Any] = reply.json()["choices"][0]["message"]
        return message

    for number in range(requests):
        asked = [{"role": "user", "content": f"book a table {number}"}]
        started = time.perf_counter()
        answer = await completion({"user": f"p{number}", "messages": asked})
        await completion({"user": f"p{number}", "messages": [
            *asked, answer, {"role": "user", "content": "thanks"}]})
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        call = await completion({"user": f"t{number}", "messages": asked, "tools": [BOOK]})
        assert call["tool_calls"], call
        await completion({"user": f"t{number}", "tools": [BOOK], "messages": [
            *asked, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                           "content": '{"confirmation": "BK-1"}'}]})
        tools.append(time.perf_counter() - started)


async def _unnamed_at_once(client: httpx.AsyncClient, requests: int,
                           answered: list[bool]) -> None:
    """`requests` unrelated prompts of one app at once, naming no user or thread (a client's
    batch, many people behind one key): whether each was answered 200 with text."""

    async def ask(number: int) -> None:
        body = {"model": "any", "messages": [{"role": "user", "content": f"prompt {number}"}]}
        reply = await client.post("/v1/chat/completions", json=body, timeout=600)
        text = reply.json()["choices"][0]["message"]["content"] if reply.is_success else ""
        answered.append(reply.status_code == 200 and bool(text and text.strip()))

    async with anyio.create_task_group() as group:
        for number in range(requests):
            group.start_soon(ask, number)


def bench_dialects(tmp: Path, quick: bool) -> dict[str, Any]:
    chats, turns = (4, 5) if quick else (10, 10)
    native: list[float] = []
    dropin: list[float] = []
    anyio.run(_serving, tmp / "dialects.db", ScriptedModel(),
              lambda client: _added_latency(client, chats, turns, native, dropin))
    paced = ScriptedModel("paced", pieces=PIECES, piece_seconds=PIECE_SECONDS)
    ttft: list[float] = []
    anyio.run(_serving, tmp / "dialects-ttft.db", paced,
              lambda client: _first_tokens(client, 10 if quick else 30, ttft))
    chat: list[float] = []
    responses: list[float] = []
    anyio.run(_serving, tmp / "dialects-responses.db", ScriptedModel(),
              lambda client: _responses_latency(client, 20 if quick else 100, chat, responses))
    plain: list[float] = []
    tools: list[float] = []
    anyio.run(_serving, tmp / "dialects-tools.db", ScriptedModel(calls_tools=True),
              lambda client: _tool_round_trips(client, 20 if quick else 100, plain, tools))
    unnamed: list[bool] = []
    anyio.run(_serving, tmp / "dialects-unnamed.db", ScriptedModel(seconds=SLOW_MODEL_SECONDS),
              lambda client: _unnamed_at_once(client, 50, unnamed), SHORT_IDLE_SECONDS)
    return {
        "dropin_requests": len(dropin),
        "responses_added_p50_ms": round((statistics.median(responses)
                                         - statistics.median(chat)) * 1000, 3),
        "tool_round_trip_added_p50_ms": round((statistics.median(tools)
                                               - statistics.median(plain)) * 1000, 3),
        "unnamed_concurrent_requests": len(unnamed),
        "unnamed_concurrent_errors": unnamed.count(False),
        "unnamed_model_seconds": SLOW_MODEL_SECONDS,
        "unnamed_idle_seconds": SHORT_IDLE_SECONDS,
        "native_p50_ms": round(statistics.median(native) * 1000, 3),
        "dropin_p50_ms": round(statistics.median(dropin) * 1000, 3),
        "dropin_added_p50_ms": round((statistics.median(dropin) - statistics.median(native))
                                     * 1000, 3),
        "dropin_ttft_p50_ms": round(statistics.median(ttft) * 1000, 3),
        "model_ttft_p50_ms": round(statistics.median(paced.first_piece_seconds) * 1000, 3),
    }
