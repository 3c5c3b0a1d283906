#!/usr/bin/env python3
"""Write `eval_long_stories.json`: long conversations, for the evaluation at a small window.

From each app of the shipped story sets (`eval_stories.json`, `eval_world_stories.json`,
`eval_locomo.json`), the first conversations that state facts, each made long: its own turns
kept in order, split in three (the start, the middle, the end), with turns of the same app's
other conversations between them (in the app's own language, none matching any of its facts'
patterns), until it takes 4,000 to 8,000 tokens by the service's estimate. Each conversation
keeps its facts; an app keeps the facts its chosen conversations state. Deterministic: the
file is rewritten the same from the same sets.

    .venv/bin/python scripts/make_long_stories.py
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from memory_agent import estimate_tokens

HERE = Path(__file__).resolve().parent
SOURCES = ("eval_stories.json", "eval_world_stories.json", "eval_locomo.json")
TARGET = "eval_long_stories.json"
# Conversations taken from each app, and the tokens each is made to take.
PER_APP = 3
TOKENS = (4000, 8000)


def main() -> None:
    chance = random.Random(48)
    apps = []
    for source in SOURCES:
        for app in json.loads((HERE / source).read_text(encoding="utf-8"))["apps"]:
            long_app = _long_app(app, chance)
            if long_app is not None:
                apps.append(long_app)
    (HERE / TARGET).write_text(
        json.dumps({"apps": apps}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    conversations = sum(len(app["conversations"]) for app in apps)
    print(f"{TARGET}: {len(apps)} apps, {conversations} conversations")


def _long_app(app: dict[str, Any], chance: random.Random) -> dict[str, Any] | None:
    patterns = [re.compile(p, re.I) for fact in app["facts"] for p in fact["patterns"]]
    stating = [c for c in app["conversations"] if c["facts"]][:PER_APP]
    if not stating:
        return None
    filler = _filler(app, stating, patterns)
    if not filler:
        return None
    kept = {fact_id for conversation in stating for fact_id in conversation["facts"]}
    facts = []
    for fact in app["facts"]:
        if fact["id"] in kept:
            fact = dict(fact)
            if fact.get("supersedes") not in kept:
                fact.pop("supersedes", None)
            facts.append(fact)
    return {
        "appId": f"long-{app['appId']}",
        "name": app["name"],
        "group": app.get("group", "other"),
        "facts": facts,
        "conversations": [
            {"facts": c["facts"], "messages": _made_long(c["messages"], filler, chance)}
            for c in stating
        ],
    }


def _filler(
    app: dict[str, Any], stating: list[dict[str, Any]], patterns: list[re.Pattern[str]]
) -> list[list[dict[str, str]]]:
    """Pairs of turns (the user's, the assistant's) from the app's other conversations that
    match none of its facts' patterns."""
    pairs = []
    for conversation in app["conversations"]:
        if conversation in stating:
            continue
        messages = conversation["messages"]
        for first, second in itertools.pairwise(messages):
            if (first["role"], second["role"]) != ("user", "assistant"):
                continue
            if any(p.search(m["content"]) for m in (first, second) for p in patterns):
                continue
            pairs.append([first, second])
    return pairs


def _made_long(
    messages: list[dict[str, str]], filler: list[list[dict[str, str]]], chance: random.Random
) -> list[dict[str, str]]:
    """`messages` in three parts, with filler between them up to the target's tokens."""
    target = chance.randint(*TOKENS)
    third = max(1, len(messages) // 3)
    start, middle, end = messages[:third], messages[third : 2 * third], messages[2 * third :]
    used = sum(estimate_tokens(m["content"]) for m in messages)
    before: list[dict[str, str]] = []
    after: list[dict[str, str]] = []
    turn = chance.randrange(len(filler))
    while used < target:
        pair = filler[turn % len(filler)]
        turn += 1
        (before if len(before) <= len(after) else after).extend(pair)
        used += sum(estimate_tokens(m["content"]) for m in pair)
    # A part ending with the user's turn is answered before the filler goes on.
    return _joined(start, before, middle, after, end)


def _joined(*parts: list[dict[str, str]]) -> list[dict[str, str]]:
    joined: list[dict[str, str]] = []
    for part in parts:
        for message in part:
            if joined and joined[-1]["role"] == message["role"] == "user":
                joined.append({"role": "assistant", "content": "I see."})
            joined.append(message)
    return joined


if __name__ == "__main__":
    main()
