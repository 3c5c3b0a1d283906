"""The memory sub-agent: writes a memory when a conversation ends and keeps each app at its cap."""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from memory_agent import prompts
from memory_agent.chat_model import ChatMessage, ChatModel, ChatReply, JsonSchema
from memory_agent.context import format_memories_for_context
from memory_agent.energy import EnergyMeter
from memory_agent.errors import (
    ChatModelError,
    ChatModelTimeout,
    InvalidCompactionDecision,
    InvalidMemoryText,
    MnemoloopError,
    StorageError,
)
from memory_agent.models import CompactionOutcome, Memory
from memory_agent.ports import Clock, Database, SqlTransaction, SystemClock, format_timestamp
from memory_agent.store import MemoryStore
from memory_agent.validation import (
    COMPACTION_DECISION_SCHEMA,
    CompactionDecision,
    normalise_memory_text,
    parse_compaction_decision,
)

log = logging.getLogger("mnemoloop.memory")
T = TypeVar("T")


@dataclass(frozen=True)
class MemoryCreationRequest:
    app_id: str
    conversation_id: str
    messages: Sequence[ChatMessage]


@dataclass(frozen=True)
class MemoryCreated:
    memory: Memory
    compactions: list[CompactionOutcome]


@dataclass
class AgentStats:
    """Running counts for metrics; never reset."""

    memories_created: int = 0
    creation_failures: int = 0
    compactions: Counter[str] = field(default_factory=Counter)


