"""Conversations and their messages. Ending one queues its memory job in the same transaction.

An answer is claimed before it is written: the claim names the instance (`owner`) and holds
until `answer_lease_until` unless renewed. The reply is stored only by the claim that still
holds it, so however many instances share the database, each question is answered once; an
instance that dies leaves the question to the others when its lease runs out.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from loop.errors import AppNotFound, AppNotInstalled, ConversationEnded, ConversationNotFound
from loop.jobs import ClaimedJob, MemoryJob
from loop.reply_feed import ReplyFeed
from loop.wakeups import JOBS_CHANNEL, MESSAGES_CHANNEL, Wakeup
from memory_agent import ChatMessage
from memory_agent.chat_model import Role
from memory_agent.ports import (
    Clock,
    Database,
    SqlSession,
    SqlTransaction,
    format_timestamp,
    now_text,
)


def app_facing_state(status: str, answer_state: str | None) -> str:
    """open, answering, failed or ended: what an app sees of a conversation."""
    return "ended" if status == "ended" else answer_state or "open"


@dataclass(frozen=True)
class Message:
    id: int
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
        return app_facing_state(self.status, self.answer_state)

    def chat_messages(self) -> list[ChatMessage]:
        return [ChatMessage(m.role, m.content) for m in self.messages]


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
class StoredAnswer:
    message_id: int | None  # None when the model only ended the conversation
    ended: bool


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


@dataclass(frozen=True)
class Unanswered:
    conversation_id: str
    app_id: str
    answer_attempts: int


# An answer nobody is writing: none claimed, or the claim ran out.
_UNCLAIMED = "(answer_state IS NULL OR (answer_state = 'answering' AND answer_lease_until < ?))"
_RELEASE = "answer_owner = NULL, answer_lease_until = NULL"
# The conversation in order: each reply right after the newest message its answer saw (a
# question posted while the answer to an earlier one was written comes after that answer).
_IN_ORDER = (
    " ORDER BY COALESCE(in_reply_to, id), CASE WHEN role = 'assistant' THEN 1 ELSE 0 END, id"
)


class ConversationStore:
    def __init__(
        self, database: Database, clock: Clock, *, owner: str = "", lease_seconds: float = 30.0
    ) -> None:
        self._db = database
        self._clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        # Set here for this instance's own waiters, and by notifications from the others.
        self.message_posted = Wakeup()
        self.job_queued = Wakeup()
        # This instance's answers as they are written, for callers waiting for a reply.
        self.replies = ReplyFeed()

    async def open(self, app_id: str) -> str:
        async with self._db.transaction() as tx:
            return await self._open(tx, app_id)

    async def record_finished(
        self, app_id: str, turns: Sequence[tuple[Role, str]], *, reason: str
    ) -> MemoryJob:
        """A conversation held elsewhere (an agent's, through MCP), stored as ended with its
        memory job queued, in one transaction: nothing answers it, and the job runs as any
        other. Returns the job."""
        async with self._db.transaction() as tx:
            conversation_id = await self._open(tx, app_id)
            now = now_text(self._clock)
            for role, content in turns:
                await self._insert_message(tx, conversation_id, role, content, now)
            await self._end(tx, conversation_id, reason)
            row = await tx.fetch_one(
                "SELECT * FROM memory_jobs WHERE conversation_id = ?", (conversation_id,)
            )
        self.job_queued.set()
        return MemoryJob.from_row(row)

    async def _open(self, tx: SqlTransaction, app_id: str) -> str:
        await self._require_installed(tx, app_id)
        conversation_id = uuid.uuid4().hex
        now = now_text(self._clock)
        await tx.execute(
            "INSERT INTO conversations (conversation_id, app_id, status, created_at,"
            " last_activity_at) VALUES (?, ?, 'open', ?, ?)",
            (conversation_id, app_id, now, now),
        )
        return conversation_id

    async def _insert_message(
        self,
        tx: SqlTransaction,
        conversation_id: str,
        role: Role,
        content: str,
        now: str,
        in_reply_to: int | None = None,
    ) -> int:
        row = await tx.fetch_one(
            "INSERT INTO messages (conversation_id, role, content, created_at, in_reply_to)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            (conversation_id, role, content, now, in_reply_to),
        )
        assert row is not None
        return int(row[0])

    async def add_message(self, conversation_id: str, role: Role, content: str) -> int:
        """Add a message to an open conversation; returns its id."""
        now = now_text(self._clock)
        async with self._db.transaction() as tx:
            await self._require_open(tx, conversation_id)
            message_id = await self._insert_message(tx, conversation_id, role, content, now)
            # A new user message is a new question: a failed answer is tried afresh.
            # (An answer being written stays claimed; this message, newer than what that
            # answer saw, waits for the next one: see `answered_up_to`.)
            reset = (
                ", answer_state = NULLIF(answer_state, 'failed'), answer_error = NULL,"
                " answer_attempts = 0"
            )
            await tx.execute(
                "UPDATE conversations SET last_activity_at = ?"
                f"{reset if role == 'user' else ''} WHERE conversation_id = ?",
                (now, conversation_id),
            )
            if role == "user":
                await tx.notify(MESSAGES_CHANNEL)
        if role == "user":
            self.message_posted.set()
        return message_id

    async def end(self, conversation_id: str, reason: str) -> bool:
        """End the conversation and queue its memory job, atomically.

        Returns False (and queues nothing) when it had already ended.
        """
        async with self._db.transaction() as tx:
            ended = await self._end(tx, conversation_id, reason)
        if ended:
            self.job_queued.set()
        return ended

    async def _end(self, tx: SqlTransaction, conversation_id: str, reason: str) -> bool:
        now = now_text(self._clock)
        # Locks the row (PostgreSQL): two instances ending it at once queue one job.
        row = await tx.fetch_one(
            "SELECT app_id, status FROM conversations WHERE conversation_id = ?"
            f"{tx.dialect.lock_rows}",
            (conversation_id,),
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        if row["status"] == "ended":
            return False
        await tx.execute(
            "UPDATE conversations SET status = 'ended', end_reason = ?, ended_at = ?,"
            f" last_activity_at = ?, answer_state = NULL, {_RELEASE} WHERE conversation_id = ?",
            (reason, now, now, conversation_id),
        )
        await tx.execute(
            "INSERT INTO memory_jobs (app_id, conversation_id, status, created_at, updated_at)"
            " VALUES (?, ?, 'pending', ?, ?)",
            (row["app_id"], conversation_id, now, now),
        )
        await tx.notify(JOBS_CHANNEL)
        return True

    async def get(self, conversation_id: str) -> Conversation:
        row = await self._db.fetch_one(
            "SELECT * FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        messages = await self._db.fetch_all(
            "SELECT id, role, content, created_at FROM messages WHERE conversation_id = ?"
            + _IN_ORDER,
            (conversation_id,),
        )
        return Conversation(
            row["conversation_id"],
            row["app_id"],
            row["status"],
            row["end_reason"],
            row["created_at"],
            row["ended_at"],
            [Message(m["id"], m["role"], m["content"], m["created_at"]) for m in messages],
            row["answer_state"],
            row["answer_error"],
        )

    async def recent(
        self, app_id: str | None = None, limit: int = 100
    ) -> list[ConversationSummary]:
        """The conversations with the latest activity first, of one app or of all."""
        where, params = ("WHERE c.app_id = ?", (app_id,)) if app_id is not None else ("", ())
        rows = await self._db.fetch_all(
            "SELECT c.conversation_id, c.app_id, c.status, c.answer_state, c.end_reason,"
            " c.created_at, c.last_activity_at,"
            " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.conversation_id)"
            f" FROM conversations c {where}"
            " ORDER BY c.last_activity_at DESC, c.conversation_id LIMIT ?",
            (*params, limit),
        )
        return [
            ConversationSummary(
                r[0], r[1], app_facing_state(r[2], r[3]), r[4], r[5], r[6], int(r[7])
            )
            for r in rows
        ]

    async def chat_messages(self, conversation_id: str) -> list[ChatMessage]:
        """The conversation's messages, for the model."""
        return await _chat_messages(self._db, conversation_id)

    async def claim_job(
        self, claim: Callable[[SqlTransaction], Awaitable[MemoryJob | None]]
    ) -> ClaimedJob | None:
        """The job `claim` takes (inside a transaction) with its conversation's messages, read
        in the same transaction: the memory worker's one trip to the database before the
        model."""

        async def claim_and_read(tx: SqlTransaction) -> ClaimedJob | None:
            job = await claim(tx)
            if job is None:
                return None
            return ClaimedJob(job, await _chat_messages(tx, job.conversation_id))

        return await self._db.run_transaction(claim_and_read)

    async def unanswered(self, limit: int = 100, per_app: int = 20) -> list[Unanswered]:
        """Open conversations with a user message newer than what their last answer saw,
        whose answer has not failed for good, oldest activity first: at most `per_app` of
        each app, so one app's flood cannot hide every other app's conversations."""
        rows = await self._db.fetch_all(
            "SELECT conversation_id, app_id, answer_attempts FROM ("
            " SELECT c.conversation_id, c.app_id, c.answer_attempts, c.last_activity_at,"
            "  ROW_NUMBER() OVER (PARTITION BY c.app_id ORDER BY c.last_activity_at) AS turn"
            " FROM conversations c"
            f" WHERE c.status = 'open' AND {_UNCLAIMED} AND"
            # Only the messages after the last answer's are looked at (the index's range).
            " EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.conversation_id"
            "  AND m.id > c.answered_up_to AND m.role = 'user')"
            ") AS waiting WHERE turn <= ? ORDER BY last_activity_at LIMIT ?",
            (now_text(self._clock), per_app, limit),
        )
        return [Unanswered(row[0], row[1], row[2]) for row in rows]

    async def idle_since(self, idle_for: timedelta) -> list[str]:
        """Open conversations with no activity for `idle_for`, but for those whose answer is
        being written: a conversation waiting for its answer is not idle."""
        cutoff = format_timestamp(self._clock.now() - idle_for)
        rows = await self._db.fetch_all(
            "SELECT conversation_id FROM conversations WHERE status = 'open'"
            " AND last_activity_at < ? AND (answer_state IS NULL OR answer_state = 'failed'"
            " OR answer_lease_until < ?) ORDER BY last_activity_at",
            (cutoff, now_text(self._clock)),
        )
        return [row[0] for row in rows]

    # -- answering ----------------------------------------------------------------------------

    async def claim_answer(self, conversation_id: str) -> bool:
        """Claim the answer for this instance (one more try), if nobody is writing it."""
        claimed = await self._db.execute(
            "UPDATE conversations SET answer_state = 'answering',"
            " answer_attempts = answer_attempts + 1, answer_owner = ?, answer_lease_until = ?"
            f" WHERE conversation_id = ? AND status = 'open' AND {_UNCLAIMED}",
            (self.owner, self._lease_end(), conversation_id, now_text(self._clock)),
        )
        return claimed == 1

    async def renew_answer(self, conversation_id: str) -> bool:
        """Extend the claim; False when this instance no longer holds it."""
        renewed = await self._db.execute(
            "UPDATE conversations SET answer_lease_until = ? WHERE conversation_id = ?"
            " AND answer_state = 'answering' AND answer_owner = ?",
            (self._lease_end(), conversation_id, self.owner),
        )
        return renewed == 1

    async def store_answer(
        self,
        conversation_id: str,
        text: str | None,
        end_reason: str | None,
        *,
        answers_up_to: int,
    ) -> StoredAnswer | None:
        """Store the reply (if any) to the messages up to `answers_up_to` and end the
        conversation (if `end_reason`), in one transaction, if this instance still holds the
        claim. None: it does not (the lease ran out and another instance took the question
        over), and nothing was stored."""
        now = now_text(self._clock)
        message_id = None
        async with self._db.transaction() as tx:
            released = await tx.execute(
                f"UPDATE conversations SET answer_state = NULL, answer_error = NULL, {_RELEASE},"
                f" last_activity_at = ?, answered_up_to = {tx.dialect.greatest}(answered_up_to, ?)"
                " WHERE conversation_id = ? AND status = 'open'"
                " AND answer_state = 'answering' AND answer_owner = ?",
                (now, answers_up_to, conversation_id, self.owner),
            )
            if released != 1:
                return None
            if text is not None:
                message_id = await self._insert_message(
                    tx, conversation_id, "assistant", text, now, in_reply_to=answers_up_to
                )
            ended = end_reason is not None and await self._end(tx, conversation_id, end_reason)
        if ended:
            self.job_queued.set()
        return StoredAnswer(message_id, ended)

    async def reply_status(self, conversation_id: str, message_id: int) -> ReplyStatus:
        """Where the answer to message `message_id` stands: the first reply whose answer saw
        it, or the conversation's state."""
        row = await self._db.fetch_one(
            "SELECT status, answer_state, answer_error FROM conversations"
            " WHERE conversation_id = ?",
            (conversation_id,),
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        reply = await self._db.fetch_one(
            "SELECT id, role, content, created_at FROM messages WHERE conversation_id = ?"
            # A reply that saw the message was stored after it: only later ids are looked at.
            " AND id > ? AND role = 'assistant' AND in_reply_to >= ? ORDER BY id LIMIT 1",
            (conversation_id, message_id, message_id),
        )
        return ReplyStatus(
            app_facing_state(row["status"], row["answer_state"]),
            row["answer_error"],
            Message(reply["id"], reply["role"], reply["content"], reply["created_at"])
            if reply
            else None,
        )

    async def release_answer(
        self, conversation_id: str, *, failed: bool, error: str | None
    ) -> None:
        """Give the claim back after a failed try: `failed` for good (with the error), or
        waiting for another try."""
        await self._db.execute(
            f"UPDATE conversations SET answer_state = ?, answer_error = ?, {_RELEASE}"
            " WHERE conversation_id = ? AND answer_state = 'answering' AND answer_owner = ?",
            ("failed" if failed else None, error, conversation_id, self.owner),
        )

    async def recover_answering(self) -> int:
        """At the start of the only instance on a database (SQLite): answers it left
        `answering` are waiting again at once, not after their lease."""
        return await self._db.execute(
            f"UPDATE conversations SET answer_state = NULL, {_RELEASE}"
            " WHERE answer_state = 'answering'"
        )

    async def retry_answer(self, conversation_id: str) -> None:
        """The app asks for another try at a failed answer."""
        await self.get(conversation_id)  # raises ConversationNotFound
        async with self._db.transaction() as tx:
            await tx.execute(
                "UPDATE conversations SET answer_state = NULL, answer_error = NULL,"
                " answer_attempts = 0 WHERE conversation_id = ? AND answer_state = 'failed'",
                (conversation_id,),
            )
            await tx.notify(MESSAGES_CHANNEL)
        self.message_posted.set()

    async def _require_installed(self, tx: SqlTransaction, app_id: str) -> None:
        app = await tx.fetch_one("SELECT installed FROM apps WHERE app_id = ?", (app_id,))
        if app is None:
            raise AppNotFound(app_id)
        if not app["installed"]:
            raise AppNotInstalled(app_id)

    async def _require_open(self, tx: SqlTransaction, conversation_id: str) -> None:
        row = await tx.fetch_one(
            "SELECT status FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        if row["status"] != "open":
            raise ConversationEnded(conversation_id)


    def _lease_end(self) -> str:
        return format_timestamp(self._clock.now() + timedelta(seconds=self.lease_seconds))


async def _chat_messages(session: SqlSession, conversation_id: str) -> list[ChatMessage]:
    rows = await session.fetch_all(
        "SELECT role, content FROM messages WHERE conversation_id = ?" + _IN_ORDER,
        (conversation_id,),
    )
    return [ChatMessage(row["role"], row["content"]) for row in rows]
