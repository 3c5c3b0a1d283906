"""Bad input everywhere: generated requests to every route, and hostile CLI arguments.
No 5xx, every error is problem+json, and a rejected request changes nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio.from_thread
import pytest
from httpx import AsyncClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_agent.storage.store import MemoryStore
from tests.db_query import query
from tests.harness import assistant_model, http_client, service

pytestmark = pytest.mark.fault
ADMIN = {"Authorization": "Bearer admin"}
TABLES = ("apps", "conversations", "messages", "app_memories", "memory_jobs")

ROUTES = [
    ("POST", "/apps", True), ("GET", "/apps", False), ("DELETE", "/apps/{app}", False),
    ("POST", "/apps/{app}/conversations", False),
    ("POST", "/conversations/{conversation}/messages", True),
    ("GET", "/conversations/{conversation}", False),
    ("POST", "/conversations/{conversation}/end", True),
    ("GET", "/apps/{app}/memories", False), ("DELETE", "/apps/{app}/memories", False),
    ("DELETE", "/apps/{app}/memories/{memory}", False), ("GET", "/memory-jobs", False),
    ("GET", "/energy", False), ("GET", "/metrics", False),
]


@dataclass
class Target:
    portal: anyio.from_thread.BlockingPortal
    client: AsyncClient
    db: Path
    conversation_id: str

    def snapshot(self) -> tuple[Any, ...]:
        with sqlite3.connect(self.db) as connection:
            return tuple(connection.execute(f"SELECT COUNT(*), TOTAL(rowid) FROM {t}").fetchone()
                         for t in TABLES)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Iterator[Target]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    with anyio.from_thread.start_blocking_portal("asyncio") as portal, ExitStack() as stack:
        services = stack.enter_context(portal.wrap_async_context_manager(
            service(db, assistant_model())))
        client = stack.enter_context(portal.wrap_async_context_manager(
            http_client(services, "admin")))

        async def seed() -> str:
            await services.stores.registry.install("cal", "Calendar")
            await MemoryStore(services.database).insert("cal", "A fact. Another fact.",
                                              created_at="2025-10-01T00:00:00.000000Z")
            conversation_id = await services.stores.conversations.open("cal")
            await services.stores.conversations.add_message(conversation_id, "user", "hi")
            return conversation_id

        yield Target(portal, client, db, portal.call(seed))


path_values = st.one_of(
    # Sent as written, malformed percent-encodings included.
    st.sampled_from(["cal", "real", "nobody", "-1", "0", "%FF", "%00", "%C3%28", "..",
                     "a" * 300, "1e9"]),
    # Any text, percent-encoded as a client would send it.
    st.text(min_size=1, max_size=40).map(lambda t: quote(t, safe="")),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["appId", "name", "content", "reason", "extra", ""]) | st.text(max_size=8),
        inner, max_size=4),
    max_leaves=12,
)
bodies = st.one_of(
    st.none(),
    json_values.map(lambda v: ("json", v)),
    st.binary(max_size=64).map(lambda b: ("raw", b)),
    st.just(("raw", b"\xff\xfe\x00not utf-8")),
    # Python's json reads these, though no JSON allows them; the client cannot send them as JSON.
    st.just(("raw", b'{"appId": NaN, "name": Infinity}')),
    st.just(("json", {"appId": "x", "name": "y" * 70_000})),
)
queries = st.dictionaries(st.sampled_from(["purgeMemories", "appId", "status", "limit", "x"]),
                          st.text(max_size=12), max_size=3)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(ROUTES), app=path_values, conversation=path_values,
       memory=path_values, body=bodies, query=queries)
def test_generated_bad_requests_never_5xx_and_change_nothing_when_refused(
        target, route, app, conversation, memory, body, query):
    method, template, takes_body = route
    if conversation == "real":
        conversation = target.conversation_id
    path = template.format(app=app, conversation=conversation, memory=memory)
    kwargs: dict[str, Any] = {"headers": dict(ADMIN), "params": query}
    if body is not None and (takes_body or method != "GET"):
        kind, value = body
        if kind == "json":
            kwargs["json"] = value
        else:
            kwargs["content"] = value
            kwargs["headers"]["content-type"] = "application/json"
    before = target.snapshot()
    response = target.portal.call(lambda: target.client.request(method, path, **kwargs))
    assert response.status_code < 500, (method, path, kwargs, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["status"] == response.status_code
        assert target.snapshot() == before, "a refused request changed the database"


def run_cli(db: Path, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MNEMOLOOP_DB": str(db)}
    return subprocess.run([sys.executable, "-m", "mnemoloop", *args], env=environment,
                          capture_output=True, text=True, timeout=60, errors="replace")


@pytest.mark.parametrize("args", [
    (), ("nonsense",), ("apps", "install", ""), ("apps", "install", "x" * 10_000),
    ("apps", "install", "ok", "--name", ""), ("apps", "install", b"bad\xff"),
    ("memories", "list", b"\xff\xfe"), ("memories", "delete", "cal", "-1"),
    ("memories", "delete", "cal", "1e99"), ("apps", "uninstall", "nobody"),
    ("memories", "export", "nobody"),
])
def test_bad_cli_input_is_a_clear_error_and_changes_nothing(db_path, args):
    assert run_cli(db_path, "migrate").returncode == 0
    assert run_cli(db_path, "apps", "install", "cal").returncode == 0
    before = query(db_path, "SELECT * FROM apps")
    result = run_cli(db_path, *args)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip(), "the error says something"
    assert query(db_path, "SELECT * FROM apps") == before
