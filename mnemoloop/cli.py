"""The `mnemoloop` command."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from loop.operations import REFRESH_SECONDS
from loop.service import open_services
from loop.settings import Settings, SettingsError, load_settings
from loop.storage import (
    InstanceRefused,
    MigrationError,
    database_exists,
    describe_url,
    migrate,
)
from memory_agent import (
    MAX_MEMORY_ID,
    PROPOSAL_STATUSES,
    MnemoloopError,
)
from mnemoloop.data_commands import (
    CommandRefused,
    admin_services,
    apps_command,
    consolidations_command,
    memories_command,
    users_command,
)
from mnemoloop.runner import ServeRefused, claimed, run_worker, serve

Command = Callable[[Settings, argparse.Namespace], Awaitable[int]]


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help="the database: a SQLite file path or a postgresql:// URL (default: $MNEMOLOOP_DB,"
        " else ./mnemoloop.db)",
    )
    parser = argparse.ArgumentParser(
        prog="mnemoloop",
        description="A self-maintaining per-app memory for LLM-driven apps.",
        parents=[common],
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every memory event")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(group: Any, name: str, help: str) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = group.add_parser(name, help=help, parents=[common])
        return made

    command(commands, "serve", "run the loop, the memory worker and the HTTP API")
    command(
        commands, "worker", "run memory work only (no HTTP, no answers), beside serve on PostgreSQL"
    )
    command(commands, "chat", "talk to an app's assistant in this terminal").add_argument("app_id")
    command(commands, "migrate", "create the database, or bring its schema up to date")
    command(commands, "demo", "a scripted run over two apps with the configured model")
    mcp = command(
        commands, "mcp", "serve the MCP tools over stdio, for an MCP client (an agent, an IDE)"
    )
    mcp.add_argument(
        "--token",
        default=os.environ.get("MNEMOLOOP_MCP_TOKEN", ""),
        help="an app's key (its own memories only) or the admin token; default: "
        "$MNEMOLOOP_MCP_TOKEN",
    )
    token = command(commands, "token", "the admin token").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    command(token, "rotate", "make a new admin token (the old one stops working)")

    apps = command(commands, "apps", "install, uninstall and list apps").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    install = command(apps, "install", "install an app (or re-install an uninstalled one)")
    install.add_argument("app_id")
    install.add_argument("--name", help="display name (default: the app id)")
    install.add_argument("--shares-profile", action="store_true",
                         help="it reads and writes its users' profiles (the person across apps)")
    uninstall = command(apps, "uninstall", "uninstall an app (memories are kept)")
    uninstall.add_argument("app_id")
    uninstall.add_argument("--purge-memories", action="store_true", help="delete its memories")
    command(apps, "list", "list apps with their state and memory counts")
    ttl = command(apps, "ttl", "set the time to live of an app's new memories")
    ttl.add_argument("app_id")
    ttl.add_argument("seconds", type=ttl_seconds, help="seconds (at least 60), or `none`")
    shares = command(apps, "profile", "whether an app reads and writes its users' profiles")
    shares.add_argument("app_id")
    shares.add_argument("sharing", choices=("on", "off"))
    kinds = command(apps, "kinds", "the kinds of memory an app's key and conversations read")
    kinds.add_argument("app_id")
    kinds.add_argument("kinds", nargs="*", metavar="KIND",
                       help="kinds of the kinds file (none given: every kind)")

    memories = command(
        commands, "memories", "list, search, export, import, purge and delete memories"
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = command(memories, "list", "an app's memories, newest first")
    listed.add_argument("app_id")
    command(memories, "spaces", "an app's memory spaces with their counts").add_argument("app_id")
    export = command(
        memories, "export", "an app's memories as the API's JSON (all apps: a list of those)"
    )
    export.add_argument("app_id", nargs="?")
    imported = command(
        memories, "import", "store memories from an export (all or none; refused past the cap)"
    )
    imported.add_argument("app_id")
    imported.add_argument("file", help="the export's JSON file, or - for standard input")
    imported.add_argument(
        "--replace", action="store_true", help="delete the app's memories first"
    )
    search = command(memories, "search", "an app's memories matching a query, best first")
    search.add_argument("app_id")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    purge = command(memories, "purge", "delete all of an app's memories (or of one user's)")
    purge.add_argument("app_id")
    delete = command(memories, "delete", "delete one memory (restorable in the grace period)")
    restore = command(memories, "restore", "bring back a deleted or expired memory")
    pin = command(memories, "pin", "pin a memory: compaction never removes it")
    unpin = command(memories, "unpin", "unpin a memory")
    steer = command(memories, "set", "set a memory's importance, privacy or expiry")
    tag = command(memories, "tag", "tag a memory relevant or irrelevant (importance ±2)")
    for one in (delete, restore, pin, unpin, steer, tag):
        one.add_argument("app_id")
        one.add_argument("memory_id", type=memory_id)
    tag.add_argument("relevance", choices=("relevant", "irrelevant"))
    for why in (pin, unpin, steer, tag):
        why.add_argument("--reason", help="why, for the memory's history", required=why is tag)
    steer.add_argument("--importance", type=int, choices=range(11), metavar="0-10")
    steer.add_argument("--private", action=argparse.BooleanOptionalAction,
                       help="--private: never injected; --no-private: injected again")
    steer.add_argument("--sensitivity", choices=("public", "private", "secret"),
                       help="secret: never injected nor shown to a model")
    for expiring in (steer, restore):
        expiring.add_argument("--expires-at", metavar="TIME",
                              help="RFC 3339 (UTC when no offset); for set, `none` removes it")
    history = command(memories, "history", "every change to an app's memories (or one)")
    history.add_argument("app_id")
    history.add_argument("memory_id", type=memory_id, nargs="?")
    listed.add_argument("--state", choices=("live", "retired", "all"), default="live",
                        help="retired: expired or deleted, restorable until erased")
    for per_space in (listed, export, imported, search, purge, history):
        per_space.add_argument(
            "--user", metavar="USER_ID", help="a user's memory space (default: the app's shared"
            " one; for history and purge, every space)"
        )

    passes = command(
        commands, "consolidations",
        "consolidation passes: merge or update memories that say the same thing",
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    asked = command(passes, "request", "ask the memory worker (of serve or worker) for a pass")
    asked.add_argument("--app", metavar="APP_ID",
                       help="that app's spaces (and its users' profiles)")
    asked.add_argument("--user", metavar="USER_ID", help="that person's spaces")
    asked.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                       help="wait up to this long for the pass to end (default: do not wait)")
    command(passes, "show", "one pass: where it is and what it did").add_argument(
        "pass_id", type=int
    )
    command(passes, "list", "the newest passes")

    users = command(commands, "users", "the people apps serve").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    erase = command(users, "erase", "erase a person from every app: memories, conversations")
    erase.add_argument("user_id")
    erase.add_argument("--app", metavar="APP_ID", help="from this app only")
    profile = command(users, "profile", "a person's profile: the facts every sharing app reads")
    profile.add_argument("user_id")
    profile.add_argument("--search", metavar="QUERY", help="only those matching it, best first")
    forget = command(users, "forget-profile", "erase a person's profile (apps' memories stay)")
    forget.add_argument("user_id")
    restore = command(users, "import-profile", "store a profile's export in a person's profile")
    restore.add_argument("user_id")
    restore.add_argument("file", help="the export's JSON file, or - for standard input")
    restore.add_argument("--replace", action="store_true", help="delete the profile first")
    proposed = command(users, "proposals",
                       "changes proposed to a person's sensitive profile facts, newest first")
    proposed.add_argument("user_id")
    proposed.add_argument("--status", choices=PROPOSAL_STATUSES,
                          help="only those of this status (e.g. pending)")
    for answer, what in (("accept", "write it into the profile now"),
                         ("decline", "write nothing")):
        answered = command(users, answer, f"the person's answer to a pending proposal: {what}")
        answered.add_argument("user_id")
        answered.add_argument("proposal_id", type=int)
    return parser


def ttl_seconds(text: str) -> int | None:
    """An app's time to live of new memories: seconds, at least a minute; `none` for none."""
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 60 <= value <= 10 * 366 * 24 * 3600:
        raise argparse.ArgumentTypeError("the time to live is 60 seconds to 10 years")
    return value


