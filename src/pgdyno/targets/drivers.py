"""The driver hosts of ``--drivers``: the machines that run pgbench against the one server.

A driver list is a file: either one SSH destination a line (``[user@]host`` or a Host alias
of ~/.ssh/config; ``#`` comments), or an Ansible inventory (any format Ansible reads, as
``pgdyno fleet`` takes it), read by Ansible's own ``ansible-inventory --list``: every host
of the inventory is a driver, reached as Ansible would reach it (``ansible_host``,
``ansible_user``, ``ansible_port``, ``ansible_ssh_private_key_file``, and ``-F FILE`` or
``-o Key=Value`` in ``ansible_ssh_common_args``); ``--drivers-group NAME`` keeps the hosts
of one group and its child groups. A password in the inventory is refused: drivers are
reached with keys or an agent, as ``--ssh`` is.

Each driver gets pgbench the way ``--ssh`` gets the server: the embedded PostgreSQL copied
over the connection once (``remote.copy_embedded``), under the driver's
``~/.local/share/pgdyno/install``.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import PgdynoError, TargetError, UsageError
from pgdyno.targets.binaries import PgInstall
from pgdyno.targets.remote import EMBEDDED_BIN, copy_embedded
from pgdyno.targets.ssh import SshTransport, check_destination

DRIVER_WORKDIR = ".local/share/pgdyno"
"""Under the driver user's home: the copied PostgreSQL and each run's scratch directory."""
PASSWORD_VARS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password",
                 "ansible_become_password", "ansible_become_pass")
INVENTORY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DriverHost:
    """One driver: its name (the inventory's, or the destination), how ssh reaches it."""

    name: str
    destination: str
    config_file: Path | None = None
    options: tuple[str, ...] = ()
    """Further ``-o Key=Value`` options for ssh (a port, a key file from the inventory)."""


def read_drivers(path: Path, ssh_config: Path | None = None,
                 group: str | None = None) -> list[DriverHost]:
    """The drivers a ``--drivers`` file names (``group``: of that inventory group only); a
    bad file or group is one line naming it."""
    if not path.is_file():
        raise UsageError(f"--drivers {path}: no such file")
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    lines = [line for line in lines if line]
    if lines and all(_is_destination(line) for line in lines):
        if group is not None:
            raise UsageError(f"--drivers-group {group}: --drivers {path} lists SSH "
                             "destinations, which have no groups; accepted: an Ansible "
                             "inventory, or no --drivers-group")
        short = [line.rpartition("@")[2] for line in lines]
        # Named by their host, unless two share one (two users of one machine).
        names = short if len(set(short)) == len(short) else lines
        hosts = [DriverHost(n, line, ssh_config) for n, line in zip(names, lines, strict=True)]
    else:
        hosts = _from_inventory(path, group)
    if not hosts:
        raise UsageError(f"--drivers {path}: no host in it; accepted: one SSH destination a "
                         "line ([user@]host), or an Ansible inventory")
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"--drivers {path}: host {twice} is named twice")
    return hosts


_INI_HEADER = re.compile(r"^\[[\w.-]+(:(children|vars))?\]$")
"""An INI inventory's group line (``[drivers]``, ``[drivers:children]``): not a host."""


def _is_destination(line: str) -> bool:
    if _INI_HEADER.match(line):
        return False
    try:
        check_destination(line)
    except UsageError:
        return False
    return True


def _from_inventory(path: Path, group: str | None = None) -> list[DriverHost]:
    """Every host of an Ansible inventory (or of one of its groups), as ansible-inventory
    resolves it."""
    program = _ansible_inventory()
    try:
        proc = subprocess.run([program, "-i", str(path), "--list"], capture_output=True,
                              text=True, timeout=INVENTORY_TIMEOUT_S, check=False,
                              env={"ANSIBLE_NOCOLOR": "1", "PATH": "/usr/bin:/bin",
                                   "HOME": str(Path.home())})
    except subprocess.TimeoutExpired:
        raise UsageError(f"--drivers {path}: ansible-inventory did not answer in "
                         f"{INVENTORY_TIMEOUT_S:.0f} s") from None
    try:
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        data = None
    warning = next((line for line in proc.stderr.splitlines() if "Unable to parse" in line
                    or "ERROR" in line), "")
    if data is None or warning:
        detail = warning or _last(proc.stderr) or f"exit {proc.returncode}"
        raise UsageError(f"--drivers {path}: neither SSH destinations one a line nor an "
                         f"Ansible inventory ({detail.strip()[:200]})")
    hostvars = data.get("_meta", {}).get("hostvars", {})
    names = _hosts_of(data, group or "all", set())
    if group is not None and not names:
        groups = sorted(g for g in data if g not in ("_meta", "all", "ungrouped")
                        and _hosts_of(data, g, set()))
        raise UsageError(f"--drivers-group {group}: no host of --drivers {path} is in such a "
                         f"group; accepted: its groups with hosts: "
                         f"{', '.join(groups) or 'none (every host is ungrouped)'}")
    return [_driver_of(path, name, hostvars.get(name, {})) for name in names]


