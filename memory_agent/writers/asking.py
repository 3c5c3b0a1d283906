"""How a writer asks the memory model, and the limits it writes within: both given to a writer
once, when it is made."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from memory_agent.core.chat_model import ChatMessage, ChatModel, ChatReply, JsonSchema
from memory_agent.core.energy import EnergyMeter
from memory_agent.core.errors import ChatModelTimeout
from memory_agent.core.tokens import TOKENS_PER_MESSAGE

log = logging.getLogger("mnemoloop.memory")
# What a chat template adds to a prompt beside its messages.
_FRAMING = 64


@dataclass(frozen=True)
class MemoryLimits:
    """What a writer keeps to: the memories a space holds (its cap), the longest memory, and
    the tokens one memory prompt may take (the model's window less a JSON answer's room)."""

    memories: int = 10
    max_chars: int = 400
    prompt_tokens: int = 3000


class MemoryModel:
    """The memory model as the writers ask it: each call within the time limit, its tokens
    charged to the sub-agent's energy meter."""

    def __init__(self, model: ChatModel, *, timeout: float, meter: EnergyMeter) -> None:
        self._model = model
        self._timeout = timeout
        self.meter = meter
        # Requests whose prompt the model's server cut (the window it holds is smaller than
        # the one it was given).
        self.prompts_cut = 0

    @property
    def name(self) -> str:
        return self._model.name

    def count_tokens(self, text: str) -> int:
        """The tokens `text` takes in the model's prompt."""
        return self._model.count_tokens(text)

    async def ask(
        self,
        messages: Sequence[ChatMessage],
        json_schema: JsonSchema | None = None,
        *,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        """The model's answer (JSON matching `json_schema` when one is given, in at most
        `answer_tokens` when given); raises `ChatModelError` (`ChatModelTimeout` past the
        time limit). A JSON answer cut at its token limit is asked for again once, with
        twice the room."""
        reply = await self._ask(messages, json_schema, answer_tokens)
        if reply.truncated and json_schema is not None:
            given = self._model.room_for(answer_tokens, json=True)
            room = self._more_room(messages, given or self._model.json_answer_tokens)
            if room is not None:
                log.info("📝 The model's answer stopped at its token limit; asked again with"
                         " room for %d tokens", room)
                reply = await self._ask(messages, json_schema, room)
        return reply

    def _more_room(self, messages: Sequence[ChatMessage], given: int) -> int | None:
        """Twice the room an answer had, within what the window leaves beside the prompt;
        None when that is no more."""
        room = 2 * given
        window = self._model.context_tokens
        if window:
            prompt = sum(self._model.count_tokens(m.content) + TOKENS_PER_MESSAGE
                         for m in messages)
            room = min(room, window - prompt - _FRAMING)
        return room if room > given else None

    async def _ask(
        self,
        messages: Sequence[ChatMessage],
        json_schema: JsonSchema | None,
        answer_tokens: int | None,
    ) -> ChatReply:
        try:
            with anyio.fail_after(self._timeout):
                reply = await self._model.chat(
                    messages, json_schema=json_schema, answer_tokens=answer_tokens
                )
        except TimeoutError:
            raise ChatModelTimeout(
                f"no answer within {self._timeout:g} s", model=self._model.name
            ) from None
        self.meter.charge(reply.usage)
        if reply.cut:
            self.prompts_cut += 1
            log.warning(
                "📝 %s's server cut a memory prompt: it holds a smaller window than it was"
                " given (set MNEMOLOOP_MODEL_CONTEXT to what it holds)", self._model.name,
            )
        return reply
