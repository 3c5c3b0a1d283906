"""The model writer's prompts: the seed's creation prompt (its first sentence is fixed), the
transcript it carries, and the prompts that ask again. No language's words are read here."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.kinds import BUNDLED_KINDS, Kinds
from memory_agent.core.unicode_forms import normalise_text
from memory_agent.models import Memory
from memory_agent.writers.prompts import memory_line

CREATION_PROMPT = """\
You are a memory creation assistant. Analyze this conversation and create a concise memory record.

Focus on:
- Key facts and information
- User preferences or patterns
- Important decisions or outcomes
- Lessons learned or insights

Write about the user in the third person ("The user ..."), in your own words, in English or \
in the language of the conversation. Keep every value exact (names, numbers, dates, amounts, \
codes); write times and dates plainly (15:00, 2025-03-14). Keep what will matter in a later \
conversation; leave out greetings, thanks, small talk, an errand for today and the answer to \
a general question. If nothing is worth remembering, give no sentences.

Format: 2-4 sentences, factual and concise, at most {max_chars} characters in all. For each \
sentence, first copy its quote: the words of the conversation it rests on, exactly as written \
there; then write the sentence. Set "aboutPerson" to true on a sentence that tells who the user \
is, whatever the app (their name, language, timezone, household, diet, health constraints, how \
they want to be contacted), and to false on one about this app's business. If the user \
asked that this be remembered only until a date ("remember it until Friday"), add \
"keepUntil": {{"date": "<that date, YYYY-MM-DD>", "quote": "<the user's words asking it>"}}; \
today is {today}.{kind_hint}
{known}{part}
Conversation (between the markers; every line is one turn):
<<<CONVERSATION
{conversation}
CONVERSATION>>>

Answer with the JSON object only:
{{"sentences": [{{"quote": "<words copied from the conversation>", "text": "<what they tell, \
as a memory sentence>", "aboutPerson": false}}], "updates": []{kind_field}}}
Create memory:"""

KNOWN_HINT = """
What the app already remembers:
{lines}
In "updates", list each of these memories that the conversation gives a newer value for (the \
same thing, now different: an address, a date, an amount, a choice), with "stillTrue": that \
memory rewritten without the replaced value, or "" when nothing else in it still holds: \
{{"memoryId": <its id>, "stillTrue": "<what still holds>"}}. Leave out a memory the \
conversation only repeats or adds to. No such memory: [].
"""

PART_HINT = """
This conversation is long: it is read in {count} parts, and this is part {index}. Write what \
this part tells (up to four sentences); the parts' sentences are put together afterwards.
"""

# A long conversation's memory, from the sentences written from its parts. Its first sentence
# is the creation prompt's.
COMBINING_PROMPT = """\
You are a memory creation assistant. A long conversation was read in {count} parts; these are \
the memory sentences written from its parts, in the order it said them, each with its quote \
(the words of the conversation it rests on):
{notes}
{known}
Write the memory of the whole conversation from them: 2-4 sentences, at most {max_chars} \
characters in all. Keep the facts that will matter in a later conversation; where a later part \
gives a newer value of the same thing, keep the newer one; put related facts in one sentence. \
Each sentence carries the quote of a sentence above it comes from, copied as given there, and \
"aboutPerson": true when that sentence is marked (about the user). If the user asked that \
this be remembered only until a date, add "keepUntil": {{"date": "<YYYY-MM-DD>", "quote": \
"<the user's words asking it>"}}; today is {today}.{kind_hint}

Answer with the JSON object only:
{{"sentences": [{{"quote": "<the quote given above>", "text": "<the memory sentence>", \
"aboutPerson": false}}], "updates": []{kind_field}}}
Create memory:"""

JSON_RETRY_PROMPT = """\
Your answer to this was not the JSON object asked for ({reason}). Answer again with the JSON \
object only:
{{"sentences": [{{"quote": "...", "text": "..."}}], "updates": [...]}}"""

RETRY_PROMPT = """\
In your answer to this, these sentences could not be checked against the conversation:
{failures}
Give each of them again with its quote copied exactly from the conversation (the words it \
rests on, as they are written there), or leave it out. Answer with the JSON object only:
{{"sentences": [{{"quote": "...", "text": "..."}}]}}"""

_SPEAKERS = {"user": "User", "assistant": "Assistant", "tool": "Tool"}


def format_transcript(messages: Sequence[ChatMessage]) -> str:
    """One line per turn. A turn's own line breaks are folded, so that no text inside a turn
    can start a line that reads as another turn or close the transcript's markers."""
    return "\n".join(transcript_lines(messages))


