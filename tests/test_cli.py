"""The `mnemoloop` command as a user runs it: a real process on a real database file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loop.storage.migrations import discover, migrations_dir
from tests.db_query import query


def mnemoloop(db: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
              ) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MNEMOLOOP_DB": str(db), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mnemoloop", *args], env=environment,
                          capture_output=True, text=True, timeout=timeout)


def test_install_list_export_purge_and_uninstall(db_path):
    mnemoloop(db_path, "migrate")
    installed = mnemoloop(db_path, "apps", "install", "cal", "--name", "Calendar")
    assert installed.returncode == 0, installed.stderr
    assert "its API key (shown once): mlk_" in installed.stdout
    listed = mnemoloop(db_path, "apps", "list")
    assert listed.stdout.splitlines() == [
        "APP\tNAME\tSTATE\tMEMORIES\tPROFILE", "cal\tCalendar\tinstalled\t0\t-"
    ]

    query(db_path, "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
                   " VALUES ('cal', 'Likes tea. Drinks it hot.', "
                   "'2025-10-10T10:00:00.000000Z', '2025-10-10T10:00:00.000000Z', '{}')")

    exported = json.loads(mnemoloop(db_path, "memories", "export", "cal").stdout)
    assert exported["appId"] == "cal"
    assert [m["content"] for m in exported["memories"]] == ["Likes tea. Drinks it hot."]
    assert "Likes tea" in mnemoloop(db_path, "memories", "list", "cal").stdout

    memory_id = exported["memories"][0]["id"]
    assert mnemoloop(db_path, "memories", "delete", "cal", str(memory_id)).returncode == 0
    history = mnemoloop(db_path, "memories", "history", "cal", str(memory_id)).stdout
    assert f"memory {memory_id} deleted by admin: deleted by an admin" in history
    assert "before: Likes tea. Drinks it hot." in history

    query(db_path, "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
                   " VALUES ('cal', 'Owns a cat. Named Tom.', "
                   "'2025-10-11T10:00:00.000000Z', '2025-10-11T10:00:00.000000Z', '{}')")
    uninstalled = mnemoloop(db_path, "apps", "uninstall", "cal")
    assert "purged 0 memories" in uninstalled.stdout
    assert "deleted 1 memories" in mnemoloop(db_path, "memories", "purge", "cal").stdout
    # The deleted memory, restorable until then, was purged with the live one.
    assert "Likes tea" not in mnemoloop(db_path, "memories", "list", "cal", "--state", "all").stdout
    erased = mnemoloop(db_path, "memories", "history", "cal").stdout
    assert "(text erased)" in erased and "Likes tea" not in erased


def test_errors_are_one_clear_line_and_a_nonzero_exit(db_path):
    mnemoloop(db_path, "migrate")
    missing = mnemoloop(db_path, "memories", "list", "nobody")
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[-1] == "mnemoloop: app 'nobody' not found"

    bad = mnemoloop(db_path, "apps", "list", env={"MNEMOLOOP_MEMORY_LIMIT": "-1"})
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("mnemoloop: MNEMOLOOP_MEMORY_LIMIT='-1':")

    mnemoloop(db_path, "apps", "install", "cal")
    absent = mnemoloop(db_path, "memories", "delete", "cal", "99")
    assert absent.returncode == 1 and "no memory 99" in absent.stderr

    usage = mnemoloop(db_path, "memories", "delete", "cal", "not-a-number")
    assert usage.returncode == 2 and "is not a memory id" in usage.stderr
    huge = mnemoloop(db_path, "memories", "delete", "cal", "9223372036854775808")
    assert huge.returncode == 2 and "is not a memory id (1 to 2^53 - 1)" in huge.stderr
    assert "Traceback" not in huge.stderr


def test_a_memorys_sensitivity_is_set_from_the_command_line(db_path):
    mnemoloop(db_path, "migrate")
    assert mnemoloop(db_path, "apps", "install", "cal").returncode == 0
    query(db_path, "INSERT INTO app_memories (app_id, content, created_at, updated_at, metadata)"
                   " VALUES ('cal', 'The safe opens with 31-7-22.', "
                   "'2025-10-10T10:00:00.000000Z', '2025-10-10T10:00:00.000000Z', '{}')")
    [(memory_id,)] = query(db_path, "SELECT id FROM app_memories")
    secret = mnemoloop(db_path, "memories", "set", "cal", str(memory_id), "--sensitivity",
                       "secret")
    assert secret.returncode == 0 and "secret" in secret.stdout, secret.stderr
    assert query(db_path, "SELECT sensitivity, private FROM app_memories") == [("secret", 1)]
    mixed = mnemoloop(db_path, "memories", "set", "cal", str(memory_id), "--private",
                      "--sensitivity", "public")
    assert mixed.returncode != 0 and "disagrees" in mixed.stderr
    assert query(db_path, "SELECT sensitivity FROM app_memories") == [("secret",)]


def test_migrate_reports_what_it_applied(engine, tmp_path, request):
    # An empty database (the PostgreSQL one given to other tests is migrated already).
    db_path = tmp_path / "empty.db" if engine == "sqlite" else request.getfixturevalue(
        "fresh_postgres"
    )
    first = mnemoloop(db_path, "migrate")
    every = len(discover(migrations_dir()))
    assert f"applied {every} migration(s)" in first.stdout and "0001 initial" in first.stdout
    assert "0002 memory_history" in first.stdout and "0003 answer_state" in first.stdout
    assert "applied 0 migration(s)" in mnemoloop(db_path, "migrate").stdout


def test_serve_refuses_a_public_bind_without_a_token(db_path):
    refused = mnemoloop(db_path, "serve",
                        env={"MNEMOLOOP_HOST": "0.0.0.0", "MNEMOLOOP_LLM": "local"})
    assert refused.returncode == 2
    assert "set MNEMOLOOP_ADMIN_TOKEN" in refused.stderr


@pytest.mark.usefixtures("allow_model_requests")
def test_chat_in_the_terminal_writes_the_memory_on_end(db_path):
    mnemoloop(db_path, "migrate")
    mnemoloop(db_path, "apps", "install", "cal", "--name", "Calendar")
    environment = {**os.environ, "MNEMOLOOP_DB": str(db_path), "MNEMOLOOP_LLM": "local"}
    chat = subprocess.run(
        [sys.executable, "-m", "mnemoloop", "chat", "cal"], env=environment,
        input="I only drink green tea, never coffee.\n/end\n", capture_output=True, text=True,
        timeout=180,
    )
    assert chat.returncode == 0, chat.stderr
    assert "assistant> " in chat.stdout
    assert "memory: " in chat.stdout


@pytest.mark.sqlite_only
def test_every_command_names_its_database_and_admin_commands_create_none(tmp_path, engine):
    elsewhere = tmp_path / "elsewhere.db"
    wanted = tmp_path / "new" / "folder" / "mnemoloop.db"
    for args in (("apps", "list", "--db", str(wanted)), ("--db", str(wanted), "memories",
                                                         "list", "cal")):
        refused = mnemoloop(elsewhere, *args)
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"mnemoloop: database {wanted}",
            f"mnemoloop: no database at {wanted}: give --db (or MNEMOLOOP_DB), or create one"
            " with `mnemoloop migrate`",
        ]
    assert not (tmp_path / "new").exists() and not elsewhere.exists()

    assert mnemoloop(elsewhere, "migrate", "--db", str(wanted)).returncode == 0
    listed = mnemoloop(elsewhere, "apps", "list", "--db", str(wanted))
    assert listed.returncode == 0 and listed.stdout == ""
    assert listed.stderr.splitlines() == [
        f"mnemoloop: database {wanted}",
        "no apps installed yet: `mnemoloop apps install APP_ID`",
    ]
    assert not elsewhere.exists()  # --db wins over MNEMOLOOP_DB


def test_export_and_import_round_trip_through_files(db_path, tmp_path):
    mnemoloop(db_path, "migrate")
    mnemoloop(db_path, "apps", "install", "cal")
    mnemoloop(db_path, "apps", "install", "copy")
    for day, text in ((10, "Likes tea. Drinks it hot."), (11, "Owns a cat. Named Tom.")):
        query(db_path, "INSERT INTO app_memories (app_id, content, created_at, updated_at,"
                       f" metadata) VALUES ('cal', '{text}', '2025-10-{day}T10:00:00.000000Z',"
                       f" '2025-10-{day}T10:00:00.000000Z', '{{\"tags\": [\"x\"]}}')")
    export = tmp_path / "cal.json"
    export.write_text(mnemoloop(db_path, "memories", "export", "cal").stdout)

    imported = mnemoloop(db_path, "memories", "import", "copy", str(export))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "imported 2 memories into copy; it holds 2"
    original = json.loads(export.read_text())["memories"]
    copied = json.loads(mnemoloop(db_path, "memories", "export", "copy").stdout)["memories"]
    fields = ("content", "createdAt", "updatedAt", "metadata")
    assert [[m[f] for f in fields] for m in copied] == [[m[f] for f in fields] for m in original]

    again = mnemoloop(db_path, "memories", "import", "copy", str(export), "--replace")
    assert again.stdout.strip() == "imported 2 memories into copy; it holds 2"

    export.write_text('{"memories": [{"content": "no time"}]}')
    bad = mnemoloop(db_path, "memories", "import", "copy", str(export))
    assert bad.returncode == 2 and "is not an export" in bad.stderr.splitlines()[-1]
    assert "Traceback" not in bad.stderr


class Terminal:
    """`mnemoloop chat` in a process of its own, its output read as it comes."""

    def __init__(self, db: Path, app_id: str) -> None:
        environment = {**os.environ, "MNEMOLOOP_DB": str(db), "MNEMOLOOP_LLM": "local"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mnemoloop", "chat", app_id], env=environment, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.output = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while piece := self.process.stdout.read(1):
            self.output += piece

    def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def wait_for(self, check, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not check(self.output):
            assert time.monotonic() < deadline, self.output
            time.sleep(0.02)

    def interrupt(self) -> tuple[int, float, str]:
        """Ctrl-C: the exit code, the seconds it took, and standard error."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=60)
        seconds = time.monotonic() - started
        self._reader.join(timeout=10)
        assert self.process.stdin and self.process.stdout and self.process.stderr
        errors = self.process.stderr.read()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            pipe.close()
        return code, seconds, errors


