"""Prometheus metrics of the running service."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from loop.jobs.store import TALLIED_OUTCOMES
from memory_agent import AgentStats, GroundingRecord

# Litestar adds the charset.
CONTENT_TYPE = "text/plain; version=0.0.4"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.retrieval_seconds = Histogram(
            "mnemoloop_memory_retrieval_seconds",
            "Time to read an app's memories and format its memory context.",
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1),
            registry=self.registry,
        )
        self.answer_failures = Counter(
            "mnemoloop_answer_failures",
            "Conversation answer attempts that failed (retried if transient).",
            registry=self.registry,
        )
        self.memories_erased = Counter(
            "mnemoloop_memories_erased",
            "Deleted or expired memories erased by the worker once their grace period was over",
            registry=self.registry,
        )
        self.consolidations = Counter(
            "mnemoloop_consolidation_passes",
            "Consolidation passes ended, by how they ended (done, failed, cancelled).",
            ["status"],
            registry=self.registry,
        )
        self.consolidation_changes = Counter(
            "mnemoloop_consolidation_changes",
            "Pairs of memories a consolidation pass merged or updated.",
            registry=self.registry,
        )
        self.loop_errors = Counter(
            "mnemoloop_background_errors",
            "Failures of the loop's or the memory worker's own work (not of one answer or job),"
            " after which they carried on.",
            registry=self.registry,
        )
        # Whether each answered conversation's prompt carried memories.
        self.context_injections = Counter(
            "mnemoloop_context_injections",
            "Answers composed, by whether their prompt carried memories.",
            ["with_memories"],
            registry=self.registry,
        )
        self._snapshot = _Snapshot()
        self.registry.register(self._snapshot)

    def count_cut_prompt(self) -> None:
        """An answer's prompt the model's server cut (its window was smaller than said)."""
        self._snapshot.conversation_prompts_cut += 1

    def count_use_unrecorded(self) -> None:
        """A turn whose memories' injections and citations could not be stored, or whose
        memories' counts could not be read (its block shows every memory in full)."""
        self._snapshot.use_unrecorded += 1

    def count_answer(self, *, with_memories: bool) -> None:
        self.context_injections.labels(with_memories=str(with_memories).lower()).inc()
        self._snapshot.answers[with_memories] += 1

    def render(
        self,
        *,
        stats: AgentStats,
        jobs_by_status: dict[str, int],
        grounding: GroundingRecord | None = None,
        energy_spent: dict[str, int],
        apps_with_memories: int,
        apps: int,
        spaces_with_memories: int = 0,
        spaces: int = 0,
    ) -> bytes:
        self._snapshot.stats = stats
        self._snapshot.grounding = grounding
        self._snapshot.jobs = jobs_by_status
        self._snapshot.energy = energy_spent
        self._snapshot.apps = (apps_with_memories, apps)
        self._snapshot.spaces = (spaces_with_memories, spaces)
        return generate_latest(self.registry)


