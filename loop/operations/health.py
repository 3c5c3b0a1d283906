"""Whether this instance can do its work: its model, its database and its memory worker, each
ready or not, with the reason. Asked by `GET /health`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from loop.jobs.worker import MemoryWorker
from memory_agent import ChatModel, Database, MnemoloopError

# A check that takes longer than this says "not ready" rather than hold the caller.
CHECK_SECONDS = 3.0
# Asking a model server costs a request: its answer is kept this long.
MODEL_CHECK_EVERY = 10.0


@dataclass(frozen=True)
class PartHealth:
    ready: bool
    reason: str | None = None


@dataclass(frozen=True)
class ModelSetup:
    """How the models were set up at start: the window each keeps to and where it came from,
    and which writer writes the memories, and why."""

    chat_window: str = ""
    memory_window: str = ""
    memory_writer: str = ""
    memory_writer_why: str = ""


@dataclass(frozen=True)
class Health:
    model: PartHealth
    database: PartHealth
    memory_worker: PartHealth
    # What an operator should know though every part is ready (the memory model's record).
    warnings: tuple[str, ...] = field(default=())
    setup: ModelSetup = field(default=ModelSetup())

    @property
    def ready(self) -> bool:
        return self.model.ready and self.database.ready and self.memory_worker.ready


class HealthChecks:
    def __init__(
        self,
        database: Database,
        models: list[ChatModel],
        worker: MemoryWorker,
        warnings: Callable[[], list[str]] = list,
        *,
        setup: Callable[[], ModelSetup] = ModelSetup,
        worker_waits: Callable[[], bool] = lambda: False,
    ) -> None:
        self._warnings = warnings
        self._setup = setup
        # Whether the worker is yet to start, by design: `auto` tries the memory model first
        # (`models.memoryWriterWhy` says so).
        self._worker_waits = worker_waits
        self._database = database
        self._models = list(dict.fromkeys(models))  # the chat and memory models, once each
        self._worker = worker
        self._model_health = PartHealth(False, "not checked yet")
        self._model_checked_at = -MODEL_CHECK_EVERY

    async def check(self) -> Health:
        return Health(
            await self.model(), await self._database_health(), self._worker_health(),
            tuple(self._warnings()), self._setup(),
        )

    async def model(self) -> PartHealth:
        if time.monotonic() - self._model_checked_at >= MODEL_CHECK_EVERY:
            self._model_health = await self._ask_models()
            self._model_checked_at = time.monotonic()
        return self._model_health

    async def _ask_models(self) -> PartHealth:
        reasons = []
        for model in self._models:
            reason: str | None = f"{model.name} did not answer within {CHECK_SECONDS:g} s"
            with anyio.move_on_after(CHECK_SECONDS):
                reason = await model.unready_reason()
            if reason:
                reasons.append(reason)
        return PartHealth(not reasons, "; ".join(reasons) or None)

    async def _database_health(self) -> PartHealth:
        with anyio.move_on_after(CHECK_SECONDS):
            try:
                await self._database.fetch_one("SELECT 1")
            except MnemoloopError as error:
                return PartHealth(False, str(error))
            return PartHealth(True)
        return PartHealth(False, f"the database did not answer within {CHECK_SECONDS:g} s")

    def _worker_health(self) -> PartHealth:
        if not self._worker.running and not self._worker_waits():
            return PartHealth(False, "the memory worker is not running")
        return PartHealth(True)
