"""The `regex` module, used the way a busy service must use it: holding the GIL.

`regex` lets go of the GIL while it matches an immutable string, so that other threads may
run. Here a match takes a microsecond or two, and the threads that are waiting are the
database's (aiosqlite) and anyio's: each call that lets go waits for them to hand it back,
which costs some fifty times the match while a database thread is busy (1.3 µs held, 59 µs let
go, measured side by side). A memory job makes thousands of such calls. So every call here
passes `concurrent=False`; the patterns and their matches are `regex`'s own.

Use it as the module it wraps: `from memory_agent.core import patterns as re`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import regex

Match = regex.Match
A = ASCII = regex.ASCII
I = IGNORECASE = regex.IGNORECASE  # noqa: E741 (the `re` module's own name)
M = MULTILINE = regex.MULTILINE
S = DOTALL = regex.DOTALL
V1 = VERSION1 = regex.VERSION1
X = VERBOSE = regex.VERBOSE
escape = regex.escape
error = regex.error


class Pattern:
    """A compiled `regex` pattern whose every match holds the GIL."""

    __slots__ = ("compiled",)
    compiled: regex.Pattern[str]

    def __init__(self, compiled: regex.Pattern[str]) -> None:
        self.compiled = compiled

    @property
    def pattern(self) -> str:
        return self.compiled.pattern

    def search(self, string: str, pos: int | None = None,
               endpos: int | None = None) -> regex.Match[str] | None:
        return self.compiled.search(string, pos, endpos, concurrent=False)

    def match(self, string: str, pos: int | None = None,
              endpos: int | None = None) -> regex.Match[str] | None:
        return self.compiled.match(string, pos, endpos, concurrent=False)

    def fullmatch(self, string: str, pos: int | None = None,
                  endpos: int | None = None) -> regex.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos, concurrent=False)

    def findall(self, string: str, pos: int | None = None,
                endpos: int | None = None) -> list[Any]:
        return self.compiled.findall(string, pos, endpos, concurrent=False)

    def finditer(self, string: str, pos: int | None = None,
                 endpos: int | None = None) -> Iterator[regex.Match[str]]:
        return self.compiled.finditer(string, pos, endpos, concurrent=False)

    def split(self, string: str, maxsplit: int = 0) -> list[Any]:
        return self.compiled.split(string, maxsplit, concurrent=False)

    def sub(self, repl: str | Callable[[regex.Match[str]], str], string: str,
            count: int = 0) -> str:
        return self.compiled.sub(repl, string, count, concurrent=False)


def compile(pattern: str, flags: int = 0) -> Pattern:
    return Pattern(regex.compile(pattern, flags))


def search(pattern: str, string: str, flags: int = 0) -> regex.Match[str] | None:
    return regex.search(pattern, string, flags, concurrent=False)


def fullmatch(pattern: str, string: str, flags: int = 0) -> regex.Match[str] | None:
    return regex.fullmatch(pattern, string, flags, concurrent=False)


def findall(pattern: str, string: str, flags: int = 0) -> list[Any]:
    return regex.findall(pattern, string, flags, concurrent=False)


def sub(pattern: str, repl: str | Callable[[regex.Match[str]], str],
        string: str, count: int = 0, flags: int = 0) -> str:
    return regex.sub(pattern, repl, string, count, flags, concurrent=False)
