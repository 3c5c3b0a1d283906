"""Errors of the memory sub-agent and of the ports it is given.

    MnemoloopError
    ├── ChatModelError               an LLM call did not produce an answer
    │   ├── ChatModelTimeout         no answer in time (transient)
    │   ├── ChatModelUnavailable     the server could not be reached (transient)
    │   ├── ChatModelEmptyAnswer     the server answered nothing (transient)
    │   └── ChatModelResponseError   the server answered with an error (transient if 5xx)
    ├── InvalidMemoryText            an answer that cannot be made into a valid memory
    ├── InvalidCompactionDecision    a compaction decision that cannot be applied
    ├── MemoryNotFound               no such memory in this app
    ├── MemoryWriteRefused           a memory job was cancelled (purge) before it could write
    ├── MemorySteeringRefused        a pin or a restore the cap has no room for
    ├── InvalidExpiry                an expiry that is not in the future
    ├── InvalidSearchQuery           a search query with no words, or too long
    └── StorageError                 the database failed (locked, I/O, constraint)

Third-party errors are translated into these at exactly one place per adapter; retry
policies look at `transient` only.
"""

from __future__ import annotations


class MnemoloopError(Exception):
    """Base of every error the project raises on purpose. `transient`: trying again later
    may succeed."""

    transient: bool = False


class ChatModelError(MnemoloopError):
    def __init__(self, message: str, *, model: str | None = None) -> None:
        super().__init__(message)
        self.model = model


class ChatModelTimeout(ChatModelError):
    transient = True


class ChatModelUnavailable(ChatModelError):
    transient = True


class ChatModelEmptyAnswer(ChatModelError):
    """The server answered, with nothing in it (no text, no call): worth another try."""

    transient = True


class ChatModelResponseError(ChatModelError):
    def __init__(self, message: str, *, status_code: int, model: str | None = None) -> None:
        super().__init__(message, model=model)
        self.status_code = status_code
        self.transient = status_code >= 500 or status_code == 429


class InvalidMemoryText(MnemoloopError):
    """The model's answer is not a usable memory; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidCompactionDecision(MnemoloopError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MemoryNotFound(MnemoloopError):
    def __init__(self, app_id: str, memory_id: int) -> None:
        super().__init__(f"memory {memory_id} not found in app {app_id!r}")
        self.app_id = app_id
        self.memory_id = memory_id


class ProposalNotFound(MnemoloopError):
    def __init__(self, user_id: str, proposal_id: int) -> None:
        super().__init__(f"no proposal {proposal_id} for the profile of user {user_id!r}")
        self.user_id = user_id
        self.proposal_id = proposal_id


class ProposalNotPending(MnemoloopError):
    """An answer to a proposal already answered, lapsed or superseded; nothing was changed."""


class MemoryWriteRefused(MnemoloopError):
    """The job's commit guard refused the write: the job was cancelled, or taken over by
    another instance, meanwhile."""


class MemorySteeringRefused(MnemoloopError):
    """A change the memory's space has no room for (a pin beyond the cap less one, a restore
    into a full space); nothing was changed."""


class InvalidExpiry(MnemoloopError):
    """An expiry set on a memory that is not in the future: it would retire the memory at
    once and cut its grace period short; nothing was changed."""


class MemoryImportRefused(MnemoloopError):
    """An import that would leave the app above its memory limit; nothing was imported."""


class InvalidImport(MnemoloopError):
    """An import holding a memory that cannot be stored (the message names it); nothing was
    imported."""


class InvalidSearchQuery(MnemoloopError):
    """A query that cannot be searched for; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidKind(MnemoloopError):
    """A kind of memory the kinds file does not list, or an agent it does not name."""


class KindNotAllowed(MnemoloopError):
    """A read asking for a kind of memory its app or agent may not read."""


class StorageError(MnemoloopError):
    """A database operation failed; `cause` holds the driver's error. Transient: the usual
    cause is a database that is busy or briefly out of reach."""

    transient = True

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