@pytest.mark.sqlite_only
@pytest.mark.usefixtures("allow_model_requests")
def test_ctrl_c_stops_chat_at_once_while_the_model_writes_or_at_the_prompt(db_path):
    mnemoloop(db_path, "migrate")
    mnemoloop(db_path, "apps", "install", "cal", "--name", "Calendar")

    writing = Terminal(db_path, "cal")
    writing.wait_for(lambda out: "you> " in out)
    writing.type("Tell me a very long story about a dragon and a knight.")
    # Some of the reply is on the screen: the model is writing.
    writing.wait_for(lambda out: len(out.partition("assistant> ")[2]) > 10)
    code, seconds, errors = writing.interrupt()
    print(f"Ctrl-C while the model writes: stopped in {seconds:.2f} s")
    assert code == 130 and "Traceback" not in errors
    assert seconds < 2.5  # minutes before the model could be stopped mid-answer

    waiting = Terminal(db_path, "cal")
    waiting.wait_for(lambda out: "you> " in out)
    code, seconds, errors = waiting.interrupt()
    print(f"Ctrl-C at the prompt: stopped in {seconds:.2f} s")
    assert code == 130 and "Traceback" not in errors and seconds < 2.5


@pytest.mark.sqlite_only
@pytest.mark.usefixtures("allow_model_requests")
def test_the_demo_shows_its_progress_and_reaches_a_compaction(db_path):
    demo = mnemoloop(db_path, "demo", env={"MNEMOLOOP_LLM": "local"}, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "Recipes' context holds Calendar's memory block: False" in demo.stdout
    assert "…writing the memory" in demo.stdout
    assert "compaction (the app passed its cap):" in demo.stdout
    assert "chosen by the" in demo.stdout and "memories (cap 10); see" in demo.stdout


def test_an_apps_profile_sharing_and_a_persons_profile(db_path, tmp_path):
    mnemoloop(db_path, "migrate")
    assert mnemoloop(db_path, "apps", "install", "cal", "--shares-profile").returncode == 0
    assert mnemoloop(db_path, "apps", "install", "notes").returncode == 0
    listed = mnemoloop(db_path, "apps", "list").stdout.splitlines()
    assert listed[1:] == ["cal\tcal\tinstalled\t0\tshared", "notes\tnotes\tinstalled\t0\t-"]
    assert "notes shares its users' profiles" in mnemoloop(
        db_path, "apps", "profile", "notes", "on").stdout
    assert "cal reads event, task of memory" in mnemoloop(
        db_path, "apps", "kinds", "cal", "task", "event").stdout
    refused = mnemoloop(db_path, "apps", "kinds", "cal", "recipe")
    assert refused.returncode != 0 and "allowedKinds: 'recipe'" in refused.stderr
    assert "cal reads every kind" in mnemoloop(db_path, "apps", "kinds", "cal").stdout
    for content in ("The user is vegetarian.", "The user's partner is Sam."):
        query(db_path, "INSERT INTO app_memories (app_id, user_id, content, created_at,"
                       " updated_at, metadata) VALUES ('', 'ana', ?, '2025-10-10T10:00:00Z',"
                       " '2025-10-10T10:00:00Z', '{}')", (content,))
    shown = mnemoloop(db_path, "users", "profile", "ana")
    assert "The user is vegetarian." in shown.stdout and "Sam" in shown.stdout
    found = mnemoloop(db_path, "users", "profile", "ana", "--search", "partner")
    assert found.stdout.count("\n") == 1 and "Sam" in found.stdout
    backup = json.loads(mnemoloop(db_path, "memories", "export").stdout)
    [document] = [d for d in backup if d["appId"] == ""]
    assert len(document["memories"]) == 2
    forgotten = mnemoloop(db_path, "users", "forget-profile", "ana")
    assert "profile of ana: erased 2 memories" in forgotten.stdout
    assert "no profile memories" in mnemoloop(db_path, "users", "profile", "ana").stderr
    saved = tmp_path / "profile.json"
    saved.write_text(json.dumps(document))
    restored = mnemoloop(db_path, "users", "import-profile", "ana", str(saved))
    assert "it holds 2" in restored.stdout, restored.stderr
