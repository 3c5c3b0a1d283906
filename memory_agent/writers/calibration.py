"""Whether a model's own memories hold what a conversation said: the short trial `auto` gives a
model before it lets the model write (`MNEMOLOOP_MEMORY_WRITER=auto`).

The model writer writes the memory of each of a few fixed conversations, in several languages
and scripts, whose facts are values a memory keeps as said whatever its language: a name, a
number, a code. A conversation is held when its memory (its sentences grounded, as every
memory's are) carries every value. The model writes when it holds `PASS_MARK` of them; else
the extractive writer keeps the speakers' own words. The trial stops as soon as the verdict
is settled either way. The calls go through the memory model, so they are charged to the
memory work's energy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memory_agent.core.chat_model import ChatMessage
from memory_agent.core.errors import ChatModelError, InvalidMemoryText
from memory_agent.core.unicode_forms import folded
from memory_agent.writers.asking import MemoryLimits, MemoryModel
from memory_agent.writers.choice import writer_of
from memory_agent.writers.written import WrittenMemory

log = logging.getLogger("mnemoloop.memory")

# Bumped when the conversations change: a verdict kept for a model is of one version.
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class TrialConversation:
    messages: tuple[ChatMessage, ...]
    # What its memory must carry, as said (compared folded: case and accents aside).
    values: tuple[str, ...]


def _said(*turns: str) -> tuple[ChatMessage, ...]:
    return tuple(
        ChatMessage("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(turns)
    )


TRIALS = (
    TrialConversation(_said(
        "Hi! I just started a new job at the lab in Tartu.",
        "Congratulations! How is it going so far?",
        "Good. My badge number is 58213 and my manager is called Priit, he's very kind.",
        "That sounds like a good start. Anything I can help with?",
    ), ("58213", "Priit")),
    TrialConversation(_said(
        "Hola, necesito organizar la semana.",
        "Claro, ¿qué tienes pendiente?",
        "Mi hija Lucía empieza en el colegio nuevo el lunes, y es alérgica al kiwi.",
        "Entendido. ¿Quieres que prepare una lista para el lunes?",
    ), ("Lucía", "kiwi")),
    TrialConversation(_said(
        "Wir planen gerade unsere Hochzeit.",
        "Wie schön! Wo soll sie stattfinden?",
        "Im Schloss Elmau, wir rechnen mit 120 Gästen. Die Anzahlung von 3500 Euro ist bezahlt.",
        "Sehr gut, dann ist der Ort gesichert.",
    ), ("Elmau", "120", "3500")),
    TrialConversation(_said(
        "来月から大阪の支社に転勤することになりました。",
        "おめでとうございます！準備は進んでいますか？",
        "はい。新しい内線番号は4417で、上司は佐藤さんです。",
        "承知しました。何かお手伝いできることがあれば言ってください。",
    ), ("4417",)),
)
# Conversations whose memories must hold their values for the model to write.
PASS_MARK = 3


@dataclass(frozen=True)
class Calibration:
    """The writer chosen for a model, and why."""

    writer: Literal["model", "extractive"]
    held: int
    tried: int
    why: str
    # Trials the model did not answer (a timeout, a server away, a refused request): no
    # judgement of it.
    unanswered: int = 0


async def calibrate(model: MemoryModel, limits: MemoryLimits, now: datetime) -> Calibration:
    """Try the model writer with `model` on the fixed conversations; the writer to use."""
    writer = writer_of("model", model, limits)
    held = unanswered = 0
    missing: list[str] = []
    for tried, trial in enumerate(TRIALS):
        if held >= PASS_MARK or held + len(TRIALS) - tried < PASS_MARK:
            break  # settled either way: the rest would cost without changing it
        try:
            written = await writer.write(trial.messages, (), now)
        except (ChatModelError, InvalidMemoryText) as error:
            # A model error (a timeout, a server away, a refused key) says nothing of what the
            # model can write; an answer that is not a memory does.
            unanswered += isinstance(error, ChatModelError)
            missing.append(f"no memory ({error})")
            continue
        text = folded(written.content) if isinstance(written, WrittenMemory) else ""
        lost = [value for value in trial.values if folded(value) not in text]
        if lost:
            missing.append("without " + ", ".join(lost))
        else:
            held += 1
    tried = held + len(missing)
    if held >= PASS_MARK:
        return Calibration("model", held, tried, (
            f"its memories held the facts of {held} of {tried} trial conversations"
        ), unanswered)
    return Calibration("extractive", held, tried, (
        f"its memories held the facts of {held} of {tried} trial conversations (at least"
        f" {PASS_MARK} of {len(TRIALS)} needed; {'; '.join(missing)}): the speakers' own words"
        " are kept instead"
    ), unanswered)
