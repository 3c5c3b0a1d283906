"""Which writer writes a space's memories: each writer registered by its name, loaded only
when chosen (the model writer's process never loads the extractive writer's words)."""

from __future__ import annotations

import importlib
from typing import Literal

from memory_agent.core.chat_model import ChatModel
from memory_agent.core.kinds import BUNDLED_KINDS, Kinds
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.writer import MemoryWriter, WriterKind

# Each writer's class, as "module:class".
WRITERS: dict[WriterKind, str] = {
    "model": "memory_agent.writers.model.writer:ModelWriter",
    "extractive": "memory_agent.writers.extractive.writer:ExtractiveWriter",
}


def writer_of(
    kind: WriterKind, model: MemoryModel, limits: MemoryLimits, kinds: Kinds = BUNDLED_KINDS
) -> MemoryWriter:
    """The writer registered as `kind`, asking `model`, within `limits`, giving each memory
    one of `kinds`."""
    module, name = WRITERS[kind].split(":")
    writer: type[MemoryWriter] = getattr(importlib.import_module(module), name)
    return writer(model, limits, kinds)


def memory_writer_for(setting: str, model: ChatModel) -> Literal["model", "extractive"]:
    """The writer `MNEMOLOOP_MEMORY_WRITER` names; `auto`: the extractive floor for the
    bundled model, the model writer for any other."""
    if setting in ("model", "extractive"):
        return setting  # type: ignore[return-value]
    return "extractive" if model.bundled else "model"
