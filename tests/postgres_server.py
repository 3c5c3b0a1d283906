"""Start a throwaway real PostgreSQL server for tests (stdlib only).

    server = PostgresServer.start(tmp_path)
    dsn = server.create_database("case1", template="migrated")
    ...
    server.cleanup()   # stop it and delete its data
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "mnemoloop"
SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
# Debian's `postgresql` package keeps the server programs here, off PATH.
DEBIAN_ROOT = Path("/usr/lib/postgresql")
# Settings for a server nobody cares about after the test: durability is switched off because
# the data is thrown away, and many connections because tests open pools in parallel.
TEST_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "16MB",
    "max_connections": "200",
}
COMMAND_TIMEOUT = 60.0
# sun_path in struct sockaddr_un holds 108 bytes including the final NUL.
MAX_SOCKET_PATH = 107


class PostgresUnavailable(Exception):
    """This machine cannot run a PostgreSQL server (programs or a user to run it as missing)."""


class PostgresError(RuntimeError):
    """A PostgreSQL program failed; the message carries its output."""


def find_server_programs() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: PATH first, then Debian's newest."""
    on_path = shutil.which("initdb")
    if on_path is not None:
        # /usr/local/bin may hold only symlinks to some of them; their real folder has all.
        for folder in (Path(on_path).parent, Path(on_path).resolve().parent):
            if _has_server_programs(folder):
                return folder
    found = [(_version_key(folder.parent.name), folder) for folder in DEBIAN_ROOT.glob("*/bin")
             if _has_server_programs(folder)]
    return max(found)[1] if found else None


def _has_server_programs(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in SERVER_PROGRAMS)


def _version_key(name: str) -> tuple[int, ...]:
    # "15" and "9.6" compare as numbers, so 15 beats 9.6; anything else sorts first.
    if not re.fullmatch(r"\d+(\.\d+)*", name):
        return (-1,)
    return tuple(int(part) for part in name.split("."))


def _free_port() -> int:
    # Another process may take the port before the server binds it; start() retries then.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _clean_environment() -> dict[str, str]:
    # PGDATA, PGPORT, PGHOST and friends from the caller's shell must not steer our programs.
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")}


def _server_user() -> pwd.struct_passwd | None:
    """The user to run the server as, or None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    # initdb and postgres refuse to run as root.
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable("running as root, and PostgreSQL refuses root; neither a "
                              "'postgres' nor a 'nobody' user exists to run the server as")


def _as_user_prefix(user: pwd.struct_passwd | None) -> list[str]:
    if user is None:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", user.pw_name, "--"]
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                "--"]
    raise PostgresUnavailable("running as root needs `runuser` or `setpriv` (util-linux) to "
                              f"run the PostgreSQL server as the user {user.pw_name!r}")


def _run(command: list[str], cwd: Path | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, env=env or _clean_environment(),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT, check=False)
    if result.returncode != 0:
        raise PostgresError(f"{' '.join(command)} failed with exit code {result.returncode}:\n"
                            f"{result.stdout}{result.stderr}".rstrip())
    return result


def _make_folder(base_dir: Path, user: pwd.struct_passwd | None) -> Path:
    """A fresh folder the server's user owns and can reach."""
    base_dir.mkdir(parents=True, exist_ok=True)
    if user is None:
        return Path(tempfile.mkdtemp(prefix="pg-", dir=base_dir))
    # The unprivileged user must be able to walk down to its folder, and pytest's own
    # /tmp/pytest-of-root is 0700; so fall back to the shared temporary folder.
    for parent in dict.fromkeys([base_dir, Path(tempfile.gettempdir()), Path("/tmp")]):
        folder = Path(tempfile.mkdtemp(prefix="pg-", dir=parent))
        os.chown(folder, user.pw_uid, user.pw_gid)
        reachable = subprocess.run([*_as_user_prefix(user), "test", "-w", str(folder)],
                                   cwd="/", stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=COMMAND_TIMEOUT, check=False)
        if reachable.returncode == 0:
            return folder
        shutil.rmtree(folder, ignore_errors=True)
    raise PostgresUnavailable(f"the user {user.pw_name!r} cannot reach a folder under {base_dir} "
                              "nor the temporary folder to keep the server's data in")


