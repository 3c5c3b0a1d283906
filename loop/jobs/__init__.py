"""Memory jobs and consolidation passes: their durable queues and the worker that runs them."""
from loop.jobs.consolidations import (
    ConsolidationPass,
    PassOrigin,
    PassStatus,
)
from loop.jobs.store import (
    JOB_STATUSES,
    MemoryJob,
)

__all__ = [
    "JOB_STATUSES",
    "ConsolidationPass",
    "MemoryJob",
    "PassOrigin",
    "PassStatus",
]
