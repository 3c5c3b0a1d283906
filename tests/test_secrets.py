"""Secrets are replaced by markers before anything is kept (memory_agent/core/redaction.py): what is
found in several phrasings and languages, what look-alikes are kept, and that no secret byte
is left in the database after a conversation that typed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_agent.core.redaction import (
    API_KEY,
    CARD,
    IBAN,
    ONE_TIME_CODE,
    PASSWORD,
    PIN,
    PRIVATE_KEY,
    TOKEN,
    redact,
)
from tests.db_query import query
from tests.fakes import CREATION_PREFIX, FunctionModel, ModelCall, quoted
from tests.harness import eventually, running, service

FOUND = [
    ("My card is 4111 1111 1111 1111, it expires 12/27.", "4111 1111", CARD),
    ("Charge 5500-0000-0000-0004 please", "5500-0000", CARD),
    ("tarjeta 4012888888881881 por favor", "4012888888881881", CARD),
    ("My IBAN is DE89 3704 0044 0532 0130 00.", "3704 0044", IBAN),
    ("IBAN : FR14 2004 1010 0505 0001 3M02 606", "2004 1010", IBAN),
    ("iban GB82WEST12345698765432", "GB82WEST", IBAN),
    ("Use sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789 for the bot", "sk-proj-Ab3d", API_KEY),
    ("the key is sk-ant-api03-abcdefghijklmnopqrstuvwx", "sk-ant-api03", API_KEY),
    ("stripe sk_live_51HabcdefGHIJklmnopQR", "sk_live_51H", API_KEY),
    ("push with ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F", API_KEY),
    ("AWS: AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7", API_KEY),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv is the maps key", "AIzaSyA123", API_KEY),
    ("curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281716abcdef'", "9f8e7d6c5b4a", TOKEN),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP",
     "dozjgNryP4J3", TOKEN),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXkt", PRIVATE_KEY),
    ("My password is hunter2!", "hunter2", PASSWORD),
    ("password: Tr0ub4dor&3", "Tr0ub4dor", PASSWORD),
    ("Mon mot de passe est soleil42.", "soleil42", PASSWORD),
    ("Mi contraseña es gato-azul-9.", "gato-azul-9", PASSWORD),
    ("Mein Passwort ist Sommer2024.", "Sommer2024", PASSWORD),
    ("A minha senha é abacaxi77.", "abacaxi77", PASSWORD),
    ("La parola d'ordine è girasole5", "girasole5", PASSWORD),
    ("My PIN is 4821.", "4821", PIN),
    ("PIN 9173", "9173", PIN),
    ("The one-time code is 739201.", "739201", ONE_TIME_CODE),
    ("Your verification code: 482913", "482913", ONE_TIME_CODE),
    ("Le code de vérification est 552211.", "552211", ONE_TIME_CODE),
    ("Der Bestätigungscode lautet 664420", "664420", ONE_TIME_CODE),
    ("CVV 123", "123", ONE_TIME_CODE),
    ("card 4111 1111 1111 1111 05/27 ok", "4111 1111", CARD),
    ("4111111111111111 123", "4111111111111111", CARD),
    ("DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX", "3704 0044", IBAN),
    ("de89 3704 0044 0532 0130 00", "3704 0044", IBAN),
    ("otp: 123 456", "456", ONE_TIME_CODE),
    ("password: abc,def123", "def123", PASSWORD),
    ("password: sunshine", "sunshine", PASSWORD),
    ("admin mla_abcdefghijklmnopqrstuvwxyz", "mla_abcdef", API_KEY),
]

KEPT = [
    "Order number 4111111111111112 shipped on Monday.",  # fails the Luhn check
    "Call me on +44 20 7946 0958 or +1 415 555 0132.",
    "My phone is 0612345678 and my flat is 4B.",
    "The meeting is on 2026-11-24 at 14:30; invoice 2026-000123.",
    "Order #A-20931, claim 482-119, tracking 1Z999AA10123456784.",
    "Not an IBAN: DE89 3704 0044 0532 0130 01.",
    "My locker code is 4821 and the gate code is 7731.",
    "I pin the post every morning and need a password reset link.",
    "My bank is in Lyon and the branch opens at 9:00.",
    "Version 3.11.9 on host db-01.internal, port 5432.",
    "I had password issues; the verification code was sent; the PIN is wrong.",
    "Le mot de passe est oublié et la clave es sencilla.",
    "Call 0044 20 7946 0956 between 2026-11-24 2026-12-07.",
]


@pytest.mark.parametrize(("text", "secret", "marker"), FOUND)
def test_a_secret_is_replaced_by_a_marker_of_its_kind(text, secret, marker):
    redacted = redact(text)
    assert secret not in redacted.text
    assert marker in redacted.text and redacted.found[marker] == 1


@pytest.mark.parametrize("text", KEPT)
def test_look_alikes_are_kept(text):
    redacted = redact(text)
    assert redacted.text == text and not redacted.changed


def test_a_marker_is_not_found_again():
    once = redact("My password is hunter2 and my PIN is 4821").text
    assert redact(once).text == once and not redact(once).changed


SECRET_MESSAGE = "My card is 4111 1111 1111 1111 and my password is hunter2 for the booking."


def _memory_model() -> FunctionModel:
    """Writes the conversation's first user message as its memory, as it reads it."""

    def answer(call: ModelCall) -> str:
        if call.prompt.startswith(CREATION_PREFIX):
            said = call.prompt.split("User: ", 1)[1].split("\n")[0].rstrip(".")
            return quoted(f'The user said: "{said}."', call)
        return "Noted."

    return FunctionModel(answer)


