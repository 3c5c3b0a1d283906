"""Chat-model backends behind `memory_agent.ChatModel`: Ollama, any OpenAI-compatible server,
the embedded llama.cpp model, the choice between them (`MNEMOLOOP_LLM`), and the window each
model's requests keep to."""

from loop.llm.choice import NoModelLoaded, open_chat_model
from loop.llm.local import LocalChatModel, local_backend_available
from loop.llm.windows import ChosenWindow, PromptBudgets, budgets, choose_window

__all__ = [
    "ChosenWindow",
    "LocalChatModel",
    "NoModelLoaded",
    "PromptBudgets",
    "budgets",
    "choose_window",
    "local_backend_available",
    "open_chat_model",
]
