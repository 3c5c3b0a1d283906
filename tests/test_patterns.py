"""`memory_agent.core.patterns`: `regex` called holding the GIL, answering as `regex` does."""

from __future__ import annotations

import regex

from memory_agent.core import patterns as re

TEXT = "Call Ana at 555-0134 on 2026-12-07, or Björn at +46 70 123 45 67. 東京で会いましょう。"
PATTERNS = [r"\d+", r"(\w)(\w+)", r"\b\p{Lu}\w*", r"[\p{Han}\p{Hiragana}]+", r"(?i)ANA|björn"]


def spans(matches) -> list[tuple[int, int, tuple]]:
    return [(m.start(), m.end(), m.groups()) for m in matches]


def test_every_method_answers_as_regex_does():
    for source in PATTERNS:
        held, plain = re.compile(source), regex.compile(source)
        assert held.pattern == plain.pattern
        assert held.findall(TEXT) == plain.findall(TEXT)
        assert spans(held.finditer(TEXT)) == spans(plain.finditer(TEXT))
        assert held.split(TEXT) == plain.split(TEXT)
        assert held.split(TEXT, 1) == plain.split(TEXT, 1)
        assert held.sub("<>", TEXT) == plain.sub("<>", TEXT)
        assert held.sub(lambda m: m.group(0).upper(), TEXT, 2) == plain.sub(
            lambda m: m.group(0).upper(), TEXT, 2)
        for method in ("search", "match", "fullmatch"):
            for pos in (None, 5):
                mine = getattr(held, method)(TEXT, pos)
                theirs = getattr(plain, method)(TEXT, pos)
                assert spans([mine] if mine else []) == spans([theirs] if theirs else [])
        found, expected = re.search(source, TEXT), regex.search(source, TEXT)
        assert found is not None and expected is not None and found.span() == expected.span()
        assert re.findall(source, TEXT, re.I) == regex.findall(source, TEXT, regex.I)
        assert re.sub(source, "-", TEXT) == regex.sub(source, "-", TEXT)
    assert re.fullmatch(r"\d{3}-\d{4}", "555-0134") is not None
    assert re.escape("a.b") == regex.escape("a.b")
