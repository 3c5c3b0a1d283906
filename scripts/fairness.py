#!/usr/bin/env python3
"""Answer latency of a healthy app alone, and beside another app with 8 hanging conversations.

The real loop and a real SQLite file, with a scripted model that answers the healthy app in
50 ms and never answers the other. Prints one JSON object (milliseconds; ratio = beside ÷
alone, target ≤ 2).

    .venv/bin/python scripts/fairness.py [--questions 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_models import ScriptedModel

from loop.service import open_services
from loop.settings import Settings

HANGING_APP = "Hanging"


async def latencies(services: Any, app_id: str, questions: int) -> list[float]:
    found = []
    for _ in range(questions):
        conversation_id = await services.stores.conversations.open(app_id)
        started = time.perf_counter()
        conversations = services.stores.conversations
        await conversations.add_message(conversation_id, "user", "Hello?")
        # The loop answers in its own task; the reply is seen by looking at the conversation.
        while (await conversations.get(conversation_id)).messages[-1].role == "user":  # noqa: ASYNC110
            await anyio.sleep(0.002)
        found.append((time.perf_counter() - started) * 1000)
        await services.stores.conversations.end(conversation_id, "done")
    return found


async def measure(questions: int, hanging: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(db=Path(folder) / "fair.db", llm="local")
        model = ScriptedModel(seconds=0.05, hangs_for=HANGING_APP)
        async with open_services(settings, chat_model=model, memory_model=model) as services:
            await services.stores.registry.install("healthy", "Healthy")
            await services.stores.registry.install("hanging", HANGING_APP)
            async with anyio.create_task_group() as group:
                group.start_soon(services.central.run)
                for _ in range(hanging):
                    conversation_id = await services.stores.conversations.open("hanging")
                    await services.stores.conversations.add_message(conversation_id, "user", "Hi?")
                await anyio.sleep(0.3)
                found = await latencies(services, "healthy", questions)
                group.cancel_scope.cancel()
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def main(questions: int) -> dict[str, float]:
    alone = await measure(questions, hanging=0)
    beside = await measure(questions, hanging=8)
    figures = {
        "alone_p50_ms": statistics.median(alone),
        "alone_p99_ms": percentile(alone, 0.99),
        "beside_hanging_p50_ms": statistics.median(beside),
        "beside_hanging_p99_ms": percentile(beside, 0.99),
    }
    figures["ratio_p50"] = figures["beside_hanging_p50_ms"] / figures["alone_p50_ms"]
    figures["ratio_p99"] = figures["beside_hanging_p99_ms"] / figures["alone_p99_ms"]
    return {key: round(value, 2) for key, value in figures.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=40)
    arguments = parser.parse_args()
    print(json.dumps(anyio.run(main, arguments.questions), indent=2))
