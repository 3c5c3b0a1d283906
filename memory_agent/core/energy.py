"""Energy metering: what LLM calls cost, kept until the host polls it."""

from __future__ import annotations

import math
import threading

from memory_agent.core.chat_model import TokenUsage


def energy_cost(usage: TokenUsage, tokens_per_unit: int) -> int:
    """`ceil((prompt + completion tokens) / tokens_per_unit)`."""
    return math.ceil(usage.total / tokens_per_unit)


class EnergyMeter:
    """Accumulates the cost of calls until `take()` hands it out and starts again at zero;
    safe to use from several threads."""

    def __init__(self, tokens_per_unit: int) -> None:
        if tokens_per_unit <= 0:
            raise ValueError("tokens_per_unit must be positive")
        self._tokens_per_unit = tokens_per_unit
        self._unpolled = 0
        # A job's transaction may take the units on the database's thread (the embedded
        # engine runs it there) while calls on the event loop add more.
        self._lock = threading.Lock()

    def charge(self, usage: TokenUsage) -> int:
        cost = energy_cost(usage, self._tokens_per_unit)
        with self._lock:
            self._unpolled += cost
        return cost

    def take(self) -> int:
        with self._lock:
            spent, self._unpolled = self._unpolled, 0
        return spent

    def give_back(self, units: int) -> None:
        """Units taken whose spending was not recorded after all, to be taken again."""
        with self._lock:
            self._unpolled += units
