"""How much of a conversation fits in the model's prompt.

The budget follows from the model's window (`loop.llm.windows`), less the answer's room. Tokens
are counted with the model's own tokenizer where the backend has one, else estimated on the
safe side (`memory_agent.estimate_tokens`), so that no prompt outgrows the window: the system
prompt and the memory block always go in, then the newest turns that fit. A newest turn too
long on its own keeps its end. The memory block takes at most `memory_tokens`, and never more
than half the budget, so that the conversation keeps the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from memory_agent import TOKENS_PER_MESSAGE, BlockBudget, ChatMessage, ToolSpec, estimate_tokens

CUT_MARK = "[earlier text omitted] "
# The fewest characters of a newest turn kept, however little room is left.
MIN_NEWEST_CHARS = 200


@dataclass(frozen=True)
class PromptBudget:
    tokens: int = 3000
    # How the model counts a text's tokens.
    count: Callable[[str], int] = field(default=estimate_tokens, compare=False)
    # The memory block's own bound (`MNEMOLOOP_MEMORY_TOKENS`, `MNEMOLOOP_MEMORY_COUNT`).
    memory_tokens: int = 2000
    memory_count: int | None = None

    @property
    def memory_block(self) -> BlockBudget:
        """What the memory block may take: its own bound, within half the budget."""
        return BlockBudget(min(self.memory_tokens, self.tokens // 2), self.memory_count)

    def message_tokens(self, message: ChatMessage) -> int:
        """A message's tokens: its text, its tool calls and its framing."""
        calls = sum(
            self.count(call.name + json.dumps(call.arguments)) for call in message.tool_calls
        )
        return self.count(message.content) + calls + TOKENS_PER_MESSAGE

    def tools_tokens(self, tools: Sequence[ToolSpec]) -> int:
        """What offering `tools` adds to a prompt (their names, descriptions and schemas)."""
        return sum(
            self.count(tool.name + tool.description + json.dumps(tool.parameters))
            for tool in tools
        )

    def newest_turns_that_fit(
        self,
        fixed: Sequence[ChatMessage],
        conversation: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        reserved: int = 0,
    ) -> list[ChatMessage]:
        """The newest turns that fit beside `fixed`, the `tools` offered and `reserved` tokens
        (room kept for what the turn may add: recalled memories)."""
        left = (
            self.tokens
            - sum(self.message_tokens(m) for m in fixed)
            - self.tools_tokens(tools)
            - reserved
        )
        kept: list[ChatMessage] = []
        for message in reversed(conversation):
            cost = self.message_tokens(message)
            if cost <= left:
                kept.append(message)
                left -= cost
                continue
            if not kept:
                # The newest turn always goes in, however much the rest took: its end, at least.
                kept.append(replace(message, content=self._end_within(message.content, left)))
            break
        return list(reversed(kept))

    def _end_within(self, text: str, tokens: int) -> str:
        """The longest end of `text` that fits `tokens` with the cut's mark (at least
        `MIN_NEWEST_CHARS` characters)."""
        room = tokens - TOKENS_PER_MESSAGE - self.count(CUT_MARK)
        low, high = MIN_NEWEST_CHARS, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if self.count(text[-middle:]) <= room:
                low = middle
            else:
                high = middle - 1
        return CUT_MARK + text[-low:]

    def within_half(self, text: str) -> bool:
        return self.count(text) <= self.tokens // 2

    def beginning_within_half(self, text: str) -> str:
        """`text`, or its beginning within half the budget (a client's own system prompt:
        the memory block and the newest turns need the rest)."""
        if self.within_half(text):
            return text
        low, high = 0, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if self.count(text[:middle]) <= self.tokens // 2:
                low = middle
            else:
                high = middle - 1
        return text[:low] + " [rest omitted]"
