"""The central loop: answers every unanswered conversation with the app's memories in context."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import anyio
from anyio.abc import TaskGroup

from loop.conversations import ConversationStore
from loop.energy import EnergyBudget
from loop.errors import ConversationEnded, ConversationNotFound
from loop.metrics import Metrics
from loop.registry import App, AppRegistry
from loop.signals import InFlight
from memory_agent import ChatMessage, ChatModel, MemorySubAgent, ToolSpec
from memory_agent.energy import energy_cost
from memory_agent.errors import ChatModelError

log = logging.getLogger("mnemoloop.loop")

BASE_SYSTEM_PROMPT = (
    'You are the assistant inside the app "{app_name}". Answer the user helpfully and '
    "briefly. When the user says goodbye or has nothing more to ask, call the "
    "end_conversation tool."
)
END_CONVERSATION_TOOL = ToolSpec(
    "end_conversation",
    "End this conversation when the user is done or says goodbye.",
    {"type": "object", "properties": {"reason": {"type": "string"}}},
)
END_REASON_TOOL = "end_conversation"
END_REASON_IDLE = "idle"


@dataclass(frozen=True)
class Answer:
    text: str
    ended: bool


class CentralLoop:
    def __init__(
        self,
        *,
        conversations: ConversationStore,
        registry: AppRegistry,
        agent: MemorySubAgent,
        energy: EnergyBudget,
        chat_model: ChatModel,
        metrics: Metrics,
        tokens_per_energy_unit: int,
        idle_end_seconds: float,
        max_concurrent: int,
        poll_interval: float = 0.5,
    ) -> None:
        self._conversations = conversations
        self._registry = registry
        self._agent = agent
        self._energy = energy
        self._model = chat_model
        self._metrics = metrics
        self._tokens_per_unit = tokens_per_energy_unit
        self._idle = timedelta(seconds=idle_end_seconds)
        self._limiter = anyio.CapacityLimiter(max_concurrent)
        self._poll_interval = poll_interval
        self._in_flight = InFlight()
        # conversation id -> monotonic time before which it is not tried again after an error
        self._retry_after: dict[str, float] = {}
        self._stopping = False

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            while not self._stopping:
                await self.end_idle_conversations()
                await self._start_answers(group)
                await self._conversations.message_posted.wait(self._poll_interval)

    async def drain(self, grace: float) -> None:
        """Stop taking conversations; wait up to `grace` seconds for answers in flight."""
        self._stopping = True
        self._conversations.message_posted.set()
        with anyio.move_on_after(grace):
            await self._in_flight.wait_empty()

    async def _start_answers(self, group: TaskGroup) -> None:
        now = time.monotonic()
        # Forget back-offs that have run out, so conversations that ended meanwhile leave none.
        self._retry_after = {c: t for c, t in self._retry_after.items() if t > now}
        for conversation_id in await self._conversations.unanswered(limit=100):
            if conversation_id in self._in_flight:
                continue
            if conversation_id in self._retry_after:
                continue
            self._in_flight.add(conversation_id)
            group.start_soon(self._answer_in_background, conversation_id)

    async def _answer_in_background(self, conversation_id: str) -> None:
        try:
            async with self._limiter:
                await self.answer(conversation_id)
        except ChatModelError as error:
            log.warning("answering conversation %s failed, will retry: %s", conversation_id, error)
            self._metrics.answer_failures.inc()
            self._retry_after[conversation_id] = time.monotonic() + 5.0
        except (ConversationEnded, ConversationNotFound):
            pass
        finally:
            self._in_flight.discard(conversation_id)

    async def answer(self, conversation_id: str) -> Answer:
        """Answer the conversation now: context, one model call, the reply stored."""
        conversation = await self._conversations.get(conversation_id)
        app = await self._registry.require(conversation.app_id)
        context = await self.build_context(app, conversation.chat_messages())
        reply = await self._model.chat(context, tools=[END_CONVERSATION_TOOL])
        await self._energy.charge("conversation", energy_cost(reply.usage, self._tokens_per_unit))
        ends = any(call.name == END_CONVERSATION_TOOL.name for call in reply.tool_calls)
        text = reply.text.strip()
        if text or not ends:
            await self._conversations.add_message(
                conversation_id, "assistant", text or "(the model gave no answer)"
            )
        if ends:
            await self._conversations.end(conversation_id, END_REASON_TOOL)
        return Answer(text, ends)

    async def build_context(self, app: App, conversation: list[ChatMessage]) -> list[ChatMessage]:
        """Base system prompt, then the app's memory block (if any), then the conversation."""
        started = time.perf_counter()
        memories = await self._agent.get_memories(app.app_id, self._agent.memory_limit)
        block = self._agent.format_memories_for_context(app.name, memories)
        self._metrics.retrieval_seconds.observe(time.perf_counter() - started)
        context = [ChatMessage("system", BASE_SYSTEM_PROMPT.format(app_name=app.name))]
        if block:
            context.append(ChatMessage("system", block))
        return context + conversation

    async def end_idle_conversations(self) -> int:
        ended = 0
        for conversation_id in await self._conversations.idle_since(self._idle):
            ended += await self._conversations.end(conversation_id, END_REASON_IDLE)
        return ended
