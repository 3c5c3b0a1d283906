#!/usr/bin/env python3
"""Whether a turn's memory block holds the memory the turn is about, when a space holds more
than the block can show; prints one JSON object.

    .venv/bin/python scripts/eval_recall.py                 # the three shipped story sets
    .venv/bin/python scripts/eval_recall.py --memories 100 --tokens 2000

The probe set is built from the story sets, the same way for each: every fact of a set is a
memory (its description, as a capable model writes it: "The user's son is named Theo ...").
The memories are dealt into spaces of `--memories` each, in the set's order, oldest first. A
probe is the user turn of the app's stories that first matches the fact's pattern (what the
user said when the subject came up, in the conversation's own language), asked in the space
holding the fact; it hits when the fact's memory is in the block the service builds for that
turn (`memory_block_within`, the budget `--tokens`, the safe estimate). Beside it, the block
as it was before a turn had a say: every memory, the oldest left out first, within half the
default prompt budget (3,000 tokens). The same probes asked of the query for agents
(`POST .../memories/query`, `recall.query.answer`): a hit when the fact's memory is among the
first five results (`query_top5_hit_rate`) or is the first (`query_top1_hit_rate`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_agent import (
    MAX_QUERY_CHARS,
    BlockBudget,
    Memory,
    MemoryQuery,
    estimate_tokens,
    format_memories_for_context,
    memory_block_within,
)
from memory_agent.recall.query import answer

HERE = Path(__file__).resolve().parent
SETS = ("eval_stories.json", "eval_world_stories.json", "eval_locomo.json")
# The bound before: half the default prompt budget.
BEFORE_TOKENS = 3000


def probes(story_set: dict[str, Any]) -> list[tuple[str, str]]:
    """Each fact's memory text and its probe (the first user turn matching its pattern)."""
    found = []
    for app in story_set["apps"]:
        turns = [m["content"] for c in app["conversations"] for m in c["messages"]
                 if m["role"] == "user"]
        for fact in app["facts"]:
            patterns = [re.compile(p, re.IGNORECASE) for p in fact["patterns"]]
            turn = next((t for t in turns if any(p.search(t) for p in patterns)), None)
            if turn is not None:
                description = fact["description"].rstrip(".")
                found.append((f"{description[0].upper()}{description[1:]}.", turn))
    return found


def as_memories(texts: list[str]) -> list[Memory]:
    """Newest first, as a space is read."""
    memories = []
    for n, text in enumerate(texts):
        day = f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T10:00:00.000000Z"
        memories.append(Memory(n + 1, "eval", text, day, day))
    return list(reversed(memories))


def before(memories: list[Memory]) -> str:
    kept = list(memories)
    while True:
        block = format_memories_for_context("Eval", kept)
        if not kept or estimate_tokens(block) <= BEFORE_TOKENS:
            return block
        kept.pop()


def measure(story_file: Path, size: int, tokens: int) -> dict[str, Any]:
    found = probes(json.loads(story_file.read_text()))
    hits = hits_before = top5 = top1 = 0
    block_tokens: list[int] = []
    tokens_before: list[int] = []
    for start in range(0, len(found), size):
        space = found[start:start + size]
        memories = as_memories([text for text, _ in space])
        old = before(memories)
        for text, probe in space:
            block = memory_block_within(BlockBudget(tokens), estimate_tokens, "Eval", memories,
                                        recent=probe).text
            hits += text in block
            hits_before += text in old
            asked = MemoryQuery(probe[:MAX_QUERY_CHARS], top_k=5)
            results = [hit.memory.content for hit in answer(
                memories, asked, lambda memory: estimate_tokens(memory.content)).hits]
            top5 += text in results
            top1 += results[:1] == [text]
            block_tokens.append(estimate_tokens(block))
            tokens_before.append(estimate_tokens(old))
    return {
        "probes": len(found),
        "spaces": -(-len(found) // size),
        "hit_rate": round(hits / len(found), 3),
        "block_tokens_p50": statistics.median(block_tokens),
        "hit_rate_before": round(hits_before / len(found), 3),
        "block_tokens_before_p50": statistics.median(tokens_before),
        "query_top5_hit_rate": round(top5 / len(found), 3),
        "query_top1_hit_rate": round(top1 / len(found), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100, help="memories in a space")
    parser.add_argument("--tokens", type=int, default=2000, help="the block's budget")
    args = parser.parse_args()
    results: dict[str, Any] = {"memories_per_space": args.memories, "tokens": args.tokens}
    for name in SETS:
        results[name.removesuffix(".json")] = measure(HERE / name, args.memories, args.tokens)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
