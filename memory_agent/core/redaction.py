"""Text that looks like a secret, replaced by a marker naming its kind before anything is
written (a memory, its history, the search index, a log line) or kept (a conversation's
messages, once its memory job has read them).

What is found:
- payment card numbers: 13 to 19 digits in one run, or in a card's groups (4-4-4-4, 4-4-4-4-3,
  4-6-5) split by spaces or dashes, not starting with 0, that pass the Luhn check (one order
  number in ten of that shape passes it too; a phone number written with `+` or `0` never is
  taken);
- IBANs: a country code, two check digits and 11 to 30 letters or digits, in groups or not,
  that pass the ISO 13616 mod-97 check;
- API keys and tokens of common shapes: OpenAI, Anthropic, Stripe, GitHub, GitLab, Slack, AWS
  access keys, Google API keys, JSON Web Tokens, mnemoloop's own app keys, and whatever follows
  `Bearer`;
- private keys in PEM form (`-----BEGIN … PRIVATE KEY-----` to its end);
- a value given as a password, passphrase, PIN, one-time code or card security code, in the
  languages of `language.py` ("my password is …", "PIN: …", "mot de passe : …",
  "contraseña es …", "Passwort ist …", "senha é …", "codice OTP …").

What is not: a secret in no known shape and given with no such word ("the door opens with
hunter2"), a card number written in words, a key split over several messages.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from memory_agent.core import patterns as re

CARD = "[card number]"
IBAN = "[IBAN]"
API_KEY = "[API key]"
TOKEN = "[token]"
PRIVATE_KEY = "[private key]"
PASSWORD = "[password]"
PIN = "[PIN]"
ONE_TIME_CODE = "[one-time code]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
_KEY_SHAPES = re.compile(
    r"\b(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
    r"|ml[ka]_[A-Za-z0-9_\-]{20,}"  # mnemoloop app keys and admin tokens
    r")"
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9_\-.~+/]{16,}=*")
# A card's digits: one run, or a card's groups split by one space or dash; not after a `+`
# or a digit, and not starting with 0 (a phone number's trunk prefix).
_CARD = re.compile(
    r"(?<![\d+])(?<!\+ )(?!0)"
    r"(?:\d{4}(?P<sep>[ \-])\d{4}(?P=sep)\d{4}(?P=sep)\d{4}(?:(?P=sep)\d{3})?"
    r"|\d{4}(?P<amex>[ \-])\d{6}(?P=amex)\d{5}"
    r"|\d{13,19})(?![\d])"
)
# Country code and check digits, then the rest in groups of four (or in one run).
_IBAN = re.compile(r"(?i)\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")

# Words that name what follows as a secret, in the languages of `language.py`.
_PASSWORD_WORDS = (
    r"password|passphrase|passcode|pass ?word|passwort|kennwort|contrase[ñn]a|clave"
    r"|mot de passe|mdp|senha|palavra-passe|parola d'ordine"
)
_PIN_WORDS = r"pin(?: code| number|-code|-nummer|-nummer)?|c[oó]digo pin|code pin|codice pin"
_CODE_WORDS = (
    r"one[- ]time (?:pass)?code|one[- ]time password|otp(?: code)?|2fa code|mfa code"
    r"|verification code|security code|cvv|cvc|c[oó]digo de (?:verificaci[oó]n|seguran[cç]a)"
    r"|code de (?:v[ée]rification|s[ée]curit[ée])|best[äa]tigungscode|sicherheitscode"
    r"|codice (?:di verifica|otp)"
)
_LINK = (
    r"\s*(?:(?:is|was|est|es|ist|é|è|lautet|sera|will be|now|ahora es|c'est)\b\s*"
    r"|[:=]\s*)*[\"'“«]?"
)
_GIVEN = re.compile(
    rf"(?i)\b(?P<what>{_PASSWORD_WORDS}|{_PIN_WORDS}|{_CODE_WORDS})\b(?P<link>{_LINK})"
    # A code may come in groups ("123 456"); a trailing stop or comma is the sentence's.
    r"(?P<value>\d{3}[ \-]\d{3}\b|[^\s\"'”»;]{3,}(?<![.!?,]))"
)


@dataclass(frozen=True)
class Redacted:
    text: str
    # How many of each marker were put in.
    found: Counter[str]

    @property
    def changed(self) -> bool:
        return bool(self.found)


def redact(text: str) -> Redacted:
    """`text` with every secret it shows replaced by its kind's marker."""
    found: Counter[str] = Counter()

    def marker(kind: str) -> str:
        found[kind] += 1
        return kind

    text = _PRIVATE_KEY.sub(lambda _: marker(PRIVATE_KEY), text)
    text = _JWT.sub(lambda _: marker(TOKEN), text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {marker(TOKEN)}", text)
    text = _KEY_SHAPES.sub(lambda _: marker(API_KEY), text)
    text = _IBAN.sub(lambda m: _iban(m.group(0), marker), text)
    text = _CARD.sub(lambda m: marker(CARD) if _luhn_valid(m.group(0)) else m.group(0), text)
    text = _GIVEN.sub(lambda m: _given(m, marker), text)
    return Redacted(text, found)


def redact_text(text: str) -> str:
    return redact(text).text


def redact_json(value: Any) -> Any:
    """A JSON value with the secrets in each of its strings (keys too) replaced by markers:
    a tool call's arguments, say."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(str(k)): redact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    return value


def _given(match: re.Match[str], marker: object) -> str:
    value = match.group("value")
    if value.startswith("[") and value.endswith("]"):
        return match.group(0)  # a marker already
    link = match.group("link")
    if not any(c.isdigit() or not c.isalpha() for c in value) and not (
        set(link) & set(":=\"'“«")
    ):
        # "pin the post", "password reset", "the PIN is wrong": a word, not a value (a value
        # of letters alone counts after ":" or "=", or in quotes).
        return match.group(0)
    what = match.group("what").lower()
    if re.fullmatch(_PASSWORD_WORDS, what):
        kind = PASSWORD
    elif re.fullmatch(_PIN_WORDS, what):
        kind = PIN
    else:
        kind = ONE_TIME_CODE
    assert callable(marker)
    return f"{match.group('what')}{match.group('link')}{marker(kind)}"


def _luhn_valid(candidate: str) -> bool:
    digits = [int(c) for c in candidate if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _iban(candidate: str, marker: object) -> str:
    """The IBAN's marker, for the longest run of its groups that passes the check (what
    follows it, an amount or a BIC, is kept); else the text as it was."""
    groups = candidate.split(" ") if " " in candidate else [candidate]
    for end in range(len(groups), 0, -1):
        head = " ".join(groups[:end])
        if _iban_valid(head):
            assert callable(marker)
            rest = candidate[len(head):]
            return f"{marker(IBAN)}{rest}"
    return candidate


def _iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1
