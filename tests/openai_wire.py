"""An OpenAI-compatible server's own answers, as vLLM, llama-server and the hosted API write
them, for tests that drive the real `openai` client over respx."""

from __future__ import annotations

import json
from typing import Any

import httpx


def completion_body(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, int] | None = None,
    model: str = "qwen2.5-7b-instruct",
) -> dict[str, Any]:
    """A `/chat/completions` answer (not streamed)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-9d2c1f",
        "object": "chat.completion",
        "created": 1760191234,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason}],
        "usage": usage if usage is not None
        else {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
    }


def tool_call(name: str, arguments: str, call_id: str = "call_7Fq2") -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def chunk(delta: dict[str, Any], finish_reason: str | None = None,
          usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9d2c1f", "object": "chat.completion.chunk", "created": 1760191234,
        "model": "qwen2.5-7b-instruct",
        "choices": [{"index": 0, "delta": delta, "logprobs": None,
                     "finish_reason": finish_reason}] if delta or finish_reason else [],
        "usage": usage,
    }


def stream_response(chunks: list[dict[str, Any]], *, done: bool = True) -> httpx.Response:
    """Server-sent events as the API streams them, ended by `data: [DONE]` unless `done` is
    False (a stream the server dropped)."""
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    if done:
        text += "data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=text)


def models_body(*names: str, **extra: Any) -> dict[str, Any]:
    """`GET /models`; `extra` adds fields to each model (vLLM's `max_model_len`)."""
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": 1760000000, "owned_by": "vllm", **extra}
        for name in names
    ]}


def error_body(message: str, kind: str = "invalid_request_error",
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
