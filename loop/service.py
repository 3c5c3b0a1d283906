"""Builds the running system from settings: every part created and wired once, here."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from loop.conversations.answer_claims import AnswerClaims
from loop.conversations.central import CentralLoop
from loop.conversations.client_threads import ClientThreads
from loop.conversations.prompt_budget import PromptBudget
from loop.conversations.store import ConversationStore
from loop.jobs.consolidating import ConsolidationRunner
from loop.jobs.consolidations import ConsolidationStore
from loop.jobs.store import MemoryJobStore
from loop.jobs.worker import MemoryWorker
from loop.llm.choice import open_chat_model
from loop.llm.windows import ChosenWindow, budgets, choose_window
from loop.operations.admin_token import AdminToken
from loop.operations.energy import EnergyBudget
from loop.operations.health import HealthChecks, ModelSetup
from loop.operations.metrics import Metrics
from loop.operations.registry import AppRegistry
from loop.operations.writer_choice import MemoryWriterChoice
from loop.settings import Settings
from loop.storage import Engine, database_for
from loop.wakeups import JOBS_CHANNEL, MESSAGES_CHANNEL
from memory_agent import ChatModel, Clock, MemorySubAgent, SystemClock, memory_writer_for

log = logging.getLogger("mnemoloop")


@dataclass(frozen=True)
class Models:
    """The model that answers conversations and the one that writes memories (the same one
    when both come from the same backend)."""

    chat: ChatModel
    memory: ChatModel
    # The windows their requests keep to, and where those came from.
    chat_window: ChosenWindow | None = None
    memory_window: ChosenWindow | None = None


@dataclass(frozen=True)
class Stores:
    """What requests read and change, each on the service's database: the HTTP API, the MCP
    tools, the console and the CLI work through these. The memory sub-agent is the way to an
    app's memories."""

    registry: AppRegistry
    conversations: ConversationStore
    agent: MemorySubAgent
    jobs: MemoryJobStore
    energy: EnergyBudget
    # Conversations of the OpenAI and Ollama dialects' clients, matched by their history.
    client_threads: ClientThreads
    # Consolidation passes asked for and run (`loop.jobs.consolidations`).
    consolidations: ConsolidationStore


@dataclass(frozen=True)
class Services:
    """The running system: its stores, the loop that answers and the worker that writes
    memories (each run by whoever runs the service), what watches and reports on them, and
    what they stand on."""

    settings: Settings
    database: Engine
    clock: Clock
    models: Models
    stores: Stores
    central: CentralLoop
    worker: MemoryWorker
    admin_token: AdminToken
    health: HealthChecks
    metrics: Metrics
    # Which writer writes the memories, and why (settled before the worker's first job).
    writer_choice: MemoryWriterChoice

    async def listen(self) -> None:
        """Wake this instance's loop and worker when another instance has work for them."""
        conversations = self.stores.conversations
        await self.database.listen(
            {
                MESSAGES_CHANNEL: conversations.message_posted.set,
                JOBS_CHANNEL: conversations.job_queued.set,
            }
        )


def _configured_token(settings: Settings) -> str | None:
    return settings.admin_token.get_secret_value() if settings.admin_token else None


