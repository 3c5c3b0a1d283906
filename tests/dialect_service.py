"""A real `mnemoloop serve` process in front of the stand-in Ollama, driven through the
OpenAI and Ollama dialects by their official clients (tests/test_dialects.py,
tests/test_dialect_tools.py, tests/test_client_packages.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import ollama
import openai
import pytest
from pydantic import BaseModel

from tests.fake_ollama import fake_ollama
from tests.live_service import free_port, start_serve

ADMIN = "dialect-admin"
END = {"X-Mnemoloop-End-Conversation": "true"}


class Service:
    def __init__(self, url: str, db: Path) -> None:
        self.url = url
        self.db = db
        self.admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"})
        self.keys: dict[str, str] = {}
        self.clients: list[Any] = [self.admin]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def install(self, app_id: str) -> str:
        response = self.admin.post("/apps", json={"appId": app_id, "name": app_id})
        assert response.status_code == 201, response.text
        self.keys[app_id] = response.json()["apiKey"]
        return self.keys[app_id]

    def openai(self, app_id: str, **headers: str) -> openai.OpenAI:
        return self.kept(openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys.get(
            app_id, app_id), default_headers=headers or None, max_retries=0))

    def ollama(self, app_id: str, **headers: str) -> ollama.Client:
        return self.kept(ollama.Client(host=self.url, headers={
            "Authorization": f"Bearer {self.keys[app_id]}", **headers}))

    def kept(self, client: Any) -> Any:
        """`client`, closed with the service."""
        self.clients.append(client)
        return client

    def conversations(self, app_id: str) -> list[dict[str, Any]]:
        """The app's conversations, oldest first, as the database file holds them."""
        with closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as db:
            rows = db.execute(
                "SELECT c.status, (SELECT COUNT(*) FROM messages m"
                " WHERE m.conversation_id = c.conversation_id) FROM conversations c"
                " WHERE c.app_id = ? ORDER BY c.created_at, c.rowid", (app_id,)).fetchall()
        return [{"state": status, "messageCount": count} for status, count in rows]

    def memories_once_written(self, app_id: str) -> list[str]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            items = self.admin.get(f"/apps/{app_id}/memories").json()["memories"]
            if items:
                return [item["content"] for item in items]
            time.sleep(0.1)
        raise AssertionError(f"no memory was written for {app_id}")


def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`mnemoloop serve` in front of the stand-in Ollama, until the generator is closed."""
    folder: Path = tmp_path_factory.mktemp("dialects")
    port = free_port()
    with fake_ollama(delay=0.005) as backend:
        process = start_serve(folder / "dialects.db", port, backend, folder / "serve.log",
                              token=ADMIN)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(url + "/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, (folder / "serve.log").read_text()
                time.sleep(0.1)
            running = Service(url, folder / "dialects.db")
            yield running
            running.close()
        finally:
            process.terminate()
            assert process.wait(timeout=30) == 0, (folder / "serve.log").read_text()


BOOK_TABLE = {"type": "function", "function": {
    "name": "book_table", "description": "Book a table at the restaurant.",
    "parameters": {"type": "object", "properties": {
        "party": {"type": "integer"}, "time": {"type": "string"}},
        "required": ["party", "time"]}}}
BOOKED = json.dumps({"confirmation": "LUI-2231", "status": "confirmed"})


class City(BaseModel):
    name: str
    population: int
    coastal: bool
