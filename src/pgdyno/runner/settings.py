"""The settings a run's server starts with: the named config, room for the clients and the
WAL archive, each recorded with its source in the config record of the manifest.
"""

from __future__ import annotations

from typing import Any

from pgdyno.config import resolve_config
from pgdyno.config.setting_specs import for_install
from pgdyno.config.sizing import connection_room
from pgdyno.options import BenchOptions
from pgdyno.targets import PgInstall, archive, target_class
from pgdyno.targets.local import BASE_SETTINGS
from pgdyno.targets.remote import detect_hardware
from pgdyno.targets.ssh import SshTransport
from pgdyno.workloads import registry
from pgdyno.workloads.base import Workload


def build_settings(opts: BenchOptions, workload: Workload, install: PgInstall,
                   hardware: Any = None) -> tuple[dict[str, str], dict]:
    """The settings and the config record of a run's server: the named config (sized for
    ``hardware``, None: this machine), room for the clients, and --archive."""
    settings, record = resolve_settings(opts, workload, install, hardware)
    archive_settings(opts, settings, record)
    return settings, record


def resolve_settings(opts: BenchOptions, workload: Workload, install: PgInstall,
                     hardware: Any = None) -> tuple[dict[str, str], dict]:
    """The PostgreSQL layer of the named config; stock PostgreSQL for ``default``.
    ``hardware``: the profile to size for (None: this machine's)."""
    if opts.config == "default" and not opts.sets:
        settings: dict[str, str] = {}
        record: dict = {"name": "default", "pg_settings": {}, "sources": {}}
    else:
        resolved = resolve_config(opts.config, list(opts.sets), install=install,
                                  workload=opts.workload, connections=max(opts.clients),
                                  dataset_bytes=workload.dataset_bytes(opts) or 0,
                                  tuning=workload.tuning, hardware=hardware,
                                  advisor=registry.ADVICE)
        settings, record = dict(resolved.pg_settings), resolved.to_dict()
    make_room_for_clients(opts, settings, record, install)
    return settings, record


def make_room_for_clients(opts: BenchOptions, settings: dict[str, str], record: dict,
                          install: PgInstall) -> None:
    """Raise max_connections of a server pgdyno starts when the clients would not fit,
    by the config engine's one rule (clients + pgdyno's sessions + reserved slots).

    Only when the config leaves max_connections alone (compliant TPROC-C at W = 30 runs 300
    terminals); a config that sets it too low is the user's choice and fails clearly. An
    existing server's room is checked instead (``preflight.check_connection_room``)."""
    if not target_class(opts.target).restartable or "max_connections" in settings:
        return
    room = connection_room(max(opts.clients), for_install(install))
    if room.needed > int(BASE_SETTINGS["max_connections"]):
        settings["max_connections"] = str(room.needed)
        record.setdefault("pg_settings", {})["max_connections"] = str(room.needed)
        record.setdefault("sources", {})["max_connections"] = f"pgdyno: {room.arithmetic()}"


def archive_settings(opts: BenchOptions, settings: dict[str, str], record: dict) -> None:
    """--archive: archive_mode and archive_command on a server pgdyno starts, recorded with
    the config's settings (their source says --archive)."""
    spec = archive.spec_of(opts.target)
    added = archive.archive_settings(spec)
    if not added:
        return
    archive.check_wal_level(settings)
    settings.update(added)
    record.setdefault("pg_settings", {}).update(added)
    record.setdefault("sources", {}).update(
        {key: f"pgdyno: --archive {opts.target.archive}" for key in added})


def database_host_hardware(opts: BenchOptions, transport: SshTransport | None):
    """--ssh: the database host's hardware, detected there: what a named config is sized
    for (a server pgdyno starts there; --dsn takes no config), and the database host the
    manifest and the run report describe beside this client (None: no --ssh). Only a config
    that needs it fails the run when the host cannot be detected (no python3 there)."""
    if transport is None:
        return None
    where = opts.target.remote_workdir or "."
    if opts.config != "default" or opts.sets:
        return detect_hardware(transport, where)
    try:
        return detect_hardware(transport, where)
    except Exception:  # noqa: BLE001 - a description only: the report says the host is unknown
        return None
