"""Value types of the memory domain."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The largest memory id anything accepts: the largest integer every JSON reader holds exactly.
MAX_MEMORY_ID = 2**53 - 1
CompactionAction = Literal["delete", "edit"]
# Who chose a compaction step: the model (its decision was applied), or the writer's fallback,
# "policy" (FIFO for the model writer, the retention policy for the extractive writer: the
# model failed, gave an invalid decision, or, with the extractive writer, was overruled).
DecidedBy = Literal["model", "policy"]
# Why the fallback decided a compaction instead of the model.
FallbackCause = Literal["llm_error", "invalid_decision", "overruled"]
MemoryEventKind = Literal[
    "created", "edited", "deleted", "restored", "erased",
    "pinned", "unpinned", "importance", "private", "public", "expiry",
]
# Who changed a memory: a memory job writing it, a compaction step (by the model or by the
# policy), an admin, a purge, an import, an app (with its own key), or the worker (erasing
# what its grace period no longer keeps).
MemoryActor = Literal["job", "model", "policy", "admin", "purge", "import", "app", "worker"]
# How sensitive a memory is (the seed's levels): public (injected, given to models), private
# (never injected; listed and exported), secret (the same, and never shown to a model),
# unknown (never returned by any read: fail-closed).
Sensitivity = Literal["public", "private", "secret", "unknown"]
SENSITIVITIES: tuple[Sensitivity, ...] = ("public", "private", "secret", "unknown")
# The importance scale of the seed's metadata (0-10), and what a memory without one counts as.
MIN_IMPORTANCE, MAX_IMPORTANCE, DEFAULT_IMPORTANCE = 0, 10, 5
# The metadata key a relevance tag leaves on a memory ("relevant" or "irrelevant"), which its
# decay reads (`recall.decay`).
TAGGED = "tagged"


@dataclass(frozen=True)
class Memory:
    id: int
    app_id: str
    content: str
    created_at: str
    updated_at: str
    source_conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The space: "" for the app's shared one, else the user's.
    user_id: str = ""
    # Compaction never deletes, merges or edits a pinned memory.
    pinned: bool = False
    # Listed and exported, never injected into a conversation.
    private: bool = False
    # After this time the memory is expired: out of sight, restorable until erased.
    expires_at: str | None = None
    # Deleted (softly) at this time: restorable until erased.
    deleted_at: str | None = None
    # How often a conversation's turn was given it, how often a reply used its values, and
    # when it was last given (`recall.usage`).
    access_count: int = 0
    citation_count: int = 0
    last_accessed: str | None = None
    # Beyond `private`: whether a model may ever see it, and whether a read may return it.
    sensitivity: Sensitivity = "public"
    # Its kind (`core.kinds`): what the writer said it holds.
    kind: str = "fact"

    @property
    def shown_to_models(self) -> bool:
        """Neither secret nor of unknown sensitivity: a prompt or an MCP tool may carry it."""
        return self.sensitivity in ("public", "private")

    @property
    def returned(self) -> bool:
        """Of a known sensitivity: a read (a listing, a search, an export) may return it."""
        return self.sensitivity != "unknown"

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Memory:
        """From a row of the store's columns, in the store's order (read by position: this is
        on the path of every retrieval)."""
        (memory_id, app_id, content, created_at, updated_at, source, metadata, user_id,
         pinned, private, expires_at, deleted_at, access_count, citation_count,
         last_accessed, sensitivity, kind) = row
        return cls(
            memory_id,
            app_id,
            content,
            created_at,
            updated_at,
            source,
            # Most memories carry none: no parse for those.
            json.loads(metadata) if metadata and metadata != "{}" else {},
            user_id,
            bool(pinned),
            # Every write sets the two together; either saying so makes it private.
            bool(private) or sensitivity != "public",
            expires_at,
            deleted_at,
            access_count,
            citation_count,
            last_accessed,
            sensitivity,
            kind,
        )

    @property
    def importance(self) -> int:
        """The seed's metadata importance (0-10); a memory without one counts as 5."""
        value = self.metadata.get("importance")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, round(value)))
        return DEFAULT_IMPORTANCE

    def state(self, now: str) -> str:
        """`live`, `expired` (its expiry has passed) or `deleted`, as of `now`."""
        if self.deleted_at is not None:
            return "deleted"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "live"

    @property
    def created_date(self) -> str:
        """`YYYY-MM-DD`, as prompts and the memory context show it."""
        return self.created_at[:10]


@dataclass(frozen=True)
class ImportedMemory:
    """A memory brought in from an export: its text, times and origin as they were."""

    content: str
    created_at: str
    updated_at: str | None = None
    source_conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    pinned: bool = False
    expires_at: str | None = None
    # An export that gives no level: "private" when it says private, else "public".
    sensitivity: Sensitivity = "public"
    # One of the kinds file's; None: the file's default.
    kind: str | None = None


