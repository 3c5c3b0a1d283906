"""`mnemoloop chat APP_ID`: one conversation in the terminal; `/end` writes its memory.

Replies are printed as the model writes them. Ctrl-C quits at any moment, within a second:
the prompt is not waited for, and the model stops at its next token.
"""

from __future__ import annotations

import os
import stat
import sys

import anyio

from loop.conversations import Answer, Question, ask
from loop.errors import AppNotFound
from loop.service import Services
from memory_agent import Memory

HELP = "Type a message and press Enter. /end ends the conversation and writes its memory."


async def run_chat(services: Services, app_id: str) -> int:
    app = await services.stores.registry.get(app_id)
    if app is None:
        raise AppNotFound(app_id)
    conversation_id = await services.stores.conversations.open(app_id)
    count = await services.stores.agent.get_memory_count(app_id)
    print(f"{app.name} ({services.models.chat.name}); {count} memories in context. {HELP}")
    ended = False
    typed = _Lines(sys.stdin.fileno())
    while not ended:
        print("you> ", end="", flush=True)
        line = await typed.next()
        line = "/end" if line is None else line.strip()
        if not line:
            continue
        if line == "/end":
            await services.stores.conversations.end(conversation_id, "user")
            break
        print("assistant> ", end="", flush=True)
        answer = await answer_as_written(services, conversation_id, line)
        if answer.ended:
            print("(the assistant ended the conversation)")
            ended = True
    print("  …writing the memory of this conversation", flush=True)
    job = await services.worker.run_now(conversation_id)
    if job is None or job.status in ("pending", "deferred"):
        print("memory: deferred until energy recovers; `mnemoloop serve` will write it")
    elif job.status != "done":
        print(f"memory: not written ({job.status}: {job.last_error})")
    else:
        print(f"memory: {describe(await memory_of(services, app_id, conversation_id))}")
    return 0


class _Lines:
    """Lines typed on a file descriptor, read as they come without a thread: a thread blocked
    in `input()` would keep Ctrl-C from ending the process until Enter is pressed."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = b""
        self._closed = False
        # A terminal, pipe or socket is waited on; a file (`< script.txt`, /dev/null) can
        # always be read at once, and cannot be waited on.
        mode = os.fstat(fd).st_mode
        self._wait = os.isatty(fd) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    async def next(self) -> str | None:
        """The next line, or None at the end of the input."""
        while b"\n" not in self._pending and not self._closed:
            if self._wait:
                await anyio.wait_readable(self._fd)
            data = os.read(self._fd, 65536)
            self._closed = not data
            self._pending += data
        if not self._pending:
            return None
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace")


async def answer_as_written(services: Services, conversation_id: str, text: str) -> Answer:
    """Post the user's `text` and answer it now, printing the reply as the model writes it."""
    question = await ask(services.stores.conversations, conversation_id, text)
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(_print_as_written, question)
        try:
            answer = await services.central.answer(conversation_id)
        except Exception as error:
            # Raised after the task group, as itself (not in an exception group): the
            # command says it in one line.
            failure = error
            group.cancel_scope.cancel()
    print(flush=True)
    if failure is not None:
        raise failure
    if not answer.text:
        print("(no text)")
    return answer


async def _print_as_written(question: Question) -> None:
    async for event in question.events():
        if isinstance(event, str):
            print(event, end="", flush=True)


async def memory_of(services: Services, app_id: str, conversation_id: str) -> Memory | None:
    """The memory that now carries this conversation (it may have been merged into another)."""
    for memory in await services.stores.agent.list_memories(app_id):
        if conversation_id in memory.metadata.get("relatedConversations", []):
            return memory
    return None


def describe(memory: Memory | None) -> str:
    if memory is None:
        return "written, then dropped by compaction"
    return f"[{memory.id}] {memory.content}"
