"""`mnemoloop chat APP_ID`: one conversation in the terminal; `/end` writes its memory."""

from __future__ import annotations

import anyio

from loop.errors import AppNotFound
from loop.service import Services
from memory_agent import Memory

HELP = "Type a message and press Enter. /end ends the conversation and writes its memory."


async def run_chat(services: Services, app_id: str) -> int:
    app = await services.registry.get(app_id)
    if app is None:
        raise AppNotFound(app_id)
    conversation_id = await services.conversations.open(app_id)
    count = await services.agent.get_memory_count(app_id)
    print(f"{app.name} ({services.chat_model.name}); {count} memories in context. {HELP}")
    ended = False
    while not ended:
        try:
            line = (await anyio.to_thread.run_sync(input, "you> ")).strip()
        except EOFError:
            line = "/end"
        if not line:
            continue
        if line == "/end":
            await services.conversations.end(conversation_id, "user")
            break
        await services.conversations.add_message(conversation_id, "user", line)
        print("  …thinking", flush=True)
        answer = await services.central.answer(conversation_id)
        print(f"assistant> {answer.text}" if answer.text else "assistant> (no text)")
        if answer.ended:
            print("(the assistant ended the conversation)")
            ended = True
    print("  …writing the memory of this conversation", flush=True)
    job = await services.worker().run_now(conversation_id)
    if job is None or job.status in ("pending", "deferred"):
        print("memory: deferred until energy recovers; `mnemoloop serve` will write it")
    elif job.status != "done":
        print(f"memory: not written ({job.status}: {job.last_error})")
    else:
        print(f"memory: {describe(await memory_of(services, app_id, conversation_id))}")
    return 0


async def memory_of(services: Services, app_id: str, conversation_id: str) -> Memory | None:
    """The memory that now carries this conversation (it may have been merged into another)."""
    for memory in await services.agent.list_memories(app_id):
        if conversation_id in memory.metadata.get("relatedConversations", []):
            return memory
    return None


def describe(memory: Memory | None) -> str:
    if memory is None:
        return "written, then dropped by compaction"
    return f"[{memory.id}] {memory.content}"
