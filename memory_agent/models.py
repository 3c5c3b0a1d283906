"""Value types of the memory domain."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

CompactionAction = Literal["delete", "edit", "fifo"]


@dataclass(frozen=True)
class Memory:
    id: int
    app_id: str
    content: str
    created_at: str
    updated_at: str
    source_conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Memory:
        """From a row of the store's columns, in the store's order (read by position: this is
        on the path of every retrieval)."""
        memory_id, app_id, content, created_at, updated_at, source, metadata = row
        return cls(
            memory_id,
            app_id,
            content,
            created_at,
            updated_at,
            source,
            json.loads(metadata) if metadata else {},
        )

    @property
    def created_date(self) -> str:
        """`YYYY-MM-DD`, as prompts and the memory context show it."""
        return self.created_at[:10]


@dataclass(frozen=True)
class CompactionOutcome:
    """One compaction step: what was done, to which memory, and why FIFO if it came to that."""

    app_id: str
    action: CompactionAction
    target_memory_id: int
    reason: str
    fallback_reason: str | None = None
