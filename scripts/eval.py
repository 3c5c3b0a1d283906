#!/usr/bin/env python3
"""Memory-quality benchmark: scripted stories through the real memory sub-agent.

Each app's conversations are fed in order to `MemorySubAgent.create_memory` (a real SQLite
file, the configured model: the embedded one by default, Ollama when MNEMOLOOP_MEMORY_LLM or
MNEMOLOOP_LLM says `ollama:<model>`). Every fact of a story has patterns that identify its
value; the figures say which facts the memories held, when written and at the end, beside a
FIFO baseline that keeps the newest `--limit` of the same memories. One JSON object out.

    .venv/bin/python scripts/eval.py              # every app of scripts/eval_stories.json
    .venv/bin/python scripts/eval.py --quick      # the first app only
    .venv/bin/python scripts/eval.py --stories other.json
    .venv/bin/python scripts/eval.py --model oracle  # a scripted model that knows the facts
    .venv/bin/python scripts/eval.py --writer extractive  # the writer (default: the setting's)
    .venv/bin/python scripts/eval.py --model oracle --quote-drift 0.3  # quotes near-verbatim
    .venv/bin/python scripts/eval.py --model oracle --window 4096 \
        --stories scripts/eval_long_stories.json  # long conversations, a small window

Fact kinds: `durable` (stated once, early), `confirmed` (only the assistant's turn says it),
`superseded` (an old value) and `update` (its new value, stated later). An app may name its
`group` (personal, teams, support, ...): the figures are given for each group too.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.llm import budgets, choose_window, open_chat_model
from loop.settings import load_settings
from loop.storage import SqliteDatabase
from memory_agent import (
    ChatMessage,
    ChatModel,
    ChatReply,
    JsonSchema,
    MemoryCreationRequest,
    MemorySubAgent,
    MnemoloopError,
    PassFigures,
    ToolSpec,
    memory_writer_for,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_consolidation import consolidate, consolidation_figures
from eval_oracle import OracleModel, is_memory_answer, is_pair_question, oracle_facts

DEFAULT_STORIES = Path(__file__).with_name("eval_stories.json")
# Every key the JSON answer carries (the test checks them).
KEYS = (
    "model",
    "writer",
    "writer_trial",
    "window",
    "quote_drift",
    "stories",
    "apps",
    "conversations",
    "facts",
    "capture",
    "recall",
    "update_recall",
    "stale_rate",
    "stale_alone",
    "no_fact_share",
    "chars_per_fact",
    "quote_share",
    "fifo",
    "groups",
    "memories_written",
    "nothing_worth_keeping",
    "jobs_failed",
    "compaction_calls",
    "updates_by_model",
    "invalid_decisions",
    "invalid_decision_rate",
    "overruled_decisions",
    "decisions_applied",
    "compaction_outcomes",
    "model_sentences",
    "model_calls_per_conversation",
    "tokens_per_conversation",
    "consolidation",
    "wall_time_s",
)


@dataclass(frozen=True)
class Fact:
    id: str
    kind: str
    patterns: tuple[re.Pattern[str], ...]
    supersedes: str | None = None

    def held_by(self, text: str) -> bool:
        return all(pattern.search(text) for pattern in self.patterns)

    def matches_in(self, text: str) -> int:
        return sum(1 for pattern in self.patterns if pattern.search(text))


@dataclass
class AppRun:
    group: str
    facts: dict[str, Fact]
    stated_in: dict[str, int]  # fact id -> index of the conversation that states it
    written: list[str | None] = field(default_factory=list)  # per conversation
    steps: list[list[str]] = field(default_factory=list)  # per conversation
    final: list[str] = field(default_factory=list)
    # The memories after a consolidation pass over the app's space.
    consolidated: list[str] = field(default_factory=list)


class CountingModel(ChatModel):
    """Passes every call on and counts calls and tokens."""

    def __init__(self, inner: ChatModel) -> None:
        self.name = inner.name
        self._inner = inner
        self.calls = 0
        self.decision_calls = 0
        self.tokens = 0
        # The consolidation's questions, counted apart from the memory jobs' calls.
        self.pair_calls = 0

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        json_schema: JsonSchema | None = None,
        answer_tokens: int | None = None,
    ) -> ChatReply:
        reply = await self._inner.chat(
            messages, tools=tools, json_schema=json_schema, answer_tokens=answer_tokens
        )
        if json_schema is not None and is_pair_question(json_schema):
            self.pair_calls += 1
            return reply
        self.calls += 1
        self.decision_calls += json_schema is not None and not is_memory_answer(json_schema)
        self.tokens += reply.usage.total
        return reply


def load_stories(path: Path) -> list[dict[str, Any]]:
    apps: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["apps"]
    return apps


def parse_facts(app: dict[str, Any]) -> tuple[dict[str, Fact], dict[str, int]]:
    found = {
        f["id"]: Fact(
            f["id"],
            f["kind"],
            tuple(re.compile(p, re.I) for p in f["patterns"]),
            f.get("supersedes"),
        )
        for f in app["facts"]
    }
    stated = {
        fact_id: index
        for index, conversation in enumerate(app["conversations"])
        for fact_id in conversation["facts"]
    }
    return found, stated


async def run_app(
    app: dict[str, Any],
    agent: MemorySubAgent,
    outcomes: Counter[str],
    failures: list[str],
    oracle: OracleModel | None,
) -> AppRun:
    facts, stated = parse_facts(app)
    run = AppRun(app.get("group", "other"), facts, stated)
    known = oracle_facts(
        app,
        lambda fact_id, text: facts[fact_id].held_by(text),
        lambda fact_id, text: facts[fact_id].matches_in(text),
    )
    for index, conversation in enumerate(app["conversations"]):
        if oracle is not None:
            oracle.showing(
                known, conversation["facts"], [m["content"] for m in conversation["messages"]]
            )
        messages = [ChatMessage(m["role"], m["content"]) for m in conversation["messages"]]
        request = MemoryCreationRequest(app["appId"], f"{app['appId']}-{index}", messages)
        try:
            created = await agent.create_memory(request)
        except MnemoloopError as error:
            failures.append(f"{request.conversation_id}: {error}")
            run.written.append(None)
            run.steps.append([])
            continue
        run.written.append(created.content)
        run.steps.append(
            [
                f"{step.outcome} {step.action} {step.target_memory_id}: {step.reason}"
                + (f" [{step.fallback_reason}]" if step.fallback_cause else "")
                for step in created.compactions
            ]
        )
        for step in created.compactions:
            if step.update and step.decided_by == "model":
                outcomes["update by model"] += 1
                continue
            cause = step.fallback_cause
            outcomes[f"{step.outcome} by {step.decided_by}"] += 1
            if cause:
                outcomes[f"fallback:{cause}"] += 1
            if cause == "invalid_decision" and step.fallback_reason:
                # The first word of what was invalid ("newContent:", "memory", "cut", ...).
                detail = step.fallback_reason.removeprefix("invalid decision:").split()
                outcomes["invalid:" + (detail[0] if detail else "?")] += 1
    run.final = [m.content for m in await agent.list_memories(app["appId"])]
    return run


def score(runs: Sequence[AppRun], final_of: Any) -> dict[str, Any]:
    """Recall, update recall, stale rates and no-fact share of the memories `final_of(run)`.

    `stale_rate`: old values still held anywhere; `stale_alone`: updates whose old value is
    still stated in a memory without the new one (an old value beside its new one, "moved
    from Denver to Miami", is history, not stale).
    """
    held = Counter[str]()
    totals = Counter[str]()
    no_fact = memories = stale_alone = chars = quotes = 0
    for run in runs:
        final = final_of(run)
        memories += len(final)
        chars += sum(len(text) for text in final)
        quotes += sum(1 for text in final if _QUOTE.search(text))
        no_fact += sum(1 for text in final if not any(f.held_by(text) for f in run.facts.values()))
        for fact in run.facts.values():
            totals[fact.kind] += 1
            held[fact.kind] += any(fact.held_by(text) for text in final)
            old = run.facts.get(fact.supersedes or "")
            if fact.kind == "update" and old is not None:
                stale_alone += any(old.held_by(t) and not fact.held_by(t) for t in final)
    key = totals["durable"] + totals["confirmed"]
    kept = held["durable"] + held["confirmed"] + held["update"]
    return {
        "recall": _share(held["durable"] + held["confirmed"], key),
        "update_recall": _share(held["update"], totals["update"]),
        "stale_rate": _share(held["superseded"], totals["superseded"]),
        "stale_alone": _share(stale_alone, totals["update"]),
        "no_fact_share": _share(no_fact, memories),
        # Characters of final memory for each key fact it keeps (durable, confirmed, update):
        # everything a later conversation is shown, per fact worth showing it.
        "chars_per_fact": round(chars / kept, 1) if kept else None,
        # Final memories that quote the conversation (`The user said: "…"`).
        "quote_share": _share(quotes, memories),
        "final_memories": memories,
    }


_QUOTE = re.compile(r'(?:The user said|The assistant confirmed): "')


def capture(runs: Sequence[AppRun]) -> float | None:
    """Facts held by the memory written for the conversation that states them."""
    captured = sum(
        1
        for run in runs
        for fact_id, index in run.stated_in.items()
        if run.written[index] and run.facts[fact_id].held_by(run.written[index] or "")
    )
    return _share(captured, sum(len(run.stated_in) for run in runs))


def by_group(runs: Sequence[AppRun], limit: int) -> dict[str, Any]:
    """The figures of each group of apps (personal, teams, ...), beside FIFO's recall."""
    groups: dict[str, list[AppRun]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    figures = {}
    for group, members in sorted(groups.items()):
        ours = score(members, lambda run: run.final)
        fifo = score(members, fifo_final(limit))
        figures[group] = {
            "apps": len(members),
            "capture": capture(members),
            **{k: v for k, v in ours.items() if k != "final_memories"},
            "fifo_recall": fifo["recall"],
        }
    return figures


def fifo_final(limit: int) -> Any:
    def final(run: AppRun) -> list[str]:
        return [text for text in run.written if text is not None][-limit:]

    return final


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings()
    if args.window:
        settings = settings.model_copy(update={"model_context": args.window})
    apps = load_stories(args.stories)
    if args.apps:
        wanted = set(args.apps.split(","))
        apps = [app for app in apps if app["appId"] in wanted]
    if args.quick:
        apps = apps[:1]
    oracle = (
        OracleModel(drift=args.quote_drift, seed=args.seed) if args.model == "oracle" else None
    )
    inner = oracle or await open_chat_model(settings.memory_backend, settings)
    window = None
    if args.window or oracle is None:
        # The window the service would keep to with this model (the oracle has none: only
        # the setting's prompt budget, unless --window gives one).
        window = (await choose_window(inner, settings)).tokens
    memory_prompt = budgets(inner, settings).memory
    model = CountingModel(inner)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    runs: list[AppRun] = []
    passes = PassFigures()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as folder:
            async with SqliteDatabase(Path(folder) / "eval.db") as database:
                agent = MemorySubAgent(
                    database,
                    model,
                    memory_limit=args.limit,
                    max_chars=settings.memory_max_chars,
                    llm_timeout=settings.llm_timeout,
                    prompt_tokens=memory_prompt,
                    writer=memory_writer_for(args.writer or settings.memory_writer, inner),
                )
                trial = None
                writer_setting = args.writer or settings.memory_writer
                if writer_setting == "auto" and oracle is None and not inner.bundled:
                    # As the service does: the writer this model's trial shows it deserves.
                    trial = (await agent.calibrate_writer()).why
                    model.calls = model.decision_calls = model.tokens = 0
                    agent.get_energy_consumed_since_last_poll()
                for app in apps:
                    async with database.transaction() as tx:
                        await tx.execute(
                            "INSERT INTO apps (app_id, name, installed, installed_at)"
                            " VALUES (?, ?, 1, '2025-01-01T00:00:00.000000Z')",
                            (app["appId"], app["name"]),
                        )
                    runs.append(await run_app(app, agent, outcomes, failures, oracle))
                    await consolidate(agent, app["appId"], runs[-1], passes)
                    if args.verbose:
                        _show(app, runs[-1])
    finally:
        if oracle is None:
            await inner.aclose()
    wall = time.perf_counter() - started
    conversations = sum(len(run.written) for run in runs)
    fact_count = sum(len(run.stated_in) for run in runs)
    ours = score(runs, lambda run: run.final)
    invalid = outcomes["fallback:invalid_decision"]
    llm_errors = outcomes["fallback:llm_error"]
    overruled = outcomes["fallback:overruled"]
    grounding = agent.grounding
    return {
        "model": model.name,
        "writer": agent.writer,
        "writer_trial": trial,
        "window": window,
        "quote_drift": args.quote_drift if oracle is not None else None,
        "stories": str(args.stories),
        "apps": len(runs),
        "conversations": conversations,
        "facts": fact_count,
        "capture": capture(runs),
        "recall": ours["recall"],
        "update_recall": ours["update_recall"],
        "stale_rate": ours["stale_rate"],
        "stale_alone": ours["stale_alone"],
        "no_fact_share": ours["no_fact_share"],
        "chars_per_fact": ours["chars_per_fact"],
        "quote_share": ours["quote_share"],
        "fifo": score(runs, fifo_final(args.limit)),
        "groups": by_group(runs, args.limit),
        "memories_written": sum(1 for run in runs for text in run.written if text),
        "nothing_worth_keeping": agent.stats.nothing_worth_keeping,
        "jobs_failed": failures,
        "compaction_calls": model.decision_calls,
        # Older memories the model writer's answers retired or rewrote as updated (the
        # extractive writer's rules retire theirs as "update").
        "updates_by_model": outcomes["update by model"],
        "invalid_decisions": {
            "total": invalid + llm_errors,
            "llm_error": llm_errors,
            **{label[8:]: n for label, n in outcomes.items() if label.startswith("invalid:")},
        },
        "invalid_decision_rate": _share(invalid + llm_errors, model.decision_calls),
        "overruled_decisions": overruled,
        # The model's compaction decisions that were applied as it gave them.
        "decisions_applied": _share(
            model.decision_calls - invalid - llm_errors - overruled, model.decision_calls
        ),
        "compaction_outcomes": {
            label: n for label, n in sorted(outcomes.items())
            if not label.startswith(("invalid:", "fallback:"))
        },
        # The model writer's sentences: written, grounded as first given, grounded when asked
        # again, dropped (None: the extractive writer asks no model for sentences).
        "model_sentences": None if grounding is None else {
            "written": grounding.written,
            "grounded": grounding.grounded,
            "recovered_by_retry": grounding.recovered,
            "dropped": grounding.dropped,
            "grounded_share": _share(grounding.grounded + grounding.recovered, grounding.written),
        },
        "model_calls_per_conversation": round(model.calls / max(conversations, 1), 3),
        "tokens_per_conversation": round(model.tokens / max(conversations, 1), 1),
        "consolidation": consolidation_figures(runs, passes, score),
        "wall_time_s": round(wall, 1),
    }


def _show(app: dict[str, Any], run: AppRun) -> None:
    print(f"== {app['appId']}", file=sys.stderr)
    for index, text in enumerate(run.written):
        print(f"  [{index}] {text}", file=sys.stderr)
        for step in run.steps[index]:
            print(f"      {step}", file=sys.stderr)
    print("  final:", file=sys.stderr)
    for text in run.final:
        held = [f.id for f in run.facts.values() if f.held_by(text)]
        print(f"   - {held} {text}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stories", type=Path, default=DEFAULT_STORIES)
    parser.add_argument("--quick", action="store_true", help="the first app only")
    parser.add_argument(
        "--model",
        choices=("configured", "oracle"),
        default="configured",
        help="the configured memory model (default), or a scripted one that knows the facts",
    )
    parser.add_argument(
        "--writer",
        choices=("auto", "model", "extractive"),
        help="who writes memories (default: MNEMOLOOP_MEMORY_WRITER, else auto)",
    )
    parser.add_argument("--apps", help="only these apps (comma-separated ids)")
    parser.add_argument("--limit", type=int, default=10, help="memories kept per app")
    parser.add_argument(
        "--window", type=int,
        help="tokens the model's window holds (MNEMOLOOP_MODEL_CONTEXT; default: what the"
        " model says, none for the oracle)",
    )
    parser.add_argument(
        "--quote-drift", type=float, default=0.0, metavar="SHARE",
        help="with --model oracle: the share of facts quoted near-verbatim, as models quote",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of --quote-drift")
    parser.add_argument("--verbose", action="store_true", help="every memory, on stderr")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    print(json.dumps(anyio.run(evaluate, args), indent=2))


if __name__ == "__main__":
    main()
