"""Conversations of clients that resend the whole history with every request (the OpenAI and
Ollama dialects, `admin_api/dialects/`): which stored conversation a request continues.

A request belongs to a thread of its app: the caller's user and conversation names, both
optional (`thread_key`). A thread may hold several open conversations: many people behind
one app key, a client's batch of unrelated prompts. With R the request's turns (user and
assistant messages and tool results, system ones aside, ending with the new user message or
tool result) and S an open conversation's stored turns, compared by role, text without
surrounding spaces and tool calls (names and arguments; ids aside, which some dialects do
not send), the open conversations are tried, the latest active first:

- R is S, whose last message still waits for its answer (or its answer failed): the same
  question sent again; it is followed, not posted twice (a failed answer is tried again);
- R is S without its last reply: the same question sent again after its reply was lost on
  the way; the stored reply is given again;
- S's answer is being written: R goes elsewhere;
- S is a beginning of R without its last message: the turns between are stored as they came
  (as answered), then the new message.

A request no open conversation leads to opens a conversation of its own, beside the others,
with R's earlier turns stored as answered, then the new message: requests are never refused
for another's sake, and are answered concurrently. Conversations no request continues end
when idle (`MNEMOLOOP_IDLE_END_SECONDS`), and their memory is written then.

All of it happens in one transaction, under a lock on the app's row on PostgreSQL, so
instances sharing a database agree.
Turns stored from a client's history are marked `carried`: the memory job of the conversation
leaves them out, as they were the previous conversation's (whose memory has them) or the
client's own examples.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from loop.conversations.client_tools import ClientTools, calls_from_json
from loop.conversations.statements import insert_message
from loop.conversations.store import ASKING_ROLES, ConversationStore
from memory_agent import ChatMessage, Clock, Database, JsonSchema, Row, SqlTransaction, now_text

END_REASON_CLIENT = "client"


def thread_key(user: str | None, conversation: str | None) -> str:
    """The thread of a caller: one string for the pair (either part may be empty), which no
    other pair gives."""
    return json.dumps([user or "", conversation or ""], ensure_ascii=False)


@dataclass(frozen=True)
class ClientRequest:
    app_id: str
    thread: str
    # User and assistant messages and tool results, oldest first, ending with the new user
    # message or tool result.
    turns: Sequence[ChatMessage]
    system_prompt: str | None = None
    # The backend's name of the model to answer with; None for the configured one.
    model: str | None = None
    # The user whose memory space a new conversation reads and writes ("": the app's shared).
    user_id: str = ""
    # The JSON schema the answer must follow (structured output); None: text.
    answer_schema: JsonSchema | None = None
    # The tools the client offers the model; None: the service's own.
    tools: ClientTools | None = None


@dataclass(frozen=True)
class Posted:
    """Where a request's user message went: its conversation and message id, and whether the
    conversation was opened for it."""

    conversation_id: str
    message_id: int
    opened: bool
    # The question was asked before (a reply being written, or stored, is followed).
    asked_before: bool = False


Key = tuple[str, str, str]


def _key(message: ChatMessage | Row) -> Key:
    role: str
    if isinstance(message, ChatMessage):
        role, content, calls = message.role, message.content, message.tool_calls
    else:
        role, content = str(message["role"]), str(message["content"])
        calls = calls_from_json(message["tool_calls"])
    called = json.dumps([[c.name, c.arguments] for c in calls], sort_keys=True)
    return role, content.strip(), called


class ClientThreads:
    def __init__(self, database: Database, clock: Clock, conversations: ConversationStore) -> None:
        self._db = database
        self._clock = clock
        self._conversations = conversations

    async def post(self, request: ClientRequest) -> Posted:
        if not request.turns or request.turns[-1].role not in ASKING_ROLES:
            raise ValueError("a request's turns end with the user's new message or a tool result")
        posted = await self._db.run_transaction(lambda tx: self._post_within(tx, request))
        self._conversations.message_posted.set()
        return posted

    async def end(self, conversation_id: str) -> bool:
        """The client said the conversation is over: end it and queue its memory job."""
        return await self._conversations.end(conversation_id, END_REASON_CLIENT)

    async def _post_within(self, tx: SqlTransaction, request: ClientRequest) -> Posted:
        # Serialises one app's client requests across instances (PostgreSQL; SQLite's
        # transactions are serial already).
        await tx.fetch_one(
            f"SELECT app_id FROM apps WHERE app_id = ?{tx.dialect.lock_rows_keeping_keys}",
            (request.app_id,),
        )
        wanted = [_key(m) for m in request.turns]
        for current in await self._open_conversations(tx, request):
            posted = await self._continued(tx, current, wanted, request)
            if posted is not None:
                return posted
        # A history no open conversation of the thread leads to: another conversation (another
        # person behind the same key, or a new chat), beside the others, which end when idle.
        conversation_id = await self._conversations.open_within(
            tx, request.app_id, request.user_id, client_thread=request.thread,
            system_prompt=request.system_prompt, model=request.model,
            answer_schema=request.answer_schema, tools=request.tools,
        )
        await self._store_answered(tx, conversation_id, request.turns[:-1], now_text(self._clock))
        message_id = await self._ask(tx, conversation_id, request)
        return Posted(conversation_id, message_id, opened=True)

    async def _open_conversations(
        self, tx: SqlTransaction, request: ClientRequest
    ) -> list[tuple[Row, list[Row]]]:
        """The thread's open conversations, the latest active first, each with its user and
        assistant messages (one query for all of them)."""
        conversations = await tx.fetch_all(
            "SELECT conversation_id, answered_up_to, answer_state FROM conversations"
            " WHERE app_id = ? AND client_thread = ? AND status = 'open'"
            f" ORDER BY last_activity_at DESC{tx.dialect.lock_rows}",
            (request.app_id, request.thread),
        )
        if not conversations:
            return []
        ids = [str(row["conversation_id"]) for row in conversations]
        rows = await tx.fetch_all(
            "SELECT conversation_id, id, role, content, tool_calls FROM messages"
            f" WHERE conversation_id IN ({', '.join('?' for _ in ids)})"
            " AND role IN ('user', 'assistant', 'tool') ORDER BY id",
            ids,
        )
        messages: dict[str, list[Row]] = {conversation_id: [] for conversation_id in ids}
        for row in rows:
            messages[str(row["conversation_id"])].append(row)
        return [(row, messages[str(row["conversation_id"])]) for row in conversations]

    async def _continued(
        self,
        tx: SqlTransaction,
        conversation: tuple[Row, list[Row]],
        wanted: list[Key],
        request: ClientRequest,
    ) -> Posted | None:
        """Where the request goes in this open conversation, if it continues it or asks its
        question again; None when its history leads elsewhere."""
        current, stored = conversation
        conversation_id = str(current["conversation_id"])
        have = [_key(row) for row in stored]
        last_user = max((int(r["id"]) for r in stored if r["role"] in ASKING_ROLES), default=0)
        waiting = last_user > int(current["answered_up_to"])
        failed = current["answer_state"] == "failed"
        if have == wanted and waiting:
            await self._keep_settings(tx, conversation_id, request)
            if failed:
                await self._conversations.retry_within(tx, conversation_id)
            return Posted(conversation_id, last_user, opened=False, asked_before=True)
        if have[:-1] == wanted and have and have[-1][0] == "assistant" and not waiting:
            return Posted(conversation_id, last_user, opened=False, asked_before=True)
        if waiting and not failed:
            # Its answer is being written: another history is another conversation.
            return None
        if have and have == wanted[: len(have)]:
            await self._keep_settings(tx, conversation_id, request)
            now = now_text(self._clock)
            await self._store_answered(
                tx, conversation_id, request.turns[len(have):-1], now, continued=True
            )
            return Posted(
                conversation_id, await self._ask(tx, conversation_id, request), opened=False
            )
        return None

    async def _keep_settings(
        self, tx: SqlTransaction, conversation_id: str, request: ClientRequest
    ) -> None:
        """The client's system prompt, model, answer schema and tools of its latest request
        are the ones used."""
        schema = json.dumps(request.answer_schema) if request.answer_schema is not None else None
        tools = request.tools.to_json() if request.tools else None
        await tx.execute(
            "UPDATE conversations SET system_prompt = ?, model = ?, answer_schema = ?, tools = ?"
            " WHERE conversation_id = ?",
            (request.system_prompt, request.model, schema, tools, conversation_id),
        )

    async def _store_answered(
        self, tx: SqlTransaction, conversation_id: str, turns: Sequence[ChatMessage], now: str,
        *, continued: bool = False,
    ) -> None:
        """Earlier turns the client holds: stored as carried, and taken as answered. Tool
        results that continue a conversation (all but the last of several calls' results)
        are what the app did in it, which its memory job reads: not carried."""
        last = 0
        for turn in turns:
            carried = not (continued and turn.role == "tool")
            last = await insert_message(
                tx, conversation_id, turn.role, turn.content, now, carried=carried,
                tool_turn=turn,
            )
        if last:
            await tx.execute(
                "UPDATE conversations SET answered_up_to = ? WHERE conversation_id = ?",
                (last, conversation_id),
            )

    async def _ask(self, tx: SqlTransaction, conversation_id: str, request: ClientRequest) -> int:
        asked = request.turns[-1]
        return await self._conversations.add_message_within(
            tx, conversation_id, asked.role, asked.content, tool_turn=asked
        )
