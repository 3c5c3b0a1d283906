"""Chat-model backends behind `memory_agent.ChatModel`: Ollama, the embedded llama.cpp model,
and the choice between them (`MNEMOLOOP_LLM`)."""

from loop.llm.choice import NoModelLoaded, open_chat_model
from loop.llm.local import LocalChatModel, local_backend_available

__all__ = ["LocalChatModel", "NoModelLoaded", "local_backend_available", "open_chat_model"]
