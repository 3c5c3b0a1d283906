"""What happens to answers on this instance, as it happens: the central loop publishes each
piece of an answer's text and how the answer ended; callers waiting for a reply subscribe to
one conversation. Nothing here is stored; the stored conversation stays the truth (another
instance may answer, and then only the database tells)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectSendStream


@dataclass(frozen=True)
class AnswerText:
    """A piece of the answer being written to the messages up to `answers_up_to`."""

    text: str
    answers_up_to: int


@dataclass(frozen=True)
class AnswerSettled:
    """The answer to the messages up to `answers_up_to` was stored, or failed (`error`; for
    good when `final`, else it will be tried again)."""

    answers_up_to: int
    error: str | None = None
    final: bool = True


AnswerEvent = AnswerText | AnswerSettled


class Subscription:
    """One conversation's answer events, from the moment of subscribing; close it after."""

    def __init__(self, feed: ReplyFeed, conversation_id: str) -> None:
        self._feed = feed
        self.conversation_id = conversation_id
        self._send: MemoryObjectSendStream[AnswerEvent]
        # Unbounded: the central loop never waits for a slow reader (an answer is short).
        self._send, self._receive = anyio.create_memory_object_stream[AnswerEvent](math.inf)

    async def next(self, at_most: float) -> AnswerEvent | None:
        """The next event, or None after `at_most` seconds without one."""
        with anyio.move_on_after(at_most):
            return await self._receive.receive()
        return None

    def close(self) -> None:
        self._feed.unsubscribe(self.conversation_id, self._send)
        self._send.close()
        self._receive.close()


class ReplyFeed:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[MemoryObjectSendStream[AnswerEvent]]] = (
            defaultdict(set)
        )

    def subscribe(self, conversation_id: str) -> Subscription:
        subscription = Subscription(self, conversation_id)
        self._subscribers[conversation_id].add(subscription._send)
        return subscription

    def unsubscribe(
        self, conversation_id: str, stream: MemoryObjectSendStream[AnswerEvent]
    ) -> None:
        streams = self._subscribers.get(conversation_id)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._subscribers[conversation_id]

    def publish(self, conversation_id: str, event: AnswerEvent) -> None:
        for stream in self._subscribers.get(conversation_id, ()):
            stream.send_nowait(event)
