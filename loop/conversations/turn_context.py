"""What one turn's model call is given: the system prompt, the memory block (the memories of
the conversation's spaces that fit, each in full, as its digest or as a stub:
`memory_agent.recall`) opened by the delta header, and the newest turns that fit the prompt
budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from loop.conversations.prompt_budget import PromptBudget
from loop.conversations.recall_tool import RECALL_ROOM_TOKENS
from loop.conversations.store import ConversationStore
from loop.operations.metrics import Metrics
from loop.operations.registry import App
from memory_agent import (
    ChatMessage,
    Given,
    Memory,
    MemoryBlock,
    MemorySubAgent,
    MnemoloopError,
    ToolSpec,
    memory_block_within,
    neutralise,
)

log = logging.getLogger("mnemoloop.loop")

BASE_SYSTEM_PROMPT = (
    'You are the assistant inside the app "{app_name}". Answer the user helpfully and '
    "briefly. When the user says goodbye or has nothing more to ask, call the "
    "end_conversation tool."
)

@dataclass(frozen=True)
class TurnContext:
    """What a turn's model call is given, and the memories its memory block holds."""

    messages: list[ChatMessage]
    shown: list[Memory]
    # Some memory is shown in part: the model may `recall` it whole, within this many tokens
    # the prompt keeps for it.
    recallable: bool = False
    recall_room: int = 0


class TurnContexts:
    """Builds each turn's context (`build`), for the central loop and for whoever shows what
    a conversation's model would be given."""

    def __init__(
        self, agent: MemorySubAgent, conversations: ConversationStore, budget: PromptBudget,
        metrics: Metrics,
    ) -> None:
        self._agent = agent
        self._conversations = conversations
        self._budget = budget
        self._metrics = metrics

    async def _given_in(self, conversation_id: str) -> dict[int, Given] | None:
        """How often the conversation's turns were given each memory; None when that cannot
        be read: the turn is answered all the same, every memory in full, and it is logged
        and counted (`mnemoloop_memory_use_unrecorded`)."""
        try:
            return await self._agent.given_in(conversation_id)
        except MnemoloopError as error:
            self._metrics.count_use_unrecorded()
            log.warning("how often %s was given its memories could not be read (%s): each is"
                        " shown in full", conversation_id, error)
            return None

    async def _links_left_out(self, block: MemoryBlock) -> dict[int, list[int]]:
        """The links (`memory_agent.links`, strongest first) of the first `LINKS_READ` memories
        the turn is about, when one of them leads to a memory the block left out: else none,
        and the block stands as it is. None either when they cannot be read: the block is
        chosen without them, and it is logged."""
        if not block.left_out or not block.relevant:
            return {}
        try:
            related = await self._agent.linked_ids(list(block.relevant[:LINKS_READ]))
        except MnemoloopError as error:
            log.warning("the links among a block's memories could not be read (%s): it is"
                        " chosen without them", error)
            return {}
        left_out = set(block.left_out)
        leads = any(other in left_out for links in related.values() for other in links)
        return related if leads else {}

    async def build(
        self,
        app: App,
        conversation: list[ChatMessage],
        client_system_prompt: str | None = None,
        *,
        user_id: str = "",
        conversation_id: str | None = None,
        tools: Sequence[ToolSpec] = (),
        fading: bool = True,
    ) -> TurnContext:
        """The base system prompt (or the client's own, within half the prompt budget), then
        the memory block (if any): the app's shared memories, and in a user's conversation
        that user's before them, and before both the person's profile when the app shares
        it, opened by what changed since the user's previous conversation (of a stored
        conversation); then the newest turns of the conversation that fit the prompt
        budget."""
        started = time.perf_counter()
        limit = self._agent.memory_limit
        # Of the kinds the app may read (its `allowedKinds`).
        shared = app.readable(await self._agent.get_memories(app.app_id, limit))
        own = app.readable(
            await self._agent.get_memories(app.app_id, limit, user_id=user_id) if user_id else [])
        with_profile = app.shares_profile and bool(user_id)
        profile = app.readable(await self._agent.get_profile(user_id) if with_profile else [])
        changes, given = "", None
        if conversation_id is not None:
            changes = await self._changes(app, user_id, conversation_id)
            # Memories fade only where the model can recall them (`recall_tool`): not beside
            # a client's own tools, nor for a structured answer.
            given = await self._given_in(conversation_id) if fading else None
        recent = _recent_words(conversation)
        block = memory_block_within(
            self._budget.memory_block, self._budget.count, app.name, shared, own, profile,
            changes, recent=recent, given=given,
        )
        if related := await self._links_left_out(block):
            # Not every memory fits: those linked to the ones the turn is about come next.
            block = memory_block_within(
                self._budget.memory_block, self._budget.count, app.name, shared, own, profile,
                changes, recent=recent, given=given, related=related,
            )
        self._metrics.retrieval_seconds.observe(time.perf_counter() - started)
        self._metrics.count_answer(with_memories=bool(block.text))
        system = (
            self._budget.beginning_within_half(client_system_prompt)
            if client_system_prompt
            else BASE_SYSTEM_PROMPT.format(app_name=neutralise(app.name))
        )
        context = [ChatMessage("system", system)]
        if block.text:
            context.append(ChatMessage("system", block.text))
        room = RECALL_ROOM_TOKENS if block.recallable else 0
        turns = self._budget.newest_turns_that_fit(context, conversation, tools, room)
        return TurnContext(context + turns, block.shown, block.recallable, room)

    async def _changes(self, app: App, user_id: str, conversation_id: str) -> str:
        """The delta header: the changes of the conversation's spaces since its user's
        previous conversation in the app; "" for their first, or when nothing changed."""
        spaces = app.memory_spaces(user_id)
        current = await self._agent.revision(spaces)
        seen, previous = await self._conversations.revisions(conversation_id, current)
        if previous is None or previous >= seen:
            return ""
        return await self._agent.changes_header(spaces, previous, seen, app.allowed_kinds)


# The newest user turns a memory block is chosen for, when not every memory fits it.
RECENT_TURNS = 3
# The memories the turn is about whose links are read, the most relevant first (the block
# adds at most `RELATED_IN_BLOCK` linked ones, from the first that have any).
LINKS_READ = 20


def _recent_words(conversation: Sequence[ChatMessage]) -> str:
    """What the turn's memory block is chosen for: the newest user turns."""
    asked = [message.content for message in conversation if message.role == "user"]
    return "\n".join(asked[-RECENT_TURNS:])
