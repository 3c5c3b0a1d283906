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


def run_eval(tmp_path, *args: str) -> dict:
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "eval.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOOP_")},
    )
    assert run.returncode == 0, run.stderr
    figures: dict = json.loads(run.stdout)
    return figures


def test_the_pipeline_lets_a_good_models_work_through(tmp_path):
    """The oracle writes each conversation's labelled facts as a capable model would (in
    English about a Spanish or French conversation, "17:30", "May 21"), quoting the turn that
    states each, and compacts by deleting what holds none: the model writer must keep what it
    keeps, in every domain and language of the shipped stories."""
    # A cap of 6 makes every app compact, so that the oracle's decisions are put to the test.
    figures = run_eval(tmp_path, "--model", "oracle", "--limit", "6")
    assert figures["apps"] >= 10 and figures["jobs_failed"] == []
    assert figures["recall"] >= 0.95
    assert figures["update_recall"] >= 0.95
    assert figures["stale_alone"] <= 0.05
    assert figures["decisions_applied"] >= 0.9
    # Every update is the model's to see ("versandkostenfrei ab 39 €" and "Gratisversand ab
    # 49 €"), and its answers are applied; its sentences, quoting the conversation, all pass.
    assert figures["writer"] == "model"
    assert figures["updates_by_model"] >= 10
    assert figures["model_sentences"]["grounded_share"] == 1.0
    assert figures["chars_per_fact"] <= 150 and figures["quote_share"] == 0
    assert len(figures["groups"]) >= 7
    assert figures["recall"] > figures["fifo"]["recall"]


def test_an_old_value_beside_its_new_one_is_history_not_stale(tmp_path):
    facts = [
        {"id": "old", "kind": "superseded", "patterns": ["denver"],
         "description": "The user lived in Denver."},
        {"id": "new", "kind": "update", "supersedes": "old", "patterns": ["miami"],
         "description": "The user moved from Denver to Miami in May."},
    ]
    conversation = {
        "facts": ["old", "new"],
        "messages": [
            {"role": "user", "content": "We moved from Denver to Miami in May."},
            {"role": "assistant", "content": "Noted: Miami it is."},
        ],
    }
    stories = tmp_path / "stories.json"
    stories.write_text(json.dumps({"apps": [
        {"appId": "a", "name": "A", "facts": facts, "conversations": [conversation]}
    ]}))
    figures = run_eval(tmp_path, "--model", "oracle", "--stories", str(stories))
    assert figures["stale_rate"] == 1.0  # the old value is still held...
    assert figures["stale_alone"] == 0.0  # ...but only beside the new one
