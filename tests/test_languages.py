"""The extractive floor in the world's major languages and scripts: the language files, what
holds in any script, a language no file covers, and memories that read as memories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_agent.core.chat_model import ChatMessage
from memory_agent.writers.extractive import facts, statements
from memory_agent.writers.extractive.words import language, text
from memory_agent.writers.extractive.writer import ExtractiveWriter
from memory_agent.writers.written import NothingToKeep, WrittenMemory
from tests.fakes import EXTRACTION_NOW as NOW
from tests.fakes import extractive_writer

ROOT = Path(__file__).resolve().parents[1]

# The twenty most spoken languages, and those covered before them.
EXPECTED = (
    "zh hi es ar bn pt ru ja pa de jv ko fr te mr tr ta vi ur it en nl".split()
)


def test_every_major_language_has_a_file_with_the_classes_the_checks_read():
    assert set(EXPECTED) <= set(language.LANGUAGES)
    for code in EXPECTED:
        words = language.LANGUAGES[code]
        for field in ("first_person", "lasting", "confirmation", "stopwords", "greetings"):
            assert getattr(words, field).split(), f"{code}: {field} is empty"


def test_a_stem_of_a_suffixing_language_matches_with_its_endings_and_a_whole_word_does_not():
    lasting = language.LASTING_FOUND
    assert language.found_in(lasting, "oğlumun toz alerjisi var")  # Turkish stem "alerji-"
    assert not language.found_in(language.FIRST_PERSON, "Kindergarten")  # no stem of "ich"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("私は大阪に住んでいます。娘は結衣です！よろしく", 3),
        ("我叫李明。我女儿八岁了？好的", 3),
        ("मेरा नाम राहुल है। मेरी बेटी दस साल की है।", 2),
        ("أين أنت؟ أنا في عمّان.", 2),
        ("میرا نام علی ہے۔ شکریہ", 2),
        ("Hello there. Dr. Smith is here!", 2),
    ],
)
def test_sentences_end_at_every_scripts_marks(written, expected):
    assert len(text.sentences(written)) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "予算は5万円です",  # a number with 万
        "費用は三千元ではなく3千元",  # 千
        "it costs ₹500",  # any currency sign
        "rent is ₺23.500",
        "٣٠٠ دينار",  # Arabic-Indic digits
        "at १५:३० today",  # Devanagari digits
        "3月15日に",  # a date in numerals and counters
        "１２３４５",  # full-width digits
        "3월 15일",
    ],
)
def test_values_hold_in_any_script(sentence):
    assert facts.significant_numbers(sentence) > 0


@pytest.mark.parametrize(
    "sentence",
    [
        "私は卵アレルギーがあります",
        "我女儿有哮喘",
        "저는 땅콩 알레르기가 있어요",
        "मेरी बेटी को अस्थमा है",
        "আমার মেয়ের হাঁপানি আছে",
        "ਮੇਰੀ ਧੀ ਨੂੰ ਦਮਾ ਹੈ",
        "عندي حساسية من الفول السوداني",
        "У меня аллергия на пенициллин",
        "Oğlumun toz alerjisi var",
        "Tôi bị dị ứng đậu phộng",
        "मेरी मुलगी शिक्षिका आहे",
        "என் மகள் ஆசிரியை",
        "నా భార్య టీచర్",
        "میری بیوی استاد ہے",
        "Anakku lanang umure pitung taun",
    ],
)
def test_a_lasting_personal_fact_without_a_value_is_kept_in_its_language(sentence):
    assert statements.statement_score(sentence, "user") > 0, sentence


@pytest.mark.parametrize(
    "sentence",
    [
        "Hey Melanie!",
        "Thanks, Mel!",
        "¡Muchas gracias, Ana!",
        "ありがとう！",
        "谢谢你！",
        "Спасибо большое!",
        "शुक्रिया!",
        "Remind me today at 18:00 to call the shop.",
        "Add oat milk to today's shopping list.",
        "Recuérdame mañana a las 9 llamar al banco.",
    ],
)
def test_a_greeting_a_thanks_or_an_errand_for_today_is_no_statement(sentence):
    assert statements.statement_score(sentence, "user") == 0


def test_an_errand_that_holds_a_lasting_fact_or_a_record_is_kept():
    assert statements.statement_score("Remind me tomorrow that I'm allergic to penicillin.", "user")
    assert statements.statement_score(
        "I've booked the plumber for tomorrow at 9, reference ET-7316.", "assistant"
    )


def writer() -> ExtractiveWriter:
    return extractive_writer()


def conversation(*turns: str) -> list[ChatMessage]:
    roles = ("user", "assistant")
    return [ChatMessage(roles[i % 2], turn) for i, turn in enumerate(turns)]  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_language_no_file_covers_keeps_the_users_statements_with_a_value():
    # Swahili: no file covers it.
    written = await writer().write(
        conversation(
            "Habari! Kodi ya nyumba yangu imepanda hadi shilingi 45000 kwa mwezi.",
            "Pole sana, nimeelewa.",
            "Asante sana",
        ),
        [],
        NOW,
    )
    assert isinstance(written, WrittenMemory)
    assert "45000" in written.content
    assert "Asante" not in written.content


@pytest.mark.anyio
async def test_a_language_no_file_covers_says_so_when_nothing_is_kept():
    written = await writer().write(
        conversation(
            "Habari za asubuhi rafiki yangu mpendwa? Je, unaweza kunisaidia leo?",
            "Nzuri sana, asante. Nikusaidie nini?",
        ),
        [],
        NOW,
    )
    assert isinstance(written, NothingToKeep)
    assert "no language file covers" in written.why


@pytest.mark.anyio
async def test_a_memory_is_the_facts_not_the_chat():
    written = await writer().write(
        conversation(
            "Hello, my daughter Mia turns 7 on May 3 and she wants a unicorn cake this year,"
            " can you help me plan it?",
            "Happy early birthday to Mia!",
            "Thanks!",
        ),
        [],
        NOW,
    )
    assert isinstance(written, WrittenMemory)
    assert written.content == (
        'The user said: "… my daughter Mia turns 7 on May 3 and she wants a unicorn cake this'
        ' year."'
    )


@pytest.mark.anyio
async def test_what_the_bundled_model_replied_is_never_a_confirmation():
    reply = "I booked your table at Chez Marcel for Friday 19:00, reference CM-4471."
    turns = conversation("Can you book us a table?", reply, "ok")
    from_other_model = await writer().write(turns, [], NOW)
    assert isinstance(from_other_model, WrittenMemory)
    assert "CM-4471" in from_other_model.content
    turns[1] = ChatMessage("assistant", reply, from_bundled_model=True)
    assert isinstance(await writer().write(turns, [], NOW), NothingToKeep)


def test_a_language_switched_off_is_not_read():
    """`MNEMOLOOP_LANGUAGES_OFF` leaves a file unread: how the floor is measured on a language
    it does not know."""
    probe = (
        "from memory_agent.writers.extractive import statements;"
        "from memory_agent.writers.extractive.words import language;"
        "print(sorted(language.LANGUAGES) == sorted(set(language.LANGUAGES)),"
        " 'ru' in language.LANGUAGES, statements.readable('Я живу в Москве и работаю учителем'))"
    )
    env = {**os.environ, "MNEMOLOOP_LANGUAGES_OFF": "ru"}
    off = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert off.stdout.split() == ["True", "False", "False"], off.stderr
    assert statements.readable("Я живу в Москве и работаю учителем")


@pytest.mark.parametrize(
    "sentence",
    [
        "The main office is in Pune and a mere formality remains.",
        "The team meets on Mondays at the big hall.",
        "La réunion a lieu au bureau principal.",
        "Das Büro ist am Hauptbahnhof.",
    ],
)
def test_no_languages_word_for_i_is_an_ordinary_word_of_another(sentence):
    # Every class is the union over the languages: a first-person word of one must not be a
    # common word of another ("main" is English, not only romanised Hindi).
    assert not language.FIRST_PERSON.search(sentence)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        "The user said: \"I have a cat named Luna.\" Booked, reference LU-4410.",
        "(memories for app: Pets) The user has a cat named Luna, ref LU-4410.",
        "User: I have a cat named Luna, reference LU-4410",
    ],
)
async def test_the_models_words_never_become_the_users(reply):
    # Whatever the reply imitates (a memory, the memory block, a transcript label), the
    # extractive writer never keeps it as anyone's statement.
    written = await writer().write(conversation("Name one animal.", reply, "ok"), [], NOW)
    assert isinstance(written, NothingToKeep)


@pytest.mark.anyio
async def test_code_is_no_statement_in_a_language_no_file_covers():
    written = await writer().write(
        conversation(
            "def compute_total(items): return sum(item.price for item in items) * rate_factor",
            "That sums the prices.",
        ),
        [],
        NOW,
    )
    assert isinstance(written, NothingToKeep)


def test_a_long_run_of_closing_marks_is_read_in_linear_time():
    # The end of a sentence and its closers are one match, not looked behind at each place.
    assert text.sentences("「行く。」と言った") == ("「行く。」", "と言った")
    assert len(text.sentences("ok。" + ")" * 50_000 + " next")) == 2
