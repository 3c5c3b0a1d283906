"""`mnemoloop demo`: memories written, injected, isolated and compacted, with the real model."""

from __future__ import annotations

from loop.service import Services
from mnemoloop.terminal_chat import describe, memory_of

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


async def run_demo(services: Services) -> int:
    step = _Steps()
    for app_id, name in ((CALENDAR, "Calendar"), (RECIPES, "Recipes")):
        await services.registry.install(app_id, name)
        await services.registry.purge_memories(app_id)  # a repeatable run
    step(f"installed {CALENDAR} and {RECIPES}; model {services.chat_model.name}")

    for app_id, opener in OPENERS.items():
        await _converse(services, app_id, opener, step)

    app = await services.registry.require(CALENDAR)
    context = await services.central.build_context(app, [])
    step("the memory block a new Calendar conversation gets:")
    print("\n".join("    " + line for line in context[-1].content.splitlines()))
    recipes = await services.registry.require(RECIPES)
    leaked = any("Calendar" in m.content for m in await services.central.build_context(recipes, []))
    step(f"Recipes' context holds Calendar's memory block: {leaked} (apps are isolated)")

    limit = services.agent.memory_limit
    step(f"now more Calendar conversations, until the app passes its cap of {limit}")
    compacted_before = sum(services.agent.stats.compactions.values())
    for number, topic in enumerate(CALENDAR_TOPICS, start=1):
        await _converse(services, CALENDAR, topic, step, label=f"[{number}/{len(CALENDAR_TOPICS)}]")
        if sum(services.agent.stats.compactions.values()) > compacted_before:
            break
    count = await services.agent.get_memory_count(CALENDAR)
    step(
        f"Calendar holds {count} memories (cap {limit}); compactions so far: "
        f"{dict(services.agent.stats.compactions)}"
    )
    return 0


async def _converse(
    services: Services, app_id: str, text: str, step: _Steps, label: str = ""
) -> None:
    conversation_id = await services.conversations.open(app_id)
    await services.conversations.add_message(conversation_id, "user", text)
    answer = await services.central.answer(conversation_id)
    await services.conversations.end(conversation_id, "user")
    job = await services.worker().run_now(conversation_id)
    step(f"{label} {app_id}: user said {text!r}; assistant: {answer.text[:80]!r}".strip())
    if job is not None and job.status == "done":
        print(f"    memory: {describe(await memory_of(services, app_id, conversation_id))}")
    else:
        print(
            f"    memory: not written ({job.status if job else 'no job'}: "
            f"{job.last_error if job else ''})"
        )


class _Steps:
    def __init__(self) -> None:
        self.number = 0

    def __call__(self, text: str) -> None:
        self.number += 1
        print(f"{self.number:>2}. {text}", flush=True)
