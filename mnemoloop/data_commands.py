"""The commands that read and change data without a model: `apps`, `memories`, `users` and
`consolidations` (each answers in a line a thing, or JSON where it exports)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import msgspec

from admin_api.replies import ExportOut, export_out
from admin_api.schemas import ImportMemories, imported_memories, stored_time
from loop.errors import ConsolidationNotFound
from loop.jobs import ConsolidationPass
from loop.llm import NoModelLoaded
from loop.operations import validate_user_id
from loop.service import Services, open_services
from loop.settings import Settings
from memory_agent import (
    PROFILE_APP,
    Memory,
    MemoryChange,
    MemoryEvent,
    MemoryNotFound,
    MemorySubAgent,
    MnemoloopError,
    ProfileProposal,
    now_text,
)

Command = Callable[[Settings, argparse.Namespace], Awaitable[int]]


class CommandRefused(Exception):
    pass

def admin_services(settings: Settings) -> AbstractAsyncContextManager[Services]:
    model = NoModelLoaded()
    return open_services(settings, chat_model=model, memory_model=model)



async def apps_command(settings: Settings, args: argparse.Namespace) -> int:
    async with admin_services(settings) as services:
        if args.action == "install":
            name = args.app_id if args.name is None else args.name
            installed = await services.stores.registry.install(args.app_id, name)
            if args.shares_profile:
                await services.stores.registry.set_shares_profile(args.app_id, True)
            print(f"installed {args.app_id}; its API key (shown once): {installed.api_key}")
        elif args.action == "uninstall":
            purged = await services.stores.registry.uninstall(
                args.app_id, purge_memories=args.purge_memories
            )
            print(f"uninstalled {args.app_id}; purged {purged} memories")
        elif args.action == "ttl":
            app = await services.stores.registry.set_memory_ttl(args.app_id, args.seconds)
            lives = f"{app.memory_ttl_seconds} s" if app.memory_ttl_seconds else "until removed"
            print(f"new memories of {args.app_id} live {lives}")
        elif args.action == "profile":
            app = await services.stores.registry.set_shares_profile(
                args.app_id, args.sharing == "on"
            )
            print(f"{args.app_id} {'shares' if app.shares_profile else 'does not share'}"
                  " its users' profiles")
        elif args.action == "kinds":
            app = await services.stores.registry.set_allowed_kinds(
                args.app_id, args.kinds or None
            )
            reads = ", ".join(app.allowed_kinds) if app.allowed_kinds else "every kind"
            print(f"{args.app_id} reads {reads} of memory")
        else:
            apps = await services.stores.registry.list()
            if not apps:
                print("no apps installed yet: `mnemoloop apps install APP_ID`", file=sys.stderr)
                return 0
            print("APP\tNAME\tSTATE\tMEMORIES\tPROFILE")
            for app in apps:
                state = "installed" if app.installed else "uninstalled"
                shares = "shared" if app.shares_profile else "-"
                print(f"{app.app_id}\t{app.name}\t{state}\t{app.memory_count}\t{shares}")
    return 0


async def memories_command(settings: Settings, args: argparse.Namespace) -> int:
    async with admin_services(settings) as services:
        user = getattr(args, "user", None)
        if user is not None:
            validate_user_id(user)
        space = user or ""
        if args.action == "list":
            await services.stores.registry.require(args.app_id)
            listed = await services.stores.agent.list_memories(
                args.app_id, user_id=space, state=args.state
            )
            now = services.stores.agent.now()
            for memory in listed:
                print(f"[{memory.id}] {memory.created_at[:10]}{_marks(memory, now)}"
                      f" {memory.content}")
        elif args.action == "spaces":
            await services.stores.registry.require(args.app_id)
            print("SPACE\tMEMORIES")
            for user_id, count in await services.stores.agent.spaces(args.app_id):
                print(f"{user_id or '(shared)'}\t{count}")
        elif args.action == "export":  # of one space; without an app, of every space
            registry, agent = services.stores.registry, services.stores.agent
            if args.app_id:
                documents = [await _export(services, args.app_id, space)]
            else:
                # Every app and every space of it, and every person's profile (`appId` ""):
                # a backup loses no user's memories.
                documents = [
                    await _export(services, app.app_id, user_id)
                    for app in await registry.list()
                    for user_id in await _spaces_of(services, app.app_id)
                ] + [
                    export_out(PROFILE_APP, now_text(services.clock),
                               await agent.list_memories(PROFILE_APP, user_id=user_id))
                    for user_id, _ in await agent.spaces(PROFILE_APP)
                ]
            exported = documents[0] if args.app_id else documents
            print(msgspec.json.format(msgspec.json.encode(exported)).decode())
            spaces = [(args.app_id, space)] if args.app_id else [
                (app.app_id, user_id) for app in await registry.list()
                for user_id in await _spaces_of(services, app.app_id)
            ]
            held = [(app_id, memory_id) for app_id, user_id in spaces
                    for memory_id in await agent.held_back(app_id, user_id=user_id)]
            if held:
                # No read returns them, an export included: said, not lost in silence.
                print(f"left out {len(held)} memories of unknown sensitivity (give each a"
                      " level to export it): " + ", ".join(f"{a}#{m}" for a, m in held),
                      file=sys.stderr)
        elif args.action == "import":
            await services.stores.registry.require(args.app_id)
            document = _read_export(args.file)
            count = await services.stores.agent.import_memories(
                args.app_id, imported_memories(document, space), replace=args.replace,
                user_id=space,
            )
            print(
                f"imported {len(document.memories)} memories into {args.app_id};"
                f" it holds {count}"
            )
        elif args.action == "search":
            await services.stores.registry.require(args.app_id)
            found = await services.stores.agent.search_memories(
                args.app_id, args.query, limit=max(args.limit, 1), user_id=space
            )
            for memory in found:
                print(f"[{memory.id}] {memory.created_at[:10]} {memory.content}")
            if not found:
                print(f"no memory of {args.app_id} matches {args.query!r}", file=sys.stderr)
        elif args.action == "history":
            await services.stores.registry.require(args.app_id)
            events = await services.stores.agent.history(
                args.app_id, memory_id=args.memory_id, limit=1_000_000, user_id=user
            )
            for event in events:
                print(describe_event(event))
        elif args.action == "purge":
            purged = await services.stores.registry.purge_memories(args.app_id, user_id=user)
            print(f"deleted {purged} memories")
        else:
            await services.stores.registry.require(args.app_id)
            try:
                print(await _steer(services, args))
            except MemoryNotFound:
                print(
                    f"mnemoloop: no memory {args.memory_id} in app {args.app_id}", file=sys.stderr
                )
                return 1
    return 0


async def _steer(services: Services, args: argparse.Namespace) -> str:
    """Delete, restore, pin, unpin, set or tag one memory; what became of it."""
    agent, app_id, memory_id = services.stores.agent, args.app_id, args.memory_id
    if args.action == "delete":
        await agent.delete_memory(app_id, memory_id)
        return f"deleted memory {memory_id}; `memories restore` brings it back in the grace period"
    if args.action == "restore":
        expires_at = _time_argument(args.expires_at)
        memory = await agent.restore_memory(app_id, memory_id, expires_at=expires_at)
    elif args.action == "tag":
        memory = await agent.tag_memory(
            app_id, memory_id, relevant=args.relevance == "relevant", reason=args.reason,
            actor="admin",
        )
    else:
        never = args.action == "set" and (args.expires_at or "").lower() == "none"
        private, level = getattr(args, "private", None), getattr(args, "sensitivity", None)
        if private is not None and level is not None and private != (level != "public"):
            raise CommandRefused(f"--{'' if private else 'no-'}private disagrees with"
                                 f" --sensitivity {level}")
        change = MemoryChange(
            pinned={"pin": True, "unpin": False}.get(args.action),
            private=getattr(args, "private", None),
            sensitivity=getattr(args, "sensitivity", None),
            importance=getattr(args, "importance", None),
            expires_at=None if never else _time_argument(getattr(args, "expires_at", None)),
            clear_expiry=never,
            reason=args.reason,
        )
        if change.changes_nothing:
            raise CommandRefused(
                "nothing to set: give --importance, --private, --sensitivity or --expires-at"
            )
        memory = await agent.steer_memory(app_id, memory_id, change)
    return f"[{memory.id}]{_marks(memory, agent.now())} {memory.content}"


def _time_argument(text: str | None) -> str | None:
    try:
        return stored_time(text, "--expires-at")
    except MnemoloopError as error:
        raise CommandRefused(str(error)) from None


def _marks(memory: Memory, now: str) -> str:
    """What sets a memory apart in a listing: pinned, private, importance, expiry, state."""
    marks = [
        *(["pinned"] if memory.pinned else []),
        *([memory.sensitivity] if memory.private else []),
        *([f"importance {memory.importance}"] if "importance" in memory.metadata else []),
        *([f"expires {memory.expires_at[:16]}"] if memory.expires_at else []),
    ]
    state = memory.state(now)
    if state != "live":
        marks.insert(0, state)
    return f" ({', '.join(marks)})" if marks else ""


async def users_command(settings: Settings, args: argparse.Namespace) -> int:
    async with admin_services(settings) as services:
        validate_user_id(args.user_id)
        agent = services.stores.agent
        if args.action == "profile":
            found = (
                await agent.search_memories(PROFILE_APP, args.search, user_id=args.user_id)
                if args.search
                else await agent.list_memories(PROFILE_APP, user_id=args.user_id)
            )
            if not found:
                print(f"{args.user_id!r} has no profile memories", file=sys.stderr)
            for memory in found:
                print(f"[{memory.id}] {memory.content}")
            return 0
        if args.action == "import-profile":
            document = _read_export(args.file)
            count = await agent.import_memories(
                PROFILE_APP, imported_memories(document, args.user_id), replace=args.replace,
                user_id=args.user_id,
            )
            print(f"imported {len(document.memories)} memories into the profile of"
                  f" {args.user_id}; it holds {count}")
            return 0
        if args.action in ("proposals", "accept", "decline"):
            return await _proposals(agent, args)
        if args.action == "forget-profile":
            count = await services.stores.registry.erase_profile(args.user_id)
            print(f"profile of {args.user_id}: erased {count} memories")
            return 0
        if args.app:
            await services.stores.registry.require(args.app)
        erased = await services.stores.registry.erase_user(args.user_id, app_id=args.app)
        for app in erased:
            if app.is_profile:
                print(f"profile: erased {app.memories} memories")
                continue
            print(
                f"{app.app_id}: erased {app.memories} memories and {app.conversations}"
                f" conversations; cancelled {app.jobs_cancelled} memory jobs"
            )
        if not erased:
            print(f"nothing of {args.user_id!r} is kept", file=sys.stderr)
    return 0


async def _proposals(agent: MemorySubAgent, args: argparse.Namespace) -> int:
    """A person's proposals listed, or one answered (through the CLI, as its record says)."""
    if args.action == "proposals":
        found = await agent.proposals.proposals(args.user_id, args.status)
        if not found:
            print(f"no proposals for the profile of {args.user_id!r}", file=sys.stderr)
        for proposal in found:
            print(describe_proposal(proposal))
        return 0
    answered = await agent.proposals.answer(
        args.user_id, args.proposal_id, accept=args.action == "accept", through="cli"
    )
    print(describe_proposal(answered))
    return 0