def memory_id(text: str) -> int:
    """A memory id as the listing shows it: a whole number from 1 to 2^53 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory id") from None
    if not 1 <= value <= MAX_MEMORY_ID:
        raise argparse.ArgumentTypeError(f"{text} is not a memory id (1 to 2^53 - 1)")
    return value


# Commands that read or change what a database holds: they never create one.
_NEEDS_A_DATABASE = ("apps", "consolidations", "memories", "mcp", "token", "users")


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
        settings = load_settings(**({"db": args.db} if "db" in args else {}))
        # On standard error: standard output stays the command's own (JSON, MCP).
        print(f"mnemoloop: database {describe_url(settings.db)}", file=sys.stderr, flush=True)
        if args.command in _NEEDS_A_DATABASE and not database_exists(settings.db):
            raise CommandRefused(
                f"no database at {describe_url(settings.db)}: give --db (or MNEMOLOOP_DB),"
                " or create one with `mnemoloop migrate`"
            )
        if args.command == "serve":
            anyio.run(serve, settings)
            return 0
        if args.command == "worker":
            anyio.run(run_worker, settings)
            return 0
        return anyio.run(_COMMANDS[args.command], settings, args)
    except (
        SettingsError,
        ServeRefused,
        InstanceRefused,
        MigrationError,
        MnemoloopError,
        CommandRefused,
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

    async with admin_services(settings) as services:
        registry, token = services.stores.registry, args.token.strip()
        caller = await caller_for_token(registry, services.admin_token, token)
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
        await build_mcp_server(services.stores, fixed_caller).run_stdio_async()
    return 0


async def _token(settings: Settings, args: argparse.Namespace) -> int:
    if settings.admin_token is not None:
        raise CommandRefused(
            "the admin token is set by MNEMOLOOP_ADMIN_TOKEN: change it there (and restart)"
        )
    async with admin_services(settings) as services:
        token = await services.admin_token.rotate()
    print(f"new admin token (shown once): {token}")
    print(
        f"the old one stops working within {REFRESH_SECONDS:g} s, in every instance",
        file=sys.stderr,
    )
    return 0


_COMMANDS: dict[str, Command] = {
    "migrate": _migrate,
    "apps": apps_command,
    "consolidations": consolidations_command,
    "memories": memories_command,
    "users": users_command,
    "chat": _chat,
    "demo": _demo,
    "mcp": _mcp,
    "token": _token,
}


def cli() -> None:
    """The console script."""
    sys.exit(main())
