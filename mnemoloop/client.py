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

Each method describes its request once, as a `Call`; the `@route` and `@event_stream`
decorators make the same description run blocking on `Client` and awaitable on `AsyncClient`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload
from urllib.parse import quote

import httpx
import msgspec

from admin_api.schemas import (
    AcceptedOut,
    AppOut,
    AppsOut,
    ConversationCreatedOut,
    ConversationOut,
    EndConversation,
    EnergyOut,
    ExportOut,
    HealthOut,
    HistoryOut,
    ImportedOut,
    ImportMemories,
    InstallApp,
    InstalledAppOut,
    JobOut,
    JobsOut,
    MemoriesOut,
    MemoryOut,
    PostedOut,
    PostMessage,
    Problem,
    PurgedOut,
    SuccessOut,
    UninstalledOut,
)

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
    "Unauthorized",
]

DEFAULT_TIMEOUT = 30.0
# How much longer than `wait` the client waits for the server's answer.
WAIT_MARGIN = 10.0
JSON = "application/json"
EVENT_STREAM = "text/event-stream"

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")

Query = Mapping[str, str | int | float | bool]
AppList = list[AppOut]
MemoryList = list[MemoryOut]
JobList = list[JobOut]


# Errors:
#
# ApiError        any answer that is not 2xx; carries the problem+json body
#  ├── BadRequest      400
#  ├── Unauthorized    401
#  ├── Forbidden       403
#  ├── NotFound        404
#  └── Conflict        409


class ApiError(Exception):
    """The API answered with an error; `problem` is its problem+json body."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.problem = problem

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def detail(self) -> str:
        return self.problem.detail


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


_ERRORS_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def api_error(response: httpx.Response) -> ApiError:
    """The error for an answer that is not 2xx (its body read)."""
    problem = _problem_in(response)
    return _ERRORS_BY_STATUS.get(response.status_code, ApiError)(problem)


def _problem_in(response: httpx.Response) -> Problem:
    try:
        return msgspec.json.decode(response.content, type=Problem)
    except msgspec.DecodeError:  # not problem+json: a proxy's page, say
        return Problem("about:blank", response.reason_phrase, response.status_code, response.text)


# The events of a streamed reply.


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


# A call, described once.


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to the API and how to read its answer."""

    method: str
    path: str
    decode: Callable[[bytes], T]
    params: Query = field(default_factory=dict)
    body: msgspec.Struct | None = None
    # The answer may take this long (a `wait`): the request's timeout is at least this.
    min_timeout: float = 0.0

    def result(self, response: httpx.Response) -> T:
        if not response.is_success:
            raise api_error(response)
        return self.decode(response.content)


def _as(kind: type[T]) -> Callable[[bytes], T]:
    return lambda content: msgspec.json.decode(content, type=kind)


def _picked(kind: type[R], pick: Callable[[R], T]) -> Callable[[bytes], T]:
    return lambda content: pick(msgspec.json.decode(content, type=kind))


def _nothing(_: object) -> None:
    return None


def _query(**values: str | int | float | bool | None) -> Query:
    return {name: value for name, value in values.items() if value is not None}


def _segment(value: str) -> str:
    return quote(value, safe="")


# Executing calls.


class _Connection:
    """What every request carries: the base URL, the bearer token and the timeout."""

    def __init__(self, base_url: str, token: str, timeout: float) -> None:
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout

    def _request(
        self, http: httpx.Client | httpx.AsyncClient, call: Call[Any], accept: str = JSON
    ) -> httpx.Request:
        headers = {"Authorization": f"Bearer {self._token}", "Accept": accept}
        content = None
        if call.body is not None:
            headers["Content-Type"] = JSON
            content = msgspec.json.encode(call.body)
        return http.build_request(
            call.method,
            self._base_url + call.path,
            params=call.params,
            content=content,
            headers=headers,
            timeout=self._timeout_for(call, accept),
        )

    def _timeout_for(self, call: Call[Any], accept: str) -> httpx.Timeout:
        seconds = max(self._timeout, call.min_timeout)
        if accept == EVENT_STREAM:
            # A stream is quiet while the model thinks or waits its turn; the server ends it.
            return httpx.Timeout(seconds, read=None)
        return httpx.Timeout(seconds)


class _SyncSession(_Connection):
    def __init__(
        self, base_url: str, token: str, timeout: float, http: httpx.Client | None
    ) -> None:
        super().__init__(base_url, token, timeout)
        self._owns_http = http is None
        self._http = http or httpx.Client()

    def run(self, call: Call[T]) -> T:
        return call.result(self._http.send(self._request(self._http, call)))

    def stream(self, call: Call[Any]) -> Iterator[ReplyEvent]:
        response = self._http.send(self._request(self._http, call, EVENT_STREAM), stream=True)
        try:
            if not response.is_success:
                response.read()
                raise api_error(response)
            reader = EventReader()
            for line in response.iter_lines():
                if (event := reader.feed(line)) is not None:
                    yield event
        finally:
            response.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()