class MemorySubAgent:
    def __init__(
        self,
        database: Database,
        chat_model: ChatModel,
        *,
        clock: Clock | None = None,
        memory_limit: int = 10,
        max_chars: int = 400,
        llm_timeout: float = 30.0,
        tokens_per_energy_unit: int = 100,
        max_transcript_chars: int = 6000,
    ) -> None:
        self.store = MemoryStore(database)
        self._model = chat_model
        self._clock = clock or SystemClock()
        self._limit = memory_limit
        self._max_chars = max_chars
        self._timeout = llm_timeout
        self._max_transcript_chars = max_transcript_chars
        self._meter = EnergyMeter(tokens_per_energy_unit)
        # One lock per app: compactions of an app never interleave. Weak values let idle
        # apps' locks go.
        self._app_locks: weakref.WeakValueDictionary[str, anyio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self.stats = AgentStats()

    @property
    def memory_limit(self) -> int:
        return self._limit

    # -- creation ---------------------------------------------------------------------------

    async def create_memory(self, request: MemoryCreationRequest) -> MemoryCreated:
        """Write one memory for the conversation and compact the app back to its cap.

        Raises `ChatModelError`, `InvalidMemoryText` or `StorageError` when no memory could be
        written; the error is logged here once.
        """
        try:
            content = await self._write_memory_text(request.messages)
            async with self._app_lock(request.app_id):
                memory = await _retry_once_on_storage_error(
                    lambda: self.store.insert(
                        request.app_id,
                        content,
                        created_at=self._now(),
                        source_conversation_id=request.conversation_id,
                        metadata={"relatedConversations": [request.conversation_id]},
                    )
                )
                self.stats.memories_created += 1
                log.info(
                    "📝 Created memory for app %s from conversation %s",
                    request.app_id,
                    request.conversation_id,
                )
                compactions = await self._compact_locked(request.app_id, memory)
        except MnemoloopError as error:
            self.stats.creation_failures += 1
            log.error("❌ Memory creation failed for %s: %s", request.conversation_id, error)
            raise
        return MemoryCreated(memory, compactions)

    async def _write_memory_text(self, messages: Sequence[ChatMessage]) -> str:
        transcript = prompts.format_transcript(messages)
        if not transcript.strip():
            raise InvalidMemoryText("the conversation has no messages to remember")
        if len(transcript) > self._max_transcript_chars:
            # The end of a conversation holds its outcome; keep that part.
            transcript = "[earlier messages omitted]\n" + transcript[-self._max_transcript_chars :]
        conversation = prompts.creation_messages(transcript)
        reply = await self._ask(conversation)
        try:
            return normalise_memory_text(reply.text, max_chars=self._max_chars)
        except InvalidMemoryText as first:
            # One repair round: tell the model what was wrong and let it try again.
            conversation += [
                ChatMessage("assistant", reply.text),
                prompts.creation_repair_message(first.reason, self._max_chars),
            ]
            reply = await self._ask(conversation)
            return normalise_memory_text(reply.text, max_chars=self._max_chars)

    # -- compaction -------------------------------------------------------------------------

    async def compact_memories(self, app_id: str, new_memory: Memory) -> list[CompactionOutcome]:
        """While the app holds more than its cap, drop one memory (LLM decision, else FIFO)."""
        async with self._app_lock(app_id):
            return await self._compact_locked(app_id, new_memory)

    async def _compact_locked(self, app_id: str, new_memory: Memory) -> list[CompactionOutcome]:
        outcomes: list[CompactionOutcome] = []
        # Each step removes exactly one memory, and the loop ends only once the count read here
        # is at or under the cap: that read is the verification the seed asks for.
        while await self.store.count(app_id) > self._limit:
            memories = await self.store.list_oldest_first(app_id)
            if len(memories) <= self._limit:
                break
            new = next((m for m in memories if m.id == new_memory.id), memories[-1])
            existing = [m for m in memories if m.id != new.id]
            decision, rejection = await self._decide(existing, new)
            outcome = await self._apply_step(app_id, new.id, decision, rejection)
            if outcome is None:
                continue
            outcomes.append(outcome)
            self.stats.compactions[outcome.action] += 1
            if outcome.fallback_reason:
                log.warning(
                    "🗜️  Compacted memories for app %s: fifo memory %s (%s)",
                    app_id,
                    outcome.target_memory_id,
                    outcome.fallback_reason,
                )
            else:
                log.info(
                    "🗜️  Compacted memories for app %s: %s memory %s",
                    app_id,
                    outcome.action,
                    outcome.target_memory_id,
                )
        return outcomes

    async def _decide(
        self, existing: list[Memory], new: Memory
    ) -> tuple[CompactionDecision | None, str | None]:
        """The model's decision, or None and why it could not be had."""
        messages = prompts.compaction_messages(
            existing, new, limit=self._limit, max_chars=self._max_chars
        )
        try:
            reply = await self._ask(messages, json_schema=COMPACTION_DECISION_SCHEMA)
        except ChatModelError as error:
            return None, f"LLM error: {error}"
        if reply.truncated:
            return None, "the decision was cut off at the token limit"
        try:
            return parse_compaction_decision(reply.text), None
        except InvalidCompactionDecision as error:
            return None, f"invalid decision: {error.reason}"

    async def _apply_step(
        self, app_id: str, new_id: int, decision: CompactionDecision | None, rejection: str | None
    ) -> CompactionOutcome | None:
        """Apply the decision in one transaction; a database error is retried once, then FIFO."""
        try:
            return await _retry_once_on_storage_error(
                lambda: self._apply_in_transaction(app_id, new_id, decision, rejection)
            )
        except StorageError as error:
            if decision is None:
                raise
            return await self._apply_in_transaction(
                app_id, new_id, None, f"database error: {error}"
            )

    async def _apply_in_transaction(
        self, app_id: str, new_id: int, decision: CompactionDecision | None, rejection: str | None
    ) -> CompactionOutcome | None:
        async with self.store.transaction() as tx:
            # Re-read: the set may have changed while the model was thinking.
            current = await self.store.list_oldest_first(app_id, tx=tx)
            if len(current) <= self._limit:
                return None
            if decision is not None:
                try:
                    return await self._apply_decision(tx, app_id, current, new_id, decision)
                except InvalidCompactionDecision as error:
                    rejection = f"invalid decision: {error.reason}"
            oldest = current[0]
            await self.store.delete(app_id, oldest.id, tx=tx)
            return CompactionOutcome(
                app_id, "fifo", oldest.id, "deleted the oldest memory", fallback_reason=rejection
            )

    async def _apply_decision(
        self,
        tx: SqlTransaction,
        app_id: str,
        current: list[Memory],
        new_id: int,
        decision: CompactionDecision,
    ) -> CompactionOutcome:
        by_id = {memory.id: memory for memory in current}
        target = by_id.get(decision.target_memory_id)
        if target is None:
            raise InvalidCompactionDecision(
                f"memory {decision.target_memory_id} is not one of this app's memories"
            )
        if decision.action == "delete":
            await self.store.delete(app_id, target.id, tx=tx)
            return CompactionOutcome(app_id, "delete", target.id, decision.reason)
        new = by_id.get(new_id)
        if target.id == new_id or new is None:
            raise InvalidCompactionDecision("an edit must target an existing memory")
        try:
            content = normalise_memory_text(decision.new_content or "", max_chars=self._max_chars)
        except InvalidMemoryText as error:
            raise InvalidCompactionDecision(f"newContent: {error.reason}") from None
        related = list(target.metadata.get("relatedConversations", []))
        related += [c for c in new.metadata.get("relatedConversations", []) if c not in related]
        metadata = {
            **target.metadata,
            "relatedConversations": related,
            "mergedFrom": [*target.metadata.get("mergedFrom", []), new.id],
        }
        await self.store.update_content(
            app_id, target.id, content, updated_at=self._now(), metadata=metadata, tx=tx
        )
        await self.store.delete(app_id, new.id, tx=tx)
        return CompactionOutcome(app_id, "edit", target.id, decision.reason)

    # -- recall -----------------------------------------------------------------------------

    async def get_memories(self, app_id: str, limit: int = 10) -> list[Memory]:
        """The app's newest memories, newest first."""
        memories = await self.store.list_newest(app_id, limit)
        log.info("🧠 Retrieved %d memories for app %s", len(memories), app_id)
        return memories

    async def get_memory_count(self, app_id: str) -> int:
        return await self.store.count(app_id)

    async def delete_app_memories(self, app_id: str) -> int:
        """Delete every memory of the app once any compaction of it is done; returns the count."""
        async with self._app_lock(app_id):
            return await self.store.delete_all(app_id)

    async def delete_memory(self, app_id: str, memory_id: int) -> bool:
        async with self._app_lock(app_id):
            return await self.store.delete(app_id, memory_id)

    def format_memories_for_context(self, app_name: str, memories: Sequence[Memory]) -> str:
        return format_memories_for_context(app_name, memories)

    # -- energy -----------------------------------------------------------------------------

    def get_energy_consumed_since_last_poll(self) -> int:
        return self._meter.take()

    # -- helpers ----------------------------------------------------------------------------

    async def _ask(
        self, messages: list[ChatMessage], json_schema: JsonSchema | None = None
    ) -> ChatReply:
        try:
            with anyio.fail_after(self._timeout):
                reply = await self._model.chat(messages, json_schema=json_schema)
        except TimeoutError:
            raise ChatModelTimeout(
                f"no answer within {self._timeout:g} s", model=self._model.name
            ) from None
        self._meter.charge(reply.usage)
        return reply

    def _app_lock(self, app_id: str) -> anyio.Lock:
        lock = self._app_locks.get(app_id)
        if lock is None:
            # fast_acquire: an uncontended lock is taken without a trip round the event loop.
            lock = anyio.Lock(fast_acquire=True)
            self._app_locks[app_id] = lock
        return lock

    def _now(self) -> str:
        return format_timestamp(self._clock.now())


async def _retry_once_on_storage_error(operation: Callable[[], Awaitable[T]]) -> T:
    """The seed's policy for database errors: one more try, then the error goes up.

    A plain loop: this runs on every memory write, and a policy this small needs no library.
    """
    try:
        return await operation()
    except StorageError as error:
        log.warning("database error, trying once more: %s", error)
    return await operation()
