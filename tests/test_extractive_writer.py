"""The extractive writer: the floor for the bundled model, and which writer an operator gets."""

from __future__ import annotations

import logging

import pytest

from loop.settings import SettingsError, load_settings
from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent
from memory_agent.writers.choice import memory_writer_for
from tests.conftest import install_app
from tests.fakes import FunctionModel, memory_model

pytestmark = pytest.mark.anyio


def request(messages: list[ChatMessage], conversation_id: str = "c1") -> MemoryCreationRequest:
    return MemoryCreationRequest("app", conversation_id, messages)


def extractive(database, clock, model=None, **options) -> MemorySubAgent:
    return MemorySubAgent(database, model or memory_model(), clock=clock, writer="extractive",
                          **options)


async def test_the_users_statements_are_kept_in_their_own_words_and_no_model_is_asked(
    database, clock
):
    await install_app(database, "app")
    model = memory_model()
    agent = extractive(database, clock, model)
    messages = [
        ChatMessage("user", "I prefer meetings after 2pm. My manager is called Dana."),
        ChatMessage("assistant", "Got it."),
    ]
    created = await agent.create_memory(request(messages))
    assert created.memory.content == (
        'The user said: "I prefer meetings after 2pm. My manager is called Dana."'
    )
    assert model.calls == []
    assert agent.stats.written_without_model == 1


async def test_what_the_assistant_confirmed_is_kept(database, clock):
    await install_app(database, "app")
    messages = [
        ChatMessage("user", "Can you find me somewhere for dinner on Friday?"),
        ChatMessage("assistant", "I booked a table at Osteria Lucca for Friday at 7:30pm."),
    ]
    created = await extractive(database, clock).create_memory(request(messages))
    assert created.memory.content.startswith("The assistant confirmed:")
    assert "Osteria Lucca" in created.memory.content


async def test_small_talk_writes_nothing(database, clock, caplog):
    caplog.set_level(logging.INFO)
    await install_app(database, "app")
    agent = extractive(database, clock)
    messages = [
        ChatMessage("user", "Hi! How are you today?"),
        ChatMessage("assistant", "I'm fine, thanks for asking."),
        ChatMessage("user", "What's the capital of France?"),
        ChatMessage("assistant", "Paris."),
    ]
    created = await agent.create_memory(request(messages))
    assert created.memory is None and created.note == "nothing worth keeping"
    assert await agent.get_memory_count("app") == 0
    assert "Nothing kept from conversation c1 of app app: nothing worth keeping" in caplog.text


async def test_a_memory_stays_within_the_length_limit(database, clock):
    await install_app(database, "app")
    messages = [
        ChatMessage("user", "My daughter Maya is allergic to peanuts. " * 2 + "x " * 80),
        ChatMessage("assistant", "Noted."),
    ]
    created = await extractive(database, clock, max_chars=80).create_memory(request(messages))
    assert len(created.memory.content) <= 80
    assert "Maya" in created.memory.content


async def test_the_same_conversation_gives_the_same_memory_after_a_restart(database, clock):
    """Nothing learned while running changes what is written: a new agent (a restart) writes
    the same memory of the same conversation."""
    await install_app(database, "app")
    messages = [ChatMessage("user", "My locker code is 4471 and I swim on Tuesdays."),
                ChatMessage("assistant", "Noted.")]
    first = await extractive(database, clock).create_memory(request(messages, "c1"))
    again = await extractive(database, clock).create_memory(request(messages, "c2"))
    assert first.content == again.content


class _Model(FunctionModel):
    def __init__(self, bundled: bool) -> None:
        super().__init__(lambda call: "", name="m")
        self.bundled = bundled


@pytest.mark.parametrize(
    ("setting", "bundled", "writer"),
    [
        ("auto", True, "extractive"),
        ("auto", False, "model"),
        ("model", True, "model"),
        ("extractive", False, "extractive"),
    ],
)
def test_auto_is_extractive_for_the_bundled_model_only(setting, bundled, writer):
    assert memory_writer_for(setting, _Model(bundled)) == writer


def test_the_writer_setting_is_checked_at_start(monkeypatch):
    monkeypatch.setenv("MNEMOLOOP_MEMORY_WRITER", "rules")
    with pytest.raises(SettingsError, match="MNEMOLOOP_MEMORY_WRITER='rules'"):
        load_settings()
