"""The benchmark script runs in --quick mode and prints every key (figures are not judged here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KEYS = {
    "retrieval_p50_ms", "retrieval_p99_ms", "retrieval_scaling", "jobs_per_s", "overhead_pct",
    "http_rps", "http_p99_ms", "http_vs_floor", "model_memory_s", "model_tokens_per_s",
    "energy_memory_share", "rss_mb", "loop_lag_p99_ms", "pg_retrieval_p99_ms", "pg_http_vs_floor",
    "pg_loop_lag_p99_ms", "pg_jobs_per_s_1_worker", "pg_jobs_per_s_4_workers",
    "pg_worker_scaling", "spaces_p99_scaling", "spaces_retrieval_p99_ms", "dropin_added_p50_ms",
    "dropin_ttft_p50_ms", "model_ttft_p50_ms", "energy_memory_share_steady",
    "model_memory_s_busy_core", "unnamed_concurrent_errors", "responses_added_p50_ms",
    "tool_round_trip_added_p50_ms", "profile_retrieval_p99_ms", "profile_p99_scaling",
    "consolidation_work_s", "consolidation_paced_block_p99_ms",
    "consolidation_paced_window_p99_ms", "edge_write_ms",
}


@pytest.mark.usefixtures("allow_model_requests")
def test_bench_quick_prints_every_key():
    script = Path(__file__).resolve().parent.parent / "scripts" / "bench.py"
    run = subprocess.run([sys.executable, str(script), "--quick", "--json"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout)
    assert KEYS <= set(figures)
    measured = {key for key in KEYS if figures[key] is not None}
    assert {"retrieval_p99_ms", "jobs_per_s", "overhead_pct", "http_rps", "rss_mb"} <= measured
    assert figures["http_errors"] == 0 and figures["pg_http_errors"] == 0
    # Measured: the share of energy memory work spent (with the embedded model's extractive
    # writer a memory costs no call, so one quick conversation may spend none on memory).
    assert 0 <= figures["energy_memory_share"] < 1
    assert figures["jobs_per_s_extractive"] > 0
    # The paced pass ran in its windows (it is paused between them, not stopped).
    assert figures["consolidation_paced_groups"] > 0
