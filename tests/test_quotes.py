"""Quotes as models write them: a quote grounds its sentence when it aligns with one turn
near-verbatim (a contraction written out or in, a filler word or an article added or left
out, about one word in five swapped, every number as given); not words of no turn, the
prompt's own text, a translation of a turn, a changed number or a changed name. No word list of any
language is read."""

from __future__ import annotations

import json

import pytest

from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent
from memory_agent.writers.model.grounding import quote_found
from tests.conftest import install_app
from tests.fakes import FunctionModel

pytestmark = pytest.mark.anyio

TURNS = (
    "I'm moving to Porto next month, the flat is already signed.",
    "By the way I'm actually really allergic to penicillin, so keep that in mind.",
    "I've been vegetarian for ten years now.",
    "My sister is called Ana and she lives in Braga.",
    "The locker code is 4411 and the gate code is 2280.",
    "Mi hermana se llama Ana y vive en Braga.",
    "我女儿对鸡蛋过敏，请记住这一点。",
    "Meine Tochter spielt jeden Dienstag um 17 Uhr Fußball im Verein.",
    "Sure, I will keep that in mind.",
)


@pytest.mark.parametrize("quote", [
    "I'm moving to Porto next month",  # exact
    "I am moving to Porto next month",  # a contraction written out
    "I'm allergic to penicillin",  # two filler words left out
    "I've been a vegetarian for ten years",  # an article added
    "My sister is named Ana and she lives in Braga",  # a word swapped
    "My sister's name is Ana and she lives in Braga",  # two words of eleven
    "the locker code is 4411",  # case and a number as given
    "Mi hermana se llama Ana, vive en Braga",  # a word left out, in Spanish
    "我女儿对鸡蛋严重过敏",  # a word added, in a script without spaces
    "Meine Tochter spielt dienstags um 17 Uhr Fußball im Verein",  # one word changed
])
def test_a_near_verbatim_quote_grounds_its_sentence(quote):
    assert quote_found(quote, TURNS) is None


@pytest.mark.parametrize("quote", [
    "The user wants to move abroad soon",  # words of no turn
    # The creation prompt's own text.
    "Keep every value exact (names, numbers, dates, amounts, codes)",
    "the words of the conversation it rests on, exactly as written there",
    "The locker code is 4412",  # a changed number
    "the gate code is 2208",  # digits swapped
    "Meine Tochter spielt jeden Dienstag um 18 Uhr Fußball",  # another hour
    "My sister is called Anna and she lives in Braga",  # another name
    "My sister is called Ana and she lives in Porto",  # another place
    "My daughter is allergic to eggs, please remember",  # a translation of a turn
    "My daughter plays football every Tuesday at 17",  # a translation of a turn
    "Porto soon",  # two words: as written or not at all
    "moving Porto month flat signed",  # a turn's words scattered, most of it left out
    "I'm moving to Porto. I've been vegetarian",  # across two turns
])
def test_a_quote_that_is_not_the_conversations_words_grounds_nothing(quote):
    assert quote_found(quote, TURNS) is not None


async def test_a_near_verbatim_quote_is_kept_without_asking_again(database):
    """Through the writer: the sentence stands on the first answer (no second call)."""
    await install_app(database, "clinic")
    answer = json.dumps({"sentences": [
        {"text": "The user is allergic to penicillin.", "quote": "I'm allergic to penicillin"},
        {"text": "The user is moving to Porto next month.",
         "quote": "I am moving to Porto next month"},
    ], "updates": []})
    model = FunctionModel(lambda call: answer if call.json_schema else "Sure.")
    agent = MemorySubAgent(database, model, writer="model")
    created = await agent.create_memory(MemoryCreationRequest("clinic", "c1", [
        ChatMessage("user", TURNS[1]), ChatMessage("assistant", "Noted."),
        ChatMessage("user", TURNS[0]), ChatMessage("assistant", "Good luck with the move."),
    ]))
    assert created.memory.content == (
        "The user is allergic to penicillin. The user is moving to Porto next month.")
    assert len(model.calls) == 1
    assert agent.grounding.grounded == 2 and agent.grounding.dropped == 0
