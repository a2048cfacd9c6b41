"""Target servers: what pgdyno puts under load.

``open_target`` turns the user's choice (``TargetSpec``: embedded, --pg-bin, --dsn, --ssh)
into an object with one interface: prepare, start, stop, restart, connection, log access.
A target answers for itself what it can do (``is_local``, ``restartable``, ``preflight``,
``drop_os_cache``, ``server_files``, ``workdir_lock``, ``meminfo_available``); a spec not
opened yet is asked through its class (``target_class``). Code outside this package never
branches on a target's ``kind``, which is only recorded.
"""

from __future__ import annotations

from typing import Any, Protocol

from pgdyno.options import TargetSpec, default_workdir
from pgdyno.targets.binaries import PgInstall, embedded_install, install_from_dir
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.dsn import NOT_DROPPED, DsnServer, dsn_connection
from pgdyno.targets.local import (
    LocalServer,
    ServerStartError,
    check_directory_option,
    drop_page_cache,
)
from pgdyno.targets.remote import RemoteServer
from pgdyno.targets.remote import drop_page_cache as drop_remote_page_cache
from pgdyno.targets.ssh import SshTransport

__all__ = ["ConnectionInfo", "PgInstall", "ServerStartError", "Target", "check_spec",
           "class_of_kind", "default_workdir", "drop_os_cache", "host_hardware", "install_for",
           "open_target", "target_class"]


class Target(Protocol):
    kind: str
    """Recorded (the manifest's target.kind), never branched on outside this package."""
    install: PgInstall
    is_local: bool
    """The server runs on this machine: its data directory, WAL and log are local paths."""
    restartable: bool
    """pgdyno starts, stops and restarts it, and writes its settings (False: an existing
    server, only measured)."""

    @property
    def data_dir(self) -> Any: ...
    @property
    def log_path(self) -> Any: ...
    @property
    def effective_wal_dir(self) -> Any: ...
    @property
    def bin_dir(self) -> str: ...
    def locate(self) -> None: ...
    def preflight(self) -> None: ...
    def server_files(self) -> tuple[dict[str, str], str] | None: ...
    def workdir_lock(self) -> Any: ...
    def drop_os_cache(self) -> str: ...
    def meminfo_available(self) -> int | None: ...
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


KINDS: dict[str, type[LocalServer] | type[RemoteServer] | type[DsnServer]] = {
    "embedded": LocalServer, "local": LocalServer, "remote": RemoteServer, "dsn": DsnServer}
"""The class of each recorded kind: its class attributes answer what such a server can do."""


def target_class(spec: TargetSpec) -> type[LocalServer] | type[RemoteServer] | type[DsnServer]:
    """The class of the server ``spec`` opens: its ``is_local`` and ``restartable`` answer for
    a target that is not opened yet."""
    if spec.dsn is not None:
        return DsnServer
    return RemoteServer if spec.kind == "remote" else LocalServer


def class_of_kind(kind: str | None
                  ) -> type[LocalServer] | type[RemoteServer] | type[DsnServer] | None:
    """The class of a recorded ``kind`` (a manifest's target.kind; None: no server)."""
    return KINDS.get(kind) if kind is not None else None


def check_spec(spec: TargetSpec) -> None:
    """What the spec alone shows wrong, before anything is opened or started: a DSN libpq
    cannot use; the workdir and WAL directory of a server on this machine (those on an
    --ssh host are checked there, when a run starts)."""
    cls = target_class(spec)
    if cls is DsnServer:
        dsn_connection(str(spec.dsn))
    elif cls is LocalServer:
        check_directory_option(spec.workdir, "--workdir")
        check_directory_option(spec.wal_dir, "--wal-dir")


def drop_os_cache(spec: TargetSpec) -> str:
    """Empty the page cache of the host a server of ``spec`` runs on, before pgdyno starts
    it (a cold first iteration): "" when dropped, else why not. The same drop as a target's
    own ``drop_os_cache``."""
    cls = target_class(spec)
    if cls is RemoteServer:
        assert spec.ssh is not None
        with SshTransport(spec.ssh, spec.ssh_config) as transport:
            return drop_remote_page_cache(transport)
    if cls is LocalServer:
        return drop_page_cache()
    return NOT_DROPPED


def open_target(spec: TargetSpec, settings: dict[str, str] | None = None,
                install: PgInstall | None = None, transport: SshTransport | None = None
                ) -> Target:
    """``transport``: the run's one SSH connection, for a remote target (made if None)."""
    install = install or install_for(spec)
    cls = target_class(spec)
    if cls is DsnServer:
        assert spec.dsn is not None
        return DsnServer(dsn=spec.dsn, install=install)
    if cls is RemoteServer:
        assert spec.ssh is not None
        return RemoteServer(transport=transport or SshTransport(spec.ssh, spec.ssh_config),
                            install=install, settings=dict(settings or {}),
                            remote_bin=str(spec.pg_bin) if spec.pg_bin else None,
                            workdir=spec.remote_workdir,
                            wal_dir=str(spec.wal_dir) if spec.wal_dir else None)
    return LocalServer(install=install, workdir=spec.workdir, wal_dir=spec.wal_dir,
                       settings=dict(settings or {}))
