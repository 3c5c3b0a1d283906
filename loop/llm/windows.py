"""The window each model's requests keep to, learned once at start.

`MNEMOLOOP_MODEL_CONTEXT` says it when set. Otherwise the model says what it holds: Ollama's
`/api/show`, an OpenAI-compatible server's model list or `/props`, llama.cpp's `n_ctx`. A model
that says nothing is taken to hold `DEFAULT_WINDOW`, the smallest window such servers commonly
run with. Ollama is told the window with every request (`num_ctx`): one steady value, since
it reloads a model whose window changes, enough for the prompt budget and the answer's room and
never more than the model holds. Every prompt the service sends then fits the window: the
conversation's budget is the window less the answer's room, and the memory sub-agent's prompts
are measured against the same window.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from loop.settings import Settings
from memory_agent import ChatModel, ChatModelError, ContextWindow

log = logging.getLogger("mnemoloop")

# What a model that says nothing of its window is taken to hold: Ollama's default, and
# llama-server's and LM Studio's usual one.
DEFAULT_WINDOW = 4096
# Room in every request beyond the messages' own tokens (the chat template's markers, a tool
# instruction), and the granularity of the window Ollama is asked for.
MARGIN_TOKENS = 256
_STEP = 1024
# The most an answer is given room for, however large the window: a hosted API refuses a
# `max_tokens` above its model's own output limit (4,096 for the smallest of them), and no
# reply or memory needs more.
MAX_ROOM = 2048
# The least: a window too small for the prompt budget's floor still leaves an answer this.
MIN_ROOM = 64


@dataclass(frozen=True)
class ChosenWindow:
    tokens: int
    # Where the figure came from, and what was made of it: for the start-up log and /health.
    said: str


async def choose_window(model: ChatModel, settings: Settings) -> ChosenWindow:
    """The window `model`'s requests keep to, set on the model (`use_window`); what was made
    of it is `said`, for the start-up log (written once the instance may run: a refused second
    process says one line) and /health."""
    try:
        held = await model.context_window()
    except ChatModelError as error:
        log.warning("%s: could not ask what the model holds (%s)", model.name, error)
        held = None
    said = held or _nothing_said()
    if settings.model_context:
        if held and held.tokens < settings.model_context:
            log.warning(
                "%s: MNEMOLOOP_MODEL_CONTEXT=%d is more than the model says it holds (%d,"
                " %s): a server may cut what does not fit", model.name,
                settings.model_context, held.tokens, held.source,
            )
        said = ContextWindow(settings.model_context, "MNEMOLOOP_MODEL_CONTEXT")
    tokens = said.tokens
    how = f"{tokens} tokens ({said.source})"
    if model.sets_window:
        # As much as the budget and an answer's room take, never more than it holds: Ollama
        # keeps a cache as large as the num_ctx it is sent.
        wanted = settings.prompt_tokens + model.json_answer_tokens + MARGIN_TOKENS
        tokens = min(tokens, -(-wanted // _STEP) * _STEP)
        how += f"; it is asked for {tokens} (num_ctx)"
    model.use_window(tokens)
    return ChosenWindow(tokens, how)


def _nothing_said() -> ContextWindow:
    return ContextWindow(
        DEFAULT_WINDOW,
        f"the model says nothing of its window: {DEFAULT_WINDOW} assumed; set"
        " MNEMOLOOP_MODEL_CONTEXT",
    )


@dataclass(frozen=True)
class PromptBudgets:
    """The tokens a prompt may take with a model: a conversation's, and a memory prompt's
    (whose JSON answer takes more room)."""

    chat: int
    memory: int


def budgets(model: ChatModel, settings: Settings) -> PromptBudgets:
    """The prompt budgets with `model`, and, once its window is known, the room each answer
    may take (set on the model: `chat_room`, `json_room`), so that no request is larger than
    the window."""
    chat = prompt_tokens(model, settings, model.answer_tokens)
    memory = prompt_tokens(model, settings, model.json_answer_tokens)
    if model.context_tokens:
        model.chat_room = _room(model.context_tokens - chat - MARGIN_TOKENS)
        model.json_room = _room(model.context_tokens - memory - MARGIN_TOKENS)
    return PromptBudgets(chat, memory)


def _room(left: int) -> int:
    return max(MIN_ROOM, min(left, MAX_ROOM))


def prompt_tokens(model: ChatModel, settings: Settings, answer_tokens: int) -> int:
    """A prompt's budget with `model`: the setting, within the window less the answer's room
    (and the margin); at least 500 tokens, or a quarter of a window too small for that."""
    tokens = settings.prompt_tokens
    if model.context_tokens:
        tokens = min(tokens, model.context_tokens - answer_tokens - MARGIN_TOKENS)
        return max(tokens, min(500, model.context_tokens // 4))
    return max(tokens, 500)