def instance_name() -> str:
    """Who holds a claim: host, process and a random part (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@asynccontextmanager
async def open_services(
    settings: Settings,
    *,
    chat_model: ChatModel | None = None,
    memory_model: ChatModel | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[Services]:
    """Open the database (migrating it) and the models, wire everything, close it all after.
    A model not given is opened from the settings; the memory work shares the chat model only
    when both were opened here from the same backend (a given chat model may be a stand-in,
    such as a memory worker's)."""
    clock = clock or SystemClock()
    database = await database_for(settings.db, pool_size=settings.db_pool_size).open()
    owner = instance_name()
    owned: list[ChatModel] = []
    energy: EnergyBudget | None = None
    try:
        if chat_model is None:
            chat_model = await open_chat_model(settings.llm, settings)
            owned.append(chat_model)
        if memory_model is None:
            if settings.memory_backend == settings.llm and chat_model in owned:
                memory_model = chat_model
            else:
                memory_model = await open_chat_model(settings.memory_backend, settings)
                owned.append(memory_model)
        chat_window = await choose_window(chat_model, settings)
        memory_window = (
            chat_window if memory_model is chat_model
            else await choose_window(memory_model, settings)
        )
        chat_budget = budgets(chat_model, settings).chat
        memory_budget = budgets(memory_model, settings).memory
        agent = MemorySubAgent(
            database,
            memory_model,
            clock=clock,
            memory_limit=settings.memory_limit,
            profile_limit=settings.profile_limit,
            max_chars=settings.memory_max_chars,
            llm_timeout=settings.llm_timeout,
            tokens_per_energy_unit=settings.tokens_per_energy_unit,
            # A memory prompt keeps within the window, less a JSON answer's room.
            prompt_tokens=memory_budget,
            grace_seconds=settings.memory_grace_seconds,
            writer=memory_writer_for(settings.memory_writer, memory_model),
            kinds=settings.kinds,
            sensitive_fields=settings.sensitive,
        )
        energy = EnergyBudget(
            database,
            clock,
            capacity=settings.energy_capacity,
            refill_per_second=settings.energy_refill_per_second,
            memory_floor=settings.energy_memory_floor,
            shared=database.shared,
        )
        await energy.load()
        lease = settings.lease_seconds
        conversations = ConversationStore(database, clock)
        answers = AnswerClaims(
            database, clock, job_queued=conversations.job_queued, owner=owner, lease_seconds=lease
        )
        jobs = MemoryJobStore(database, clock, owner=owner, lease_seconds=lease)
        passes = ConsolidationStore(database, clock, owner=owner, lease_seconds=lease)
        registry = AppRegistry(database, agent, jobs, clock, passes)
        metrics = Metrics()
        stores = Stores(
            registry, conversations, agent, jobs, energy,
            ClientThreads(database, clock, conversations), passes,
        )
        central = CentralLoop(
            conversations=conversations,
            answers=answers,
            registry=registry,
            agent=agent,
            energy=energy,
            chat_model=chat_model,
            metrics=metrics,
            tokens_per_energy_unit=settings.tokens_per_energy_unit,
            idle_end_seconds=settings.idle_end_seconds,
            max_concurrent=settings.max_concurrent_conversations,
            max_per_app=settings.max_concurrent_per_app,
            answer_timeout=settings.answer_timeout,
            answer_attempts=settings.answer_attempts,
            prompt_budget=PromptBudget(
                chat_budget, chat_model.count_tokens,
                memory_tokens=settings.memory_tokens, memory_count=settings.memory_count,
            ),
            recover_on_start=not database.shared,
        )
        worker = MemoryWorker(
            jobs=jobs,
            conversations=conversations,
            agent=agent,
            energy=energy,
            metrics=metrics,
            max_concurrent=settings.max_concurrent_memory_jobs,
            attempts=settings.memory_job_attempts,
            retry_base_seconds=settings.memory_retry_base_seconds,
            recover_on_start=not database.shared,
            keep_conversation_secrets=settings.keep_conversation_secrets,
            consolidation=ConsolidationRunner(
                passes=passes, agent=agent, registry=registry, energy=energy,
                metrics=metrics, clock=clock,
                pairs_per_space=settings.consolidation_pairs_per_space,
                every_seconds=settings.consolidation_every_seconds,
                rest_factor=settings.consolidation_rest_factor,
            ),
        )
        writer_choice = MemoryWriterChoice(settings, database, clock, agent, memory_model)
        yield Services(
            settings,
            database,
            clock,
            Models(chat_model, memory_model, chat_window, memory_window),
            stores,
            central,
            worker,
            AdminToken(database, clock, configured=_configured_token(settings)),
            HealthChecks(
                database, [chat_model, memory_model], worker, agent.warnings,
                setup=lambda: _setup(chat_window, memory_window, writer_choice),
                worker_waits=lambda: not writer_choice.settled,
            ),
            metrics,
            writer_choice,
        )
    finally:
        if energy is not None:
            await _write_last_spending(energy)
        for model in owned:
            await model.aclose()
        await database.close()


def _setup(
    chat: ChosenWindow, memory: ChosenWindow, writer: MemoryWriterChoice
) -> ModelSetup:
    return ModelSetup(chat.said, memory.said, writer.writer, writer.why)


async def _write_last_spending(energy: EnergyBudget) -> None:
    try:
        await energy.write_spending()
    except Exception as error:
        log.warning("energy: the last minute's spending was not written: %s", error)
