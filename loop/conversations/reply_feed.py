"""What happens to answers on this instance, as it happens: the central loop publishes each
piece of an answer's text and how the answer ended; callers waiting for a reply subscribe to
one conversation, and are handed the pieces of an answer under way first. Nothing here is
stored; the stored conversation stays the truth (another instance may answer, and then only
the database tells)."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

import anyio


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
        # A queue and a wake-up rather than a stream: an event is never lost to a timeout
        # that ends the wait at the moment it arrives.
        self._events: deque[AnswerEvent] = deque()
        self._arrived = anyio.Event()

    def put(self, event: AnswerEvent) -> None:
        self._events.append(event)
        self._arrived.set()

    async def next(self, at_most: float) -> AnswerEvent | None:
        """The next event, or None after `at_most` seconds without one."""
        if not self._events:
            with anyio.move_on_after(at_most):
                await self._arrived.wait()
        if not self._events:
            return None
        event = self._events.popleft()
        if not self._events:
            self._arrived = anyio.Event()
        return event

    def close(self) -> None:
        self._feed.unsubscribe(self)
        self._events.clear()


class ReplyFeed:
    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[Subscription]] = defaultdict(set)
        # The pieces of each answer being written on this instance, until it settles: a
        # caller that subscribes late (one that asks the same question again) reads it whole.
        self._under_way: dict[str, list[AnswerText]] = {}

    def subscribe(self, conversation_id: str) -> Subscription:
        subscription = Subscription(self, conversation_id)
        self._subscribers[conversation_id].add(subscription)
        for piece in self._under_way.get(conversation_id, ()):
            subscription.put(piece)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Idempotent."""
        subscribers = self._subscribers.get(subscription.conversation_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.conversation_id]

    def publish(self, conversation_id: str, event: AnswerEvent) -> None:
        if isinstance(event, AnswerText):
            self._under_way.setdefault(conversation_id, []).append(event)
        else:
            self._under_way.pop(conversation_id, None)
        for subscription in self._subscribers.get(conversation_id, ()):
            subscription.put(event)