def transcript_lines(messages: Sequence[ChatMessage]) -> list[str]:
    """The transcript's lines, one per turn (the system prompt is no turn)."""
    return [
        f"{_speaker(message)}: {_one_line(message.content)}{_calls(message)}"
        for message in messages
        if message.role != "system"
    ]


def _speaker(message: ChatMessage) -> str:
    if message.role == "tool" and message.tool_name:
        return f"Tool {_one_line(message.tool_name)} returned"
    return _SPEAKERS[message.role]


def _calls(message: ChatMessage) -> str:
    """An assistant turn's calls of the app's tools, after its text."""
    return "".join(
        f" [calls {_one_line(call.name)}({_one_line(json.dumps(call.arguments))})]"
        for call in message.tool_calls
    )


def _one_line(text: str) -> str:
    """The text on one line, with nothing that reads as the transcript's markers."""
    return " ".join(normalise_text(text).split()).replace("<<<", "‹‹‹").replace(">>>", "›››")


def creation_messages(
    transcript: str,
    known: Sequence[Memory] = (),
    *,
    max_chars: int,
    today: str,
    part: tuple[int, int] | None = None,
    kinds: Kinds | None = BUNDLED_KINDS,
) -> list[ChatMessage]:
    """The model writer's creation prompt, showing the memories the space already holds
    (`known`), each with its id, so that the model can say which the new one updates; with
    `part` (its number from 1, of how many), for one part of a long conversation; with
    `kinds`, asking for the memory's kind (a part's is not asked: the whole memory's is)."""
    part_hint = "" if part is None else PART_HINT.format(index=part[0], count=part[1])
    prompt = CREATION_PROMPT.format(
        conversation=transcript, known=_known_hint(known), max_chars=max_chars, today=today,
        part=part_hint, **_kind_asked(kinds),
    )
    return [ChatMessage("user", prompt)]


def combining_messages(
    notes: Sequence[tuple[str, str, bool]],
    parts: int,
    known: Sequence[Memory] = (),
    *,
    max_chars: int,
    today: str,
    kinds: Kinds = BUNDLED_KINDS,
) -> list[ChatMessage]:
    """The prompt that writes a long conversation's memory from the `(sentence, quote,
    about the person)` notes written from its `parts`."""
    lines = "\n".join(
        f'{n}. {_one_line(text)} (quote: "{_one_line(quote)}")'
        + (" (about the user)" if about_person else "")
        for n, (text, quote, about_person) in enumerate(notes, 1)
    )
    prompt = COMBINING_PROMPT.format(
        count=parts, notes=lines, known=_known_hint(known), max_chars=max_chars, today=today,
        **_kind_asked(kinds),
    )
    return [ChatMessage("user", prompt)]


def _kind_asked(kinds: Kinds | None) -> dict[str, str]:
    """The words that ask for the memory's kind, and its field in the answer's example."""
    if kinds is None:
        return {"kind_hint": "", "kind_field": ""}
    return {
        "kind_hint": f' Give the memory\'s "kind", the one that fits it best: {kinds.listed()}.',
        "kind_field": ', "kind": "<its kind>"',
    }


def _known_hint(known: Sequence[Memory]) -> str:
    if not known:
        return ""
    return KNOWN_HINT.format(lines="\n".join(memory_line(m) for m in known))


# What asking again adds to a prompt, at most (the writer keeps the first prompt this much
# within its budget, so that the second fits the window too): the request, and each sentence
# that failed cut to `_FAILED_CHARS`. The answer asked about is not sent back: it would take
# as much room as the answer to come.
RETRY_TOKENS = 400
_FAILED_CHARS = 160
_FAILED_SHOWN = 4


def retry_messages(
    asked: Sequence[ChatMessage], failures: Sequence[tuple[str, str]]
) -> list[ChatMessage]:
    """The creation prompt again, with the sentences that failed and why."""
    lines = "\n".join(
        f'- "{_one_line(text)[:_FAILED_CHARS]}": {why}' for text, why in failures[:_FAILED_SHOWN]
    )
    return _with_request(asked, RETRY_PROMPT.format(failures=lines))


def json_retry_messages(asked: Sequence[ChatMessage], reason: str) -> list[ChatMessage]:
    """The creation prompt again, with why its answer was not the JSON."""
    return _with_request(asked, JSON_RETRY_PROMPT.format(reason=reason[:200]))


def _with_request(asked: Sequence[ChatMessage], request: str) -> list[ChatMessage]:
    """The prompt with `request` at the end of its last message: two user turns in a row are
    refused by chat templates that require the roles to alternate."""
    *before, last = asked
    return [*before, ChatMessage(last.role, f"{last.content}\n\n{request}")]
