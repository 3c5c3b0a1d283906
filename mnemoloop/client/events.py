"""The events of a streamed reply, read from Server-Sent Events."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from admin_api.replies import Problem


class ReplyDelta(msgspec.Struct, frozen=True):
    """A piece of the reply's text, as it is written."""

    text: str


class ReplyDone(msgspec.Struct, frozen=True, rename="camel"):
    """The reply is stored (`message_id` is null when the conversation ended without one)."""

    message_id: int | None
    conversation_ended: bool


@dataclass(frozen=True)
class ReplyError:
    """The answer failed: status 502 for good, 503 when it will be tried again."""

    problem: Problem


ReplyEvent = ReplyDelta | ReplyDone | ReplyError


def reply_event(name: str, data: str) -> ReplyEvent | None:
    """The event a Server-Sent Event carries; None for one this client does not know."""
    if name == "delta":
        return msgspec.json.decode(data, type=ReplyDelta)
    if name == "done":
        return msgspec.json.decode(data, type=ReplyDone)
    if name == "error":
        return ReplyError(msgspec.json.decode(data, type=Problem))
    return None


class EventReader:
    """Reads Server-Sent Events one line at a time (the WHATWG event-stream format)."""

    def __init__(self) -> None:
        self._name = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> ReplyEvent | None:
        """Take one line; a blank line completes an event, which is returned."""
        if not line:
            return self._complete()
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            self._name = value
        elif key == "data":
            self._data.append(value)
        return None  # a comment (empty key), `id`, `retry` or an unknown field

    def _complete(self) -> ReplyEvent | None:
        name, data = self._name, "\n".join(self._data)
        self._name, self._data = "message", []
        return reply_event(name, data) if data else None
