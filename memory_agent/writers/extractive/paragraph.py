"""Turning text into one memory paragraph (the extractive writer's, and an edit's text)."""

from __future__ import annotations

from memory_agent.core import patterns as re
from memory_agent.core.errors import InvalidMemoryText
from memory_agent.writers.answers import MAX_SENTENCES, strip_reasoning
from memory_agent.writers.extractive.words.text import sentences as sentences_of

MIN_SENTENCES = 1
_LABEL = re.compile(
    r"^\s*(?:[#*_\s]*)(?:memory(?:\s+record)?|created memory|summary|user|assistant)"
    r"\s*[:\-–]\s*(?:[*_]*)\s*",
    re.IGNORECASE,
)
def clean_model_text(raw: str) -> str:
    """A model's answer as one paragraph: no reasoning block, code fence or leading label."""
    text = strip_reasoning(raw)
    text = _LABEL.sub("", text, count=1)
    return " ".join(text.split()).strip("*_ ")


def normalise_memory_text(raw: str, *, max_chars: int) -> str:
    """Make a text into one memory paragraph, or raise `InvalidMemoryText`.

    Cleans it (`clean_model_text`), keeps at most four sentences (fewer if that fits
    `max_chars`), and requires at least one sentence within `max_chars`. The seed asks the
    model for 2-4 sentences; one sentence that holds a fact is kept rather than lost.
    """
    text = clean_model_text(raw)
    if not text:
        raise InvalidMemoryText("the answer is empty")
    sentences = list(sentences_of(text))[:MAX_SENTENCES]
    # Trailing sentences are the least essential: drop them (down to one) to fit the limit,
    # rather than lose the whole memory.
    while len(sentences) > MIN_SENTENCES and len(" ".join(sentences)) > max_chars:
        sentences.pop()
    text = " ".join(sentences)
    if len(text) > max_chars:
        raise InvalidMemoryText(f"it is {len(text)} characters long, the limit is {max_chars}")
    return text
