"""The kinds of memory (the seed's categories) and who may read which: a small list in a TOML
file (`kinds.toml` here, or the operator's own through `MNEMOLOOP_MEMORY_KINDS`), with the
kind a memory gets when none fits, and the agents an app may name with the kinds each reads.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_agent.core import patterns as re
from memory_agent.core.errors import InvalidKind, KindNotAllowed

BUNDLED = Path(__file__).with_name("kinds.toml")
# Every memory kept before kinds is of this one.
KEPT_BEFORE = "fact"
MAX_KINDS = 32
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class Kinds:
    """The kinds, each with what it holds (in the file's order), the default one, and each
    agent's allow-list."""

    described: Mapping[str, str]
    default: str
    allowlists: Mapping[str, tuple[str, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.described)

    def listed(self) -> str:
        """The kinds as a prompt lists them: each name with what it holds."""
        return "; ".join(f"{name} ({holds})" for name, holds in self.described.items())

    def known(self, kinds: Iterable[str], field: str) -> tuple[str, ...]:
        """`kinds`, each one of the list, or `InvalidKind` naming `field`."""
        given = tuple(kinds)
        unknown = [kind for kind in given if kind not in self.described]
        if unknown:
            raise InvalidKind(
                f"{field}: {', '.join(map(repr, unknown))} is no kind of memory here; the kinds"
                f" are {', '.join(self.names)}"
            )
        return given

    def of(self, kind: str | None) -> str:
        """`kind` when it is one of the list, else the default (a model's answer may give
        any word)."""
        return kind if kind is not None and kind in self.described else self.default

    def readable(
        self, app_allows: tuple[str, ...] | None, agent: str | None
    ) -> frozenset[str] | None:
        """The kinds a read may return: the app's allow-list, narrowed by the agent's; None
        when nothing bounds it. An agent the file does not name is refused."""
        allowed = None if app_allows is None else frozenset(app_allows)
        if agent is not None:
            if agent not in self.allowlists:
                raise InvalidKind(
                    f"agent: {agent!r} is not an agent the kinds file names"
                    + (f" ({', '.join(self.allowlists)})" if self.allowlists else "")
                )
            own = frozenset(self.allowlists[agent])
            allowed = own if allowed is None else allowed & own
        return allowed


def check_readable(asked: Iterable[str], readable: frozenset[str] | None) -> None:
    """`KindNotAllowed` when a read asks for a kind outside what it may read."""
    refused = [kind for kind in asked if readable is not None and kind not in readable]
    if refused:
        raise KindNotAllowed(
            f"categories: {', '.join(map(repr, refused))} may not be read here; this reader"
            f" may read {', '.join(sorted(readable or ())) or 'no kind'}"
        )


def load_kinds(path: Path | None = None) -> Kinds:
    """The kinds of `path` (the bundled file when None); `ValueError` saying what is wrong."""
    source = path or BUNDLED
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{source}: {error}") from None
    described = data.get("kinds")
    if not isinstance(described, dict) or not described or len(described) > MAX_KINDS:
        raise ValueError(f"{source}: [kinds] must name 1 to {MAX_KINDS} kinds")
    for name, holds in described.items():
        if not _NAME.fullmatch(name) or not isinstance(holds, str):
            raise ValueError(
                f"{source}: kind {name!r}: a name of a-z, 0-9, _ or - (at most 32) = what it"
                " holds, in words"
            )
    if KEPT_BEFORE not in described:
        raise ValueError(
            f"{source}: [kinds] must keep {KEPT_BEFORE!r}, the kind of every memory kept before"
            " kinds"
        )
    default = data.get("default")
    if not isinstance(default, str) or default not in described:
        raise ValueError(f"{source}: default {default!r} is not one of [kinds]")
    allowlists = data.get("allowlists", {})
    if not isinstance(allowlists, dict):
        raise ValueError(f"{source}: [allowlists] maps an agent to a list of kinds")
    lists: dict[str, tuple[str, ...]] = {}
    for agent, kinds in allowlists.items():
        if not isinstance(kinds, list) or any(kind not in described for kind in kinds):
            raise ValueError(f"{source}: allowlists.{agent}: a list of the [kinds]")
        lists[agent] = tuple(kinds)
    return Kinds(dict(described), default, lists)


# The bundled kinds, what a writer gives when the service names no file of its own.
BUNDLED_KINDS = load_kinds()
