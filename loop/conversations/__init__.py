"""Conversations: their store, the central loop that answers them, answer claims, replies as
they are written, and the drop-in clients' threads and tools."""
from loop.conversations.central import (
    Answer,
)
from loop.conversations.client_threads import (
    ClientRequest,
    thread_key,
)
from loop.conversations.client_tools import (
    AUTO,
    NONE,
    REQUIRED,
    ClientTools,
)
from loop.conversations.records import Message, ReplyStatus
from loop.conversations.replies import (
    Question,
    Retrying,
    ask,
)
from loop.conversations.store import ASKING_ROLES

__all__ = [
    "ASKING_ROLES",
    "AUTO",
    "NONE",
    "REQUIRED",
    "Answer",
    "ClientRequest",
    "ClientTools",
    "Message",
    "Question",
    "ReplyStatus",
    "Retrying",
    "ask",
    "thread_key",
]
