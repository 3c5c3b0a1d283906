"""How much of a conversation fits in the model's prompt.

Tokens are estimated from characters, on the safe side (English runs near four characters a
token; this counts three), so that no prompt outgrows the model's context: the system prompt
and the memory block always go in, then the newest turns that fit. A newest turn too long on
its own keeps its end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory_agent import ChatMessage

CHARS_PER_TOKEN = 3
# Each message costs a few tokens of chat-template framing besides its text.
TOKENS_PER_MESSAGE = 4
CUT_MARK = "[earlier text omitted] "
MIN_NEWEST_CHARS = 1000


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + TOKENS_PER_MESSAGE


@dataclass(frozen=True)
class PromptBudget:
    tokens: int = 3000

    def newest_turns_that_fit(
        self, fixed: Sequence[ChatMessage], conversation: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        left = self.tokens - sum(estimate_tokens(m.content) for m in fixed)
        kept: list[ChatMessage] = []
        for message in reversed(conversation):
            cost = estimate_tokens(message.content) + sum(
                estimate_tokens(call.name + json.dumps(call.arguments))
                for call in message.tool_calls
            )
            if cost <= left:
                kept.append(message)
                left -= cost
                continue
            if not kept:
                # The newest turn always goes in, however much the rest took: its end, at least.
                room = max((left - TOKENS_PER_MESSAGE) * CHARS_PER_TOKEN, MIN_NEWEST_CHARS)
                kept.append(replace(message, content=CUT_MARK + message.content[-room:]))
            break
        return list(reversed(kept))

    def within_half(self, text: str) -> bool:
        return estimate_tokens(text) <= self.tokens // 2

    def beginning_within_half(self, text: str) -> str:
        """`text`, or its beginning within half the budget (a client's own system prompt:
        the memory block and the newest turns need the rest)."""
        room = self.tokens // 2 * CHARS_PER_TOKEN
        return text if len(text) <= room else text[:room] + " [rest omitted]"

    def transcript_chars(self, prompt_overhead_tokens: int = 700) -> int:
        """Characters of transcript that fit beside a prompt of `prompt_overhead_tokens`."""
        return max(1000, (self.tokens - prompt_overhead_tokens) * CHARS_PER_TOKEN)
