"""The energy chart: spending by the minute as stacked bars, drawn on the server as SVG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from loop.operations import MinuteSpending

WIDTH, HEIGHT = 720, 200
LEFT, BOTTOM, TOP = 48, 24, 8


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    # Conversations at the bottom, memory work on top of them.
    conversation_y: float
    conversation_height: float
    memory_y: float
    memory_height: float
    title: str


@dataclass(frozen=True)
class SpendingChart:
    width: int
    height: int
    left: int
    baseline: float
    peak: int
    bars: list[Bar]
    first_label: str
    last_label: str
    memory_total: int
    conversation_total: int

    @property
    def summary(self) -> str:
        """What the chart shows, in words (for screen readers, and for anyone)."""
        minutes = len(self.bars)
        return (
            f"Energy spent per minute over the last {minutes} minutes: {self.memory_total}"
            f" units on memory work and {self.conversation_total} on conversations;"
            f" the busiest minute spent {self.peak}."
        )


def spending_chart(minutes: Sequence[MinuteSpending]) -> SpendingChart:
    peak = max((m.memory + m.conversation for m in minutes), default=0)
    scale = (HEIGHT - BOTTOM - TOP) / peak if peak else 0.0
    baseline = float(HEIGHT - BOTTOM)
    slot = (WIDTH - LEFT) / max(len(minutes), 1)
    bars = []
    for index, minute in enumerate(minutes):
        conversation = minute.conversation * scale
        memory = minute.memory * scale
        bars.append(
            Bar(
                x=round(LEFT + index * slot + slot * 0.1, 2),
                width=round(slot * 0.8, 2),
                conversation_y=round(baseline - conversation, 2),
                conversation_height=round(conversation, 2),
                memory_y=round(baseline - conversation - memory, 2),
                memory_height=round(memory, 2),
                title=f"{_clock(minute.minute_s)}: {minute.memory} memory,"
                f" {minute.conversation} conversations",
            )
        )
    return SpendingChart(
        WIDTH,
        HEIGHT,
        LEFT,
        baseline,
        peak,
        bars,
        _clock(minutes[0].minute_s) if minutes else "",
        _clock(minutes[-1].minute_s) if minutes else "",
        sum(m.memory for m in minutes),
        sum(m.conversation for m in minutes),
    )


def _clock(minute_s: int) -> str:
    return datetime.fromtimestamp(minute_s, UTC).strftime("%H:%M UTC")
