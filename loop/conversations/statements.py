"""Writes made inside a transaction someone else holds: a message added, and a conversation
ended with its memory job queued (the conversation store, the answer claims and the client
threads each commit them with their own changes).
"""

from __future__ import annotations

from loop.conversations.client_tools import calls_to_json
from loop.errors import ConversationNotFound
from loop.wakeups import JOBS_CHANNEL
from memory_agent import ChatMessage, Role, SqlTransaction, TokenUsage

# Clears an answer's claim (ending a conversation drops the claim on its answer).
RELEASE_ANSWER = "answer_owner = NULL, answer_lease_until = NULL"


async def insert_message(
    tx: SqlTransaction,
    conversation_id: str,
    role: Role,
    content: str,
    now: str,
    in_reply_to: int | None = None,
    usage: TokenUsage | None = None,
    carried: bool = False,
    written_by: str | None = None,
    tool_turn: ChatMessage | None = None,
) -> int:
    """`carried`: a turn of a client's history, left out of the memory job (see
    loop/conversations/client_threads.py); `written_by`: the model that wrote a reply (None:
    the app or the client did); `tool_turn`: the turn whose tool calls, or call answered, are
    stored."""
    calls = tool_turn.tool_calls if tool_turn else ()
    row = await tx.fetch_one(
        "INSERT INTO messages (conversation_id, role, content, created_at, in_reply_to,"
        " prompt_tokens, completion_tokens, carried, written_by, tool_calls, tool_call_id,"
        " tool_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (conversation_id, role, content, now, in_reply_to,
         usage.prompt_tokens if usage else None, usage.completion_tokens if usage else None,
         int(carried), written_by, calls_to_json(calls),
         tool_turn.tool_call_id if tool_turn else None,
         tool_turn.tool_name if tool_turn else None),
    )
    assert row is not None
    return int(row[0])


async def end_within(
    tx: SqlTransaction,
    conversation_id: str,
    reason: str,
    now: str,
    *,
    idle_since: str | None = None,
) -> bool:
    """End the conversation inside `tx` and queue its memory job; False when it had
    already ended (or had activity after `idle_since`). The caller sets `job_queued` once
    `tx` has committed."""
    # Locks the row (PostgreSQL): two instances ending it at once queue one job.
    row = await tx.fetch_one(
        "SELECT app_id, status, last_activity_at, user_id FROM conversations"
        " WHERE conversation_id = ?"
        f"{tx.dialect.lock_rows}",
        (conversation_id,),
    )
    if row is None:
        raise ConversationNotFound(conversation_id)
    if row["status"] == "ended":
        return False
    if idle_since is not None and row["last_activity_at"] >= idle_since:
        return False
    await tx.execute(
        "UPDATE conversations SET status = 'ended', end_reason = ?, ended_at = ?,"
        f" last_activity_at = ?, answer_state = NULL, {RELEASE_ANSWER} WHERE conversation_id = ?",
        (reason, now, now, conversation_id),
    )
    await tx.execute(
        "INSERT INTO memory_jobs (app_id, conversation_id, status, created_at, updated_at,"
        " user_id) VALUES (?, ?, 'pending', ?, ?, ?)",
        (row["app_id"], conversation_id, now, now, row["user_id"]),
    )
    await tx.notify(JOBS_CHANNEL)
    return True