def _process_state(pid: int) -> str | None:
    """The process's state letter from /proc ("Z" for a zombie), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name in parentheses may hold spaces; the fields after it are fixed.
    return stat.rsplit(")", 1)[1].split()[0]


def _is_alive(pid: int) -> bool:
    return _process_state(pid) not in (None, "Z")


def _children(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PostgresServer:
    """One PostgreSQL server with its own data folder, listening on 127.0.0.1:port."""

    def __init__(self, folder: Path, programs: Path, port: int,
                 user: pwd.struct_passwd | None) -> None:
        self.folder = folder  # holds data/, server.log and the Unix socket
        self.data = folder / "data"
        self.log = folder / "server.log"
        self.programs = programs
        self.port = port
        self._user = user
        self._as_user = _as_user_prefix(user)

    @classmethod
    def start(cls, base_dir: Path) -> PostgresServer:
        """initdb a fresh data folder under base_dir and start a server on a free port."""
        programs = find_server_programs()
        if programs is None:
            raise PostgresUnavailable(
                "PostgreSQL's server programs (initdb, pg_ctl, postgres) are neither on PATH nor "
                f"in {DEBIAN_ROOT}/*/bin; run scripts/setup, or install Debian's `postgresql` "
                "package")
        user = _server_user()
        folder = _make_folder(Path(base_dir), user)
        server = cls(folder, programs, _free_port(), user)
        try:
            server._initdb()
            server._start_on_a_free_port()
        except BaseException:
            server._stop("immediate")
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return server

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{quote(database, safe='')}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database, copied from template if given (nobody may be connected to it)."""
        client, kind = self._client()
        if kind == "psql":
            sql = f"CREATE DATABASE {_identifier(name)}"
            if template is not None:
                sql += f" TEMPLATE {_identifier(template)}"
            self._psql(client, sql)
        else:
            _run([str(client), *self._client_options(),
                  *(["-T", template] if template is not None else []), "--", name])
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """Drop a database if it exists, ending its connections first (PostgreSQL 13+)."""
        client, kind = self._client()
        if kind == "psql":
            self._psql(client, f"DROP DATABASE IF EXISTS {_identifier(name)} WITH (FORCE)")
        else:
            _run([str(client.with_name("dropdb")), *self._client_options(), "--if-exists",
                  "--force", "--", name])

    def stop(self) -> None:
        """Stop the server (fast shutdown: connections are cut); fine if already stopped."""
        self._stop("fast")

    def restart(self) -> None:
        """Stop the server if it runs, and start it again on the same port with the same data."""
        self.stop()
        self._pg_ctl_start()

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends, as a crash would; restart() recovers."""
        pid = self._postmaster_pid()
        if pid is None or not _is_alive(pid):
            return
        # Freeze the postmaster first so that it cannot fork new backends while we collect
        # them, nor react to their death; then kill them all at once.
        os.kill(pid, signal.SIGSTOP)
        victims = [pid, *_children(pid)]
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while any(_is_alive(victim) for victim in victims):
            if time.monotonic() > deadline:
                raise PostgresError(f"the PostgreSQL processes {victims} outlived SIGKILL")
            time.sleep(0.01)
        if _process_state(pid) == "Z":
            # Nobody reaps the orphaned postmaster when the machine's init does not (as in some
            # containers), and postgres and pg_ctl take a zombie's PID in a lock file for a
            # running server; a real crash leaves no such process, so drop the lock files.
            for lock in [self.data / "postmaster.pid", *self.folder.glob(".s.PGSQL.*")]:
                lock.unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Stop the server and delete its folder (which may lie outside base_dir when root)."""
        self._stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    # Internals.

    def _server_command(self, program: str, *arguments: str) -> None:
        # cwd: the server's user may not be allowed into our own working folder.
        _run([*self._as_user, str(self.programs / program), *arguments], cwd=self.folder)

    def _initdb(self) -> None:
        environment = _clean_environment()
        # A fixed time zone saves initdb probing for the local one and keeps tests alike.
        environment["TZ"] = "UTC"
        _run([*self._as_user, str(self.programs / "initdb"), "-D", str(self.data),
              "--auth=trust", "-U", SUPERUSER, "--encoding=UTF8", "--no-locale", "--no-sync"],
             cwd=self.folder, env=environment)
        with (self.data / "postgresql.conf").open("a") as config:
            config.write("\ninclude 'mnemoloop_test.conf'\n")

    def _write_settings(self) -> None:
        settings = {**TEST_SETTINGS, "port": str(self.port)}
        # Only the unprivileged user may enter the folder; a socket path too long for the
        # kernel would stop the server from starting, and everyone connects over TCP anyway.
        socket_path = self.folder / f".s.PGSQL.{self.port}"
        settings["unix_socket_directories"] = (
            str(self.folder) if len(str(socket_path)) <= MAX_SOCKET_PATH else "")
        path = self.data / "mnemoloop_test.conf"
        path.write_text("".join(f"{key} = '{value.replace(chr(39), chr(39) * 2)}'\n"
                                for key, value in settings.items()))
        if self._user is not None:
            os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _start_on_a_free_port(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            log_size = self.log.stat().st_size if self.log.exists() else 0
            try:
                self._pg_ctl_start()
                return
            except PostgresError:
                with self.log.open("rb") as log:
                    log.seek(log_size)
                    lost_the_port = b"could not bind" in log.read()
                if not lost_the_port or attempt == attempts - 1:
                    raise
                # Someone took the port between our probe and the server's bind.
                self.port = _free_port()

    def _pg_ctl_start(self) -> None:
        self._write_settings()
        try:
            self._server_command("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log),
                                 "-w", "-t", "30", "-s")
        except PostgresError as error:
            tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise PostgresError(f"{error}\n--- {self.log} ---\n{tail}") from None

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def _stop(self, mode: str) -> None:
        pid = self._postmaster_pid()
        # pg_ctl stop fails on a dead server's stale postmaster.pid; there is nothing to stop.
        if pid is None or not _is_alive(pid):
            return
        self._server_command("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t",
                             "30", "-s")

    def _client(self) -> tuple[Path, str]:
        """psql, or else createdb: on PATH first, then next to the server programs."""
        for name in ("psql", "createdb"):
            on_path = shutil.which(name)
            if on_path is not None:
                return Path(on_path), name
        for folder in (self.programs, (self.programs / "pg_ctl").resolve().parent):
            for name in ("psql", "createdb"):
                if os.access(folder / name, os.X_OK):
                    return folder / name, name
        raise PostgresUnavailable("neither `psql` nor `createdb` is on PATH nor next to "
                                  f"{self.programs / 'pg_ctl'}")

    def _client_options(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER]

    def _psql(self, psql: Path, sql: str) -> None:
        _run([str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(), "-c", sql])


if __name__ == "__main__":
    # Self-test: python3 tests/postgres_server.py
    def timed(label: str, started: float) -> float:
        now = time.perf_counter()
        print(f"{label:<34}{now - started:7.3f} s")
        return now

    def select_one(server: PostgresServer, database: str) -> None:
        psql = shutil.which("psql") or "psql"
        answer = _run([psql, "-X", "-At", "-d", server.dsn(database), "-c", "SELECT 1"]).stdout
        assert answer.strip() == "1", answer

    with tempfile.TemporaryDirectory() as base:
        print(f"server programs: {find_server_programs()}, running as uid {os.geteuid()}")
        clock = time.perf_counter()
        server = PostgresServer.start(Path(base))
        clock = timed(f"start (port {server.port})", clock)
        try:
            server.create_database("template_test")
            clock = timed("create_database", clock)
            _run([shutil.which("psql") or "psql", "-X", "-q", "-d",
                  server.dsn("template_test"), "-c",
                  "CREATE TABLE memory (id bigserial PRIMARY KEY, body text NOT NULL);"
                  "CREATE INDEX ON memory (body)"])
            clock = time.perf_counter()
            dsn = server.create_database("copy 1", template="template_test")
            clock = timed("create_database from template", clock)
            select_one(server, "copy 1")
            clock = timed(f"SELECT 1 via psql ({dsn})", clock)
            server.drop_database("copy 1")
            clock = timed("drop_database", clock)
            server.restart()
            clock = timed("restart", clock)
            select_one(server, "template_test")
            port = server.port
            server.kill()
            clock = timed("kill", clock)
            server.restart()
            clock = timed("restart after kill", clock)
            select_one(server, "template_test")
            assert server.port == port
            server.stop()
            server.stop()  # already stopped: fine
            clock = timed("stop", clock)
        finally:
            server.cleanup()
        assert not server.folder.exists()
    print("ok")
    sys.exit(0)
