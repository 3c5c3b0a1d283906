"""Conversations and their messages, as apps see them. Ending one queues its memory job in
the same transaction. The central loop's claims on answers are in
`loop.conversations.answer_claims`.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from loop.conversations.client_tools import ClientTools, calls_from_json
from loop.conversations.records import (
    Conversation,
    ConversationSummary,
    Message,
    ReplyStatus,
    app_facing_state,
)
from loop.conversations.reply_feed import ReplyFeed
from loop.conversations.statements import end_within, insert_message
from loop.errors import AppNotFound, AppNotInstalled, ConversationEnded, ConversationNotFound
from loop.jobs.store import ClaimedJob, MemoryJob
from loop.llm.local import BUNDLED_MODEL
from loop.storage import Engine
from loop.wakeups import MESSAGES_CHANNEL, Wakeup
from memory_agent import (
    ChatMessage,
    Clock,
    JsonSchema,
    Redacted,
    Role,
    Row,
    SqlSession,
    SqlTransaction,
    format_timestamp,
    now_text,
    redact,
    redact_json,
)

# The roles of messages the model answers: the user's, and a tool's result a client sends back.
ASKING_ROLES = ("user", "tool")
# The conversation in order: each reply right after the newest message its answer saw (a
# question posted while the answer to an earlier one was written comes after that answer).
_TOOL_COLUMNS = "tool_calls, tool_call_id, tool_name"
_IN_ORDER = (
    " ORDER BY COALESCE(in_reply_to, id), CASE WHEN role = 'assistant' THEN 1 ELSE 0 END, id"
)


class ConversationStore:
    def __init__(self, database: Engine, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        # Set here for this instance's own waiters, and by notifications from the others.
        self.message_posted = Wakeup()
        self.job_queued = Wakeup()
        # This instance's answers as they are written, for callers waiting for a reply.
        self.replies = ReplyFeed()

    async def open(self, app_id: str, *, user_id: str = "") -> str:
        """A new conversation of the app, of one of its users (`user_id`) or none ("")."""
        async with self._db.transaction() as tx:
            return await self.open_within(tx, app_id, user_id)

    async def record_finished(
        self, app_id: str, turns: Sequence[tuple[Role, str]], *, reason: str, user_id: str = ""
    ) -> MemoryJob:
        """A conversation held elsewhere (an agent's, through MCP), stored as ended with its
        memory job queued, in one transaction: nothing answers it, and the job runs as any
        other. Returns the job."""
        async with self._db.transaction() as tx:
            conversation_id = await self.open_within(tx, app_id, user_id)
            now = now_text(self._clock)
            for role, content in turns:
                await insert_message(tx, conversation_id, role, content, now)
            await end_within(tx, conversation_id, reason, now)
            row = await tx.fetch_one(
                "SELECT * FROM memory_jobs WHERE conversation_id = ?", (conversation_id,)
            )
        self.job_queued.set()
        return MemoryJob.from_row(row)

    async def open_within(
        self,
        tx: SqlTransaction,
        app_id: str,
        user_id: str,
        *,
        client_thread: str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        answer_schema: JsonSchema | None = None,
        tools: ClientTools | None = None,
    ) -> str:
        """Inside `tx`: a new open conversation; a dialect client's has its thread, system
        prompt, model, answer schema and tools (loop/conversations/client_threads.py)."""
        await self.require_installed(tx, app_id)
        conversation_id = uuid.uuid4().hex
        now = now_text(self._clock)
        await tx.execute(
            "INSERT INTO conversations (conversation_id, app_id, status, created_at,"
            " last_activity_at, user_id, client_thread, system_prompt, model, answer_schema,"
            " tools) VALUES (?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, app_id, now, now, user_id, client_thread, system_prompt, model,
             json.dumps(answer_schema) if answer_schema is not None else None,
             tools.to_json() if tools else None),
        )
        return conversation_id

    async def add_message(self, conversation_id: str, role: Role, content: str) -> int:
        """Add a message to an open conversation; returns its id."""
        async with self._db.transaction() as tx:
            await self._require_open(tx, conversation_id)
            message_id = await self.add_message_within(tx, conversation_id, role, content)
        if role in ASKING_ROLES:
            self.message_posted.set()
        return message_id

    async def add_message_within(
        self, tx: SqlTransaction, conversation_id: str, role: Role, content: str,
        tool_turn: ChatMessage | None = None,
    ) -> int:
        """Inside `tx`, on a conversation known to be open: the message, and the
        conversation's activity. The caller sets `message_posted` once `tx` has committed.
        A user message, or a tool's result, waits for an answer."""
        now = now_text(self._clock)
        message_id = await insert_message(
            tx, conversation_id, role, content, now, tool_turn=tool_turn
        )
        asks = role in ASKING_ROLES
        # A new user message is a new question: a failed answer is tried afresh.
        # (An answer being written stays claimed; this message, newer than what that
        # answer saw, waits for the next one: see `answered_up_to`.)
        reset = (
            ", answer_state = NULLIF(answer_state, 'failed'), answer_error = NULL,"
            " answer_attempts = 0"
        )
        await tx.execute(
            "UPDATE conversations SET last_activity_at = ?"
            f"{reset if asks else ''} WHERE conversation_id = ?",
            (now, conversation_id),
        )
        if asks:
            await tx.notify(MESSAGES_CHANNEL)
        return message_id

    async def end(
        self, conversation_id: str, reason: str, *, idle_since: str | None = None
    ) -> bool:
        """End the conversation and queue its memory job, atomically.

        Returns False (and queues nothing) when it had already ended, or, with `idle_since`
        (a timestamp), when it has had activity since then (a message posted meanwhile).
        """
        async with self._db.transaction() as tx:
            ended = await end_within(
                tx, conversation_id, reason, now_text(self._clock), idle_since=idle_since
            )
        if ended:
            self.job_queued.set()
        return ended

    async def get(self, conversation_id: str) -> Conversation:
        row = await self._db.fetch_one(
            "SELECT * FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        messages = await self._db.fetch_all(
            "SELECT id, role, content, created_at, prompt_tokens, completion_tokens,"
            f" {_TOOL_COLUMNS} FROM messages WHERE conversation_id = ?" + _IN_ORDER,
            (conversation_id,),
        )
        return Conversation(
            row["conversation_id"],
            row["app_id"],
            row["status"],
            row["end_reason"],
            row["created_at"],
            row["ended_at"],
            [Message.from_row(m) for m in messages],
            row["answer_state"],
            row["answer_error"],
            row["system_prompt"],
            row["model"],
            row["user_id"],
            json.loads(row["answer_schema"]) if row["answer_schema"] else None,
            ClientTools.from_json(row["tools"]),
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

    async def is_open(self, conversation_id: str) -> bool:
        row = await self._db.fetch_one(
            "SELECT status FROM conversations WHERE conversation_id = ?", (conversation_id,)
        )
        return row is not None and row["status"] == "open"

    async def redact_messages(self, conversation_id: str) -> int:
        """Replace the secrets in the conversation's messages by their markers (once its
        memory job has read them), and clean the database files of the originals; returns
        how many texts changed. Read first: a conversation without secrets (most) costs no
        write transaction. It has ended, so nothing changes its texts meanwhile."""
        # A drop-in client's own system prompt is the conversation's too, and the arguments
        # of its tool calls (as their JSON text, each string of it redacted).
        rows = await self._db.fetch_all(
            "SELECT id, content, tool_calls FROM messages WHERE conversation_id = ?",
            (conversation_id,),
        )
        texts = [
            ("UPDATE messages SET content = ? WHERE id = ?", row["id"], row["content"], redact)
            for row in rows
        ] + [
            ("UPDATE messages SET tool_calls = ? WHERE id = ?", row["id"], row["tool_calls"],
             _redacted_calls)
            for row in rows
            if row["tool_calls"]
        ] + [
            ("UPDATE conversations SET system_prompt = ? WHERE conversation_id = ?",
             conversation_id, row["system_prompt"], redact)
            for row in await self._db.fetch_all(
                "SELECT system_prompt FROM conversations WHERE conversation_id = ?"
                " AND system_prompt IS NOT NULL",
                (conversation_id,),
            )
        ]
        changes = [
            (update, redacted.text, key)
            for update, key, text, redacted_by in texts
            if (redacted := redacted_by(text)).changed
        ]
        if not changes:
            return 0
        async with self._db.transaction() as tx:
            for update, text, key in changes:
                await tx.execute(update, (text, key))
        await self._db.checkpoint()
        return len(changes)

    async def revisions(self, conversation_id: str, current: int) -> tuple[int, int | None]:
        """The memory revision the conversation was first answered at (`current`, on its
        first answer), and the newest its user's other conversations in the app were at, up
        to it (None: it is their first): what the delta header spans."""
        row = await self._revision_of(conversation_id)
        if row["memory_revision"] is None:
            # Its first answer: written once (the first writer wins), later answers only read.
            await self._db.execute(
                "UPDATE conversations SET memory_revision = ?"
                " WHERE conversation_id = ? AND memory_revision IS NULL",
                (current, conversation_id),
            )
            row = await self._revision_of(conversation_id)
        seen = int(row["memory_revision"])
        before = await self._db.fetch_one(
            "SELECT MAX(memory_revision) FROM conversations WHERE app_id = ?"
            " AND user_id = ? AND conversation_id <> ? AND memory_revision <= ?",
            (row["app_id"], row["user_id"], conversation_id, seen),
        )
        previous = before[0] if before else None
        return seen, int(previous) if previous is not None else None

    async def _revision_of(self, conversation_id: str) -> Row:
        row = await self._db.fetch_one(
            "SELECT app_id, user_id, memory_revision FROM conversations"
            " WHERE conversation_id = ?",
            (conversation_id,),
        )
        if row is None:
            raise ConversationNotFound(conversation_id)
        return row

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
            app = await tx.fetch_one(
                "SELECT users_write_shared, memory_ttl_seconds, shares_profile FROM apps"
                " WHERE app_id = ?",
                (job.app_id,),
            )
            return ClaimedJob(
                job,
                await _chat_messages(tx, job.conversation_id, carried=False),
                also_shared=bool(job.user_id and app and app[0]),
                memory_ttl_seconds=app[1] if app else None,
                to_profile=bool(job.user_id and app and app[2]),
            )

        return await self._db.run_transaction(claim_and_read)

    def idle_cutoff(self, idle_for: timedelta) -> str:
        """The timestamp before which a conversation's last activity makes it idle."""
        return format_timestamp(self._clock.now() - idle_for)

    async def idle_since(self, cutoff: str) -> list[str]:
        """Open conversations with no activity since `cutoff`, but for those waiting for an
        answer: one being written, and one whose question waits for an answer slot (a slow
        model makes them queue), are not idle. One whose answer failed for good is."""
        rows = await self._db.fetch_all(
            "SELECT c.conversation_id FROM conversations c WHERE c.status = 'open'"
            " AND c.last_activity_at < ? AND (c.answer_state = 'failed' OR ("
            "  (c.answer_state IS NULL OR c.answer_lease_until < ?)"
            "  AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.conversation_id"
            "   AND m.id > c.answered_up_to AND m.role IN ('user', 'tool'))"
            " )) ORDER BY c.last_activity_at",
            (cutoff, now_text(self._clock)),
        )
        return [row[0] for row in rows]

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
            "SELECT id, role, content, created_at, prompt_tokens, completion_tokens,"
            f" {_TOOL_COLUMNS} FROM messages WHERE conversation_id = ?"
            # A reply that saw the message was stored after it: only later ids are looked at.
            " AND id > ? AND role = 'assistant' AND in_reply_to >= ? ORDER BY id LIMIT 1",
            (conversation_id, message_id, message_id),
        )
        return ReplyStatus(
            app_facing_state(row["status"], row["answer_state"]),
            row["answer_error"],
            Message.from_row(reply)
            if reply
            else None,
        )

    async def retry_answer(self, conversation_id: str) -> None:
        """The app asks for another try at a failed answer."""
        await self.get(conversation_id)  # raises ConversationNotFound
        async with self._db.transaction() as tx:
            await self.retry_within(tx, conversation_id)
        self.message_posted.set()

    async def retry_within(self, tx: SqlTransaction, conversation_id: str) -> None:
        """Inside `tx`: a failed answer is tried again. The caller sets `message_posted`
        once `tx` has committed."""
        await tx.execute(
            "UPDATE conversations SET answer_state = NULL, answer_error = NULL,"
            " answer_attempts = 0 WHERE conversation_id = ? AND answer_state = 'failed'",
            (conversation_id,),
        )
        await tx.notify(MESSAGES_CHANNEL)

    async def require_installed(self, tx: SqlTransaction, app_id: str) -> None:
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


def _redacted_calls(text: str) -> Redacted:
    """Tool calls' JSON text with its secrets replaced string by string, so that it stays
    JSON."""
    calls = json.loads(text)
    redacted = redact_json(calls)
    return Redacted(json.dumps(redacted), Counter(secret=1) if redacted != calls else Counter())


async def _chat_messages(
    session: SqlSession, conversation_id: str, *, carried: bool = True
) -> list[ChatMessage]:
    """The conversation's messages; without the turns carried from a client's history when
    `carried` is False (what its memory job reads)."""
    rows = await session.fetch_all(
        f"SELECT role, content, written_by, {_TOOL_COLUMNS} FROM messages"
        " WHERE conversation_id = ?"
        + ("" if carried else " AND carried = 0")
        + _IN_ORDER,
        (conversation_id,),
    )
    return [
        ChatMessage(
            row["role"], row["content"], from_bundled_model=row["written_by"] == BUNDLED_MODEL,
            tool_calls=calls_from_json(row["tool_calls"]), tool_call_id=row["tool_call_id"],
            tool_name=row["tool_name"],
        )
        for row in rows
    ]
