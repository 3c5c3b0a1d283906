"""Schemathesis against the live service's own OpenAPI document: generated requests for every
operation, responses checked against the schema (status codes, content types, bodies)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.fake_ollama import fake_ollama
from tests.live_service import free_port, start_serve, wait_healthy

pytestmark = [pytest.mark.fault, pytest.mark.anyio]

# Left out, each for a stated reason:
# - use_after_free: after DELETE /apps/{id}/memories the collection is empty, not gone, and
#   GET answers 200 with no memories, as documented.
# - allow_header_conformance: Litestar's automatic OPTIONS answer lists only the methods of
#   the first handler registered on a path; OPTIONS is not part of this API.
EXCLUDED = "use_after_free,allow_header_conformance"
CONFIG = Path(__file__).with_name("schemathesis.toml")


async def test_every_operation_conforms_to_the_schema(tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with fake_ollama(delay=0.005) as ollama:
        server = start_serve(tmp_path / "st.db", port, ollama, tmp_path / "serve.log",
                             token="schema-test")
        try:
            await wait_healthy(base)
            schemathesis = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
            assert schemathesis, "schemathesis is a dev dependency"
            result = await anyio.run_process(
                [schemathesis, "--config-file", str(CONFIG), "run",
                 f"{base}/schema/openapi.json", "-H", "Authorization: Bearer schema-test",
                 "--max-examples", "25", "--seed", "1", "--exclude-checks", EXCLUDED,
                 # No example database: every run, CI's included, draws the same cases.
                 "--generation-database", "none"],
                check=False, stderr=subprocess.STDOUT)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    output = result.stdout.decode(errors="replace")
    assert result.returncode == 0, output[-6000:]