def describe_proposal(one: ProfileProposal) -> str:
    change = f"{one.before!r} -> {one.content!r}" if one.before else repr(one.content)
    answered = f" by {one.decided_through} at {one.decided_at}" if one.decided_at else (
        f" until {one.lapses_at}"
    )
    return (f"proposal {one.id} ({', '.join(one.fields)}; from {one.app_id}, {one.origin}):"
            f" {one.status}{answered}: {change}")


async def consolidations_command(settings: Settings, args: argparse.Namespace) -> int:
    """Passes are run by the memory worker of `serve` (or `worker`), with its model: this
    asks for one and follows it."""
    async with admin_services(settings) as services:
        passes = services.stores.consolidations
        if args.action == "list":
            for one in await passes.recent(20):
                print(describe_pass(one))
            return 0
        if args.action == "show":
            found = await passes.get(args.pass_id)
            if found is None:
                raise ConsolidationNotFound(args.pass_id)
            print(describe_pass(found))
            return 0
        if args.app:
            await services.stores.registry.require(args.app)
        if args.user:
            validate_user_id(args.user)
        asked = await passes.request(args.app, args.user)
        deadline = time.monotonic() + args.wait
        while asked.status in ("pending", "running") and time.monotonic() < deadline:
            await anyio.sleep(0.5)
            asked = await passes.get(asked.id) or asked
        print(describe_pass(asked))
        if asked.status == "pending":
            print("the memory worker of `mnemoloop serve` (or `worker`) runs it", file=sys.stderr)
        return 0 if asked.status in ("pending", "running", "done") else 1


