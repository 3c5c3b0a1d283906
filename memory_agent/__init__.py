"""The memory sub-agent: writes, compacts, recalls and steers the memories of apps, users and
people's profiles. This file is its door: the host (`loop`), the HTTP API and the command line
import from here only, never from the rooms inside (a contract of `lint-imports`).

The rooms: `core/` (what the host and the agent share: the chat-model seam, the database and
clock ports, errors, redaction), `storage/` (memories, their history and search), `recall/`
(the memory block and the delta header), `steering/` (pins, expiry, deletes, import and
export), `links/` (how alike two memories are, and the links between them), `writers/` (the
two writers behind one seam: `model/` and `extractive/`, whose words are in
`extractive/words/`), `job/` (one memory job, from a conversation to its commit),
`consolidation/` (the pass that merges and updates memories saying the same thing),
`consent/` (what in a person's profile changes only with their consent) and `agent.py` with
`reads.py` and `proposals.py` (the sub-agent the host holds).
"""
from memory_agent.agent import (
    MemorySubAgent,
)
from memory_agent.consent.fields import DEFAULT_FIELDS as DEFAULT_SENSITIVE_FIELDS
from memory_agent.consent.fields import UNREAD, checked_fields
from memory_agent.consent.holding import LAPSE_AFTER
from memory_agent.consolidation.consolidator import (
    PAIRS_PER_SPACE,
    RECHECK_AFTER,
    Group,
    PassFigures,
)
from memory_agent.core.chat_model import (
    ChatMessage,
    ChatModel,
    ChatReply,
    ContextWindow,
    JsonSchema,
    Role,
    TextSink,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from memory_agent.core.energy import (
    energy_cost,
)
from memory_agent.core.errors import (
    ChatModelEmptyAnswer,
    ChatModelError,
    ChatModelResponseError,
    ChatModelTimeout,
    ChatModelUnavailable,
    InvalidExpiry,
    InvalidImport,
    InvalidKind,
    InvalidSearchQuery,
    KindNotAllowed,
    MemoryImportRefused,
    MemoryNotFound,
    MemorySteeringRefused,
    MemoryWriteRefused,
    MnemoloopError,
    ProposalNotFound,
    ProposalNotPending,
    StorageError,
)
from memory_agent.core.kinds import KEPT_BEFORE, Kinds, check_readable, load_kinds
from memory_agent.core.lenient_json import repaired_object
from memory_agent.core.ports import (
    POSTGRESQL,
    SQLITE,
    Clock,
    Database,
    Dialect,
    Params,
    Row,
    SqlSession,
    SqlTransaction,
    SystemClock,
    TransactionBody,
    format_timestamp,
    given_timestamp,
    in_space,
    now_text,
)
from memory_agent.core.redaction import (
    Redacted,
    redact,
    redact_json,
)
from memory_agent.core.tokens import TOKENS_PER_MESSAGE, estimate_tokens
from memory_agent.job.creation import (
    AgentStats,
    MemoryCreationRequest,
)
from memory_agent.job.outcome import JobRecord, MemoryCreated
from memory_agent.models import (
    MAX_IMPORTANCE,
    MAX_MEMORY_ID,
    MIN_IMPORTANCE,
    PROPOSAL_STATUSES,
    SENSITIVITIES,
    CompactionOutcome,
    ImportedMemory,
    Memory,
    MemoryActor,
    MemoryEvent,
    ProfileProposal,
    ProposalStatus,
    Sensitivity,
    stored_outcome_label,
)
from memory_agent.recall.context import (
    MemoryBlock,
    format_memories_for_context,
    memory_block_within,
    neutralise,
)
from memory_agent.recall.decay import Given, View, digest_of
from memory_agent.recall.query import (
    MAX_BUDGET_TOKENS,
    MAX_TOP_K,
    MIN_BUDGET_TOKENS,
    MemoryQuery,
    QueryAnswer,
    QueryHit,
)
from memory_agent.recall.selection import BlockBudget
from memory_agent.steering.changes import (
    MemoryChange,
)
from memory_agent.storage.search import (
    MAX_QUERY_CHARS,
)
from memory_agent.storage.store import (
    PROFILE_APP,
    MemoryState,
)
from memory_agent.writers.calibration import CALIBRATION_VERSION, Calibration
from memory_agent.writers.choice import memory_writer_for
from memory_agent.writers.written import GroundingRecord

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_SENSITIVE_FIELDS",
    "KEPT_BEFORE",
    "LAPSE_AFTER",
    "MAX_BUDGET_TOKENS",
    "MAX_IMPORTANCE",
    "MAX_MEMORY_ID",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "MIN_BUDGET_TOKENS",
    "MIN_IMPORTANCE",
    "PAIRS_PER_SPACE",
    "POSTGRESQL",
    "PROFILE_APP",
    "PROPOSAL_STATUSES",
    "RECHECK_AFTER",
    "SENSITIVITIES",
    "SQLITE",
    "TOKENS_PER_MESSAGE",
    "UNREAD",
    "AgentStats",
    "BlockBudget",
    "Calibration",
    "ChatMessage",
    "ChatModel",
    "ChatModelEmptyAnswer",
    "ChatModelError",
    "ChatModelResponseError",
    "ChatModelTimeout",
    "ChatModelUnavailable",
    "ChatReply",
    "Clock",
    "CompactionOutcome",
    "ContextWindow",
    "Database",
    "Dialect",
    "Given",
    "GroundingRecord",
    "Group",
    "ImportedMemory",
    "InvalidExpiry",
    "InvalidImport",
    "InvalidKind",
    "InvalidSearchQuery",
    "JobRecord",
    "JsonSchema",
    "KindNotAllowed",
    "Kinds",
    "Memory",
    "MemoryActor",
    "MemoryBlock",
    "MemoryChange",
    "MemoryCreated",
    "MemoryCreationRequest",
    "MemoryEvent",
    "MemoryImportRefused",
    "MemoryNotFound",
    "MemoryQuery",
    "MemoryState",
    "MemorySteeringRefused",
    "MemorySubAgent",
    "MemoryWriteRefused",
    "MnemoloopError",
    "Params",
    "PassFigures",
    "ProfileProposal",
    "ProposalNotFound",
    "ProposalNotPending",
    "ProposalStatus",
    "QueryAnswer",
    "QueryHit",
    "Redacted",
    "Role",
    "Row",
    "Sensitivity",
    "SqlSession",
    "SqlTransaction",
    "StorageError",
    "SystemClock",
    "TextSink",
    "TokenUsage",
    "ToolCall",
    "ToolSpec",
    "TransactionBody",
    "View",
    "check_readable",
    "checked_fields",
    "digest_of",
    "energy_cost",
    "estimate_tokens",
    "format_memories_for_context",
    "format_timestamp",
    "given_timestamp",
    "in_space",
    "load_kinds",
    "memory_block_within",
    "memory_writer_for",
    "neutralise",
    "now_text",
    "redact",
    "redact_json",
    "repaired_object",
    "stored_outcome_label",
]
