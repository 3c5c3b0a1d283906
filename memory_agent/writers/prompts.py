"""The seed's compaction question, which both writers ask, and how a memory is shown to a model
(`[id=N] (created YYYY-MM-DD) content`). The seed fixes the question's first sentence."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.core.chat_model import ChatMessage
from memory_agent.models import Memory

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

Keep lasting facts (who and what: names, numbers, dates, amounts, codes, versions, \
places) and the newest value of a fact that changed. Prefer to DELETE a memory that holds no \
such fact, or one whose fact a newer memory updates. To EDIT, set targetMemoryId to an \
existing memory (never 0) and newContent to that memory rewritten so it also carries every \
fact of the new memory (at most {max_chars} characters); the new memory (id 0) is then folded \
into it. Answer with the JSON object only."""

def memory_line(memory: Memory) -> str:
    """`[id=N] (created YYYY-MM-DD) content`, on one line whatever the content holds; with
    `, importance N` when one was set (by an operator or an app)."""
    importance = memory.importance if "importance" in memory.metadata else None
    return candidate_line(memory.id, memory.created_date, memory.content, importance)


def candidate_line(
    memory_id: int, created_date: str, content: str, importance: int | None = None
) -> str:
    weight = "" if importance is None else f", importance {importance}/10"
    return f"[id={memory_id}] (created {created_date}{weight}) {' '.join(content.split())}"


def compaction_messages(
    existing: Sequence[Memory], new_line: str, *, limit: int, max_chars: int
) -> list[ChatMessage]:
    prompt = COMPACTION_PROMPT.format(
        total=len(existing) + 1,
        limit=limit,
        existing="\n".join(memory_line(m) for m in existing),
        new=new_line,
        max_chars=max_chars,
    )
    return [ChatMessage("user", prompt)]
