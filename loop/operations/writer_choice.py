"""Which writer writes the memories, and why: the one `MNEMOLOOP_MEMORY_WRITER` names, or the
one `auto` chose for the memory model: the extractive floor for the bundled model, and for any
other what a short trial showed it can do (`memory_agent.writers.calibration`), kept per model
in the database so that a restart does not try it again."""

from __future__ import annotations

import logging

from loop.settings import Settings
from memory_agent import (
    CALIBRATION_VERSION,
    ChatModel,
    Clock,
    Database,
    MemorySubAgent,
    format_timestamp,
)

log = logging.getLogger("mnemoloop")


class MemoryWriterChoice:
    def __init__(
        self,
        settings: Settings,
        database: Database,
        clock: Clock,
        agent: MemorySubAgent,
        model: ChatModel,
    ) -> None:
        self._settings = settings
        self._db = database
        self._clock = clock
        self._agent = agent
        self._model = model
        # Settled once the writer is known (at once, unless `auto` must try the model).
        self.settled = settings.memory_writer != "auto" or model.bundled
        if settings.memory_writer != "auto":
            self.why = f"MNEMOLOOP_MEMORY_WRITER={settings.memory_writer}"
        elif model.bundled:
            self.why = "auto: the bundled 135M model writes no memories of its own"
        else:
            self.why = "auto: the model has not been tried yet"

    @property
    def writer(self) -> str:
        return self._agent.writer

    async def settle(self) -> None:
        """With `auto` and a model other than the bundled one: the writer this model was
        found to deserve (tried now, unless it was before), logged with why. Memory work
        waits for it; conversations do not."""
        if self.settled:
            return
        try:
            await self._settle()
        except Exception as error:  # memory work goes on, with the floor
            self._agent.use_writer("extractive")
            self.why = (f"auto: trying the model failed ({error}); the extractive writer until"
                        " the next start")
            log.error("mnemoloop: %s", self.why)
        self.settled = True
        log.info("mnemoloop: memories of %s are written by the %s writer (%s)",
                 self._model.name, self.writer, self.why)

    async def _settle(self) -> None:
        # A verdict is of a model on its server: `openai:model` names whatever a local
        # server has loaded.
        name = self._model.name
        host = getattr(self._model, "host", None)
        if isinstance(host, str) and host:
            name = f"{name} at {host}"
        row = await self._db.fetch_one(
            "SELECT writer, why, calibrated_at FROM model_calibrations"
            " WHERE model = ? AND version = ?",
            (name, CALIBRATION_VERSION),
        )
        if row is not None:
            self._agent.use_writer(row["writer"])
            self.why = f"auto: {row['why']} (tried on {row['calibrated_at'][:10]})"
        else:
            log.info("mnemoloop: trying %s on a few conversations to choose its writer", name)
            calibration = await self._agent.calibrate_writer()
            self.why = f"auto: {calibration.why}"
            if calibration.unanswered:
                # A model that did not answer was not judged: tried again at the next start.
                self.why += " (the model did not answer every trial; tried again at next start)"
            else:
                await self._db.execute(
                    "INSERT INTO model_calibrations (model, version, writer, why, calibrated_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (model, version) DO UPDATE SET"
                    " writer = excluded.writer, why = excluded.why,"
                    " calibrated_at = excluded.calibrated_at",
                    (name, CALIBRATION_VERSION, calibration.writer, calibration.why,
                     format_timestamp(self._clock.now())),
                )