def _hosts_of(data: dict, group: str, seen: set[str]) -> list[str]:
    """Hosts of ``group`` and its children, in the inventory's order, each once."""
    out: list[str] = []
    entry = data.get(group, {})
    for name in entry.get("hosts", []):
        if name not in seen:
            seen.add(name)
            out.append(name)
    for child in entry.get("children", []):
        out.extend(_hosts_of(data, child, seen))
    return out


def _driver_of(path: Path, name: str, hv: dict) -> DriverHost:
    where = f"--drivers {path}: host {name}"
    secret = [v for v in PASSWORD_VARS if hv.get(v)]
    if secret:
        raise UsageError(f"{where}: {secret[0]} is set; pgdyno takes no password for "
                         "drivers (use a key or an agent, as ssh does)")
    user = hv.get("ansible_user") or hv.get("ansible_ssh_user")
    host = str(hv.get("ansible_host") or name)
    destination = f"{user}@{host}" if user else host
    if not _is_destination(destination):
        raise UsageError(f"{where}: {destination!r} is not an SSH destination; accepted: "
                         "[user@]host")
    options: list[str] = []
    if hv.get("ansible_port"):
        options.append(f"Port={int(hv['ansible_port'])}")
    if hv.get("ansible_ssh_private_key_file"):
        options.append(f"IdentityFile={hv['ansible_ssh_private_key_file']}")
    config, more = _common_args(where, str(hv.get("ansible_ssh_common_args") or ""))
    return DriverHost(name, destination, config, tuple(options + more))


def _common_args(where: str, text: str) -> tuple[Path | None, list[str]]:
    """``-F FILE`` and ``-o Key=Value`` of ansible_ssh_common_args; anything else refused."""
    words = shlex.split(text)
    config, options = None, []
    while words:
        flag = words.pop(0)
        if flag in ("-F", "-o") and words:
            value = words.pop(0)
            if flag == "-F":
                config = Path(value)
            else:
                options.append(value)
        elif flag.startswith("-o") and len(flag) > 2:
            options.append(flag[2:])
        else:
            raise UsageError(f"{where}: ansible_ssh_common_args {text!r}: accepted: -F FILE "
                             "and -o Key=Value")
    return config, options


def _ansible_inventory() -> str:
    beside = Path(sys.executable).parent / "ansible-inventory"
    if beside.exists():
        return str(beside)
    found = shutil.which("ansible-inventory")
    if found is None:
        raise UsageError("--drivers with an Ansible inventory needs ansible-inventory: pip "
                         "install ansible-core (or list SSH destinations, one a line)")
    return found


