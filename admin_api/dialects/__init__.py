"""The OpenAI and Ollama dialects: a client of either gains the app's memory by pointing its
base URL and key at mnemoloop (`/v1` and `/api`)."""

from admin_api.dialects.ollama import ollama_router
from admin_api.dialects.openai import openai_router

__all__ = ["ollama_router", "openai_router"]
