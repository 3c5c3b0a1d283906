"""A typed client for the HTTP API, blocking (`Client`) or async (`AsyncClient`), on httpx.

Answers are decoded into the API's own models (`admin_api.schemas`)::

    from mnemoloop.client import Client, ReplyDelta

    with Client("http://127.0.0.1:8080", token="admin-secret") as client:
        key = client.apps.install("cal", "Calendar").api_key
        conversation_id = client.conversations.open("cal")
        print(client.conversations.send(conversation_id, "Hi", wait=30).reply)
        for event in client.conversations.stream(conversation_id, "And tomorrow?"):
            if isinstance(event, ReplyDelta):
                print(event.text, end="")
        client.conversations.end(conversation_id)

`AsyncClient` has the same groups and methods, to be awaited (`stream` gives an async
iterator). Every answer that is not 2xx raises `ApiError` (a subclass for common statuses).

Each method describes its request once, as a `Call` (`calls.py`); the groups of routes and the
two clients are in `routes.py` (the people's routes in `people.py`, the consolidation passes'
in `consolidations.py`), the errors in `errors.py`, a streamed reply's events in `events.py`.
"""

from mnemoloop.client.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    TooManyRequests,
    Unauthorized,
)
from mnemoloop.client.events import ReplyDelta, ReplyDone, ReplyError, ReplyEvent
from mnemoloop.client.routes import AsyncClient, Client

__all__ = [
    "ApiError",
    "AsyncClient",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "NotFound",
    "ReplyDelta",
    "ReplyDone",
    "ReplyError",
    "ReplyEvent",
    "TooManyRequests",
    "Unauthorized",
]
