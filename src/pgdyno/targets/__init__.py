"""Target servers: what pgdyno puts under load.

``open_target`` turns the user's choice (embedded, --pg-bin, --dsn) into an object
with one interface: prepare, start, stop, restart, connection, log access.
"""

from __future__ import annotations

from typing import Protocol

from pgdyno.options import TargetSpec, default_workdir
from pgdyno.targets.binaries import PgInstall, embedded_install, install_from_dir
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.dsn import DsnServer
from pgdyno.targets.local import LocalServer, ServerStartError
from pgdyno.targets.remote import RemoteServer
from pgdyno.targets.ssh import SshTransport

__all__ = ["ConnectionInfo", "PgInstall", "ServerStartError", "Target", "default_workdir",
           "host_hardware", "install_for", "open_target"]


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
