"""Every prompt the memory sub-agent sends. The seed fixes their wording."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.chat_model import ChatMessage
from memory_agent.models import Memory

CREATION_PROMPT = """\
You are a memory creation assistant. Analyze this conversation and create a concise memory record.

Focus on:
- Key facts and information
- User preferences or patterns
- Important decisions or outcomes
- Lessons learned or insights

Format: Single paragraph, 2-4 sentences, factual and concise.

Conversation:
{conversation}

Create memory:"""

CREATION_REPAIR_PROMPT = """\
That answer cannot be stored: {reason}. Write the memory again as one plain paragraph of \
2-4 complete sentences, at most {max_chars} characters, with no heading or label."""

COMPACTION_PROMPT = """\
You are a memory management assistant. You have {total} memories but can only keep {limit}.

Analyze these memories and decide which ONE to either:
1. DELETE (remove entirely)
2. EDIT (merge with another or update content)

Existing memories:
{existing}

New memory:
{new}

Decision format:
{{
  "action": "delete" | "edit",
  "targetMemoryId": <id>,
  "newContent": "<merged content if editing>",
  "reason": "<explanation>"
}}

To DELETE, set targetMemoryId to the id of the memory to remove (the new memory may be it).
To EDIT, set targetMemoryId to an existing memory and newContent to that memory rewritten so it \
also carries the new memory's facts (at most {max_chars} characters); the new memory is then \
folded into it. Answer with the JSON object only."""


def format_transcript(messages: Sequence[ChatMessage]) -> str:
    lines = []
    for message in messages:
        if message.role == "system":
            continue
        speaker = {"user": "User", "assistant": "Assistant", "tool": "Tool"}[message.role]
        lines.append(f"{speaker}: {message.content.strip()}")
    return "\n".join(lines)


def creation_messages(transcript: str) -> list[ChatMessage]:
    return [ChatMessage("user", CREATION_PROMPT.format(conversation=transcript))]


def creation_repair_message(reason: str, max_chars: int) -> ChatMessage:
    return ChatMessage("user", CREATION_REPAIR_PROMPT.format(reason=reason, max_chars=max_chars))


def memory_line(memory: Memory) -> str:
    """`[id=N] (created YYYY-MM-DD) content`, on one line whatever the content holds."""
    content = " ".join(memory.content.split())
    return f"[id={memory.id}] (created {memory.created_date}) {content}"


def compaction_messages(
    existing: Sequence[Memory], new: Memory, *, limit: int, max_chars: int
) -> list[ChatMessage]:
    prompt = COMPACTION_PROMPT.format(
        total=len(existing) + 1,
        limit=limit,
        existing="\n".join(memory_line(m) for m in existing),
        new=memory_line(new),
        max_chars=max_chars,
    )
    return [ChatMessage("user", prompt)]
