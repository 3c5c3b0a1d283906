"""The memory-quality benchmark runs in --quick mode with the embedded model and prints every
key (the figures are for people to read, not judged here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

from eval import KEYS  # noqa: E402


@pytest.mark.real_model
@pytest.mark.usefixtures("allow_model_requests")
def test_eval_quick_prints_every_key(tmp_path):
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "eval.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOOP_")},
            "MNEMOLOOP_LLM": "local",
        },
    )
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout)
    assert set(KEYS) <= set(figures)
    assert figures["apps"] == 1 and figures["conversations"] == 24
    assert figures["jobs_failed"] == []
    for key in ("capture", "recall", "update_recall", "stale_rate", "no_fact_share"):
        assert 0 <= figures[key] <= 1, key
    assert {"recall", "update_recall", "stale_rate", "no_fact_share"} <= set(figures["fifo"])
