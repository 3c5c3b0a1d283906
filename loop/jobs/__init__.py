"""Memory jobs: their durable queue and the worker that runs them."""
from loop.jobs.store import (
    JOB_STATUSES,
    MemoryJob,
)

__all__ = [
    "JOB_STATUSES",
    "MemoryJob",
]
