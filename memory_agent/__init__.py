"""The memory sub-agent: writes, compacts, recalls and formats per-app memories.

It imports nothing from `loop` or `admin_api`: it receives its database handle, chat model
and clock in its constructor (see `ports.py` and `chat_model.py`).
"""

from memory_agent.agent import MemorySubAgent
from memory_agent.chat_model import (
    ChatMessage,
    ChatModel,
    ChatReply,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from memory_agent.creation import MemoryCreationRequest
from memory_agent.models import CompactionOutcome, Memory

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatReply",
    "CompactionOutcome",
    "Memory",
    "MemoryCreationRequest",
    "MemorySubAgent",
    "TokenUsage",
    "ToolCall",
    "ToolSpec",
]