class _AsyncSession(_Connection):
    def __init__(
        self, base_url: str, token: str, timeout: float, http: httpx.AsyncClient | None
    ) -> None:
        super().__init__(base_url, token, timeout)
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient()

    async def run(self, call: Call[T]) -> T:
        return call.result(await self._http.send(self._request(self._http, call)))

    async def stream(self, call: Call[Any]) -> AsyncIterator[ReplyEvent]:
        request = self._request(self._http, call, EVENT_STREAM)
        response = await self._http.send(request, stream=True)
        try:
            if not response.is_success:
                await response.aread()
                raise api_error(response)
            reader = EventReader()
            async for line in response.aiter_lines():
                if (event := reader.feed(line)) is not None:
                    yield event
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()


class Group(Generic[S]):
    """A group of routes, run by a blocking or an async session."""

    def __init__(self, session: S) -> None:
        self._session = session


def _bound(
    describe: Callable[..., Call[Any]], group: Group[Any], execute: Callable[[Call[Any]], Any]
) -> Callable[..., Any]:
    @functools.wraps(describe)
    def call(*args: Any, **kwargs: Any) -> Any:
        return execute(describe(group, *args, **kwargs))

    return call


class route(Generic[P, T]):
    """Turns a method that describes a call into one that makes it: on a `Client`'s group it
    returns the answer, on an `AsyncClient`'s it returns a coroutine of the answer."""

    def __init__(self, describe: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self._describe = describe

    @overload
    def __get__(self, group: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, group: Group[_SyncSession], owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, group: Group[_AsyncSession], owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, group: Group[Any] | None, owner: type[Any]) -> Any:
        return self if group is None else _bound(self._describe, group, group._session.run)


class event_stream(Generic[P]):
    """Like `route`, for a call answered as Server-Sent Events: the method returns an
    iterator of `ReplyEvent`s (an async iterator on an `AsyncClient`). The request is made
    when the iteration starts; to leave it early, close the iterator (`contextlib.closing`,
    `contextlib.aclosing`), which ends the request."""

    def __init__(self, describe: Callable[Concatenate[Any, P], Call[Any]]) -> None:
        self._describe = describe

    @overload
    def __get__(self, group: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(
        self, group: Group[_SyncSession], owner: type[Any]
    ) -> Callable[P, Iterator[ReplyEvent]]: ...
    @overload
    def __get__(
        self, group: Group[_AsyncSession], owner: type[Any]
    ) -> Callable[P, AsyncIterator[ReplyEvent]]: ...
    def __get__(self, group: Group[Any] | None, owner: type[Any]) -> Any:
        return self if group is None else _bound(self._describe, group, group._session.stream)


# The routes.


class Apps(Group[S]):
    """Installing and uninstalling apps (admin token)."""

    @route
    def install(self, app_id: str, name: str) -> Call[InstalledAppOut]:
        """Install an app (or re-install an uninstalled one); its API key is in this answer
        only. An app already installed raises `Conflict` (its key stays valid)."""
        return Call("POST", "/apps", _as(InstalledAppOut), body=InstallApp(app_id, name))

    @route
    def uninstall(self, app_id: str, purge_memories: bool = False) -> Call[UninstalledOut]:
        params = _query(purgeMemories=purge_memories)
        return Call("DELETE", f"/apps/{_segment(app_id)}", _as(UninstalledOut), params)

    @route
    def list(self) -> Call[AppList]:
        return Call("GET", "/apps", _picked(AppsOut, lambda out: out.apps))


class Conversations(Group[S]):
    """Conversations and their messages (admin token or the app's key)."""

    @route
    def open(self, app_id: str) -> Call[str]:
        """Open a conversation; returns its id."""
        path = f"/apps/{_segment(app_id)}/conversations"
        return Call("POST", path, _picked(ConversationCreatedOut, lambda out: out.conversation_id))

    @route
    def send(
        self, conversation_id: str, content: str, wait: float | None = None
    ) -> Call[PostedOut]:
        """Post a user message. With `wait`, wait up to that many seconds for the reply."""
        return _message(conversation_id, content, wait)

    @event_stream
    def stream(self, conversation_id: str, content: str) -> Call[Any]:
        """Post a user message and follow its reply: `ReplyDelta`s, then `ReplyDone` or
        `ReplyError`."""
        return _message(conversation_id, content, None)

    @route
    def get(self, conversation_id: str) -> Call[ConversationOut]:
        return Call("GET", _conversation(conversation_id), _as(ConversationOut))

    @route
    def end(self, conversation_id: str, reason: str = "app") -> Call[None]:
        """End a conversation (again is fine); its memory is written in the background."""
        path = f"{_conversation(conversation_id)}/end"
        return Call("POST", path, _picked(AcceptedOut, _nothing), body=EndConversation(reason))

    @route
    def retry(self, conversation_id: str) -> Call[None]:
        """Try again to answer a conversation whose answer failed."""
        path = f"{_conversation(conversation_id)}/retry"
        return Call("POST", path, _picked(AcceptedOut, _nothing))


def _conversation(conversation_id: str) -> str:
    return f"/conversations/{_segment(conversation_id)}"


def _message(conversation_id: str, content: str, wait: float | None) -> Call[PostedOut]:
    return Call(
        "POST",
        f"{_conversation(conversation_id)}/messages",
        _as(PostedOut),
        params=_query(wait=wait),
        body=PostMessage(content),
        min_timeout=0.0 if wait is None else wait + WAIT_MARGIN,
    )


class Memories(Group[S]):
    """An app's memories and their history: an app's key reads its own; deleting needs the
    admin token."""

    @route
    def list(self, app_id: str) -> Call[MemoryList]:
        """The app's memories, newest first."""
        return Call("GET", _memories(app_id), _picked(MemoriesOut, lambda out: out.memories))

    @route
    def search(self, app_id: str, query: str, limit: int | None = None) -> Call[MemoryList]:
        """The app's memories matching any word of `query`, best first."""
        params = _query(q=query, limit=limit)
        return Call(
            "GET", _memories(app_id), _picked(MemoriesOut, lambda out: out.memories), params
        )

    @route
    def delete(self, app_id: str, memory_id: int) -> Call[None]:
        path = f"{_memories(app_id)}/{memory_id}"
        return Call("DELETE", path, _picked(SuccessOut, _nothing))

    @route
    def export(self, app_id: str) -> Call[ExportOut]:
        """The app's memories as a document `import_` takes back (here or elsewhere)."""
        return Call("GET", f"{_memories(app_id)}/export", _as(ExportOut))

    @route
    def import_(
        self, app_id: str, document: ExportOut | ImportMemories, *, replace: bool = False
    ) -> Call[ImportedOut]:
        """Store the memories of an export, all or none (admin token). Refused (`Conflict`)
        when the app would hold more than its limit; `replace` deletes its memories first."""
        params = _query(replace="true") if replace else {}
        path = f"{_memories(app_id)}/import"
        return Call("POST", path, _as(ImportedOut), params, body=document)

    @route
    def purge(self, app_id: str) -> Call[PurgedOut]:
        """Delete all of the app's memories."""
        return Call("DELETE", _memories(app_id), _as(PurgedOut))

    @route
    def history(
        self,
        app_id: str,
        memory_id: int | None = None,
        *,
        since: int | None = None,
        limit: int | None = None,
    ) -> Call[HistoryOut]:
        """Every change to the app's memories (or to one memory), oldest first; pass the
        answer's `next_cursor` as `since` for the next page."""
        path = f"/apps/{_segment(app_id)}/history"
        if memory_id is not None:
            path = f"{_memories(app_id)}/{memory_id}/history"
        return Call("GET", path, _as(HistoryOut), _query(since=since, limit=limit))


def _memories(app_id: str) -> str:
    return f"/apps/{_segment(app_id)}/memories"


class _Api(Group[S]):
    """Every route, in groups; `Client` and `AsyncClient` say how they are run."""

    def __init__(self, session: S) -> None:
        super().__init__(session)
        self.apps = Apps(session)
        self.conversations = Conversations(session)
        self.memories = Memories(session)

    @route
    def health(self) -> Call[HealthOut]:
        return Call("GET", "/health", _as(HealthOut))

    @route
    def energy(self) -> Call[EnergyOut]:
        """The energy budget, and what memory work and conversations spent of it."""
        return Call("GET", "/energy", _as(EnergyOut))

    @route
    def jobs(self, app_id: str | None = None, status: str | None = None) -> Call[JobList]:
        """Memory jobs, newest first; `status` is pending, running, deferred, done, skipped,
        failed or cancelled."""
        params = _query(appId=app_id, status=status)
        return Call("GET", "/memory-jobs", _picked(JobsOut, lambda out: out.jobs), params)


class Client(_Api[_SyncSession]):
    """The API, blocking. `token` is the admin token or an app's key; `http_client`, if
    given, is used as it is (and not closed by `close()`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(_SyncSession(base_url, token, timeout, http_client))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Api[_AsyncSession]):
    """The API, async. `token` is the admin token or an app's key; `http_client`, if given,
    is used as it is (and not closed by `aclose()`)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(_AsyncSession(base_url, token, timeout, http_client))

    async def aclose(self) -> None:
        await self._session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
