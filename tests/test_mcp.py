"""The MCP server through the official `mcp` client: over stdio (`mnemoloop mcp`) and over
streamable HTTP at /mcp of a live `serve`. Tools listed and called, every tool scoped to the
key's app, bad arguments answered as tool errors, no token no tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.db_query import query
from tests.fake_ollama import fake_ollama
from tests.live_service import free_port, start_serve, wait_healthy
from tests.test_cli import mnemoloop

pytestmark = pytest.mark.anyio
STAMP = "2025-10-10T10:00:00.000000Z"
APP_TOOLS = {"recall", "query", "remember", "forget", "memory_history",
             "tag_memory_relevant", "tag_memory_irrelevant", "pin_memory",
             "profile_proposals", "answer_profile_proposal"}


def install(db: Path | str, app_id: str) -> str:
    mnemoloop(db, "migrate")
    installed = mnemoloop(db, "apps", "install", app_id)
    assert installed.returncode == 0, installed.stderr
    return installed.stdout.rsplit(" ", 1)[-1].strip()


def add_memory(db: Path | str, app_id: str, text: str) -> int:
    query(db, "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
              " VALUES (?, ?, ?, ?, '{}')", (app_id, text, STAMP, STAMP))
    return int(query(db, "SELECT MAX(id) FROM app_memories")[0][0])


def found_id(memories: list[dict[str, Any]], word: str) -> int:
    [memory_id] = [m["id"] for m in memories if word in m["content"]]
    return int(memory_id)


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    structured = result.structuredContent or {}
    return structured.get("result", structured)


def error_text(result: CallToolResult) -> str:
    assert result.isError, result
    return " ".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def stdio_session(db: Path | str, token: str) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "mnemoloop", "mcp"],
        env={**os.environ, "MNEMOLOOP_DB": str(db), "MNEMOLOOP_MCP_TOKEN": token},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as client, \
            streamable_http_client(url, http_client=client) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_stdio_tools_are_scoped_to_the_keys_app(db_path):
    key = install(db_path, "cal")
    install(db_path, "notes")
    peanut = add_memory(db_path, "cal", "The user's daughter Mia has a peanut allergy.")
    add_memory(db_path, "cal", "The user plays tennis on Saturdays.")
    zoe = add_memory(db_path, "notes", "The user's daughter Zoe plays the violin.")
    pen = add_memory(db_path, "cal", "Mia carries an EpiPen to school.")
    query(db_path, "INSERT INTO relations (from_id, to_id, type, strength, created_at)"
                   " VALUES (?, ?, 'related', 0.5, ?)", (peanut, pen, STAMP))

    with anyio.fail_after(60):
        async with stdio_session(db_path, key) as session:
            assert {t.name for t in (await session.list_tools()).tools} == APP_TOOLS
            # One memory whole, as a block's digest or stub names it; never another app's.
            whole = payload(await session.call_tool("recall", {"memory_id": peanut}))
            # Then the memory of its space it is linked to.
            assert [(m["content"], m.get("related")) for m in whole] == [
                ("The user's daughter Mia has a peanut allergy.", None),
                ("Mia carries an EpiPen to school.", True)]
            assert "not found" in error_text(
                await session.call_tool("recall", {"memory_id": zoe}))

            everything = payload(await session.call_tool("recall", {}))
            assert len(everything) == 3 and "Zoe" not in json.dumps(everything)
            found = payload(await session.call_tool("recall", {"query": "peanut allergies"}))
            assert [m["id"] for m in found] == [peanut]
            asked = payload(await session.call_tool(
                "query", {"query": "peanut allergies", "top_k": 1, "full": True}))
            [hit] = asked["results"]
            assert (hit["id"], hit["score"], hit["space"]) == (peanut, 1.0, "shared")
            assert hit["memory"]["content"] == hit["text"] and asked["omitted"] == 0
            assert "threshold" in error_text(await session.call_tool(
                "query", {"query": "peanut", "threshold": 2}))
            assert "updatedAfter" in error_text(await session.call_tool(
                "query", {"query": "peanut", "updated_after": "yesterday"}))

            other = await session.call_tool("recall", {"app_id": "notes"})
            assert "belongs to app 'cal'" in error_text(other)
            assert "list_apps needs the admin token" in error_text(
                await session.call_tool("list_apps", {}))

            block = await session.read_resource("mnemoloop://apps/cal/memories")
            assert "peanut allergy" in block.contents[0].text  # type: ignore[union-attr]
            with pytest.raises(Exception, match="belongs to app"):
                await session.read_resource("mnemoloop://apps/notes/memories")

            tennis = found_id(everything, "tennis")
            tagged = payload(await session.call_tool(
                "tag_memory_relevant", {"memory_id": tennis, "reason": "asked about it"}))
            assert tagged["importance"] == 7
            lowered = payload(await session.call_tool(
                "tag_memory_irrelevant", {"memory_id": tennis, "reason": "never again"}))
            assert lowered["importance"] == 5
            pinned = payload(await session.call_tool("pin_memory", {"memory_id": tennis}))
            assert pinned["pinned"] is True
            assert "reason" in error_text(await session.call_tool(
                "tag_memory_relevant", {"memory_id": tennis}))
            query(db_path, "UPDATE app_memories SET private = 1 WHERE id = ?", (tennis,))
            # A private memory is never given to a model: not by recall either.
            assert [m["id"] for m in payload(await session.call_tool("recall", {}))] == [
                pen, peanut]
            query(db_path, "UPDATE app_memories SET private = 1 WHERE id = ?", (pen,))
            # Nor as a memory linked to the one recalled.
            assert [m["id"] for m in payload(await session.call_tool(
                "recall", {"memory_id": peanut}))] == [peanut]
            tennis_history = payload(await session.call_tool(
                "memory_history", {"memory_id": tennis}))
            assert [(e["event"], e["actor"]) for e in tennis_history] == [
                ("importance", "app"), ("importance", "app"), ("pinned", "app")]
            # A secret memory is never given to a model: no tool answers with it.
            query(db_path, "UPDATE app_memories SET sensitivity = 'secret' WHERE id = ?",
                  (tennis,))
            assert "is secret" in error_text(await session.call_tool(
                "pin_memory", {"memory_id": tennis, "pinned": False}))
            assert payload(await session.call_tool(
                "memory_history", {"memory_id": tennis})) == []
            assert "tennis" not in json.dumps(payload(await session.call_tool(
                "recall", {"query": "tennis Saturdays"})))
            assert payload(await session.call_tool(
                "query", {"query": "tennis Saturdays"}))["results"] == []

            assert payload(await session.call_tool("forget", {"memory_id": peanut})) == {
                "deleted": peanut}
            assert "not found" in error_text(
                await session.call_tool("forget", {"memory_id": peanut}))
            history = payload(await session.call_tool("memory_history", {"memory_id": peanut}))
            assert [e["event"] for e in history] == ["deleted"]

            job = payload(await session.call_tool("remember", {"transcript": [
                {"role": "user", "content": "My friend Ana lives in Porto."},
                {"role": "assistant", "content": "Noted: Ana lives in Porto."},
            ]}))
            assert job["status"] == "pending" and job["appId"] == "cal"

            for bad in ({"limit": "lots"}, {"limit": 0}, {"query": "***"}):
                assert error_text(await session.call_tool("recall", bad))
            for bad_transcript in ([], [{"role": "system", "content": "x"}],
                                   [{"role": "user", "content": ""}], "text"):
                assert error_text(
                    await session.call_tool("remember", {"transcript": bad_transcript}))
            assert error_text(await session.call_tool("forget", {"memory_id": "x"}))

    # The transcript is an ended conversation with its job queued: `serve` will write it.
    rows = query(db_path, "SELECT c.status, c.end_reason, j.status, COUNT(m.id)"
                          " FROM conversations c JOIN memory_jobs j USING (conversation_id)"
                          " JOIN messages m USING (conversation_id)"
                          " GROUP BY c.status, c.end_reason, j.status")
    assert rows == [("ended", "mcp", "pending", 2)]
    # The forgotten memory stays, deleted, until its grace period ends.
    assert query(db_path, "SELECT app_id, deleted_at IS NOT NULL FROM app_memories"
                          " ORDER BY id") == [("cal", 1), ("cal", 0), ("notes", 0), ("cal", 0)]


def test_stdio_without_a_valid_token_serves_nothing(db_path):
    mnemoloop(db_path, "migrate")
    for env in ({"MNEMOLOOP_MCP_TOKEN": ""}, {"MNEMOLOOP_MCP_TOKEN": "mlk_wrong"}):
        started = subprocess.run(
            [sys.executable, "-m", "mnemoloop", "mcp"], input="", capture_output=True,
            text=True, timeout=60, env={**os.environ, "MNEMOLOOP_DB": str(db_path), **env})
        assert started.returncode == 2
        assert "give an app's key or the admin token" in started.stderr
        assert started.stdout == ""


async def test_http_mcp_on_a_live_server(db_path, tmp_path):
    key = install(db_path, "cal")
    install(db_path, "notes")
    add_memory(db_path, "notes", "The user's daughter Zoe plays the violin.")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with fake_ollama() as ollama:
        process = start_serve(db_path, port, ollama, tmp_path / "serve.log", "admin-token")
        try:
            await wait_healthy(base)
            async with httpx.AsyncClient() as client:
                for headers in ({}, {"Authorization": "Bearer wrong"}):
                    refused = await client.post(f"{base}/mcp", json={}, headers=headers)
                    assert refused.status_code == 401
                    assert refused.headers["content-type"] == "application/problem+json"
                huge = await client.post(f"{base}/mcp", content=b"x" * (2 * 1024 * 1024),
                                         headers={"Authorization": f"Bearer {key}"})
                assert huge.status_code == 413

            with anyio.fail_after(60):
                async with http_session(f"{base}/mcp", "admin-token") as admin:
                    tools = {t.name for t in (await admin.list_tools()).tools}
                    assert tools == APP_TOOLS | {"list_apps"}
                    apps = payload(await admin.call_tool("list_apps", {}))
                    assert {a["appId"]: a["memoryCount"] for a in apps} == {"cal": 0, "notes": 1}
                    assert "app_id is required" in error_text(
                        await admin.call_tool("recall", {}))
                    violin = payload(await admin.call_tool(
                        "recall", {"app_id": "notes", "query": "violin"}))
                    assert len(violin) == 1
                    block = await admin.read_resource("mnemoloop://apps/notes/memories")
                    assert "violin" in block.contents[0].text  # type: ignore[union-attr]

                async with http_session(f"{base}/mcp", key) as app:
                    assert {t.name for t in (await app.list_tools()).tools} == APP_TOOLS
                    job = payload(await app.call_tool("remember", {"transcript": [
                        {"role": "user", "content": "My friend Ana lives in Porto."},
                        {"role": "assistant", "content": "Noted."},
                    ]}))
                    assert job["status"] == "pending"
                    # serve's memory worker writes it, through the stand-in model.
                    while not (recalled := payload(await app.call_tool(
                            "recall", {"query": "Ana Porto"}))):
                        await anyio.sleep(0.2)
                    assert "Ana lives in Porto" in recalled[0]["content"]
                    assert "belongs to app 'cal'" in error_text(
                        await app.call_tool("recall", {"app_id": "notes"}))
                    block = await app.read_resource("mnemoloop://apps/cal/memories")
                    assert "Ana lives in Porto" in block.contents[0].text  # type: ignore[union-attr]
                    with pytest.raises(Exception, match="belongs to app"):
                        await app.read_resource("mnemoloop://apps/notes/memories")
                    assert error_text(await app.call_tool("forget", {"memory_id": 2**70}))
        finally:
            process.terminate()
            process.wait(timeout=30)


async def test_recall_gives_a_users_profile_in_an_app_that_shares_it(db_path):
    key = install(db_path, "cal")
    mnemoloop(db_path, "apps", "profile", "cal", "on")
    notes_key = install(db_path, "notes")
    for app_id, user, text in (("cal", "ana", "The user has a dentist visit on 2026-03-02."),
                               ("", "ana", "The user is vegetarian."),
                               ("", "ben", "The user is allergic to nuts.")):
        query(db_path, "INSERT INTO app_memories (app_id, user_id, content, created_at,"
                       " updated_at, metadata) VALUES (?, ?, ?, ?, ?, '{}')",
              (app_id, user, text, STAMP, STAMP))
    with anyio.fail_after(60):
        async with stdio_session(db_path, key) as session:
            recalled = payload(await session.call_tool("recall", {"user_id": "ana"}))
            assert [(m["content"], m.get("profile", False)) for m in recalled] == [
                ("The user has a dentist visit on 2026-03-02.", False),
                ("The user is vegetarian.", True)]
            found = payload(await session.call_tool(
                "recall", {"user_id": "ana", "query": "vegetarian"}))
            assert [m["content"] for m in found] == ["The user is vegetarian."]
            assert payload(await session.call_tool("recall", {})) == []  # the shared space
        async with stdio_session(db_path, notes_key) as session:  # does not share
            assert payload(await session.call_tool("recall", {"user_id": "ana"})) == []


async def test_tools_read_only_the_kinds_the_apps_key_may_read(db_path):
    key = install(db_path, "cal")
    event = add_memory(db_path, "cal", "The dentist appointment is on Tuesday at 15:00.")
    add_memory(db_path, "cal", "The dentist is Dr. Ruiz on Calle Mayor.")
    query(db_path, "UPDATE app_memories SET kind = 'event' WHERE id = ?", (event,))
    query(db_path, "UPDATE apps SET allowed_kinds = '[\"event\"]' WHERE app_id = 'cal'")

    with anyio.fail_after(60):
        async with stdio_session(db_path, key) as session:
            recalled = payload(await session.call_tool("recall", {}))
            assert [(m["id"], m["kind"]) for m in recalled] == [(event, "event")]
            found = payload(await session.call_tool("query", {"query": "dentist"}))
            assert [r["kind"] for r in found["results"]] == ["event"]
            assert "may not be read" in error_text(await session.call_tool(
                "query", {"query": "dentist", "categories": ["fact"]}))
            assert "planner" in error_text(await session.call_tool(
                "query", {"query": "dentist", "agent_name": "stranger"}))
            block = await session.read_resource("mnemoloop://apps/cal/memories")
            text = block.contents[0].text  # type: ignore[union-attr]
            assert "Tuesday" in text and "Ruiz" not in text
