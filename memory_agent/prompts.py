"""Every prompt the memory sub-agent sends. The seed fixes their first sentences and shape."""

from __future__ import annotations

from collections.abc import Sequence

from memory_agent.chat_model import ChatMessage
from memory_agent.facts import Statement
from memory_agent.models import Memory
from memory_agent.written_forms import normalise_text

CREATION_PROMPT = """\
You are a memory creation assistant. Analyze this conversation and create a concise memory record.

Focus on:
- Key facts and information
- User preferences or patterns
- Important decisions or outcomes
- Lessons learned or insights

Write about the user in the third person ("The user ..."), in the language of the \
conversation. Keep what the user stated, decided or asked to be remembered, and what the \
assistant confirmed it did, with every value exactly as written (names, numbers, dates, \
amounts, codes, versions). Say nothing the conversation does not say, and do not continue the \
conversation. If it holds nothing worth remembering later (small talk, a general question), \
answer NOTHING.

Format: Single paragraph, 2-4 sentences, factual and concise.
{known}
Conversation (between the markers; every line is one turn):
<<<CONVERSATION
{conversation}
CONVERSATION>>>
{statements}
Create memory:"""

KNOWN_HINT = """
What the app already remembers, to tell who and what the conversation speaks of (name them \
as these do; do not repeat these memories, and take every value from the conversation):
{lines}
"""

STATEMENTS_HINT = """
Statements worth keeping:
{lines}
"""

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

UPDATE_PROMPT = """\
You keep an app's memories up to date. A new memory was just written:
{new}

Earlier memories:
{existing}

Which earlier memories state an older value of something the new memory gives a newer value \
for (the same address, date, time, amount, count, place, choice or setting, now different)? \
Leave out a memory that the new one only adds to, repeats or mentions, or that is about \
something else. An empty list is a good answer.

Answer with the JSON object only:
{{"updatedMemoryIds": [<id>, ...], "reason": "<explanation>"}}"""

# How a hint names who said a statement: the memory's own words, so that a model that copies
# a hint line writes a sentence a memory may hold.
_SAID_BY = {"user": "The user said", "assistant": "The assistant confirmed"}
_SPEAKERS = {"user": "User", "assistant": "Assistant", "tool": "Tool"}


def format_transcript(messages: Sequence[ChatMessage]) -> str:
    """One line per turn. A turn's own line breaks are folded, so that no text inside a turn
    can start a line that reads as another turn or close the transcript's markers."""
    return "\n".join(
        f"{_SPEAKERS[message.role]}: {_one_line(message.content)}"
        for message in messages
        if message.role != "system"
    )


def _one_line(text: str) -> str:
    """The text on one line, with nothing that reads as the transcript's markers."""
    return " ".join(normalise_text(text).split()).replace("<<<", "‹‹‹").replace(">>>", "›››")


def creation_messages(
    transcript: str, statements: Sequence[Statement] = (), known: Sequence[str] = ()
) -> list[ChatMessage]:
    """The creation prompt, with the statements the checks found worth keeping and the
    memories the app already holds (`known`), when there are any."""
    known_hint = ""
    if known:
        known_hint = KNOWN_HINT.format(
            lines="\n".join(f"- {_one_line(memory)}" for memory in known)
        )
    hint = ""
    if statements:
        hint = STATEMENTS_HINT.format(
            lines="\n".join(
                f"- {_SAID_BY[s.speaker]}: {' '.join(s.text.split())}" for s in statements
            )
        )
    prompt = CREATION_PROMPT.format(conversation=transcript, statements=hint, known=known_hint)
    return [ChatMessage("user", prompt)]


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


def update_messages(existing: Sequence[Memory], new_line: str) -> list[ChatMessage]:
    """Asks a model which of `existing` the new memory gives newer values for."""
    prompt = UPDATE_PROMPT.format(
        new=new_line, existing="\n".join(memory_line(m) for m in existing)
    )
    return [ChatMessage("user", prompt)]