def describe_pass(one: ConsolidationPass) -> str:
    scope = ", ".join(part for part in (
        f"app {one.app_id}" if one.app_id is not None else "",
        f"user {one.user_id}" if one.user_id is not None else "",
    ) if part) or "every space"
    line = (f"pass {one.id} ({one.origin}, {scope}): {one.status}; {one.spaces} spaces,"
            f" {one.pairs_asked} pairs asked"
            + (f" ({one.pairs_unjudged} not judged)" if one.pairs_unjudged else "")
            + f", {one.changes} changed, {one.model_calls} model calls")
    return line + (f"; {one.error}" if one.error else "")


async def _spaces_of(services: Services, app_id: str) -> list[str]:
    """The app's shared space, then each user's that holds memories."""
    spaces = [user_id for user_id, _ in await services.stores.agent.spaces(app_id)]
    return ["", *(user_id for user_id in spaces if user_id)]


async def _export(services: Services, app_id: str, user_id: str = "") -> ExportOut:
    await services.stores.registry.require(app_id)
    memories = await services.stores.agent.list_memories(app_id, user_id=user_id)
    return export_out(app_id, now_text(services.clock), memories)


def _read_export(file: str) -> ImportMemories:
    """The export document in `file` (- for standard input), checked as the API checks it."""
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as error:
        raise CommandRefused(f"cannot read {file}: {error.strerror}") from None
    try:
        return msgspec.json.decode(data, type=ImportMemories)
    except msgspec.ValidationError as error:
        raise CommandRefused(f"{file} is not an export: {error}") from None
    except msgspec.DecodeError as error:
        raise CommandRefused(f"{file} is not JSON: {error}") from None


def describe_event(event: MemoryEvent) -> str:
    """One line: when, what happened to which memory, by whom, why, and the text."""
    line = f"{event.created_at[:19]} memory {event.memory_id} {event.event} by {event.actor}"
    if event.reason:
        line += f": {event.reason}"
    if event.erased:
        return line + " (text erased)"
    if event.content_before is not None:
        line += f"\n    before: {event.content_before}"
    if event.content_after is not None:
        line += f"\n    after:  {event.content_after}"
    return line


