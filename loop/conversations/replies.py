"""A user message posted by an app, and its reply: waited for, or streamed as it is written.

This instance's central loop tells its waiters at once (the reply feed); the stored
conversation is looked at too, now and then, as another instance may be the one answering.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from loop.conversations.records import ReplyStatus
from loop.conversations.reply_feed import AnswerSettled, AnswerText, Subscription
from loop.conversations.store import ConversationStore

# How often the stored conversation is looked at when this instance hears nothing.
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Retrying:
    """The answer failed and will be tried again (the error says why)."""

    error: str


class Question:
    """A posted user message (`message_id`) with a subscription to its conversation's
    answers taken before it was posted, so no piece of the reply is missed. Close it after
    (`async with`, or `events()` to its end)."""

    def __init__(
        self, conversations: ConversationStore, subscription: Subscription, message_id: int
    ) -> None:
        self._conversations = conversations
        self._subscription = subscription
        self.conversation_id = subscription.conversation_id
        self.message_id = message_id

    async def __aenter__(self) -> Question:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._subscription.close()

    async def status(self) -> ReplyStatus:
        return await self._conversations.reply_status(self.conversation_id, self.message_id)

    async def wait(self, seconds: float) -> ReplyStatus:
        """The reply if it comes within `seconds` (or the answer fails for good, or the
        conversation ends); else where it stands then."""
        with anyio.move_on_after(seconds):
            async for event in self.events(until_retry=False):
                if isinstance(event, ReplyStatus):
                    return event
        return await self.status()

    async def events(
        self, *, until_retry: bool = True
    ) -> AsyncIterator[str | ReplyStatus | Retrying]:
        """The reply's text in pieces as it is written, then its settled `ReplyStatus`;
        or, when an answer fails but will be tried again, `Retrying` (if `until_retry`).
        A reply written by another instance comes as one piece. Closes the question."""
        handed_on = False
        look = True
        try:
            while True:
                if look:
                    status = await self.status()
                    if status.settled:
                        if status.reply is not None and not handed_on:
                            yield status.reply.content
                        yield status
                        return
                event = await self._subscription.next(POLL_SECONDS)
                # Pieces come many to a second: look at the database on anything else.
                look = not isinstance(event, AnswerText)
                if event is None or event.answers_up_to < self.message_id:
                    continue  # silence, or the answer to an earlier message
                if isinstance(event, AnswerText):
                    handed_on = True
                    yield event.text
                elif isinstance(event, AnswerSettled) and event.error and not event.final:
                    if until_retry:
                        yield Retrying(event.error)
                        return
                    handed_on = False  # the next try writes the reply afresh
        finally:
            self.close()


async def ask(conversations: ConversationStore, conversation_id: str, content: str) -> Question:
    """Post the user's message; the returned question follows its reply."""
    subscription = conversations.replies.subscribe(conversation_id)
    try:
        message_id = await conversations.add_message(conversation_id, "user", content)
    except BaseException:
        subscription.close()
        raise
    return Question(conversations, subscription, message_id)
