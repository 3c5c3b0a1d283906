"""`mnemoloop serve` tells the truth at start: "serving on" once the port is bound (the real
one for port 0), a port in use in one line, the model checked, `/health` part by part, and a
generated admin token kept (as a hash) across restarts until `mnemoloop token rotate`."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.fake_ollama import MODEL, fake_ollama
from tests.live_service import free_port


class Serve:
    """`mnemoloop serve` in a process of its own, its output read as it comes."""

    def __init__(self, db: Path | str, **settings: str) -> None:
        environment = {
            **os.environ, "MNEMOLOOP_DB": str(db), "MNEMOLOOP_PORT": "0",
            **{f"MNEMOLOOP_{name.upper()}": value for name, value in settings.items()},
        }
        environment.pop("MNEMOLOOP_ADMIN_TOKEN", None)
        if "ollama_host" in settings:
            environment["OLLAMA_HOST"] = settings["ollama_host"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mnemoloop", "serve"], env=environment, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.out = ""
        self.err = ""
        self._readers = [threading.Thread(target=self._read, args=(name,), daemon=True)
                         for name in ("out", "err")]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str) -> None:
        stream = self.process.stdout if name == "out" else self.process.stderr
        assert stream is not None
        for line in stream:
            setattr(self, name, getattr(self, name) + line)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while not (found := re.search(pattern, self.out + self.err)):
            assert self.process.poll() is None or time.monotonic() < deadline, (self.out, self.err)
            assert time.monotonic() < deadline, (self.out, self.err)
            time.sleep(0.05)
        return found

    def stop(self) -> int:
        """SIGTERM, then its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.ended()

    def ended(self) -> int:
        """Its exit code, once it has ended by itself."""
        code = self.process.wait(timeout=60)
        for reader in self._readers:
            reader.join(timeout=10)
        for pipe in (self.process.stdout, self.process.stderr):
            assert pipe is not None
            pipe.close()
        return code


def cli(db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "MNEMOLOOP_ADMIN_TOKEN"}
    return subprocess.run([sys.executable, "-m", "mnemoloop", *args, "--db", str(db)],
                          env=environment, capture_output=True, text=True, timeout=60)


def status(url: str, path: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url + path, headers=headers, timeout=10).status_code


def test_serving_on_the_real_port_and_one_admin_token_kept_until_rotated(db_path):
    with fake_ollama() as ollama:
        settings = {"llm": f"ollama:{MODEL}", "ollama_host": ollama}
        first = Serve(db_path, **settings)
        token = first.wait_for(r"admin token \(shown once.*\): (mla_\S+)").group(1)
        url = first.wait_for(r"serving on (http://127\.0\.0\.1:(\d+))").group(1)
        assert not url.endswith(":0")
        assert first.out.index("admin token") < first.out.index("serving on")
        assert status(url, "/apps", token) == 200
        health = httpx.get(url + "/health").json()
        models = health.pop("models")
        assert health == {"status": "ok", "model": {"ready": True, "reason": None},
                          "database": {"ready": True, "reason": None},
                          "memoryWorker": {"ready": True, "reason": None}, "warnings": []}
        # What the stand-in says its model holds, and the steady num_ctx it is asked for.
        assert models["chatWindow"] == (
            "131072 tokens (Ollama /api/show: llama.context_length); it is asked for 8192"
            " (num_ctx)")
        assert models["memoryWriter"] in ("model", "extractive")
        assert models["memoryWriterWhy"].startswith("auto: ")
        assert first.stop() == 0

        again = Serve(db_path, **settings)
        url = again.wait_for(r"serving on (http://\S+)").group(1)
        assert "the one shown at the first start" in again.out and token not in again.out
        assert status(url, "/apps", token) == 200  # the same token after a restart

        rotated = cli(db_path, "token", "rotate")
        assert rotated.returncode == 0, rotated.stderr
        new = re.search(r"new admin token \(shown once\): (mla_\S+)", rotated.stdout).group(1)
        deadline = time.monotonic() + 15
        while status(url, "/apps", token) != 401:
            assert time.monotonic() < deadline, "the old token still opens the API"
            time.sleep(0.2)
        assert status(url, "/apps", new) == 200
        assert again.stop() == 0


@pytest.mark.sqlite_only
def test_a_port_in_use_is_one_line_and_nothing_else_is_said(db_path):
    with socket.socket() as taken, fake_ollama() as ollama:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = Serve(db_path, llm=f"ollama:{MODEL}", ollama_host=ollama, port=str(port))
        code = refused.ended()
    assert code == 2
    assert refused.err.splitlines()[-1] == (
        f"mnemoloop: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert "Traceback" not in refused.err and refused.out == ""


@pytest.mark.sqlite_only
def test_a_model_that_cannot_answer_is_said_at_start_and_by_health(db_path):
    closed = free_port()
    serve = Serve(db_path, llm="ollama:llama3.2:1b", ollama_host=f"http://127.0.0.1:{closed}")
    url = serve.wait_for(r"serving on (http://\S+)").group(1)
    assert (f"warning: the model is not ready: cannot reach Ollama at http://127.0.0.1:{closed}"
            in serve.err)
    response = httpx.get(url + "/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded" and not body["model"]["ready"]
    assert "cannot reach Ollama" in body["model"]["reason"] and body["database"]["ready"]
    assert serve.stop() == 0

    with fake_ollama() as ollama:
        serve = Serve(db_path, llm="ollama:other:7b", ollama_host=ollama)
        serve.wait_for("serving on")
        assert "does not have other:7b: run `ollama pull other:7b`" in serve.err
        assert serve.stop() == 0


@pytest.mark.sqlite_only
def test_a_model_file_that_does_not_exist_is_named(db_path, tmp_path):
    missing = tmp_path / "nowhere.gguf"
    serve = Serve(db_path, llm="local", local_model_path=str(missing))
    assert serve.ended() == 2
    assert serve.err.splitlines()[-1] == (
        f"mnemoloop: MNEMOLOOP_LOCAL_MODEL_PATH={missing}: no such file (give a GGUF model file)"
    )


def test_token_rotate_refuses_a_configured_token(tmp_path):
    db = tmp_path / "mnemoloop.db"
    assert cli(db, "migrate").returncode == 0
    environment = {**os.environ, "MNEMOLOOP_ADMIN_TOKEN": "set-by-the-operator"}
    refused = subprocess.run([sys.executable, "-m", "mnemoloop", "token", "rotate", "--db",
                              str(db)], env=environment, capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2
    assert "set by MNEMOLOOP_ADMIN_TOKEN: change it there" in refused.stderr
