"""A conversation and its messages as the store reads them, and where the answer to one
question stands (`ReplyStatus`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from loop.conversations.client_tools import ClientTools, calls_from_json
from memory_agent import ChatMessage, JsonSchema, Role, Row, ToolCall


def app_facing_state(status: str, answer_state: str | None) -> str:
    """open, answering, failed or ended: what an app sees of a conversation."""
    return "ended" if status == "ended" else answer_state or "open"


@dataclass(frozen=True)
class Message:
    id: int
    role: Role
    content: str
    created_at: str
    # On a reply: the tokens its answer took in and wrote, when the model said.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # On a reply: the calls of the client's tools it made; on a `tool` message: the call
    # whose result it is (loop/conversations/client_tools.py).
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> Message:
        return cls(
            row["id"], row["role"], row["content"], row["created_at"],
            row["prompt_tokens"], row["completion_tokens"],
            calls_from_json(row["tool_calls"]), row["tool_call_id"], row["tool_name"],
        )

    def chat_message(self) -> ChatMessage:
        return ChatMessage(
            self.role, self.content, tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id, tool_name=self.tool_name,
        )


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    app_id: str
    status: str
    end_reason: str | None
    created_at: str
    ended_at: str | None
    messages: list[Message] = field(default_factory=list)
    # None, "answering" or "failed"; with the error of the last failed try.
    answer_state: str | None = None
    answer_error: str | None = None
    # A dialect client's own system prompt, and the model it named
    # (loop/conversations/client_threads.py).
    system_prompt: str | None = None
    model: str | None = None
    # The user whose memory space the conversation reads and writes ("": the app's shared).
    user_id: str = ""
    # The JSON schema a dialect client asked its answers to follow (None: text).
    answer_schema: JsonSchema | None = None
    # The tools a dialect client offers the model (None: the service's own).
    tools: ClientTools | None = None

    @property
    def state(self) -> str:
        return app_facing_state(self.status, self.answer_state)

    def chat_messages(self) -> list[ChatMessage]:
        return [m.chat_message() for m in self.messages]


@dataclass(frozen=True)
class ConversationSummary:
    """A conversation as a list shows it: without its messages, with how many there are."""

    conversation_id: str
    app_id: str
    state: str
    end_reason: str | None
    created_at: str
    last_activity_at: str
    message_count: int


@dataclass(frozen=True)
class ReplyStatus:
    """Where the answer to a user message stands: its reply once stored, else the
    conversation's state (open, answering, failed with `error`, or ended without one)."""

    state: str
    error: str | None
    reply: Message | None

    @property
    def settled(self) -> bool:
        """Nothing more will happen without the app: replied, failed for good, or ended."""
        return self.reply is not None or self.state in ("failed", "ended")

    @property
    def ended(self) -> bool:
        return self.state == "ended"


