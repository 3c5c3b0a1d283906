"""Run `mnemoloop serve` as a real separate process, against the stand-in Ollama."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx

from tests.fake_ollama import MODEL


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_serve(db: Path | str, port: int, ollama: str, log: Path, token: str,
                **settings: str) -> subprocess.Popen[bytes]:
    return start_command("serve", db, ollama, log, admin_token=token, port=str(port), **settings)


def start_worker(db: Path | str, ollama: str, log: Path, **settings: str
                 ) -> subprocess.Popen[bytes]:
    """`mnemoloop worker`: memory work only."""
    return start_command("worker", db, ollama, log, **settings)


def start_command(command: str, db: Path | str, ollama: str, log: Path,
                  **settings: str) -> subprocess.Popen[bytes]:
    # The stand-in writes what its script says, not what a trial of a model would judge: the
    # writer is named rather than chosen by `auto`.
    environment = {**os.environ, "MNEMOLOOP_DB": str(db), "MNEMOLOOP_LLM": f"ollama:{MODEL}",
                   "OLLAMA_HOST": ollama, "MNEMOLOOP_MEMORY_WRITER": "model",
                   **{f"MNEMOLOOP_{name.upper()}": value for name, value in settings.items()}}
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "mnemoloop", command],
                                env=environment, stdout=out, stderr=subprocess.STDOUT)


async def wait_healthy(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        with anyio.fail_after(30):
            while True:
                try:
                    if (await client.get("/health")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.1)
