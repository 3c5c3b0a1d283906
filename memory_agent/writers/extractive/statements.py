"""What of a conversation is worth remembering, read without a model: the user's statements
with a value or a word of a lasting kind, and what the assistant confirmed it did.

A small model summarises badly: it continues the transcript, invents details and drops the
one sentence that mattered. `key_statements` finds instead what is worth remembering: a
statement with a value (a number, a date, an amount, a code, a name), the user's own
first-person statement with a word of a lasting kind (allergic, daughter, prefer, in the
languages of `words.language`), and what the assistant confirmed it did (booked, reservado,
gebucht, or a reference it issued). A conversation with none holds nothing worth a memory slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_agent.core import patterns as re
from memory_agent.core.unicode_forms import normalise_text
from memory_agent.writers.extractive import values
from memory_agent.writers.extractive.facts import (
    lasting_words,
    record_references,
    significant_numbers,
)
from memory_agent.writers.extractive.words import language
from memory_agent.writers.extractive.words.reading import (
    UNSPACED,
    some_language_reads,
    unspaced_characters,
)
from memory_agent.writers.extractive.words.text import (
    FREQUENCY,
    WORD,
    content_words,
    names,
    sentences,
    stem,
    vocabulary,
)

_FIRST_PERSON = language.FIRST_PERSON


def _asks_about_the_world(text: str) -> bool:
    """A question that starts with a question word ("what", "qué", "wie"), or, in a script
    written without spaces, ends with a question mark and holds one ("何を食べたらいいですか？");
    chat often leaves out the question mark after the plainest of them ("whats the
    difference between ...")."""
    asked = _asks(text)
    first = WORD.findall(text.lstrip("¿¡ \"'"))[:1]
    if not first or first[0].lower() not in language.QUESTION_STARTS:
        return (
            asked
            and UNSPACED.search(text) is not None
            and language.QUESTION_FOUND.search(text) is not None
        )
    return asked or first[0].lower() in _PLAIN_QUESTION_WORDS


_PLAIN_QUESTION_WORDS = language.PLAIN_QUESTIONS


# What the assistant says when it did something that the user will want remembered. Every
# sentence with a value in such a message counts: a confirmation often runs over several.
_CONFIRMATION = language.CONFIRMATION


# How people state a standing preference or instruction, beside the words below.
_STANDING = language.STANDING


@dataclass(frozen=True)
class Statement:
    """A sentence from the conversation worth remembering, and who said it."""

    speaker: str  # "user" or "assistant"
    text: str
    score: int


def statement_score(sentence: str, speaker: str, *, confirming: bool = False) -> int:
    """How much a sentence is worth remembering; 0 means nothing lasting.

    The user's sentence counts when it speaks of themselves (first person) and holds a
    marker, or when it states a strong one (a value, a lasting word) even tersely ("rent
    1650."); a question about the world does not. The assistant's counts when it holds a
    value and `confirming` (its message confirms something done) or says so itself.
    """
    text = normalise_text(sentence)
    if is_chat(text) or is_errand(text):
        return 0
    words = {word.lower() for word in WORD.findall(text)}
    lasting = lasting_words(text)
    strong = significant_numbers(text) + len(names(text)) + len(lasting - FREQUENCY)
    if speaker == "assistant":
        return strong + 1 if strong and (confirming or _CONFIRMATION.search(text)) else 0
    if _asks_about_the_world(text) and not (lasting - FREQUENCY):
        return 0  # a question about the world, not a statement about the user
    standing = 2 if _STANDING.search(text) else 0
    own = _FIRST_PERSON.search(text) or (
        _mostly_other_scripts(text)
        and not _asks(text)
        and word_count(text) >= 4
    )
    if not own:
        # Without the first person, only a value makes a statement ("rent 1650.", "failover
        # takes about 4 minutes"); a word of a lasting kind alone is chat ("ok lets plan it").
        valued = strong - len(lasting - FREQUENCY)
        asks = _asks(text) and not _gives_a_reference(text)
        return valued + standing if valued and not asks else 0
    markers = strong + standing
    weak = (lasting & FREQUENCY) | {m.lower() for m in _LIKING.findall(text)}
    # A habit or a liking counts in a short statement that says what it is about.
    about = content_words(text) - {stem(w) for w in weak}
    markers += len(weak) if weak and about and (markers or len(words) < 25) else 0
    return markers


def about_the_person(statement: Statement) -> bool:
    """A statement the floor counts as a lasting personal fact: the user's, about themselves
    (first person, or a statement in a script such texts leave it out of), with a word of a
    lasting kind (health, family, home, diet, how to be reached), not a habit or a question.
    These hold whatever the app: the person's profile keeps them."""
    if statement.speaker != "user" or statement.score <= 0:
        return False
    text = normalise_text(statement.text)
    own = _FIRST_PERSON.search(text) or (_mostly_other_scripts(text) and word_count(text) >= 4)
    return bool(own) and not _asks(text) and bool(lasting_words(text) - FREQUENCY)


def _asks(text: str) -> bool:
    """The text ends with a question mark of any script (NFKC makes "?" of "？")."""
    return text.rstrip(" \"'”’)»」").endswith(("?", "؟", "፧", "՞"))


def word_count(text: str) -> int:
    """The text's words; a script written without spaces counted a word every three
    characters (Chinese and Japanese words run one to four)."""
    return len(WORD.findall(text)) + unspaced_characters(text) // 3


# Code or a log line, which reads as no language: an identifier joined by "_" or called,
# or an assignment, a block or an index.
_CODE_LIKE = re.compile(r"\b\w+_\w+\b|\w\(|[=;{}]|\w\[")


# A statement in a language no file covers is kept from this many words: enough to state
# something ("Kodi ya nyumba imepanda hadi shilingi 45000"), more than chat has ("Habari yako").
_UNREAD_STATEMENT_WORDS = 6


def _mostly_other_scripts(text: str) -> bool:
    """Most of the text's letters are of a script other than Latin. Chat in those languages
    (Chinese, Japanese, Korean, Hindi, Arabic, Russian, ...) often leaves out the "I" a
    statement about oneself has in English ("あの子卵アレルギーやから", "朵朵有哮喘",
    "ابني عنده ربو"): there a lasting word in a statement of four words counts without it. In
    Latin script it does not: "ok lets plan it" is chat."""
    letters = _LETTER.findall(text)
    return len(letters) > 2 * len(_LATIN_LETTER.findall(text))


_LETTER = re.compile(r"\p{L}")


_LATIN_LETTER = re.compile(r"\p{Latin}")


def is_chat(text: str) -> bool:
    """Greetings, thanks or goodbyes and names, nothing else ("Hey Melanie!", "Thanks, Mel!",
    "¡Gracias, Ana!"): chat, whoever says it."""
    rest = language.GREETINGS.sub(" ", text)
    if rest == text:
        return False
    # Any word left but a name says something ("hi again, its Dmitri Halvorsen").
    said = {stem(word) for word in WORD.findall(rest)} - {stem(name) for name in names(text)}
    return not said and not significant_numbers(rest)


def is_errand(text: str) -> bool:
    """A one-off errand for today or tomorrow ("Remind me today at 18:00 to call the shop",
    "Add oat milk to today's list", "I'll remind you tomorrow"): done by then, so nothing to
    remember, unless it holds a lasting word or a reference of a record."""
    return (
        language.SOON.search(text) is not None
        and language.ERRAND.search(text) is not None
        and not (lasting_words(text) - FREQUENCY)
        and not record_references(text)
    )


def readable(text: str) -> bool:
    """Some language's file reads a quarter of the text's words (English chat: a half; a
    language no file covers: a tenth or less, by words other languages share). A text too
    short to tell (under five words) is readable."""
    words = len(WORD.findall(text))
    unspaced = unspaced_characters(text)
    if words + unspaced // 3 < 5:
        return True
    return some_language_reads(text, words=words, unspaced=unspaced, share=_READ_SHARE)


_READ_SHARE = 0.25



def unread_statement_score(sentence: str, speaker: str, *, confirming: bool = False) -> int:
    """`statement_score` for text in a language no file covers: what holds without its
    words. The user's sentence counts by its values, or when it is long enough to state
    something (six words), not a question; the assistant's by its values, when its message
    gives a reference the user did not."""
    text = normalise_text(sentence)
    strong = significant_numbers(text) + len(names(text))
    if speaker == "assistant":
        return strong + 1 if strong and confirming else 0
    if _asks(text) or is_chat(text) or _CODE_LIKE.search(text):
        return 0
    long_enough = word_count(text) >= _UNREAD_STATEMENT_WORDS
    return strong + (1 if long_enough else 0)


def _score_either(sentence: str, speaker: str, *, confirming: bool = False) -> int:
    """In a text the language files read little of, what the words the files hold find, or
    what holds without them."""
    return max(
        statement_score(sentence, speaker, confirming=confirming),
        unread_statement_score(sentence, speaker, confirming=confirming),
    )


def _gives_a_reference(text: str) -> bool:
    """The sentence gives a reference of the user's (an order, a member or policy number),
    which a request often wraps in a question ("my member number is 0457-8812, can you note
    it?"): a statement, in any language."""
    return bool(record_references(text)) or _NUMERIC_REFERENCE.search(text) is not None


# Digits joined by hyphens that are no range: a leading zero, three groups or more, or a
# group of five digits ("0457-8812", "601-442-913"); not "2024-2025" or "100-200".
_NUMERIC_REFERENCE = re.compile(
    r"(?<![\w.,-])(?:0\d+-\d+|\d+(?:-\d+){2,}|\d{5,}-\d+|\d+-\d{5,})(?![\w-])"
)


def key_statements(turns: Sequence[tuple[str, str]], limit: int = 6) -> list[Statement]:
    """The conversation's statements worth remembering, best first, at most `limit`."""
    found: list[Statement] = []
    seen: set[str] = set()
    users_text = " ".join(content for speaker, content in turns if speaker == "user")
    users_words = vocabulary(users_text)
    scored = statement_score if readable(users_text) else _score_either
    for speaker, content in turns:
        if speaker not in ("user", "assistant"):
            continue
        # The assistant confirms when it says so, or when it gives a reference the user did not
        # (an order, a ticket): that holds in any language.
        confirming = speaker == "assistant" and (
            _CONFIRMATION.search(content) is not None
            or bool(record_references(content) - users_words)
        )
        previous = ""  # the turn's sentence before, unless it is a statement itself
        for sentence in sentences(content):
            score = scored(sentence, speaker, confirming=confirming)
            if score and sentence.lower() not in seen:
                seen.add(sentence.lower())
                found.append(Statement(speaker, _with_its_subject(previous, sentence), score))
            previous = "" if score else sentence
    ranked = sorted(enumerate(found), key=lambda pair: (-pair[1].score, pair[0]))
    # Keep the conversation's order among the best ones: it reads better.
    return [statement for _, statement in sorted(ranked[:limit], key=lambda pair: pair[0])]


def _with_its_subject(previous: str, sentence: str) -> str:
    """The sentence, after the one before it in the same turn when its values stand beside
    no word that says what they are ("landlord raised the rent. its 1900 now"): the value
    alone would be remembered as a value of nothing."""
    if not previous or values.value_keys(sentence) or not values.keyed_values(sentence):
        return sentence
    return f"{previous} {sentence}"


# Likes and pastimes, said of oneself: "I love jazz", "we really enjoy hiking".
_LIKING = re.compile(
    rf"\b(?:{language.longest_first(language.LIKING_SPEAKERS)})\s+(?:\w+\s+)?"
    rf"({language.longest_first(language.LIKING)})\b",
    re.I,
)
