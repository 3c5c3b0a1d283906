"""What a handler is given by name: the stores (`stores: Provided[Stores]`), and the clock and
what the operations routes report on. A handler names only what it uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

from litestar.di import NamedDependency, Provide
from litestar.params import SkipValidation

from loop.service import Services

T = TypeVar("T")

# The service's own objects, not input: nothing to validate (and a protocol, such as the
# clock, could not be checked).
Provided: TypeAlias = NamedDependency[SkipValidation[T]]


def dependencies(services: Services) -> dict[str, Provide]:
    # One name for all the stores: a handler given two or more dependencies is slower, as
    # Litestar resolves them in a task group of their own on every request (the routes that
    # take two, such as the export, are not the busy ones).
    parts: dict[str, object] = {
        "stores": services.stores,
        "clock": services.clock,
        "health_checks": services.health,
        "metrics": services.metrics,
    }
    return {
        name: Provide(_constant(part), use_cache=True, sync_to_thread=False)
        for name, part in parts.items()
    }


def _constant(value: object) -> Callable[[], object]:
    def provide() -> object:
        return value

    return provide