class _Snapshot(Collector):
    """Figures read at scrape time from the sub-agent, the job table and the energy budget."""

    def __init__(self) -> None:
        self.stats = AgentStats()
        self.grounding: GroundingRecord | None = None
        self.jobs: dict[str, int] = {}
        self.energy: dict[str, int] = {}
        self.apps = (0, 0)
        self.spaces = (0, 0)
        # Answers composed, by whether their prompt carried memories.
        self.answers = {True: 0, False: 0}
        self.conversation_prompts_cut = 0
        self.use_unrecorded = 0

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        cut = CounterMetricFamily(
            "mnemoloop_prompts_cut",
            "Requests whose prompt the model's server cut (it read as many tokens as the"
            " window holds less the answer's room): the window it was given is larger than it"
            " holds. By the work the request was for.",
            labels=["work"],
        )
        cut.add_metric(["conversation"], self.conversation_prompts_cut)
        cut.add_metric(["memory"], self.stats.prompts_cut)
        yield cut
        unrecorded = CounterMetricFamily(
            "mnemoloop_memory_use_unrecorded",
            "Turns whose memories' injections and citations could not be stored, or whose"
            " memories' counts could not be read, so that every memory was shown in full"
            " (each is logged).",
        )
        unrecorded.add_metric([], self.use_unrecorded)
        yield unrecorded
        created = CounterMetricFamily("mnemoloop_memories_created", "Memories written.")
        created.add_metric([], self.stats.memories_created)
        yield created
        failed = CounterMetricFamily(
            "mnemoloop_memory_creation_failures", "Memory creations skipped after an error."
        )
        failed.add_metric([], self.stats.creation_failures)
        yield failed
        nothing = CounterMetricFamily(
            "mnemoloop_memories_not_written",
            "Conversations that held nothing worth keeping (no memory, no slot spent).",
        )
        nothing.add_metric([], self.stats.nothing_worth_keeping)
        yield nothing
        without_model = CounterMetricFamily(
            "mnemoloop_memories_written_without_model",
            "Memories written from the conversation's statements alone (the extractive writer).",
        )
        without_model.add_metric([], self.stats.written_without_model)
        yield without_model
        if self.grounding is not None:
            sentences = CounterMetricFamily(
                "mnemoloop_model_sentences",
                "The model writer's memory sentences: grounded as first given, grounded when"
                " asked again, dropped (not grounded twice).",
                labels=["outcome"],
            )
            for outcome, count in (
                ("grounded", self.grounding.grounded),
                ("recovered", self.grounding.recovered),
                ("dropped", self.grounding.dropped),
            ):
                sentences.add_metric([outcome], count)
            yield sentences
        compactions = CounterMetricFamily(
            "mnemoloop_compactions",
            "Compaction steps by what they did (delete, merge, fifo: the oldest of the least"
            " important, update: an older value a newer memory replaced) and whose decision it"
            " was (the model's, or the writer's policy).",
            labels=["outcome", "decided_by"],
        )
        for outcome, decided_by in TALLIED_OUTCOMES:
            count = self.stats.compactions.get((outcome, decided_by), 0)
            compactions.add_metric([outcome, decided_by], count)
        yield compactions
        fallbacks = CounterMetricFamily(
            "mnemoloop_compaction_fallbacks",
            "Why the fallback (FIFO, or the extractive writer's policy) decided instead of the"
            " model.",
            labels=["cause"],
        )
        for cause in ("llm_error", "invalid_decision", "overruled"):
            fallbacks.add_metric([cause], self.stats.fallbacks.get(cause, 0))
        yield fallbacks
        jobs = GaugeMetricFamily(
            "mnemoloop_memory_jobs", "Memory jobs by status.", labels=["status"]
        )
        for status, count in sorted(self.jobs.items()):
            jobs.add_metric([status], count)
        yield jobs
        energy = CounterMetricFamily(
            "mnemoloop_energy_spent", "Energy units spent by kind.", labels=["kind"]
        )
        for kind, units in sorted(self.energy.items()):
            energy.add_metric([kind], units)
        yield energy
        apps = GaugeMetricFamily(
            "mnemoloop_apps", "Apps known, and apps holding memories.", labels=["with_memories"]
        )
        apps.add_metric(["true"], self.apps[0])
        apps.add_metric(["false"], self.apps[1] - self.apps[0])
        yield apps
        utilisation = GaugeMetricFamily(
            "mnemoloop_memory_utilisation",
            "Share of apps, and of memory spaces (each app's shared one and each user's seen),"
            " that hold at least one memory.",
            labels=["of"],
        )
        for of, (holding, known) in (("apps", self.apps), ("spaces", self.spaces)):
            utilisation.add_metric([of], holding / known if known else 0.0)
        yield utilisation
        answered = sum(self.answers.values())
        rate = GaugeMetricFamily(
            "mnemoloop_context_injection_rate",
            "Share of the answers composed by this instance whose prompt carried memories.",
        )
        rate.add_metric([], self.answers[True] / answered if answered else 0.0)
        yield rate
