"""The web console in a real browser: Debian's Chromium driven by Playwright, against the
real service (real database, loop and memory worker) on a real HTTP server.

Screenshots of every page go to `artifacts/console/` (or `$MNEMOLOOP_ARTIFACTS/console`).
Every page is checked with axe-core; a serious or critical violation fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.fakes import decision, friend_fact, ids_in_prompt
from tests.harness import assistant_model, eventually, live_http, running, service

pytestmark = pytest.mark.anyio

TOKEN = "console-admin-token"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("MNEMOLOOP_ARTIFACTS", Path(__file__).parent.parent / "artifacts"))


def chromium_path() -> str:
    """Debian's Chromium (scripts/setup installs it); never skipped: a missing browser fails."""
    for candidate in (os.environ.get("MNEMOLOOP_CHROMIUM"), "/usr/bin/chromium", "chromium"):
        if candidate and (found := shutil.which(candidate)):
            return found
    pytest.fail("Chromium is not installed: run scripts/setup (it installs Debian's chromium)")


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS
        )
        yield launched
        await launched.close()


class Console:
    """One browser page on the console, with its checks and screenshots."""

    def __init__(self, page: Page, base: str, shots: Path) -> None:
        self.page = page
        self.base = base
        self.shots = shots

    async def open(self, path: str) -> None:
        await self.page.goto(self.base + path)

    async def check(self, name: str) -> None:
        """A screenshot, and no serious accessibility violation on the page as it is."""
        self.shots.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=self.shots / f"{name}.png", full_page=True)
        results = await Axe().run(self.page)
        serious = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert not serious, f"{name}: accessibility violations: {serious}"

    async def sign_in(self, token: str = TOKEN) -> None:
        await self.page.get_by_label("Admin token").fill(token)
        await self.page.get_by_role("button", name="Sign in").click()

    async def memory_count(self) -> int:
        return int(await self.page.get_by_test_id("memory-count").inner_text())

    async def app_row_count(self, app_id: str) -> str:
        return await self.page.locator(f'tr[data-app="{app_id}"] .memory-count').inner_text()


async def _seed(services: Any) -> None:
    """cal: 11 lasting facts, so its eleventh memory compacts it back to 10; food: two."""
    await services.stores.registry.install("cal", "Calendar")
    await services.stores.registry.install("food", "Food planner")
    for app_id, facts in (("cal", range(11)), ("food", range(20, 22))):
        for n in facts:
            conversation_id = await services.stores.conversations.open(app_id)
            await services.stores.conversations.add_message(conversation_id, "user", friend_fact(n))
            await eventually(lambda c=conversation_id: _answered(services, c))
            await services.stores.conversations.end(conversation_id, "app")
            await eventually(lambda c=conversation_id: _job_settled(services, c))


async def _answered(services: Any, conversation_id: str) -> bool:
    conversation = await services.stores.conversations.get(conversation_id)
    return conversation.messages[-1].role == "assistant"


async def _job_settled(services: Any, conversation_id: str) -> bool:
    job = await services.stores.jobs.for_conversation(conversation_id)
    return job is not None and job.status == "done"


def _model() -> Any:
    # The model names a memory that is not one of those shown: the fallback (FIFO) decides,
    # and the history shows a compaction with its fallback reason.
    return assistant_model(
        compaction=lambda call: decision("delete", max(ids_in_prompt(call)) + 1000,
                                         reason="least useful"),
    )