# What a compaction step did: deleted a memory, merged one into another, deleted the oldest
# of the least important (the model writer's FIFO fallback), or retired an older value that a
# newer memory updates.
CompactionOutcomeLabel = Literal["delete", "merge", "fifo", "update"]
COMPACTION_OUTCOMES: tuple[CompactionOutcomeLabel, ...] = ("delete", "merge", "fifo", "update")


def outcome_label(action: str, *, update: bool, fifo: bool) -> CompactionOutcomeLabel:
    """A compaction step's outcome, by what it did (`decided_by` says whose it was)."""
    if update:
        return "update"
    if fifo:
        return "fifo"
    return "delete" if action == "delete" else "merge"


def stored_outcome_label(step: dict[str, Any]) -> CompactionOutcomeLabel:
    """The outcome of a step as a job's record keeps it (`CompactionOutcome.to_json`); a
    record written before outcomes were kept called every step of the fallback FIFO."""
    if isinstance(step.get("outcome"), str) and step["outcome"] in COMPACTION_OUTCOMES:
        return step["outcome"]  # type: ignore[no-any-return]
    if step.get("update"):
        return "update"
    if step.get("decidedBy") == "policy":
        return "fifo"
    return "delete" if step.get("action") == "delete" else "merge"


@dataclass(frozen=True)
class CompactionOutcome:
    """One compaction step as applied.

    `action` is what was done to `target_memory_id` (an edit folds `folded_memory_id` into it);
    `decided_by` says whose choice it was; `fallback_reason` says why the model's decision was
    not applied, when the policy decided.
    """

    app_id: str
    action: CompactionAction
    target_memory_id: int
    reason: str
    decided_by: DecidedBy = "model"
    fallback_reason: str | None = None
    folded_memory_id: int | None = None
    # True for a step that retired what a newer memory updates (not a compaction proper).
    update: bool = False
    # Set on the step where the model's decision was not used (not on later policy steps).
    fallback_cause: FallbackCause | None = None
    # The step was the FIFO fallback's: the oldest of the least important memories went.
    fifo: bool = False

    @property
    def outcome(self) -> CompactionOutcomeLabel:
        """What the step did: `delete`, `merge`, `fifo` or `update` (`outcome_label`)."""
        return outcome_label(self.action, update=self.update, fifo=self.fifo)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "targetMemoryId": self.target_memory_id,
            "foldedMemoryId": self.folded_memory_id,
            "decidedBy": self.decided_by,
            "reason": self.reason,
            "fallbackReason": self.fallback_reason,
            "update": self.update,
            "outcome": self.outcome,
        }


@dataclass(frozen=True)
class MemoryEvent:
    """One change to one memory, as the history keeps it (texts are None once purged)."""

    id: int
    app_id: str
    memory_id: int
    event: MemoryEventKind
    actor: MemoryActor
    created_at: str
    reason: str | None = None
    content_before: str | None = None
    content_after: str | None = None
    conversation_id: str | None = None
    job_id: int | None = None
    model: str | None = None
    erased: bool = False


# The start of the history's reason for a merge (`job.commit`), by which the delta header
# tells a merge from an update.
MERGED = "merged: "
# What leads the reason of a change a consolidation pass made (the delta header: ↔merged).
CONSOLIDATED = "consolidated: "


@dataclass(frozen=True)
class SpaceChange:
    """One change to a memory space, as the delta header names it."""

    revision: int
    event: str  # created, edited, deleted, restored
    content: str
    # An edit that folded another memory in (compaction's EDIT), not an update.
    merged: bool = False


ProposalStatus = Literal["pending", "accepted", "declined", "lapsed", "superseded"]
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = (
    "pending", "accepted", "declined", "lapsed", "superseded",
)


@dataclass(frozen=True)
class ProfileProposal:
    """A change to a sensitive fact of a person's profile, waiting for their answer
    (`memory_agent.consent`): never injected while it waits."""

    id: int
    user_id: str
    # The app whose conversation (or whose memories, for a consolidation) it came from.
    app_id: str
    origin: Literal["memory", "consolidation"]
    # The sensitive fields it speaks of (or `consent.UNREAD`).
    fields: tuple[str, ...]
    # The profile's text as proposed (None: a fact removed).
    content: str | None
    # The profile's texts it changes or replaces, if any.
    before: str | None
    status: ProposalStatus
    proposed_at: str
    lapses_at: str
    decided_at: str | None = None
    # Who answered: api, client, cli, console, mcp, an app ("app:<id>"), or "lapsed".
    decided_through: str | None = None
    # The profile memory the accepted change wrote or changed.
    memory_id: int | None = None
    conversation_id: str | None = None
