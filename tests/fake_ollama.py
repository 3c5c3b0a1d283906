"""A stand-in Ollama server on loopback, speaking the real `/api/chat`, `/api/show` and
`/api/tags` wire format, for tests that run `mnemoloop serve` as a separate process.

It reads a request as Ollama does: within `options.num_ctx` tokens (4,096 when none is sent),
counted with a real tokenizer (SmolLM2's) over the chat template's rendering. A request that
does not fit is cut without an error: the oldest turns go (the system messages and the last
message stay), then, when the rest still does not fit, everything after the first few tokens
up to what fits at the end. It answers from what it read, and reports the tokens it read as
`prompt_eval_count`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.ollama_wire import show_body

MODEL = "fake:1b"
# A second model the stand-in has pulled, for clients that name one.
OTHER_MODEL = "fake-large:7b"
# Questions the stand-in answers from what it was sent, so a test can see its prompt.
SHOW_PROMPT = "What were you told?"
WHICH_MODEL = "Which model are you?"
# A question whose answer takes this long (a reply still being written).
SLOW = "[slow]"
SLOW_SECONDS = 2.0
# Ollama's window when a request sends no `num_ctx`, and the tokens its runner keeps at the
# start of a prompt it cuts.
DEFAULT_NUM_CTX = 4096
NUM_KEEP = 4


def answer_for(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if prompt.startswith("You are a memory creation assistant."):
        return json.dumps({"sentences": _memory_sentences(prompt), "updates": []})
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


def _memory_sentences(prompt: str) -> list[dict[str, str]]:
    """The model writer's answer: a sentence for what the prompt tells, with the words it
    rests on (each friend it names, up to four; else what a tool booked; else the locker
    code)."""
    friends = list(dict.fromkeys(re.findall(r"My friend (\w+) lives in (\w+)", prompt)))
    booked = re.findall(r"Tool (\w+) returned: .*?([A-Z]{3}-\d{4})", prompt)
    if booked:
        # What the app's tool did, with the reference it returned.
        tool, reference = booked[-1]
        return [{"text": f"The app's {tool} tool booked it for the user, reference {reference}.",
                 "quote": reference}]
    if friends:
        return [{"text": f"The user's friend {name} lives in {city}.",
                 "quote": f"My friend {name} lives in {city}"} for name, city in friends[-4:]]
    code = re.findall(r"locker code is (\d+)", prompt)
    return [{"text": f"The user's locker code is {code[-1] if code else 0}.",
             "quote": f"locker code is {code[-1]}" if code else "User:"}]


@functools.cache
def _tokenizer() -> Any:
    from llama_cpp import Llama

    from loop.llm.local import bundled_model_path

    return Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)


_TOKENIZER_LOCK = threading.Lock()


def _tokens(text: str) -> list[int]:
    with _TOKENIZER_LOCK:
        return list(_tokenizer().tokenize(text.encode(), add_bos=False, special=True))


def _text(tokens: list[int]) -> str:
    with _TOKENIZER_LOCK:
        return bytes(_tokenizer().detokenize(tokens, special=True)).decode(errors="ignore")


def _rendered(messages: list[dict[str, Any]], tools: list[Any]) -> str:
    """The chat template's rendering (ChatML), tools described in the system turn."""
    text = ""
    if tools:
        text += f"<|im_start|>system\nTools: {json.dumps(tools)}<|im_end|>\n"
    for message in messages:
        text += f"<|im_start|>{message['role']}\n{message.get('content') or ''}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>\n|$)", re.S)


def read_as_ollama(
    body: dict[str, Any], holds: int | None = None
) -> tuple[list[dict[str, Any]], int, bool]:
    """The messages Ollama reads of a request, the tokens they take, and whether it cut;
    within `holds` tokens whatever the request asks, when given (a server that holds less
    than it is told)."""
    window = (body.get("options") or {}).get("num_ctx") or DEFAULT_NUM_CTX
    window = min(window, holds or window)
    messages = list(body["messages"])
    tools = body.get("tools") or []

    def size(kept: list[dict[str, Any]]) -> int:
        return len(_tokens(_rendered(kept, tools)))

    cut = False
    # The oldest turns go first; the system messages and the last message stay.
    while size(messages) > window:
        oldest = next((i for i, m in enumerate(messages[:-1]) if m["role"] != "system"), None)
        if oldest is None:
            break
        del messages[oldest]
        cut = True
    tokens = _tokens(_rendered(messages, tools))
    if len(tokens) <= window:
        return messages, len(tokens), cut
    # The runner keeps the first few tokens and the end that fits.
    kept = tokens[:NUM_KEEP] + tokens[len(tokens) - (window - NUM_KEEP):]
    text = _text(kept)
    head, _, rest = text.partition("<|im_start|>")
    read = [{"role": role, "content": content} for role, content in _TURN.findall(
        "<|im_start|>" + rest)] if rest else []
    if head and read:
        read[0]["content"] = head + read[0]["content"]
    return read or [{"role": "user", "content": text}], len(kept), True


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


@dataclass
class StandIn:
    """A running stand-in: its URL, and what it read of the requests it was sent."""

    url: str
    # Per `/api/chat` request: the tokens it read, and whether it cut the request.
    reads: list[tuple[int, bool]] = field(default_factory=list)

    @property
    def cut(self) -> int:
        return sum(1 for _, cut in self.reads if cut)


class _Handler(BaseHTTPRequestHandler):
    delay = 0.03
    # What the models hold (their `<arch>.context_length` in `/api/show`).
    context_length = 131072
    # At most what it reads, whatever a request asks (None: as asked).
    holds: int | None = None
    stand_in: StandIn

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
        if self.path == "/api/show":
            if body.get("model") in (MODEL, OTHER_MODEL):
                self._send(show_body(self.context_length))
            else:
                self._send({"error": f"model '{body.get('model')}' not found"}, 404)
            return
        if self.path != "/api/chat":
            self._send({"error": "not found"}, 404)
            return
        time.sleep(SLOW_SECONDS if SLOW in body["messages"][-1]["content"] else self.delay)
        messages, read, cut = read_as_ollama(body, self.holds)
        self.stand_in.reads.append((read, cut))
        body = {**body, "messages": messages}
        calls = tool_calls_for(body)
        content = "" if calls else answer_for(body)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        self._send({
            "model": body["model"], "created_at": "2025-10-11T14:13:43Z",
            "message": message, "done": True,
            "done_reason": "stop", "prompt_eval_count": read,
            "eval_count": len(_tokens(content)),
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
def ollama_stand_in(
    delay: float = 0.03, *, context_length: int = 131072, holds: int | None = None
) -> Iterator[StandIn]:
    """Serve in a thread, its models saying they hold `context_length` tokens (and reading at
    most `holds`, when given, whatever a request asks)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    stand_in = StandIn(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = type("Handler", (_Handler,), {
        "delay": delay, "context_length": context_length, "holds": holds,
        "stand_in": stand_in,
    })
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def fake_ollama(delay: float = 0.03) -> Iterator[str]:
    """Serve in a thread; yields the base URL."""
    with ollama_stand_in(delay) as stand_in:
        yield stand_in.url