async def _typed_a_secret(db_path: Path | str, **settings: object) -> tuple[list[str], str]:
    """A conversation that typed a card number and a password, to its memory job's end:
    the app's memories, and the conversation's first message as kept."""
    model = _memory_model()
    async with service(db_path, model, **settings) as services, running(services):
        conversations = services.stores.conversations
        await services.stores.registry.install("shop", "Shop")
        conversation_id = await conversations.open("shop")
        await conversations.add_message(conversation_id, "user", SECRET_MESSAGE)
        await conversations.end(conversation_id, "done")

        async def job_ended() -> bool:
            job = await services.stores.jobs.for_conversation(conversation_id)
            return job is not None and job.status == "done"

        await eventually(job_ended)
        await eventually(lambda: _redacted_or_kept(conversations, conversation_id, settings))
        memories = [m.content for m in await services.stores.agent.list_memories("shop")]
        kept = (await conversations.get(conversation_id)).messages[0].content
    assert all("4111" not in call.prompt for call in model.calls)  # the model never read it
    return memories, kept


async def _redacted_or_kept(conversations, conversation_id, settings) -> bool:
    first = (await conversations.get(conversation_id)).messages[0].content
    return settings.get("keep_conversation_secrets", False) or "hunter2" not in first


@pytest.mark.anyio
async def test_no_secret_byte_is_left_after_a_conversation_that_typed_one(db_path, engine):
    memories, kept = await _typed_a_secret(db_path)
    assert memories == [f'The user said: "My card is {CARD} and my password is {PASSWORD} for'
                        ' the booking."']
    assert kept == f"My card is {CARD} and my password is {PASSWORD} for the booking."
    if engine == "sqlite":
        for path in Path(db_path).parent.glob(Path(db_path).name + "*"):
            data = path.read_bytes()
            assert b"4111 1111" not in data and b"hunter2" not in data, path.name
    else:
        tables = [r[0] for r in query(db_path, "SELECT table_name FROM information_schema.tables"
                                               " WHERE table_schema = 'public'")]
        for table in tables:
            rows = query(db_path, f'SELECT t::text FROM "{table}" t')
            assert not [r for r in rows if "4111 1111" in r[0] or "hunter2" in r[0]], table


@pytest.mark.anyio
@pytest.mark.sqlite_only
async def test_an_operator_may_keep_the_conversations_own_messages(db_path):
    memories, kept = await _typed_a_secret(db_path, keep_conversation_secrets=True)
    assert kept == SECRET_MESSAGE
    assert "hunter2" not in memories[0] and CARD in memories[0]