def _last(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass
class DriverConnection:
    """An open driver: its transport, and where pgbench and this run's files are on it."""

    host: DriverHost
    transport: SshTransport
    home: str = ""
    machine: str = ""
    cores: int = 1
    pgbench: str = ""
    pgdyno: str = ""
    """pgdyno on the driver (its PATH or ~/.local/bin), which bins pgbench's logs there when
    it is this version (``pgdyno driver-bin --expect-version``); '': none, its logs are
    fetched whole and binned here."""
    scratch: str = ""
    """This run's directory on the driver (scripts, logs), removed when the run ends."""
    opened: bool = field(default=False, repr=False)

    def sh(self, script: str, timeout_s: float = 120.0) -> str:
        proc = self.transport.run(script, timeout_s=timeout_s)
        if proc.returncode != 0:
            raise TargetError(f"--drivers {self.host.name}: {script.split()[0]!r} failed "
                              f"(exit {proc.returncode}): {_last(proc.stderr)}")
        return proc.stdout


def connect(host: DriverHost) -> DriverConnection:
    """The driver's master connection, its home, architecture and core count; an unreachable
    driver is one line naming it."""
    transport = SshTransport(host.destination, host.config_file, extra_options=host.options)
    try:
        transport.open()
        out = transport.check_output('printf "%s\\n" "$HOME"; uname -m; nproc')
    except PgdynoError as exc:
        transport.close()
        reason = str(exc).split(": cannot connect: ", 1)[-1]
        raise UsageError(f"--drivers: driver {host.name} ({host.destination}) cannot be "
                         f"reached: {reason}") from None
    home, machine, cores = (out.splitlines() + ["", "", "1"])[:3]
    return DriverConnection(host, transport, home=home.strip(), machine=machine.strip(),
                            cores=int(cores.strip() or 1), opened=True)


def install_pgbench(conn: DriverConnection, install: PgInstall) -> None:
    """pgbench on the driver: the embedded PostgreSQL of this machine, copied once."""
    if conn.machine != platform.machine():
        raise UsageError(f"--drivers: driver {conn.host.name} is {conn.machine}; the embedded "
                         f"PostgreSQL here is built for {platform.machine()}")
    root = f"{conn.home}/{DRIVER_WORKDIR}/install/pg-{install.version}-{conn.machine}"
    if conn.transport.run(f"test -f {shlex.quote(root)}/.complete").returncode != 0:
        copy_embedded(conn.transport, install, root, lambda script: script,
                      f"--drivers {conn.host.name}")
    conn.pgbench = f"{root}/{EMBEDDED_BIN}/pgbench"


FIND_PGDYNO = """\
for p in "$(command -v pgdyno 2>/dev/null)" "$HOME/.local/bin/pgdyno"; do
  if [ -n "$p" ] && [ -x "$p" ]; then printf '%s\\n' "$p"; exit 0; fi
done"""


def find_pgdyno(conn: DriverConnection) -> None:
    """pgdyno on the driver, if any (its version is checked where it is used: starting it
    once more here would cost every run a second or so)."""
    proc = conn.transport.run(FIND_PGDYNO, timeout_s=60)
    lines = proc.stdout.splitlines()
    if proc.returncode == 0 and lines:
        conn.pgdyno = lines[0].strip()


def make_scratch(conn: DriverConnection, name: str) -> None:
    conn.scratch = f"{conn.home}/{DRIVER_WORKDIR}/drivers/{name}"
    conn.sh(f"rm -rf {shlex.quote(conn.scratch)} && mkdir -p {shlex.quote(conn.scratch)} "
            f"&& chmod 0700 {shlex.quote(conn.scratch)}")


CLIENT_OFFSET = "pgdyno_client_offset"
"""The pgbench variable (``-D``) holding the number of clients on the drivers before this
one: scripts that spread clients by ``:client_id`` (TPROC-C's home warehouses, OLTP's
slices) see the ids of the whole run, not each driver's own from 0."""
_CLIENT_ID = re.compile(r":client_id\b")


RUN_CLIENT_ID = "pgdyno_client_id"


def driver_script(text: str) -> str:
    """A pgbench script as a driver runs it: ``:client_id`` counted across the drivers. The
    sum is a variable of its own, set first: in SQL a variable is one parameter (with
    -M extended or prepared, ``$1 + $2`` of unknown types would not parse)."""
    if not _CLIENT_ID.search(text):
        return text
    return (f"\\set {RUN_CLIENT_ID} :client_id + :{CLIENT_OFFSET}\n"
            + _CLIENT_ID.sub(f":{RUN_CLIENT_ID}", text))


def copy_file(conn: DriverConnection, text: str, remote_name: str) -> str:
    """A file of this run (a pgbench script) into the driver's scratch directory."""
    dest = f"{conn.scratch}/{remote_name}"
    proc = conn.transport.run(f"cat > {shlex.quote(dest)}", input_text=text)
    if proc.returncode != 0:
        raise TargetError(f"--drivers {conn.host.name}: copying {remote_name} failed: "
                          f"{_last(proc.stderr)}")
    return dest


def close(conn: DriverConnection) -> None:
    """This run's scratch directory removed and the connection closed, whatever happened."""
    if conn.scratch:
        with contextlib.suppress(Exception):
            conn.transport.run(f"rm -rf {shlex.quote(conn.scratch)}", timeout_s=30)
    conn.transport.close()


@dataclass
class DriverPool:
    """The run's open drivers, in the file's order."""

    source: Path
    connections: list[DriverConnection]
    remote_scripts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Driver name -> local script path -> its copy on that driver."""
    reached: set[str] = field(default_factory=set)
    """Drivers that reached the server (checked before their first iteration)."""

    def offsets(self, clients: int) -> list[int]:
        """The clients on the drivers before each one (its first client's run-wide id)."""
        shares = self.shares(clients)
        return [sum(shares[:i]) for i in range(len(shares))]

    def shares(self, clients: int) -> list[int]:
        """``clients`` split as evenly as possible, the first drivers taking one more."""
        n = len(self.connections)
        return [clients // n + (1 if i < clients % n else 0) for i in range(n)]

    def script_on(self, conn: DriverConnection, local: Path) -> str:
        copies = self.remote_scripts.setdefault(conn.host.name, {})
        if str(local) not in copies:
            copies[str(local)] = copy_file(conn, driver_script(local.read_text()),
                                           f"{len(copies)}-{local.name}")
        return copies[str(local)]

    def close(self) -> None:
        for conn in self.connections:
            close(conn)


def open_pool(source: Path, ssh_config: Path | None, install: PgInstall, run_name: str,
              clients: tuple[int, ...], group: str | None = None) -> DriverPool:
    """Every driver reached, pgbench there and a scratch directory made, before anything
    else starts; the first driver that cannot be reached is refused in one line (the
    drivers already reached are closed)."""
    hosts = read_drivers(source, ssh_config, group)
    if min(clients) < len(hosts):
        raise UsageError(f"--clients {min(clients)} with {len(hosts)} drivers (--drivers "
                         f"{source}): each driver runs at least one client")
    pool = DriverPool(source, [])
    try:
        for host in hosts:
            pool.connections.append(connect(host))
        for conn in pool.connections:
            install_pgbench(conn, install)
            find_pgdyno(conn)
            make_scratch(conn, run_name)
    except BaseException:
        pool.close()
        raise
    return pool
