"""A call to the API, described once, and the sessions that make it: blocking or async.

The `@route` and `@event_stream` decorators make the same description run blocking on a
`Client`'s groups and awaitable on an `AsyncClient`'s.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload
from urllib.parse import quote

import httpx
import msgspec

from mnemoloop.client.errors import api_error
from mnemoloop.client.events import EventReader, ReplyEvent

JSON = "application/json"
EVENT_STREAM = "text/event-stream"

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")

Query = Mapping[str, str | int | float | bool]


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


def decoded_as(kind: type[T]) -> Callable[[bytes], T]:
    return lambda content: msgspec.json.decode(content, type=kind)


def picked(kind: type[R], pick: Callable[[R], T]) -> Callable[[bytes], T]:
    return lambda content: pick(msgspec.json.decode(content, type=kind))


def nothing(_: object) -> None:
    return None


def query_params(**values: str | int | float | bool | None) -> Query:
    return {name: value for name, value in values.items() if value is not None}


def segment(value: str) -> str:
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


class SyncSession(_Connection):
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


class AsyncSession(_Connection):
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
    def __get__(self, group: Group[SyncSession], owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, group: Group[AsyncSession], owner: type[Any]
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
        self, group: Group[SyncSession], owner: type[Any]
    ) -> Callable[P, Iterator[ReplyEvent]]: ...
    @overload
    def __get__(
        self, group: Group[AsyncSession], owner: type[Any]
    ) -> Callable[P, AsyncIterator[ReplyEvent]]: ...
    def __get__(self, group: Group[Any] | None, owner: type[Any]) -> Any:
        return self if group is None else _bound(self._describe, group, group._session.stream)
