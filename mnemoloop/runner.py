"""`mnemoloop serve`: the central loop, the memory worker and the HTTP server in one process.
`mnemoloop worker`: the memory worker alone, for more memory throughput beside `serve`
processes on one PostgreSQL database.

SIGINT or SIGTERM stops taking new work, gives work in flight a few seconds to finish, and
stops. Nothing is lost either way: an unanswered conversation is answered after a restart
(or by another instance once the claim runs out), and so is a memory job left `running`.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn

from admin_api import create_app
from loop.llm import NoModelLoaded
from loop.service import Services, open_services
from loop.settings import Settings

log = logging.getLogger("mnemoloop")

DRAIN_SECONDS = 5.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# How long an idle client connection is kept open. uvicorn's 5 s is also httpx's and many
# pools' own expiry: a client then reuses a connection in the instant the server closes it,
# and its request fails with a dropped connection. A longer wait leaves the closing to the
# client.
KEEP_ALIVE_SECONDS = 75


class ServeRefused(Exception):
    pass


def refuse_public_bind_without_token(settings: Settings) -> None:
    """A generated token is printed on this machine's console: beyond loopback, the operator
    must choose the token."""
    if settings.admin_token is None and settings.host not in LOOPBACK:
        raise ServeRefused(
            f"MNEMOLOOP_HOST={settings.host} is not loopback: set MNEMOLOOP_ADMIN_TOKEN to serve "
            "beyond this machine"
        )


@asynccontextmanager
async def claimed(services: Services) -> AsyncIterator[None]:
    """Take part as an instance: refused in one line (`InstanceRefused`) when the database
    cannot be shared (a SQLite file another process serves); otherwise listen for the
    other instances' notifications, and write this one's energy spending by the minute,
    while the body runs."""
    services.database.claim_instance()
    async with anyio.create_task_group() as group:
        group.start_soon(services.listen)
        group.start_soon(services.stores.energy.write_spending_every)
        yield
        group.cancel_scope.cancel()


async def serve(settings: Settings) -> None:
    """Bind first (a port in use is one line, before anything else is said), then open the
    database and the model, check the model, and say "serving on" once requests are taken."""
    refuse_public_bind_without_token(settings)
    sock = listening_socket(settings.host, settings.port)
    try:
        async with open_services(settings) as services, claimed(services):
            log.info(
                "mnemoloop: %s, model %s, memory model %s (%s)",
                services.database.describe(),
                services.models.chat.name,
                services.models.memory.name,
                _writer_said(services),
            )
            _log_windows(services)
            model = await services.health.model()
            if not model.ready:
                print(f"mnemoloop: warning: the model is not ready: {model.reason}; messages"
                      " wait for it, and /health says so", file=sys.stderr, flush=True)
            await _announce_admin_token(services)
            await _run_until_signalled(services, create_app(services), sock)
    finally:
        sock.close()
    print("mnemoloop: stopped", flush=True)


def _log_windows(services: Services) -> None:
    models = services.models
    windows = [(models.chat, models.chat_window), (models.memory, models.memory_window)]
    if models.memory is models.chat or isinstance(models.chat, NoModelLoaded):
        windows = windows[1:]
    for model, window in windows:
        if window is not None:
            log.info("mnemoloop: %s holds %s", model.name, window.said)


def _writer_said(services: Services) -> str:
    choice = services.writer_choice
    if choice.settled:
        return f"{choice.writer} writer"
    return "its writer chosen once the model is tried"


async def _announce_admin_token(services: Services) -> None:
    made = await services.admin_token.ensure()
    if made:
        print(
            f"mnemoloop: admin token (shown once; kept across restarts, `mnemoloop token rotate`"
            f" makes a new one): {made}",
            flush=True,
        )
    elif not services.admin_token.configured:
        print(
            "mnemoloop: admin token: the one shown at the first start on this database"
            " (`mnemoloop token rotate` makes a new one)",
            flush=True,
        )


async def _run_until_signalled(services: Services, app: Any, sock: socket.socket) -> None:
    server = http_server(app, sock)
    worker = services.worker
    server_stopped = anyio.Event()

    async def run_server() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            server_stopped.set()

    async with anyio.create_task_group() as group:
        group.start_soon(services.central.run)
        group.start_soon(_memory_work, services)
        group.start_soon(run_server)
        # uvicorn says it has started with a flag, not an event.
        while not server.started and not server_stopped.is_set():  # noqa: ASYNC110
            await anyio.sleep(0.01)
        if not server.started:
            raise ServeRefused("the HTTP server did not start (see the log above)")
        # The signals are ours before "serving on" is said: a SIGTERM sent on reading it would
        # otherwise meet the default handler and end the process without draining.
        with _signals() as signals:
            host, port = sock.getsockname()[:2]
            print(f"mnemoloop: serving on http://{_url_host(host)}:{port}", flush=True)
            await _until_signalled_or(signals, server_stopped)
        # Stop taking requests and work, let what is in flight finish, then stop the rest.
        server.should_exit = True
        async with anyio.create_task_group() as drain:
            drain.start_soon(services.central.drain, DRAIN_SECONDS)
            drain.start_soon(worker.drain, DRAIN_SECONDS)
        with anyio.move_on_after(DRAIN_SECONDS):
            await server_stopped.wait()
        group.cancel_scope.cancel()


async def _memory_work(services: Services) -> None:
    """The memory worker, once the writer is known (`auto` tries a model first, while
    conversations are already answered)."""
    await services.writer_choice.settle()
    await services.worker.run()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def run_worker(settings: Settings) -> None:
    """Memory jobs only: no HTTP server, no answers, and no chat model loaded."""
    async with open_services(settings, chat_model=NoModelLoaded()) as services, claimed(
        services
    ):
        log.info(
            "mnemoloop worker: %s, memory model %s (%s)",
            services.database.describe(),
            services.models.memory.name,
            _writer_said(services),
        )
        _log_windows(services)
        worker = services.worker
        async with anyio.create_task_group() as group:
            group.start_soon(_memory_work, services)
            with _signals() as signals:
                print("mnemoloop: worker running", flush=True)
                await _until_signalled(signals)
            await worker.drain(DRAIN_SECONDS)
            group.cancel_scope.cancel()
    print("mnemoloop: stopped", flush=True)


def _signals() -> AbstractContextManager[AsyncIterator[int]]:
    """SIGINT and SIGTERM, received by the loop from now on instead of ending the process."""
    return anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)


async def _until_signalled(signals: AsyncIterator[int]) -> None:
    async for received in signals:
        log.info("mnemoloop: %s received, draining", signal.Signals(received).name)
        return


async def _until_signalled_or(signals: AsyncIterator[int], stopped: anyio.Event) -> None:
    """Until SIGINT or SIGTERM, or until `stopped` is set (the HTTP server ended by itself)."""
    async with anyio.create_task_group() as group:

        async def then_stop(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        group.start_soon(then_stop, lambda: _until_signalled(signals))
        group.start_soon(then_stop, stopped.wait)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound and listening now, so a port in use is known before anything is said
    (and port 0 has its real number): `ServeRefused` in one line when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family = infos[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        # create_server adds the address to its message: the error's own words suffice.
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise ServeRefused(f"cannot listen on {host}:{port}: {reason}") from None


def http_server(app: Any, sock: socket.socket) -> SignalFreeServer:
    """uvicorn for `app` on `sock`, quiet but for warnings, with the app's lifespan. The
    client's address is the connecting peer's: uvicorn would otherwise take it from
    `X-Forwarded-For` when the peer is local, which anyone on the machine can set (and the
    count of wrong tokens goes by that address)."""
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", proxy_headers=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    return SignalFreeServer(config)


class SignalFreeServer(uvicorn.Server):
    """uvicorn's server, leaving SIGINT/SIGTERM to its host: the runner drains the loop and
    the worker too (uvicorn would also re-raise the signal on its way out)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
