"""A change the writers propose to a sensitive fact of a person's profile, held as a proposal
instead of applied (inside the transaction that would have applied it): the memory job's
profile write and the consolidation pass ask `Consent.touched` of every text the change reads
or writes, and file it with `Consent.propose` when one speaks of a sensitive field. An app's
own memories are never held back; only the profile, which every sharing app reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from memory_agent.consent.fields import SensitiveFields
from memory_agent.core.ports import Clock, format_timestamp
from memory_agent.storage.store import MemoryStore

# A proposal no one answers lapses after this long.
LAPSE_AFTER = timedelta(days=7)


@dataclass(frozen=True)
class Consent:
    fields: SensitiveFields
    clock: Clock

    def touched(self, texts: Iterable[str | None]) -> frozenset[str]:
        """The sensitive fields any of `texts` speaks of (none: the change needs no consent)."""
        return frozenset().union(*(self.fields.found_in(text) for text in texts if text))

    async def propose(
        self, store: MemoryStore, *, user_id: str, app_id: str,
        origin: Literal["memory", "consolidation"], fields: Iterable[str],
        content: str | None, before: Iterable[str], change: dict[str, Any],
        conversation_id: str | None = None, job_id: int | None = None,
    ) -> int:
        """File the change as the person's proposal (`store` bound to the transaction that
        would have applied it); its id."""
        now = self.clock.now()
        replaced = "\n".join(text for text in before if text) or None
        return await store.propose(
            user_id=user_id, app_id=app_id, origin=origin, fields=sorted(fields),
            content=content, before=replaced, change=change, at=format_timestamp(now),
            lapses_at=format_timestamp(now + LAPSE_AFTER), conversation_id=conversation_id,
            job_id=job_id,
        )
