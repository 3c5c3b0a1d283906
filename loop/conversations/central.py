"""The central loop: answers every unanswered conversation with the app's memories in context."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import anyio
from anyio.abc import TaskGroup

from loop.backoff import backoff_seconds
from loop.conversations.answer_claims import AnswerClaims, Unanswered
from loop.conversations.client_tools import with_ids
from loop.conversations.prompt_budget import PromptBudget
from loop.conversations.recall_tool import (
    MAX_RECALL_ROUNDS,
    RECALL_TOOL,
    recall_calls,
    recall_turns,
)
from loop.conversations.reply_feed import AnswerSettled, AnswerText
from loop.conversations.store import ConversationStore
from loop.conversations.turn_context import TurnContexts
from loop.errors import AnswerTaken, ConversationEnded, ConversationNotFound
from loop.leases import while_renewing
from loop.operations.energy import EnergyBudget
from loop.operations.metrics import Metrics
from loop.operations.registry import AppRegistry
from loop.wakeups import InFlight
from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatModelEmptyAnswer,
    ChatReply,
    JsonSchema,
    Memory,
    MemorySubAgent,
    MnemoloopError,
    TokenUsage,
    ToolCall,
    ToolSpec,
    energy_cost,
)

log = logging.getLogger("mnemoloop.loop")

END_CONVERSATION_TOOL = ToolSpec(
    "end_conversation",
    "End this conversation when the user is done or says goodbye.",
    {"type": "object", "properties": {"reason": {"type": "string"}}},
)
END_REASON_TOOL = "end_conversation"
# The service's own tools, never given with a structured answer.
_SERVICE_TOOLS = (END_CONVERSATION_TOOL, RECALL_TOOL)
END_REASON_IDLE = "idle"


@dataclass(frozen=True)
class Answer:
    text: str
    ended: bool
    usage: TokenUsage = field(default_factory=TokenUsage)
    # The model that wrote it (its name), stored with the reply.
    written_by: str | None = None
    # Its calls of the client's tools (loop/conversations/client_tools.py), each with an id.
    tool_calls: tuple[ToolCall, ...] = ()
    # The memories its prompt was given, and the user's message it answers: the memories'
    # use (`memory_agent.recall.usage`) once it is stored.
    shown: tuple[Memory, ...] = ()
    asked: str = ""


@dataclass
class _Answering:
    """An answer under way: the newest message it answers, once the conversation is read."""

    conversation_id: str
    answers_up_to: int = 0


@dataclass(frozen=True)
class _Failure:
    message: str
    transient: bool


def _describe(error: Exception, timeout: float) -> _Failure:
    if isinstance(error, TimeoutError):
        return _Failure(f"the model did not answer within {timeout:g} s", transient=True)
    if isinstance(error, MnemoloopError):
        return _Failure(f"{type(error).__name__}: {error}", transient=error.transient)
    log.exception("answering failed unexpectedly")
    return _Failure(f"{type(error).__name__}: {error}", transient=False)


class CentralLoop:
    """Answers conversations, at most `max_concurrent` at once and `max_per_app` of one app,
    so one app's slow or hanging conversations cannot hold every slot.

    Each answer has `answer_timeout` seconds. A transient failure (timeout, refused
    connection, 5xx, database busy) is tried again after a back-off, up to `answer_attempts`
    tries; a permanent one (model not found) or the last try marks the conversation `failed`
    with the error, which `GET /conversations/{id}` shows and the app can retry. No failure
    of one answer stops the loop.
    """

    def __init__(
        self,
        *,
        conversations: ConversationStore,
        answers: AnswerClaims,
        registry: AppRegistry,
        agent: MemorySubAgent,
        energy: EnergyBudget,
        chat_model: ChatModel,
        metrics: Metrics,
        tokens_per_energy_unit: int,
        idle_end_seconds: float,
        max_concurrent: int,
        max_per_app: int | None = None,
        answer_timeout: float = 120.0,
        answer_attempts: int = 3,
        retry_base_seconds: float = 2.0,
        prompt_budget: PromptBudget | None = None,
        poll_interval: float = 0.5,
        recover_on_start: bool = True,
    ) -> None:
        self._conversations = conversations
        self._answers = answers
        self._registry = registry
        self._agent = agent
        self._energy = energy
        self._model = chat_model
        self._metrics = metrics
        self._tokens_per_unit = tokens_per_energy_unit
        self._idle = timedelta(seconds=idle_end_seconds)
        self._max_concurrent = max_concurrent
        self._max_per_app = max_per_app or max(1, max_concurrent // 2)
        self._answer_timeout = answer_timeout
        self._answer_attempts = answer_attempts
        self._retry_base = retry_base_seconds
        self._budget = prompt_budget or PromptBudget()
        # What each turn's model call is given (the prompt, its memory block, the turns).
        self.contexts = TurnContexts(agent, conversations, self._budget, metrics)
        self._poll_interval = poll_interval
        self._recover_on_start = recover_on_start
        self._in_flight = InFlight()
        self._per_app: Counter[str] = Counter()
        # conversation id -> monotonic time before which it is not tried again after an error
        self._retry_after: dict[str, float] = {}
        self._stopping = False

    async def run(self) -> None:
        # The only instance on its database takes back at once what it left `answering`;
        # instances sharing one wait for the claims to run out.
        if self._recover_on_start:
            recovered = await self._answers.recover_interrupted()
            if recovered:
                log.info("answering %d conversations interrupted by a stop again", recovered)
        async with anyio.create_task_group() as group:
            while not self._stopping:
                try:
                    await self.end_idle_conversations()
                    await self._start_answers(group)
                except MnemoloopError as error:
                    # The database is busy or gone for a moment: say so, and look again.
                    log.error("the central loop could not look for work: %s", error)
                    self._metrics.loop_errors.inc()
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
        # Room for the conversations in back-off besides an app's share of slots.
        per_app = self._max_per_app + len(self._retry_after) + 1
        for waiting in await self._answers.unanswered(limit=200, per_app=per_app):
            if len(self._in_flight) >= self._max_concurrent:
                break
            if waiting.conversation_id in self._in_flight:
                continue
            if waiting.conversation_id in self._retry_after:
                continue
            if self._per_app[waiting.app_id] >= self._max_per_app:
                continue  # this app has its share; the next app's turn
            self._in_flight.add(waiting.conversation_id)
            self._per_app[waiting.app_id] += 1
            group.start_soon(self._answer_in_background, waiting)

    async def _answer_in_background(self, waiting: Unanswered) -> None:
        answering = _Answering(waiting.conversation_id)
        try:
            with anyio.fail_after(self._answer_timeout):
                await self._claim_and_answer(answering)
        except (ConversationEnded, ConversationNotFound, AnswerTaken):
            pass
        except Exception as error:
            await self._answer_failed(waiting, answering, _describe(error, self._answer_timeout))
        finally:
            self._in_flight.discard(waiting.conversation_id)
            self._per_app[waiting.app_id] -= 1
            if self._per_app[waiting.app_id] <= 0:
                del self._per_app[waiting.app_id]
            self._conversations.message_posted.set()  # a slot is free

    async def _answer_failed(
        self, waiting: Unanswered, answering: _Answering, failure: _Failure
    ) -> None:
        attempts = waiting.answer_attempts + 1
        self._metrics.answer_failures.inc()
        final = not failure.transient or attempts >= self._answer_attempts
        try:
            if final:
                log.error(
                    "answering conversation %s failed for good after %d tries: %s",
                    waiting.conversation_id,
                    attempts,
                    failure.message,
                )
            else:
                delay = backoff_seconds(attempts, self._retry_base)
                log.warning(
                    "answering conversation %s failed (try %d), again in %.0f s: %s",
                    waiting.conversation_id,
                    attempts,
                    delay,
                    failure.message,
                )
                self._retry_after[waiting.conversation_id] = time.monotonic() + delay
            await self._answers.release(
                waiting.conversation_id, failed=final, error=failure.message
            )
        except MnemoloopError as error:
            log.error(
                "could not record the failed answer of %s: %s", waiting.conversation_id, error
            )
        self._settled(answering, failure.message, final=final)

    async def answer(self, conversation_id: str) -> Answer:
        """Answer the conversation now (the terminal chat, the demo). Raises `AnswerTaken`
        when another instance is answering it; after any other failure the question is
        left waiting again, and the error raised."""
        answering = _Answering(conversation_id)
        try:
            return await self._claim_and_answer(answering)
        except AnswerTaken:
            raise
        except BaseException as error:
            message = f"{type(error).__name__}: {error}"
            with anyio.CancelScope(shield=True):
                await self._answers.release(
                    conversation_id, failed=False, error=message
                )
            self._settled(answering, message, final=False)
            raise

    async def _claim_and_answer(self, answering: _Answering) -> Answer:
        """Claim the question, build the context, call the model once, and store the reply
        if the claim still holds: `AnswerTaken` when another instance is answering it (or
        took it over meanwhile)."""
        conversation_id = answering.conversation_id
        if not await self._answers.claim(conversation_id):
            raise AnswerTaken(conversation_id)
        answer = await while_renewing(
            lambda: self._compose(answering),
            lambda: self._answers.renew(conversation_id),
            every=self._answers.lease_seconds / 3,
            what=f"the answer to conversation {conversation_id}",
        )
        end_reason = END_REASON_TOOL if answer.ended else None
        reply = answer.text or (
            None if answer.ended else "" if answer.tool_calls else "(the model gave no answer)"
        )
        stored = await self._answers.store(
            conversation_id, reply, end_reason, answers_up_to=answering.answers_up_to,
            usage=answer.usage, written_by=answer.written_by, tool_calls=answer.tool_calls,
        )
        if not stored:
            if await self._conversations.is_open(conversation_id):
                log.warning("the answer to %s was not stored: its claim ran out", conversation_id)
                self._settled(answering, "another instance took the answer over", final=False)
            else:
                # Ended or erased meanwhile: nobody will answer it, and its waiters hear so.
                self._settled(answering, "the conversation ended before its answer was stored")
            raise AnswerTaken(conversation_id)
        await self._record_use(conversation_id, answer)
        self._settled(answering)
        return answer

    async def _record_use(self, conversation_id: str, answer: Answer) -> None:
        """Count the stored answer's memories as used; a failure never fails the turn: it is
        logged and counted (`mnemoloop_memory_use_unrecorded`)."""
        try:
            await self._agent.record_use(conversation_id, answer.shown, answer.text, answer.asked)
        except MnemoloopError as error:
            self._metrics.count_use_unrecorded()
            log.warning("the memories given to %s were not counted as used: %s",
                        conversation_id, error)

    async def _compose(self, answering: _Answering) -> Answer:
        conversation = await self._conversations.get(answering.conversation_id)
        answering.answers_up_to = max((m.id for m in conversation.messages), default=0)
        app = await self._registry.require(conversation.app_id)
        # A client's tools take the place of the service's own: their calls are the client's
        # to run, and the client ends its conversations itself.
        client_tools = conversation.tools
        tools = client_tools.offered() if client_tools else [END_CONVERSATION_TOOL]
        turns = conversation.chat_messages()
        prompt = await self.contexts.build(
            app, turns, conversation.system_prompt,
            user_id=conversation.user_id, conversation_id=conversation.conversation_id,
            tools=tools if client_tools else [*tools, RECALL_TOOL],
            fading=not client_tools and conversation.answer_schema is None,
        )
        context, shown = prompt.messages, list(prompt.shown)
        asked = next((turn.content for turn in reversed(turns) if turn.role == "user"), "")
        model = self._model.named(conversation.model) if conversation.model else self._model
        if client_tools:
            reply = await self._ask(model, context, tools, answering, conversation.answer_schema)
            offered = {tool.name for tool in tools}
            calls = with_ids([call for call in reply.tool_calls if call.name in offered])
            _not_empty(reply.text, calls, model.name)
            return Answer(reply.text.strip(), False, reply.usage, model.name, calls,
                          tuple(shown), asked)
        # The model may read a memory the block shows in part (`recall_tool`), a round or two.
        offered_recall = [*tools, RECALL_TOOL] if prompt.recallable else tools
        reply = await self._ask(model, context, offered_recall, answering,
                                conversation.answer_schema)
        usage, said, room = reply.usage, [reply.text.strip()], prompt.recall_room
        ends = _ends(reply)
        for round_ in range(MAX_RECALL_ROUNDS if prompt.recallable else 0):
            calls = recall_calls(reply.tool_calls)
            if not calls:
                break
            related = await self._agent.linked_ids([memory.id for memory in prompt.shown])
            more, recalled, room = recall_turns(
                reply.text, calls, prompt.shown, room, self._budget.message_tokens, related)
            context = [*context, *more]
            shown += [memory for memory in recalled if memory not in shown]
            if said[-1]:
                # What the model said before recalling was streamed: the rest follows it.
                self._conversations.replies.publish(
                    answering.conversation_id, AnswerText("\n\n", answering.answers_up_to))
            last = round_ == MAX_RECALL_ROUNDS - 1
            reply = await self._ask(model, context, tools if last else offered_recall,
                                    answering, conversation.answer_schema)
            usage = _added(usage, reply.usage)
            said.append(reply.text.strip())
            ends = ends or _ends(reply)
        text = "\n\n".join(part for part in said if part)
        if ends and not text:
            # The model ended the conversation without a word: its closing line is asked
            # for (without the tool), so that the user is answered.
            closing = await model.chat(context)
            await self._energy.charge(
                "conversation", energy_cost(closing.usage, self._tokens_per_unit))
            text = closing.text.strip()
            usage = _added(usage, closing.usage)
        _not_empty(text, (), model.name)
        return Answer(text, ends, usage, model.name, (), tuple(shown), asked)

    async def _ask(
        self, model: ChatModel, context: list[ChatMessage], tools: Sequence[ToolSpec],
        answering: _Answering, answer_schema: JsonSchema | None,
    ) -> ChatReply:
        """One call of the model for the turn, its text published as it comes and its tokens
        charged to energy."""
        feed = self._conversations.replies
        if answer_schema is not None:
            # Structured output: the backend's own schema support (Ollama's `format`,
            # llama.cpp's grammar) writes it whole; the JSON comes as one piece. Only a
            # client's tools go with it.
            reply = await model.chat(
                context, json_schema=answer_schema,
                tools=[tool for tool in tools if tool not in _SERVICE_TOOLS],
            )
            feed.publish(
                answering.conversation_id, AnswerText(reply.text, answering.answers_up_to)
            )
        else:
            reply = await model.chat_streaming(
                context,
                tools=tools,
                on_text=lambda text: feed.publish(
                    answering.conversation_id, AnswerText(text, answering.answers_up_to)
                ),
            )
        await self._energy.charge("conversation", energy_cost(reply.usage, self._tokens_per_unit))
        if reply.cut:
            self._metrics.count_cut_prompt()
            log.warning("the model's server cut the prompt of %s (it read %d tokens): the"
                        " window it was given is larger than it holds; set"
                        " MNEMOLOOP_MODEL_CONTEXT", answering.conversation_id,
                        reply.usage.prompt_tokens)
        return reply

    def _settled(
        self, answering: _Answering, error: str | None = None, *, final: bool = True
    ) -> None:
        """Tell this instance's waiters the answer was stored, or failed."""
        self._conversations.replies.publish(
            answering.conversation_id,
            AnswerSettled(answering.answers_up_to, error, final),
        )

    async def end_idle_conversations(self) -> int:
        """End conversations idle too long; never one whose answer is being written."""
        ended = 0
        cutoff = self._conversations.idle_cutoff(self._idle)
        for conversation_id in await self._conversations.idle_since(cutoff):
            if conversation_id in self._in_flight:
                continue
            # Unless a message came meanwhile (checked in the ending transaction).
            ended += await self._conversations.end(
                conversation_id, END_REASON_IDLE, idle_since=cutoff
            )
        return ended


def _ends(reply: ChatReply) -> bool:
    return any(call.name == END_CONVERSATION_TOOL.name for call in reply.tool_calls)


def _added(one: TokenUsage, other: TokenUsage) -> TokenUsage:
    return TokenUsage(one.prompt_tokens + other.prompt_tokens,
                      one.completion_tokens + other.completion_tokens)


def _not_empty(text: str, calls: Sequence[ToolCall], model: str) -> None:
    """An answer with neither text nor a call fails (tried again, then failed with the
    reason): it is never stored as an empty answer."""
    if not text.strip() and not calls:
        raise ChatModelEmptyAnswer("the model answered nothing", model=model)
