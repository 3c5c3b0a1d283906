"""`mnemoloop demo`: memories written, injected, isolated and compacted, with the real model.

Every step says what it is doing before it waits for the model, and the replies appear as
they are written. The demo goes on talking to the Calendar app until a compaction happens
(new facts each time), then shows what the compaction did and why.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import count

from loop.jobs import MemoryJob
from loop.service import Services
from mnemoloop.terminal_chat import answer_as_written, describe, memory_of

CALENDAR, RECIPES = "demo-calendar", "demo-recipes"
OPENERS = {
    CALENDAR: "Please book my meetings after 2pm. Mornings are for deep work.",
    RECIPES: "I am vegetarian and allergic to peanuts. Suggest a dinner.",
}
CALENDAR_TOPICS = [
    "My project Phoenix is due on November 1.",
    "I prefer video calls over phone calls.",
    "Every Friday afternoon I have a team retro.",
    "I am on holiday from December 20.",
    "Lunch is always at noon for me.",
    "My manager is called Dana.",
    "I want reminders 15 minutes before each meeting.",
    "No meetings on Wednesdays please.",
    "I work from the Lisbon office on Tuesdays.",
    "My time zone is Europe/Lisbon.",
    "I take a walk at 4pm every day.",
    "The quarterly review is on January 15.",
]
CITIES = ["Porto", "Oslo", "Kyoto", "Lima", "Accra", "Quito", "Perth", "Cork"]
# A model that keeps nothing would never fill the app: stop after this many conversations.
MAX_CALENDAR_CONVERSATIONS = 40


def calendar_topics() -> Iterator[str]:
    """The scripted topics, then new facts for as long as the demo needs them."""
    yield from CALENDAR_TOPICS
    for number in count(1):
        yield f"My colleague number {number} works from our {CITIES[number % len(CITIES)]} office."


async def run_demo(services: Services) -> int:
    step = _Steps()
    for app_id, name in ((CALENDAR, "Calendar"), (RECIPES, "Recipes")):
        app = await services.stores.registry.get(app_id)
        if app is None or not app.installed:
            await services.stores.registry.install(app_id, name)
        await services.stores.registry.purge_memories(app_id)  # a repeatable run
    step(f"installed {CALENDAR} and {RECIPES}; model {services.models.chat.name}")

    for app_id, opener in OPENERS.items():
        await _converse(services, app_id, opener, step)

    app = await services.stores.registry.require(CALENDAR)
    context = (await services.central.contexts.build(app, [])).messages
    step("the memory block a new Calendar conversation gets:")
    print("\n".join("    " + line for line in context[-1].content.splitlines()))
    recipes = await services.stores.registry.require(RECIPES)
    calendar_memories = [m.content for m in await services.stores.agent.list_memories(CALENDAR)]
    recipes_context = "\n".join(
        m.content for m in (await services.central.contexts.build(recipes, [])).messages
    )
    leaked = any(memory in recipes_context for memory in calendar_memories)
    step(f"Recipes' context holds Calendar's memory block: {leaked} (apps are isolated)")

    limit = services.stores.agent.memory_limit
    step(f"now more Calendar conversations, until the app passes its cap of {limit}")
    for number, topic in enumerate(calendar_topics(), start=1):
        held = await services.stores.agent.get_memory_count(CALENDAR)
        job = await _converse(services, CALENDAR, topic, step, f"[{number}, {held}/{limit} held]")
        if job is not None and job.steps:
            _show_compaction(job)
            step(f"Calendar holds {await services.stores.agent.get_memory_count(CALENDAR)} memories"
                 f" (cap {limit}); see `mnemoloop memories history {CALENDAR}`")
            return 0
        if number == MAX_CALENDAR_CONVERSATIONS:
            break
    step(f"no compaction after {MAX_CALENDAR_CONVERSATIONS} conversations: the model kept too"
         " few memories to pass the cap")
    return 1


async def _converse(
    services: Services, app_id: str, text: str, step: _Steps, label: str = ""
) -> MemoryJob | None:
    step(f"{label} {app_id}: the user says {text!r}".strip())
    conversation_id = await services.stores.conversations.open(app_id)
    started = time.monotonic()
    print("    assistant: ", end="", flush=True)
    await answer_as_written(services, conversation_id, text)
    await services.stores.conversations.end(conversation_id, "user")
    print(f"    …writing the memory ({time.monotonic() - started:.0f} s so far)", flush=True)
    job = await services.worker.run_now(conversation_id)
    if job is not None and job.status == "done":
        print(f"    memory: {describe(await memory_of(services, app_id, conversation_id))}")
    else:
        print(
            f"    memory: not written ({job.status if job else 'no job'}: "
            f"{job.last_error if job else ''})"
        )
    return job


def _show_compaction(job: MemoryJob) -> None:
    print("    compaction (the app passed its cap):")
    for step in job.steps:
        action = f"{step['action']} memory {step['targetMemoryId']}"
        if step.get("foldedMemoryId"):
            action += f" (folding in memory {step['foldedMemoryId']})"
        if step["decidedBy"] == "policy":
            who, why = "the retention policy", step.get("fallbackReason") or step.get("reason")
        else:
            who, why = "the model", step.get("reason")
        print(f"      {action}, chosen by {who}: {why or 'no reason given'}")


class _Steps:
    def __init__(self) -> None:
        self.number = 0

    def __call__(self, text: str) -> None:
        self.number += 1
        print(f"{self.number:>2}. {text}", flush=True)
