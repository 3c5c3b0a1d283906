"""The central loop's claims on answers.

An answer is claimed before it is written: the claim names the instance (`owner`) and holds
until `answer_lease_until` unless renewed. The reply is stored only by the claim that still
holds it, so however many instances share the database, each question is answered once; an
instance that dies leaves the question to the others when its lease runs out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from loop.conversations.statements import RELEASE_ANSWER, end_within, insert_message
from loop.wakeups import Wakeup
from memory_agent import (
    ChatMessage,
    Clock,
    Database,
    TokenUsage,
    ToolCall,
    format_timestamp,
    now_text,
)

# An answer nobody is writing: none claimed, or the claim ran out.
_UNCLAIMED = "(answer_state IS NULL OR (answer_state = 'answering' AND answer_lease_until < ?))"


@dataclass(frozen=True)
class Unanswered:
    conversation_id: str
    app_id: str
    answer_attempts: int


@dataclass(frozen=True)
class StoredAnswer:
    message_id: int | None  # None when the model only ended the conversation
    ended: bool


class AnswerClaims:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        *,
        job_queued: Wakeup,
        owner: str = "",
        lease_seconds: float = 30.0,
    ) -> None:
        self._db = database
        self._clock = clock
        # Set when an answer ends its conversation (the conversation store's own wakeup).
        self._job_queued = job_queued
        self.owner = owner
        self.lease_seconds = lease_seconds

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
            "  AND m.id > c.answered_up_to AND m.role IN ('user', 'tool'))"
            ") AS waiting WHERE turn <= ? ORDER BY last_activity_at LIMIT ?",
            (now_text(self._clock), per_app, limit),
        )
        return [Unanswered(row[0], row[1], row[2]) for row in rows]

    async def claim(self, conversation_id: str) -> bool:
        """Claim the answer for this instance (one more try), if nobody is writing it."""
        claimed = await self._db.execute(
            "UPDATE conversations SET answer_state = 'answering',"
            " answer_attempts = answer_attempts + 1, answer_owner = ?, answer_lease_until = ?"
            f" WHERE conversation_id = ? AND status = 'open' AND {_UNCLAIMED}",
            (self.owner, self._lease_end(), conversation_id, now_text(self._clock)),
        )
        return claimed == 1

    async def renew(self, conversation_id: str) -> bool:
        """Extend the claim; False when this instance no longer holds it."""
        renewed = await self._db.execute(
            "UPDATE conversations SET answer_lease_until = ? WHERE conversation_id = ?"
            " AND answer_state = 'answering' AND answer_owner = ?",
            (self._lease_end(), conversation_id, self.owner),
        )
        return renewed == 1

    async def store(
        self,
        conversation_id: str,
        text: str | None,
        end_reason: str | None,
        *,
        answers_up_to: int,
        usage: TokenUsage | None = None,
        written_by: str | None = None,
        tool_calls: Sequence[ToolCall] = (),
    ) -> StoredAnswer | None:
        """Store the reply (if any) to the messages up to `answers_up_to` and end the
        conversation (if `end_reason`), in one transaction, if this instance still holds the
        claim. None: it does not (the lease ran out and another instance took the question
        over), and nothing was stored."""
        now = now_text(self._clock)
        message_id = None
        async with self._db.transaction() as tx:
            released = await tx.execute(
                f"UPDATE conversations SET answer_state = NULL, answer_error = NULL,"
                f" {RELEASE_ANSWER}, last_activity_at = ?,"
                f" answered_up_to = {tx.dialect.greatest}(answered_up_to, ?)"
                " WHERE conversation_id = ? AND status = 'open'"
                " AND answer_state = 'answering' AND answer_owner = ?",
                (now, answers_up_to, conversation_id, self.owner),
            )
            if released != 1:
                return None
            if text is not None:
                message_id = await insert_message(
                    tx, conversation_id, "assistant", text, now, in_reply_to=answers_up_to,
                    usage=usage, written_by=written_by,
                    tool_turn=ChatMessage("assistant", text, tool_calls=tuple(tool_calls)),
                )
            ended = end_reason is not None and await end_within(
                tx, conversation_id, end_reason, now
            )
        if ended:
            self._job_queued.set()
        return StoredAnswer(message_id, ended)

    async def release(self, conversation_id: str, *, failed: bool, error: str | None) -> None:
        """Give the claim back after a failed try: `failed` for good (with the error), or
        waiting for another try."""
        await self._db.execute(
            f"UPDATE conversations SET answer_state = ?, answer_error = ?, {RELEASE_ANSWER}"
            " WHERE conversation_id = ? AND answer_state = 'answering' AND answer_owner = ?",
            ("failed" if failed else None, error, conversation_id, self.owner),
        )

    async def recover_interrupted(self) -> int:
        """At the start of the only instance on a database (SQLite): answers it left
        `answering` are waiting again at once, not after their lease."""
        return await self._db.execute(
            f"UPDATE conversations SET answer_state = NULL, {RELEASE_ANSWER}"
            " WHERE answer_state = 'answering'"
        )

    def _lease_end(self) -> str:
        return format_timestamp(self._clock.now() + timedelta(seconds=self.lease_seconds))
