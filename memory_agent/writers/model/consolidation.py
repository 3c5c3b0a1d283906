"""The model writer's answer to the consolidation question (`writers.pairs`): the model says
keep, merge or update, and its text is applied only under the rules of its EDIT
(`model.compaction`): a merge is within the length limit, every sentence of it is grounded in
the two memories, and it keeps nearly all of each (`MERGE_KEEPS`) and every number; what an
update leaves of the older memory is grounded in it. Anything else (a failed call, an answer
that is not the verdict, a text that breaks a rule) keeps both memories, with why. Nothing here
reads a word of any language."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import Field, ValidationError

from memory_agent.core import patterns as re
from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.errors import ChatModelError, InvalidCompactionDecision
from memory_agent.core.sentences import sentences_of
from memory_agent.core.unicode_forms import folded
from memory_agent.models import Memory
from memory_agent.writers.answers import Strict, first_error, json_object, strip_reasoning
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.model import grounding
from memory_agent.writers.model.compaction import ungrounded
from memory_agent.writers.pairs import PairVerdict, keep, unjudged
from memory_agent.writers.prompts import memory_line

log = logging.getLogger("mnemoloop.memory")

# A merge deletes a memory: each sentence of the two must have this share of its character
# trigrams in the merged text (a rewording keeps about 0.8; a merge that drops a clause, 0.5),
# where the EDIT of compaction asks for `grounding.MIN_TRIGRAM_SHARE`.
MERGE_KEEPS = 0.7
_DIGITS = re.compile(r"\d+")

PAIR_PROMPT = """\
You keep a memory store tidy. Two memories may say the same thing, or the same thing's old \
and new value.

Older memory:
{older}

Newer memory:
{newer}

Answer with one JSON object:
{{"action": {actions}, "newContent": "<text>", "reason": "<explanation>"}}
{merge}- "update": the newer memory gives a newer value of something the older one says. \
newContent is what still holds of the older memory, in its words ("" when nothing does).
- "keep": they say different things, or you are not sure. Keep is always safe.
Answer with the JSON object only."""
_MERGE = """\
- "merge": both say the same thing, or parts of one thing. newContent is one memory holding \
every fact of both, in their words (at most {max_chars} characters).
"""


class PairAnswer(Strict):
    action: Literal["keep", "merge", "update"]
    new_content: str = Field(default="", alias="newContent")
    reason: str = ""


def pair_schema(*, merge: bool, max_chars: int) -> dict[str, Any]:
    actions = ["keep", "merge", "update"] if merge else ["keep", "update"]
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": actions},
            "newContent": {"type": "string", "maxLength": max_chars},
            "reason": {"type": "string", "maxLength": 200},
        },
        "required": ["action", "newContent", "reason"],
    }


def pair_messages(
    older: Memory, newer: Memory, *, merge: bool, max_chars: int
) -> list[ChatMessage]:
    actions = '"keep" | "merge" | "update"' if merge else '"keep" | "update"'
    prompt = PAIR_PROMPT.format(
        older=memory_line(older), newer=memory_line(newer), actions=actions,
        merge=_MERGE.format(max_chars=max_chars) if merge else "",
    )
    return [ChatMessage("user", prompt)]


async def judge(
    model: MemoryModel, limits: MemoryLimits, older: Memory, newer: Memory, *, same_space: bool
) -> PairVerdict:
    """The model's verdict on the pair, checked (see the module's rules)."""
    messages = pair_messages(older, newer, merge=same_space, max_chars=limits.max_chars)
    try:
        reply = await model.ask(
            messages, pair_schema(merge=same_space, max_chars=limits.max_chars)
        )
    except ChatModelError as error:
        return unjudged(f"the model could not be asked ({error})")
    if reply.truncated:
        return unjudged("the model's answer was cut off at the token limit")
    try:
        answer = PairAnswer.model_validate(json_object(reply.text, InvalidCompactionDecision))
    except InvalidCompactionDecision as error:
        return unjudged(f"the model's answer is not a verdict ({error.reason})")
    except ValidationError as error:
        return unjudged(f"the model's answer is not a verdict ({first_error(error)})")
    reason = " ".join(answer.reason.split())[:300] or "(no reason given)"
    content = " ".join(strip_reasoning(answer.new_content).split())
    why = _refused(answer.action, content, older, newer, same_space, limits.max_chars)
    if why is not None:
        log.info("🧹 The model's %s of memories %d and %d was not applied: %s",
                 answer.action, older.id, newer.id, why)
        return keep(f"kept: the model's {answer.action} was not applied ({why})", "policy", 1)
    if answer.action == "keep":
        return keep(reason, "model", 1)
    return PairVerdict(answer.action, reason, "model", content or None, model_calls=1)


def _refused(
    action: str, content: str, older: Memory, newer: Memory, same_space: bool, max_chars: int
) -> str | None:
    """Why the verdict may not be applied, or None."""
    if action == "keep":
        return None
    if len(content) > max_chars:
        return f"newContent is {len(content)} characters, the limit is {max_chars}"
    if action == "update":
        return ungrounded(content, older.content) if content else None
    if not same_space:
        return "memories of two spaces are not merged"
    if older.kind != newer.kind:
        return f"a memory of kind {newer.kind} is not merged into one of kind {older.kind}"
    if older.expires_at != newer.expires_at:
        return "memories that expire at different times are not merged"
    if not content:
        return "a merge needs the merged text"
    why = ungrounded(content, f"{older.content}\n{newer.content}")
    if why is not None:
        return f"newContent: {why}"
    merged_numbers = _numbers(content)
    for memory in (older, newer):
        for sentence in sentences_of(memory.content):
            if not grounding.shares_enough(sentence, content, MERGE_KEEPS):
                return f"newContent leaves out some of memory {memory.id}"
        lost = _numbers(memory.content) - merged_numbers
        if lost:
            return f"newContent leaves out {sorted(lost)[0]} of memory {memory.id}"
    return None


def _numbers(text: str) -> set[str]:
    """The numbers a text gives, in any script's digits: a merge keeps every one (a price, a
    date, a code), which trigrams alone would let one digit of go."""
    return set(_DIGITS.findall(folded(text)))
