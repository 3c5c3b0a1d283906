"""A stand-in Ollama server on loopback, speaking the real `/api/chat` and `/api/tags` wire
format, for tests that run `mnemoloop serve` as a separate process."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake:1b"
# A second model the stand-in has pulled, for clients that name one.
OTHER_MODEL = "fake-large:7b"
# Questions the stand-in answers from what it was sent, so a test can see its prompt.
SHOW_PROMPT = "What were you told?"
WHICH_MODEL = "Which model are you?"
# A question whose answer takes this long (a reply still being written).
SLOW = "[slow]"
SLOW_SECONDS = 2.0


def answer_for(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if prompt.startswith("You are a memory creation assistant."):
        # The model writer's answer: the sentence, and the words it rests on.
        friend = re.findall(r"My friend (\w+) lives in (\w+)", prompt)
        booked = re.findall(r"Tool (\w+) returned: .*?([A-Z]{3}-\d{4})", prompt)
        if booked:
            # What the app's tool did, with the reference it returned.
            tool, reference = booked[-1]
            sentence = f"The app's {tool} tool booked it for the user, reference {reference}."
            quote = reference
        elif friend:
            name, city = friend[-1]
            sentence = f"The user's friend {name} lives in {city}."
            quote = f"My friend {name} lives in {city}"
        else:
            code = re.findall(r"locker code is (\d+)", prompt)
            sentence = f"The user's locker code is {code[-1] if code else 0}."
            quote = f"locker code is {code[-1]}" if code else "User:"
        return json.dumps({"sentences": [{"text": sentence, "quote": quote}], "updates": []})
    if prompt.startswith("You are a memory management assistant."):
        ids = re.findall(r"\[id=(\d+)\]", prompt)
        return json.dumps({"action": "delete", "targetMemoryId": int(ids[0]), "reason": "old"})
    if client_tools(body) and body["messages"][-1]["role"] == "tool":
        # A tool's result came back: the final answer tells it.
        return f"Done: {body['messages'][-1]['content']}"
    if body.get("format"):
        # Structured output: an instance of the schema asked for, as Ollama's `format` makes.
        schema = body["format"] if isinstance(body["format"], dict) else {"type": "object"}
        return json.dumps(instance_of(schema))
    question = body["messages"][-1]["content"]
    if question == SHOW_PROMPT:
        return "\n---\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    if question == WHICH_MODEL:
        return str(body["model"])
    return "Noted."


def client_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools offered besides the service's own `end_conversation`."""
    return [tool["function"] for tool in body.get("tools") or ()
            if tool["function"]["name"] != "end_conversation"]


def tool_calls_for(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A model offered a client's tools calls the first, with arguments its parameters
    accept, unless the last message is a tool's result (then it answers)."""
    tools = client_tools(body)
    if not tools or body["messages"][-1]["role"] == "tool":
        return []
    tool = tools[0]
    return [{"function": {"name": tool["name"],
                          "arguments": instance_of(tool.get("parameters") or {})}}]


def instance_of(schema: dict[str, Any]) -> Any:
    """A value the JSON schema accepts (objects, arrays, strings, numbers, booleans, enums)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: instance_of(part) for name, part in properties.items()} or {"ok": True}
    if kind == "array":
        return [instance_of(schema.get("items", {"type": "string"}))]
    return {"string": "Lisbon", "integer": 3, "number": 2.5, "boolean": True}.get(kind)


class _Handler(BaseHTTPRequestHandler):
    delay = 0.03

    def do_GET(self) -> None:
        if self.path == "/api/tags":
            self._send({"models": [{"name": name, "model": name, "size": 1, "digest": "x",
                                    "modified_at": "2025-10-01T00:00:00Z", "details": {}}
                                   for name in (MODEL, OTHER_MODEL)]})
        else:
            self._send({"error": "not found"}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length))
        time.sleep(SLOW_SECONDS if SLOW in body["messages"][-1]["content"] else self.delay)
        calls = tool_calls_for(body)
        content = "" if calls else answer_for(body)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        self._send({
            "model": body["model"], "created_at": "2025-10-11T14:13:43Z",
            "message": message, "done": True,
            "done_reason": "stop", "prompt_eval_count": len(json.dumps(body)) // 4,
            "eval_count": len(content) // 4,
        })

    def _send(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client was killed mid-request: what these tests do on purpose

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def fake_ollama(delay: float = 0.03) -> Iterator[str]:
    """Serve in a thread; yields the base URL."""
    handler = type("Handler", (_Handler,), {"delay": delay})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