async def test_an_operator_signs_in_reads_and_changes_memories(db_path, browser, engine):
    async with service(db_path, _model(), admin_token=TOKEN) as services, running(services):
        await _seed(services)
        async with live_http(services, TOKEN) as base:
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            console = Console(await context.new_page(), base, ARTIFACTS / "console" / engine)
            page = console.page

            # Signing in: the root leads to the console, which asks for the token first.
            await console.open("/")
            await expect(page).to_have_url(re.compile(r"/console/sign-in\?next=%2Fconsole$"))
            await console.check("sign-in")
            await console.sign_in("not-the-token")
            await expect(page.get_by_role("alert")).to_have_text("That is not the admin token.")
            await console.sign_in()
            await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            cookie = next(c for c in await context.cookies() if c["name"] == "mnemoloop_console")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

            # The overview: apps against the cap, jobs, compactions, energy, health.
            assert await console.app_row_count("cal") == "10"
            assert await console.app_row_count("food") == "2"
            compaction = page.get_by_test_id("compaction")
            await expect(compaction).to_contain_text("FIFO: the oldest, least important 1")
            await expect(page.get_by_test_id("job-counts")).to_contain_text("done 13")
            await expect(page.locator("svg[role=img] title").first).to_contain_text(
                "units on memory work"
            )
            await console.check("overview")

            # An app's memories, newest first, and the compaction in its history.
            await page.get_by_role("link", name="cal", exact=True).click()
            await expect(page.get_by_role("heading", name=re.compile("Calendar"))).to_be_visible()
            assert await console.memory_count() == 10
            memories = page.get_by_test_id("memories").locator("li.memory")
            await expect(memories).to_have_count(10)
            changes = page.get_by_test_id("changes")
            await expect(changes).to_contain_text("by policy")
            await memories.first.locator("summary").click()
            await expect(memories.first.locator("ol.history")).to_contain_text("created by job")
            await console.check("app")

            # Jobs, filtered, with their compaction steps and reasons (a purge erases those).
            await console.open("/console/jobs?app=cal&status=done")
            await expect(page.get_by_test_id("jobs").locator("li.job")).to_have_count(11)
            await expect(page.get_by_test_id("jobs")).to_contain_text("the policy (FIFO)")
            await expect(page.get_by_test_id("jobs")).to_contain_text("model's decision not used")
            await console.check("jobs")

            await console.open("/console/apps/cal")

            # Delete one: the count goes down.
            first_id = await memories.first.get_attribute("data-memory")
            await memories.first.get_by_role("button", name=f"Delete memory {first_id}").click()
            await expect(page.get_by_role("status")).to_have_text(
                f"Memory {first_id} deleted; it can be restored until its grace period ends.")
            assert await console.memory_count() == 9
            shown = page.get_by_test_id("memories").locator(f'li[data-memory="{first_id}"]')
            await expect(shown).to_have_count(0)
            # It waits among the deleted ones, and comes back.
            retired = page.get_by_test_id("retired").locator("li.memory")
            await expect(retired).to_have_count(1)
            await retired.get_by_role("button", name=f"Restore memory {first_id}").click()
            await expect(page.get_by_role("status")).to_have_text(f"Memory {first_id} restored.")
            assert await console.memory_count() == 10
            # Pinned, it says so; then it is deleted for good.
            await page.get_by_role("button", name=f"Pin memory {first_id}").click()
            await expect(page.get_by_role("status")).to_have_text(
                f"Memory {first_id} pinned: compaction will not remove it.")
            await expect(page.locator(f'#memory-{first_id} .badge')).to_have_text("pinned")
            await page.get_by_role("button", name=f"Delete memory {first_id}").click()
            assert await console.memory_count() == 9

            # Purge: the confirmation names the count; then none are left.
            await page.get_by_role("link", name="Purge all memories…").click()
            await expect(page.get_by_text("This deletes all 9 memories")).to_be_visible()
            await console.check("confirm-purge")
            await page.get_by_role("button", name="Delete all 9 memories").click()
            await expect(page.get_by_role("status")).to_have_text("Purged: 9 memories deleted.")
            assert await console.memory_count() == 0
            assert await services.stores.agent.get_memory_count("cal") == 0

            # The overview shows the counts changed.
            await page.get_by_role("link", name="Overview").click()
            assert await console.app_row_count("cal") == "0"

            # Conversations, listed and readable.
            await console.open("/console/conversations?app=food")
            rows = page.get_by_test_id("conversations").locator("tbody tr")
            await expect(rows).to_have_count(2)
            await console.check("conversations")
            await rows.first.get_by_role("link").click()
            await expect(page.get_by_test_id("messages")).to_contain_text("My friend")
            await expect(page.get_by_test_id("messages")).to_contain_text("Happy to help.")
            await console.check("conversation")

            # A form whose CSRF token is wrong, or missing, changes nothing.
            await console.open("/console/apps/food")
            delete_form = page.locator("li.memory form").first
            await delete_form.locator("input[name=csrf]").evaluate("e => e.value = 'forged'")
            await delete_form.get_by_role("button").click()
            await expect(page.get_by_role("heading", name="Form refused")).to_be_visible()
            await console.check("csrf-refused")
            await console.open("/console/apps/food")
            delete_form = page.locator("li.memory form").first
            await delete_form.locator("input[name=csrf]").evaluate("e => e.remove()")
            await delete_form.get_by_role("button").click()
            await expect(page.get_by_role("heading", name="Form refused")).to_be_visible()
            assert await services.stores.agent.get_memory_count("food") == 2

            # The overview refreshes itself: a new memory shows up without a reload.
            await console.open("/console")
            await page.evaluate("window.stillTheSamePage = true")
            conversations = services.stores.conversations
            conversation_id = await conversations.open("food")
            await conversations.add_message(conversation_id, "user", friend_fact(22))
            await conversations.end(conversation_id, "app")
            await expect(page.locator('tr[data-app="food"] .memory-count')).to_have_text(
                "3", timeout=15_000
            )
            assert await page.evaluate("window.stillTheSamePage") is True

            # Signing out ends the session: the console asks for the token again.
            await page.get_by_role("button", name="Sign out").click()
            await expect(page).to_have_url(re.compile(r"/console/sign-in$"))
            await console.open("/console/apps/food")
            await expect(page).to_have_url(re.compile(r"/console/sign-in\?next="))
            await context.close()


async def test_the_console_fits_a_phone(db_path, browser, engine):
    async with service(db_path, _model(), admin_token=TOKEN) as services, running(services):
        await _seed(services)
        async with live_http(services, TOKEN) as base:
            context = await browser.new_context(
                viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
            )
            console = Console(await context.new_page(), base, ARTIFACTS / "console-phone" / engine)
            await console.open("/console")
            await console.sign_in()
            for name, path in (
                ("overview", "/console"),
                ("app", "/console/apps/cal"),
                ("jobs", "/console/jobs"),
                ("conversations", "/console/conversations"),
                ("profile", "/console/users/ana/profile"),
            ):
                await console.open(path)
                # Nothing runs off the side of the screen (a wide table scrolls in its own box).
                width = await console.page.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, f"{name}: the page is {width} px wide on a 390 px screen"
                await console.check(name)
            await context.close()
