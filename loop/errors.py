"""Errors of the host, beside `memory_agent.core.errors` whose base they share.

MnemoloopError
├── AppNotFound               no app with this id
├── AppNotInstalled           the app exists but is uninstalled (conflict)
├── ConversationNotFound      no conversation with this id
├── ConsolidationNotFound     no consolidation pass with this id
├── ConversationEnded         the conversation no longer takes messages (conflict)
├── AnswerTaken               another instance is answering the conversation (conflict)
├── MemoryCountChanged        a purge was confirmed for another number of memories (conflict)
└── NoChatModel               no usable model backend; the message says how to fix it
"""

from __future__ import annotations

from memory_agent import MnemoloopError


class AppNotFound(MnemoloopError):
    def __init__(self, app_id: str) -> None:
        super().__init__(f"app {app_id!r} not found")
        self.app_id = app_id


class AppNotInstalled(MnemoloopError):
    def __init__(self, app_id: str) -> None:
        super().__init__(f"app {app_id!r} is uninstalled")
        self.app_id = app_id


class AppAlreadyInstalled(MnemoloopError):
    def __init__(self, app_id: str) -> None:
        super().__init__(
            f"app {app_id!r} is already installed: its key stays as it is (uninstall it first"
            " to install it again with a new key)"
        )
        self.app_id = app_id


class MemoryCountChanged(MnemoloopError):
    def __init__(self, app_id: str, confirmed: int, count: int) -> None:
        super().__init__(
            f"app {app_id!r} holds {count} memories, not the {confirmed} the purge was confirmed"
            " for: nothing was deleted"
        )
        self.count = count


class ConversationNotFound(MnemoloopError):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} not found")
        self.conversation_id = conversation_id


class ConsolidationNotFound(MnemoloopError):
    def __init__(self, pass_id: int) -> None:
        super().__init__(f"consolidation pass {pass_id} not found")
        self.pass_id = pass_id


class ConversationEnded(MnemoloopError):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} has ended")
        self.conversation_id = conversation_id


class AnswerTaken(MnemoloopError):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"another instance is answering conversation {conversation_id!r}")
        self.conversation_id = conversation_id


class InvalidInput(MnemoloopError):
    pass


class NotRelaying(MnemoloopError):
    """An app's key asked for what only an app relaying a person's answers may see."""


class NoChatModel(MnemoloopError):
    pass
