"""Conversations and their messages. Ending one queues its memory job in the same transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from loop.errors import AppNotFound, AppNotInstalled, ConversationEnded, ConversationNotFound
from loop.signals import Wakeup
from memory_agent import ChatMessage
from memory_agent.chat_model import Role
from memory_agent.ports import Clock, Database, SqlTransaction, format_timestamp


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    created_at: str


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

    @property
    def state(self) -> str:
        """open, answering, failed or ended: what an app sees."""
        if self.status == "ended":
            return "ended"
        return self.answer_state or "open"

    def chat_messages(self) -> list[ChatMessage]:
        return [ChatMessage(m.role, m.content) for m in self.messages]


@dataclass(frozen=True)
class Unanswered:
    conversation_id: str
    app_id: str
    answer_attempts: int


class ConversationStore:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        self.message_posted = Wakeup()
        self.job_queued = Wakeup()

    async def open(self, app_id: str) -> str:
        conversation_id = uuid.uuid4().hex
        now = self._now()
        async with self._db.transaction() as tx:
            app = await tx.fetch_one("SELECT installed FROM apps WHERE app_id = ?", (app_id,))
            if app is None:
                raise AppNotFound(app_id)
            if not app["installed"]:
                raise AppNotInstalled(app_id)
            await tx.execute(
                "INSERT INTO conversations (conversation_id, app_id, status, created_at,"
                " last_activity_at) VALUES (?, ?, 'open', ?, ?)",
                (conversation_id, app_id, now, now),
            )
        return conversation_id

    async def add_message(self, conversation_id: str, role: Role, content: str) -> None:
        now = self._now()
        async with self._db.transaction() as tx:
            await self._require_open(tx, conversation_id)
            await tx.execute(
                "INSERT INTO messages (conversation_id, role, content, created_at)"
                " VALUES (?, ?, ?, ?)",
                (conversation_id, role, content, now),
            )
            # A new user message is a new question: a failed answer is tried afresh.
            reset = ", answer_state = NULL, answer_error = NULL, answer_attempts = 0"
            await tx.execute(
                "UPDATE conversations SET last_activity_at = ?"
                f"{reset if role == 'user' else ''} WHERE conversation_id = ?",
                (now, conversation_id),
            )
        if role == "user":
            self.message_posted.set()

    async def end(self, conversation_id: str, reason: str) -> bool:
        """End the conversation and queue its memory job, atomically.

        Returns False (and queues nothing) when it had already ended.
        """
        now = self._now()
        async with self._db.transaction() as tx:
            row = await tx.fetch_one(
                "SELECT app_id, status FROM conversations WHERE conversation_id = ?",
                (conversation_id,),
            )
            if row is None:
                raise ConversationNotFound(conversation_id)
            if row["status"] == "ended":
                return False
            await tx.execute(
                "UPDATE conversations SET status = 'ended', end_reason = ?, ended_at = ?,"
                " last_activity_at = ? WHERE conversation_id = ?",
                (reason, now, now, conversation_id),
            )
            await tx.execute(
                "INSERT INTO memory_jobs (app_id, conversation_id, status, created_at, updated_at)"
                " VALUES (?, ?, 'pending', ?, ?)",
                (row["app_id"], conversation_id, now, now),
            )
        self.job_queued.set()
        return True

    async def get(self, conversation_id: str) -> Conversation:
        row = await self._db.fetch_one(
            "SELECT * FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        messages = await self._db.fetch_all(
            "SELECT role, content, created_at FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return Conversation(
            row["conversation_id"],
            row["app_id"],
            row["status"],
            row["end_reason"],
            row["created_at"],
            row["ended_at"],
            [Message(m["role"], m["content"], m["created_at"]) for m in messages],
            row["answer_state"],
            row["answer_error"],
        )

    async def chat_messages(self, conversation_id: str) -> list[ChatMessage]:
        """The conversation's messages, for the model (one query; the memory worker's read)."""
        rows = await self._db.fetch_all(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [ChatMessage(row["role"], row["content"]) for row in rows]

    async def unanswered(self, limit: int = 100, per_app: int = 20) -> list[Unanswered]:
        """Open conversations whose last message is the user's and whose answer has not
        failed for good, oldest activity first: at most `per_app` of each app, so one app's
        flood cannot hide every other app's conversations."""
        rows = await self._db.fetch_all(
            "SELECT conversation_id, app_id, answer_attempts FROM ("
            " SELECT c.conversation_id, c.app_id, c.answer_attempts, c.last_activity_at,"
            "  ROW_NUMBER() OVER (PARTITION BY c.app_id ORDER BY c.last_activity_at) AS turn"
            " FROM conversations c"
            " WHERE c.status = 'open' AND c.answer_state IS NOT 'failed' AND"
            " (SELECT m.role FROM messages m WHERE m.conversation_id = c.conversation_id"
            "  ORDER BY m.id DESC LIMIT 1) = 'user'"
            ") WHERE turn <= ? ORDER BY last_activity_at LIMIT ?",
            (per_app, limit),
        )
        return [Unanswered(row[0], row[1], row[2]) for row in rows]

    async def idle_since(self, idle_for: timedelta) -> list[str]:
        """Open conversations with no activity for `idle_for`, but for those whose answer is
        being written: a conversation waiting for its answer is not idle."""
        cutoff = format_timestamp(self._clock.now() - idle_for)
        rows = await self._db.fetch_all(
            "SELECT conversation_id FROM conversations WHERE status = 'open'"
            " AND last_activity_at < ? AND answer_state IS NOT 'answering'"
            " ORDER BY last_activity_at",
            (cutoff,),
        )
        return [row[0] for row in rows]

    async def set_answer_state(
        self, conversation_id: str, state: str | None, error: str | None = None
    ) -> None:
        """`answering` (one more try), `failed` with the error, or None (answered)."""
        attempts = "answer_attempts + 1" if state == "answering" else "answer_attempts"
        await self._db.execute(
            f"UPDATE conversations SET answer_state = ?, answer_error = ?,"
            f" answer_attempts = {attempts} WHERE conversation_id = ?",
            (state, error, conversation_id),
        )

    async def recover_answering(self) -> int:
        """Answers left `answering` by a stop are waiting again (at start-up)."""
        result = await self._db.execute(
            "UPDATE conversations SET answer_state = NULL WHERE answer_state = 'answering'"
        )
        return result.rowcount

    async def retry_answer(self, conversation_id: str) -> None:
        """The app asks for another try at a failed answer."""
        await self.get(conversation_id)  # raises ConversationNotFound
        await self._db.execute(
            "UPDATE conversations SET answer_state = NULL, answer_error = NULL,"
            " answer_attempts = 0 WHERE conversation_id = ? AND answer_state = 'failed'",
            (conversation_id,),
        )
        self.message_posted.set()

    async def _require_open(self, tx: SqlTransaction, conversation_id: str) -> None:
        row = await tx.fetch_one(
            "SELECT status FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        if row["status"] != "open":
            raise ConversationEnded(conversation_id)

    def _now(self) -> str:
        return format_timestamp(self._clock.now())
