"""`mnemoloop serve`: the central loop, the memory worker and the HTTP server in one process.

SIGINT or SIGTERM stops taking new work, gives work in flight a few seconds to finish, and
stops. Nothing is lost either way: an unanswered conversation is answered after a restart,
and a memory job left `running` is requeued.
"""

from __future__ import annotations

import logging
import secrets
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn

from loop.service import Services, open_services
from loop.settings import Settings

log = logging.getLogger("mnemoloop")

HttpAppFactory = Callable[[Services, str], Any]
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


async def serve(settings: Settings, http_app_factory: HttpAppFactory) -> None:
    token, generated = admin_token_for(settings)
    async with open_services(settings) as services:
        log.info(
            "mnemoloop: database %s, model %s, memory model %s",
            settings.db,
            services.chat_model.name,
            services.memory_model.name,
        )
        if generated:
            print(f"mnemoloop: admin token (shown once): {token}", flush=True)
        config = uvicorn.Config(
            http_app_factory(services, token),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            lifespan="on",
        )
        server = _Server(config)
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
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for received in signals:
                    log.info("mnemoloop: %s received, draining", signal.Signals(received).name)
                    break
            # Stop taking requests and work, let what is in flight finish, then stop the rest.
            server.should_exit = True
            async with anyio.create_task_group() as drain:
                drain.start_soon(services.central.drain, DRAIN_SECONDS)
                drain.start_soon(worker.drain, DRAIN_SECONDS)
            with anyio.move_on_after(DRAIN_SECONDS):
                await server_stopped.wait()
            group.cancel_scope.cancel()
    print("mnemoloop: stopped", flush=True)


class _Server(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The runner owns SIGINT/SIGTERM, so that the loop and the worker drain too.
        yield
