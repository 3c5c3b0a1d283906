"""`MNEMOLOOP_MEMORY_WRITER=auto` chooses the writer by what the model can do, not by its name:
a short trial of a few fixed conversations whose facts are known tells whether this model's
memories ground and hold them. The choice is logged, shown in /health, charged to the energy
budget, and kept per model so that a restart does not try it again."""

from __future__ import annotations

import json
import logging
import re

import pytest

from loop.operations.writer_choice import MemoryWriterChoice
from memory_agent import CALIBRATION_VERSION
from memory_agent.core.errors import ChatModelResponseError, ChatModelUnavailable
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall
from tests.harness import http_client, service

pytestmark = pytest.mark.anyio


def _user_turns(call: ModelCall) -> list[str]:
    shown = call.prompt.split("<<<CONVERSATION\n", 1)[-1].split("\nCONVERSATION>>>", 1)[0]
    return [line.removeprefix("User: ") for line in shown.splitlines()
            if line.startswith("User: ")]


def capable(call: ModelCall) -> str:
    """Writes what each of the user's turns says, quoting it."""
    if not call.prompt.startswith(CREATION_PREFIX):
        return "Sure."
    return json.dumps({"sentences": [
        {"quote": turn, "text": f"The user said: {turn}"} for turn in _user_turns(call)[:4]
    ], "updates": []})


def weak(call: ModelCall) -> str:
    """Writes a plausible sentence resting on words nobody said (a small model's habit)."""
    if not call.prompt.startswith(CREATION_PREFIX):
        return "Sure."
    return json.dumps({"sentences": [
        {"quote": "The user likes the weather", "text": "The user likes sunny weather."}
    ], "updates": []})


async def _choose(services) -> MemoryWriterChoice:
    choice = services.writer_choice
    await choice.settle()
    return choice


async def test_a_capable_model_writes_and_the_verdict_is_kept(db_path, caplog):
    caplog.set_level(logging.INFO)
    model = FunctionModel(capable)
    async with service(db_path, model, memory_writer="auto") as services:
        choice = await _choose(services)
        assert choice.writer == "model" == services.stores.agent.writer
        # Settled once three of the four held their facts.
        assert "held the facts of 3 of 3 trial conversations" in choice.why
        assert len(model.calls) == 3
        spent = services.stores.agent.get_energy_consumed_since_last_poll()
        assert spent >= 1  # the trial is memory work, charged as such
        row = await services.database.fetch_one(
            "SELECT writer, version FROM model_calibrations WHERE model = ?", (model.name,))
        assert (row["writer"], row["version"]) == ("model", CALIBRATION_VERSION)
    assert "written by the model writer" in caplog.text

    again = FunctionModel(capable)
    async with service(db_path, again, memory_writer="auto") as services:
        choice = await _choose(services)
        assert choice.writer == "model" and "tried on" in choice.why
        assert again.calls == []  # not tried again


async def test_a_model_whose_memories_do_not_hold_the_facts_gets_the_extractive_writer(db_path):
    model = FunctionModel(weak)
    async with service(db_path, model, memory_writer="auto") as services, \
            http_client(services, "admin") as client:
        choice = await _choose(services)
        assert choice.writer == "extractive" == services.stores.agent.writer
        # Settled once two had failed: three of four could no longer hold.
        assert "held the facts of 0 of 2 trial conversations" in choice.why
        health = (await client.get("/health")).json()
        assert health["models"]["memoryWriter"] == "extractive"
        assert "0 of 2 trial conversations" in health["models"]["memoryWriterWhy"]
        # The next memory is the speakers' own words: no model is asked to write it.
        calls = len(model.calls)
        await services.stores.registry.install("desk", "Desk")
        from memory_agent import ChatMessage, MemoryCreationRequest
        created = await services.stores.agent.create_memory(MemoryCreationRequest(
            "desk", "c1", [ChatMessage("user", "My locker code is 4411."),
                           ChatMessage("assistant", "Noted.")]))
        assert "4411" in created.memory.content
        assert len(model.calls) == calls


async def test_a_model_that_does_not_answer_is_not_judged(db_path):
    def away(call: ModelCall) -> str:
        raise ChatModelUnavailable("connection refused")

    async with service(db_path, FunctionModel(away), memory_writer="auto") as services:
        choice = await _choose(services)
        assert choice.writer == "extractive"
        assert "tried again at next start" in choice.why
        assert await services.database.fetch_one("SELECT 1 FROM model_calibrations") is None


async def test_a_refused_request_is_no_verdict_on_the_model(db_path):
    """A 401 (a key the server refuses) is the operator's to fix, not the model's failing."""

    def refused(call: ModelCall) -> str:
        raise ChatModelResponseError("the server answered 401: bad key", status_code=401)

    async with service(db_path, FunctionModel(refused), memory_writer="auto") as services:
        choice = await _choose(services)
        assert choice.writer == "extractive" and "tried again at next start" in choice.why
        assert await services.database.fetch_one("SELECT 1 FROM model_calibrations") is None


async def test_a_trial_that_breaks_leaves_memory_work_to_the_extractive_writer(db_path, caplog):
    """Whatever goes wrong while choosing (here the database's table is gone), the worker
    still starts, with the floor, and says why."""
    async with service(db_path, FunctionModel(capable), memory_writer="auto") as services:
        await services.database.execute("DROP TABLE model_calibrations")
        choice = await _choose(services)
        assert choice.settled and choice.writer == "extractive"
        assert choice.why.startswith("auto: trying the model failed (")
        assert "trying the model failed" in caplog.text


@pytest.mark.parametrize("setting", ["model", "extractive"])
async def test_a_named_writer_is_never_tried(db_path, setting):
    model = FunctionModel(weak)
    async with service(db_path, model, memory_writer=setting) as services:
        choice = await _choose(services)
        assert choice.writer == setting
        assert choice.why == f"MNEMOLOOP_MEMORY_WRITER={setting}"
        assert model.calls == []


async def test_the_bundled_model_is_given_the_extractive_writer_without_a_trial(db_path):
    model = FunctionModel(capable)
    model.bundled = True
    async with service(db_path, model, memory_writer="auto") as services:
        choice = await _choose(services)
        assert choice.writer == "extractive"
        assert re.search(r"bundled 135M model", choice.why)
        assert model.calls == []
