"""How a writer asks the memory model, and the limits it writes within: both given to a writer
once, when it is made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from memory_agent.core.chat_model import ChatMessage, ChatModel, ChatReply, JsonSchema
from memory_agent.core.energy import EnergyMeter
from memory_agent.core.errors import ChatModelTimeout


@dataclass(frozen=True)
class MemoryLimits:
    """What a writer keeps to: the memories a space holds (its cap), the longest memory, and
    the characters of transcript one memory prompt may carry."""

    memories: int = 10
    max_chars: int = 400
    transcript_chars: int = 6000


class MemoryModel:
    """The memory model as the writers ask it: each call within the time limit, its tokens
    charged to the sub-agent's energy meter."""

    def __init__(self, model: ChatModel, *, timeout: float, meter: EnergyMeter) -> None:
        self._model = model
        self._timeout = timeout
        self.meter = meter

    @property
    def name(self) -> str:
        return self._model.name

    async def ask(
        self, messages: Sequence[ChatMessage], json_schema: JsonSchema | None = None
    ) -> ChatReply:
        """The model's answer (JSON matching `json_schema` when one is given); raises
        `ChatModelError` (`ChatModelTimeout` past the time limit)."""
        try:
            with anyio.fail_after(self._timeout):
                reply = await self._model.chat(messages, json_schema=json_schema)
        except TimeoutError:
            raise ChatModelTimeout(
                f"no answer within {self._timeout:g} s", model=self._model.name
            ) from None
        self.meter.charge(reply.usage)
        return reply
