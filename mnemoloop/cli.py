"""The `mnemoloop` command."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict

import anyio

from loop.llm.choice import NoModelLoaded
from loop.service import Services, open_services
from loop.settings import Settings, SettingsError, load_settings
from loop.storage import InstanceRefused, MigrationError, describe_url, migrate
from memory_agent.errors import MnemoloopError
from memory_agent.models import MAX_MEMORY_ID, MemoryEvent
from mnemoloop.runner import ServeRefused, claimed, run_worker, serve

Command = Callable[[Settings, argparse.Namespace], Awaitable[int]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemoloop", description="A self-maintaining per-app memory for LLM-driven apps."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every memory event")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("serve", help="run the loop, the memory worker and the HTTP API")
    commands.add_parser(
        "worker", help="run memory work only (no HTTP, no answers), beside serve on PostgreSQL"
    )
    chat = commands.add_parser("chat", help="talk to an app's assistant in this terminal")
    chat.add_argument("app_id")
    commands.add_parser("migrate", help="bring the database schema up to date")
    commands.add_parser("demo", help="a scripted run over two apps with the configured model")
    mcp = commands.add_parser(
        "mcp", help="serve the MCP tools over stdio, for an MCP client (an agent, an IDE)"
    )
    mcp.add_argument(
        "--token",
        default=os.environ.get("MNEMOLOOP_MCP_TOKEN", ""),
        help="an app's key (its own memories only) or the admin token; default: "
        "$MNEMOLOOP_MCP_TOKEN",
    )

    apps = commands.add_parser("apps", help="install, uninstall and list apps").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    install = apps.add_parser("install", help="install (or re-install) an app")
    install.add_argument("app_id")
    install.add_argument("--name", help="display name (default: the app id)")
    uninstall = apps.add_parser("uninstall", help="uninstall an app (memories are kept)")
    uninstall.add_argument("app_id")
    uninstall.add_argument("--purge-memories", action="store_true", help="delete its memories")
    apps.add_parser("list", help="list apps with their memory counts")

    memories = commands.add_parser(
        "memories", help="list, export, purge and delete memories"
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    memories.add_parser("list", help="an app's memories, newest first").add_argument("app_id")
    export = memories.add_parser("export", help="memories as JSON (one app, or all)")
    export.add_argument("app_id", nargs="?")
    search = memories.add_parser("search", help="an app's memories matching a query, best first")
    search.add_argument("app_id")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    memories.add_parser("purge", help="delete all of an app's memories").add_argument("app_id")
    delete = memories.add_parser("delete", help="delete one memory")
    delete.add_argument("app_id")
    delete.add_argument("memory_id", type=memory_id)
    history = memories.add_parser("history", help="every change to an app's memories (or one)")
    history.add_argument("app_id")
    history.add_argument("memory_id", type=memory_id, nargs="?")
    return parser


def memory_id(text: str) -> int:
    """A memory id as the listing shows it: a whole number from 1 to 2^53 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory id") from None
    if not 1 <= value <= MAX_MEMORY_ID:
        raise argparse.ArgumentTypeError(f"{text} is not a memory id (1 to 2^53 - 1)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    long_running = args.command in ("serve", "worker")
    logging.basicConfig(
        level=logging.INFO if args.verbose or long_running else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s" if long_running else "%(message)s",
    )
    # One line per model request is noise; the service logs what it does with the answers.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = load_settings()
        if args.command == "serve":
            anyio.run(serve, settings)
            return 0
        if args.command == "worker":
            anyio.run(run_worker, settings)
            return 0
        return anyio.run(_COMMANDS[args.command], settings, args)
    except (
        SettingsError, ServeRefused, InstanceRefused, MigrationError, MnemoloopError
    ) as error:
        print(f"mnemoloop: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _migrate(settings: Settings, args: argparse.Namespace) -> int:
    applied = await migrate(settings.db)
    print(
        f"{describe_url(settings.db)}: applied {len(applied)} migration(s)"
        + "".join(f"\n  {m.version:04d} {m.name}" for m in applied)
    )
    return 0


async def _apps(settings: Settings, args: argparse.Namespace) -> int:
    async with _admin_services(settings) as services:
        if args.action == "install":
            name = args.app_id if args.name is None else args.name
            installed = await services.registry.install(args.app_id, name)
            print(f"installed {args.app_id}; its API key (shown once): {installed.api_key}")
        elif args.action == "uninstall":
            purged = await services.registry.uninstall(
                args.app_id, purge_memories=args.purge_memories
            )
            print(f"uninstalled {args.app_id}; purged {purged} memories")
        else:
            for app in await services.registry.list():
                state = "installed" if app.installed else "uninstalled"
                print(f"{app.app_id}\t{app.name}\t{state}\t{app.memory_count} memories")
    return 0


async def _memories(settings: Settings, args: argparse.Namespace) -> int:
    async with _admin_services(settings) as services:
        if args.action == "list":
            await services.registry.require(args.app_id)
            for memory in await services.agent.list_memories(args.app_id):
                print(f"[{memory.id}] {memory.created_at[:10]} {memory.content}")
        elif args.action == "export":
            app_ids = (
                [args.app_id] if args.app_id else [a.app_id for a in await services.registry.list()]
            )
            exported = {}
            for app_id in app_ids:
                await services.registry.require(app_id)
                exported[app_id] = [
                    asdict(m) for m in reversed(await services.agent.list_memories(app_id))
                ]
            print(json.dumps(exported, indent=2, ensure_ascii=False))
        elif args.action == "search":
            await services.registry.require(args.app_id)
            found = await services.agent.search_memories(
                args.app_id, args.query, limit=max(args.limit, 1)
            )
            for memory in found:
                print(f"[{memory.id}] {memory.created_at[:10]} {memory.content}")
            if not found:
                print(f"no memory of {args.app_id} matches {args.query!r}", file=sys.stderr)
        elif args.action == "history":
            await services.registry.require(args.app_id)
            events = await services.agent.history(
                args.app_id, memory_id=args.memory_id, limit=1_000_000
            )
            for event in events:
                print(describe_event(event))
        elif args.action == "purge":
            print(f"deleted {await services.registry.purge_memories(args.app_id)} memories")
        else:
            await services.registry.require(args.app_id)
            if not await services.agent.delete_memory(args.app_id, args.memory_id):
                print(
                    f"mnemoloop: no memory {args.memory_id} in app {args.app_id}", file=sys.stderr
                )
                return 1
            print(f"deleted memory {args.memory_id}")
    return 0


def describe_event(event: MemoryEvent) -> str:
    """One line: when, what happened to which memory, by whom, why, and the text."""
    line = f"{event.created_at[:19]} memory {event.memory_id} {event.event} by {event.actor}"
    if event.reason:
        line += f": {event.reason}"
    if event.erased:
        return line + " (text erased by a purge)"
    if event.content_before is not None:
        line += f"\n    before: {event.content_before}"
    if event.content_after is not None:
        line += f"\n    after:  {event.content_after}"
    return line


def _admin_services(settings: Settings) -> AbstractAsyncContextManager[Services]:
    model = NoModelLoaded()
    return open_services(settings, chat_model=model, memory_model=model)


async def _chat(settings: Settings, args: argparse.Namespace) -> int:
    from mnemoloop.terminal_chat import run_chat

    async with open_services(settings) as services, claimed(services):
        return await run_chat(services, args.app_id)


async def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from mnemoloop.demo import run_demo

    async with open_services(settings) as services, claimed(services):
        return await run_demo(services)


async def _mcp(settings: Settings, args: argparse.Namespace) -> int:
    from admin_api.mcp_server import Caller, build_mcp_server, caller_for_token

    admin_token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    async with _admin_services(settings) as services:
        caller = await caller_for_token(services, admin_token, args.token.strip())
        if caller is None:
            print(
                "mnemoloop mcp: give an app's key or the admin token (--token or "
                "MNEMOLOOP_MCP_TOKEN); the one given is not valid" if args.token else
                "mnemoloop mcp: give an app's key or the admin token (--token or "
                "MNEMOLOOP_MCP_TOKEN)",
                file=sys.stderr,
            )
            return 2

        async def fixed_caller(_: object) -> Caller:
            return caller

        # Memory jobs that `remember` queues run in `serve` or `worker` on this database.
        await build_mcp_server(services, fixed_caller).run_stdio_async()
    return 0


_COMMANDS: dict[str, Command] = {
    "migrate": _migrate,
    "apps": _apps,
    "memories": _memories,
    "chat": _chat,
    "demo": _demo,
    "mcp": _mcp,
}


def cli() -> None:
    """The console script."""
    sys.exit(main())
