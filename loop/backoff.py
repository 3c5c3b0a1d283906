"""How long to wait before trying work again after it failed: doubling, with a ceiling."""

from __future__ import annotations

MAX_SECONDS = 300.0


def backoff_seconds(tries: int, base_seconds: float) -> float:
    """The wait after `tries` failed tries: base, 2 × base, 4 × base, … at most 5 minutes."""
    return min(base_seconds * 2.0 ** max(tries - 1, 0), MAX_SECONDS)
