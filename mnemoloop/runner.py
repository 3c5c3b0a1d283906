"""`mnemoloop serve`: the central loop, the memory worker and the HTTP server in one process.
`mnemoloop worker`: the memory worker alone, for more memory throughput beside `serve`
processes on one PostgreSQL database.

SIGINT or SIGTERM stops taking new work, gives work in flight a few seconds to finish, and
stops. Nothing is lost either way: an unanswered conversation is answered after a restart
(or by another instance once the claim runs out), and so is a memory job left `running`.
"""

from __future__ import annotations

import logging
import secrets
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn

from admin_api import create_app
from loop.llm.choice import NoModelLoaded
from loop.service import Services, open_services
from loop.settings import Settings

log = logging.getLogger("mnemoloop")

DRAIN_SECONDS = 5.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ServeRefused(Exception):
    pass


def admin_token_for(settings: Settings) -> tuple[str, bool]:
    """The configured admin token, or a fresh one (True when generated)."""
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value(), False
    if settings.host not in LOOPBACK:
        raise ServeRefused(
            f"MNEMOLOOP_HOST={settings.host} is not loopback: set MNEMOLOOP_ADMIN_TOKEN to serve "
            "beyond this machine"
        )
    return "mla_" + secrets.token_urlsafe(24), True


@asynccontextmanager
async def claimed(services: Services) -> AsyncIterator[None]:
    """Take part as an instance: refused in one line (`InstanceRefused`) when the database
    cannot be shared (a SQLite file another process serves); otherwise listen for the
    other instances' notifications while the body runs."""
    services.database.claim_instance()
    async with anyio.create_task_group() as group:
        group.start_soon(services.listen)
        yield
        group.cancel_scope.cancel()


async def serve(settings: Settings) -> None:
    token, generated = admin_token_for(settings)
    async with open_services(settings) as services, claimed(services):
        log.info(
            "mnemoloop: %s, model %s, memory model %s",
            services.database.describe(),
            services.chat_model.name,
            services.memory_model.name,
        )
        if generated:
            print(f"mnemoloop: admin token (shown once): {token}", flush=True)
        config = uvicorn.Config(
            create_app(services, token),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            lifespan="on",
        )
        server = SignalFreeServer(config)
        worker = services.worker()
        server_stopped = anyio.Event()

        async def run_server() -> None:
            try:
                await server.serve()
            finally:
                server_stopped.set()

        async with anyio.create_task_group() as group:
            group.start_soon(services.central.run)
            group.start_soon(worker.run)
            group.start_soon(run_server)
            print(f"mnemoloop: serving on http://{settings.host}:{settings.port}", flush=True)
            await _until_signalled()
            # Stop taking requests and work, let what is in flight finish, then stop the rest.
            server.should_exit = True
            async with anyio.create_task_group() as drain:
                drain.start_soon(services.central.drain, DRAIN_SECONDS)
                drain.start_soon(worker.drain, DRAIN_SECONDS)
            with anyio.move_on_after(DRAIN_SECONDS):
                await server_stopped.wait()
            group.cancel_scope.cancel()
    print("mnemoloop: stopped", flush=True)


async def run_worker(settings: Settings) -> None:
    """Memory jobs only: no HTTP server, no answers, and no chat model loaded."""
    async with open_services(settings, chat_model=NoModelLoaded()) as services, claimed(
        services
    ):
        log.info(
            "mnemoloop worker: %s, memory model %s",
            services.database.describe(),
            services.memory_model.name,
        )
        worker = services.worker()
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)
            print("mnemoloop: worker running", flush=True)
            await _until_signalled()
            await worker.drain(DRAIN_SECONDS)
            group.cancel_scope.cancel()
    print("mnemoloop: stopped", flush=True)


async def _until_signalled() -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            log.info("mnemoloop: %s received, draining", signal.Signals(received).name)
            return


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound and listening now, so a port in use is known before anything is said
    (and port 0 has its real number): `ServeRefused` in one line when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family = infos[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ServeRefused(f"cannot listen on {host}:{port}: {reason}") from None


def http_server(app: Any, sock: socket.socket) -> SignalFreeServer:
    """uvicorn for `app` on `sock`, quiet but for warnings, with the app's lifespan."""
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    return SignalFreeServer(config)


class SignalFreeServer(uvicorn.Server):
    """uvicorn's server, leaving SIGINT/SIGTERM to its host: the runner drains the loop and
    the worker too (uvicorn would also re-raise the signal on its way out)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
