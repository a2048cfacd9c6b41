"""Target servers: what pgdyno puts under load.

``open_target`` turns the user's choice (embedded, --pg-bin, --dsn) into an object
with one interface: prepare, start, stop, restart, connection, log access.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pgdyno.targets.binaries import PgInstall, embedded_install, install_from_dir
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.dsn import DsnServer
from pgdyno.targets.local import LocalServer, ServerStartError
from pgdyno.targets.osuser import running_as_root
from pgdyno.targets.remote import RemoteServer
from pgdyno.targets.ssh import SshTransport

__all__ = ["ConnectionInfo", "PgInstall", "ServerStartError", "Target", "TargetSpec",
           "default_workdir", "host_hardware", "install_for", "open_target"]


class Target(Protocol):
    kind: str
    install: PgInstall

    def prepare(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def restart(self) -> None: ...
    def is_running(self) -> bool: ...
    def write_settings(self, settings: dict[str, str]) -> None: ...
    def connection(self, via: str = "socket") -> ConnectionInfo: ...
    def admin_connection(self) -> ConnectionInfo: ...
    def log_tail(self, lines: int = 15) -> str: ...
    def log_size(self) -> int: ...
    def remember_good_settings(self, config_name: str) -> None: ...
    def last_good_settings(self) -> tuple[str, dict[str, str]]: ...


@dataclass(frozen=True)
class TargetSpec:
    """The user's choice of server, validated by the CLI."""

    kind: str = "embedded"
    """``embedded``, ``local`` (with pg_bin), ``dsn``, or ``remote`` (--ssh without --dsn:
    pgdyno starts the server on that host, from --pg-bin there or the embedded one)."""
    workdir: Path = field(default_factory=lambda: default_workdir())
    pg_bin: Path | None = None
    dsn: str | None = field(default=None, repr=False, metadata={"serialise": False})
    """Never written anywhere: it may hold a password."""
    wal_dir: Path | None = None
    keep: bool = False
    ssh: str | None = None
    """``user@host`` (or an ssh_config Host alias) of the database host: its telemetry is read
    over SSH (pgdyno.targets.ssh). Only the destination is recorded, never a key."""
    ssh_config: Path | None = None
    """An ssh_config file for ``ssh -F`` (default: the user's ~/.ssh/config)."""
    remote_workdir: str | None = None
    """--remote-workdir: where the clusters live on the --ssh host (kind ``remote``)."""
    archive: str = "off"
    """``--archive``: off, buffered, direct, or the user's own archive_command
    (pgdyno.targets.archive)."""
    archive_dir: Path | None = None
    """``--archive-dir``, made absolute (buffered/direct: <workdir>/archive by default)."""


def default_workdir() -> Path:
    """Where clusters live between runs, so that datasets can be reused.

    As root the default is outside /root, which the unprivileged server user cannot enter.
    """
    if env := os.environ.get("PGDYNO_WORKDIR"):
        return Path(env)
    if running_as_root():
        return Path("/var/lib/pgdyno")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pgdyno"


def install_for(spec: TargetSpec) -> PgInstall:
    """The binaries a target runs with (--pg-bin, else the embedded PostgreSQL 18); probing
    them runs ``postgres --version``, so a caller that needs them twice keeps them.

    On a remote target --pg-bin names the host's directory: pgbench and the settings
    catalogue here are the embedded PostgreSQL's."""
    if spec.pg_bin and spec.kind != "remote":
        return install_from_dir(spec.pg_bin)
    return embedded_install()


def host_hardware(spec: TargetSpec, transport: SshTransport | None = None):
    """The HardwareProfile of the database host when that is not this machine (a remote
    target: detected there, over ``transport`` or a connection of its own); None when the
    server runs here (the config engine detects this machine itself)."""
    if spec.kind != "remote" or not spec.ssh:
        return None
    from pgdyno.targets.remote import detect_hardware

    if transport is not None:
        return detect_hardware(transport, spec.remote_workdir or ".")
    with SshTransport(spec.ssh, spec.ssh_config) as own:
        return detect_hardware(own, spec.remote_workdir or ".")


def open_target(spec: TargetSpec, settings: dict[str, str] | None = None,
                install: PgInstall | None = None, transport: SshTransport | None = None
                ) -> Target:
    """``transport``: the run's one SSH connection, for a remote target (made if None)."""
    install = install or install_for(spec)
    if spec.dsn is not None:
        return DsnServer(dsn=spec.dsn, install=install)
    if spec.kind == "remote":
        assert spec.ssh is not None
        return RemoteServer(transport=transport or SshTransport(spec.ssh, spec.ssh_config),
                            install=install, settings=dict(settings or {}),
                            remote_bin=str(spec.pg_bin) if spec.pg_bin else None,
                            workdir=spec.remote_workdir,
                            wal_dir=str(spec.wal_dir) if spec.wal_dir else None)
    return LocalServer(install=install, workdir=spec.workdir, wal_dir=spec.wal_dir,
                       settings=dict(settings or {}))
