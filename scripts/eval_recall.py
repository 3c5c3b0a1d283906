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
turn (`memory_block_within`, the budget `--tokens`, the safe estimate, with the links the
service keeps among the space's memories: `hit_rate`; without them: `hit_rate_unlinked`).
Beside it, the block as it was before a turn had a say: every memory, the oldest left out
first, within half the default prompt budget (3,000 tokens). The same probes asked of the
query for agents (`POST .../memories/query`, `recall.query.answer`): a hit when the fact's
memory is among the first five results (`query_top5_hit_rate`) or is the first
(`query_top1_hit_rate`).

`decay`: a 12-turn conversation in each app, its space the memories of the app's newest ten
conversations that state facts (each the sentences of those facts, as a capable model writes
a memory); each turn asks after one of them (the probes, in turn), and each memory a turn is
given counts toward its decay (`recall.decay`). The block's tokens per turn and its hits (the
fact's sentence in the block), against the same turns with no decay.
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
    Given,
    Memory,
    MemoryQuery,
    estimate_tokens,
    format_memories_for_context,
    memory_block_within,
)
from memory_agent.links.linking import links_for
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


def links_among(memories: list[Memory]) -> dict[int, list[int]]:
    """The links the service would keep among `memories`: each linked when written to those of
    its space before it that it shares most with (`links.linking`), read both ways, the
    strongest first."""
    found: dict[int, list[tuple[float, int]]] = {}
    space: dict[int, str] = {}
    for memory in sorted(memories, key=lambda m: m.id):
        space[memory.id] = memory.content
        for other, strength in links_for(memory.id, space):
            found.setdefault(memory.id, []).append((strength, other))
            found.setdefault(other, []).append((strength, memory.id))
    return {i: [other for _, other in sorted(links, key=lambda link: (-link[0], link[1]))]
            for i, links in found.items()}


def measure(story_file: Path, size: int, tokens: int) -> dict[str, Any]:
    found = probes(json.loads(story_file.read_text()))
    hits = hits_unlinked = hits_before = top5 = top1 = 0
    block_tokens: list[int] = []
    tokens_before: list[int] = []
    for start in range(0, len(found), size):
        space = found[start:start + size]
        memories = as_memories([text for text, _ in space])
        old = before(memories)
        related = links_among(memories)
        for text, probe in space:
            block = memory_block_within(BlockBudget(tokens), estimate_tokens, "Eval", memories,
                                        recent=probe, related=related).text
            unlinked = memory_block_within(BlockBudget(tokens), estimate_tokens, "Eval",
                                           memories, recent=probe).text
            hits += text in block
            hits_unlinked += text in unlinked
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
        "hit_rate_unlinked": round(hits_unlinked / len(found), 3),
        "block_tokens_p50": statistics.median(block_tokens),
        "hit_rate_before": round(hits_before / len(found), 3),
        "block_tokens_before_p50": statistics.median(tokens_before),
        "query_top5_hit_rate": round(top5 / len(found), 3),
        "query_top1_hit_rate": round(top1 / len(found), 3),
    }


# A conversation with the same memories, turn after turn (the seed's decay table's span).
DECAY_TURNS = 12
SPACE_CAP = 10


def conversation_memories(app: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """A memory a conversation's writer keeps, as a capable model writes one: the sentences
    of the facts its user turns state (up to four), with those sentences; the newest
    `SPACE_CAP` of the app's conversations that state any, as a space at its cap holds them."""
    kept = []
    for conversation in app["conversations"]:
        said = [m["content"] for m in conversation["messages"] if m["role"] == "user"]
        sentences = []
        for fact in app["facts"]:
            if any(re.search(p, turn, re.IGNORECASE) for p in fact["patterns"] for turn in said):
                description = fact["description"].rstrip(".")
                sentences.append(f"{description[0].upper()}{description[1:]}.")
        if sentences:
            kept.append((" ".join(sentences[:4]), sentences[:4]))
    return kept[-SPACE_CAP:]


def measure_decay(story_file: Path, tokens: int) -> dict[str, Any]:
    """A 12-turn conversation for each app: each turn asks after one fact of its space (the
    probes, in turn), and every memory given to a turn counts toward its decay, as the service
    counts them. A hit: the fact's sentence is in the turn's block (a stub's memory the model
    would `recall` is no hit here). Beside it, the same turns with no decay."""
    story_set = json.loads(story_file.read_text())
    turn_tokens: list[int] = []
    tokens_before: list[int] = []
    hits = hits_before = turns = 0
    for app in story_set["apps"]:
        written = conversation_memories(app)
        memories = as_memories([text for text, _ in written])
        held = {sentence for _, sentences in written for sentence in sentences}
        asked = [(text, probe) for text, probe in probes({"apps": [app]}) if text in held]
        if not asked:
            continue
        given: dict[int, Given] = {}
        recent: list[str] = []
        for turn in range(DECAY_TURNS):
            fact, probe = asked[turn % len(asked)]
            recent = [*recent, probe][-3:]
            budget = BlockBudget(tokens)
            block = memory_block_within(budget, estimate_tokens, "Eval", memories,
                                        recent="\n".join(recent), given=given)
            whole = memory_block_within(budget, estimate_tokens, "Eval", memories,
                                        recent="\n".join(recent))
            for memory in block.shown:
                given[memory.id] = Given(given.get(memory.id, Given(0)).times + 1)
            turns += 1
            hits += fact in block.text
            hits_before += fact in whole.text
            turn_tokens.append(estimate_tokens(block.text))
            tokens_before.append(estimate_tokens(whole.text))
    return {
        "conversations": turns // DECAY_TURNS,
        "turns": turns,
        "hit_rate": round(hits / turns, 3),
        "block_tokens_mean": round(statistics.mean(turn_tokens), 1),
        "hit_rate_without_decay": round(hits_before / turns, 3),
        "block_tokens_mean_without_decay": round(statistics.mean(tokens_before), 1),
        "tokens_ratio": round(sum(turn_tokens) / sum(tokens_before), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100, help="memories in a space")
    parser.add_argument("--tokens", type=int, default=2000, help="the block's budget")
    args = parser.parse_args()
    results: dict[str, Any] = {"memories_per_space": args.memories, "tokens": args.tokens}
    for name in SETS:
        results[name.removesuffix(".json")] = measure(HERE / name, args.memories, args.tokens)
    results["decay"] = {name.removesuffix(".json"): measure_decay(HERE / name, args.tokens)
                        for name in SETS}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
