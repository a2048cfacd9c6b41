"""The user's choice of server, from the options as given, into a ``TargetSpec``.

The one place that knows what each choice means (``--target``, ``--pg-bin``, ``--dsn``,
``--ssh``) and which options each refuses: an existing server (--dsn) is never restarted or
reconfigured; with --ssh pgdyno starts the server on that host, whose paths are absolute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.options import TargetSpec, default_workdir
from pgdyno.targets.archive import parse_archive
from pgdyno.targets.ssh import check_destination

TARGET_CHOICES = ("embedded", "local", "dsn")
"""``--target``: the choices a user names (remote follows from --ssh)."""


def target_spec(values: dict[str, Any]) -> TargetSpec:
    """The server under test; --dsn servers are never restarted or reconfigured."""
    kind = values["target"]
    if values["dsn"] is not None:
        kind = "dsn"
    elif values["pg_bin"] is not None:
        kind = "local"
    if kind == "dsn" and values["dsn"] is None:
        raise UsageError("--target dsn needs --dsn postgresql://user@host:port/dbname")
    if values.get("ssh") is not None:
        _check_ssh(values, kind)
        if kind != "dsn":
            kind = "remote"
    elif values.get("remote_workdir") is not None:
        raise UsageError("--remote-workdir is where clusters live on the --ssh host; give "
                         "--ssh user@host with it")
    if kind == "local" and values["pg_bin"] is None:
        raise UsageError("--target local needs --pg-bin DIR, e.g. /usr/lib/postgresql/15/bin")
    if kind == "dsn" and values["cache"] == "cold":
        raise UsageError("--cache cold restarts the server; with --dsn pgdyno never does that")
    if kind == "dsn" and (values["wal_dir"] or values["config"] != "default" or values["set_"]):
        raise UsageError("--dsn: pgdyno never changes an existing server; drop --wal-dir, "
                         "--config and --set")
    workdir = Path(values["workdir"] or default_workdir())
    archive = parse_archive(values.get("archive"), values.get("archive_dir"), workdir,
                            values["dsn"] if kind == "dsn" else None)
    return TargetSpec(kind=kind, workdir=workdir,
                      pg_bin=values["pg_bin"], dsn=values["dsn"], wal_dir=values["wal_dir"],
                      keep=values["keep"], ssh=values.get("ssh"),
                      ssh_config=values.get("ssh_config"),
                      remote_workdir=values.get("remote_workdir"),
                      archive=archive.command or archive.method, archive_dir=archive.directory)


def _check_ssh(values: dict[str, Any], kind: str) -> None:
    check_destination(values["ssh"])
    if kind != "dsn":
        if values.get("archive") not in (None, "off"):
            raise UsageError("--archive with --ssh: archiving on the database host is not "
                             "supported; accepted: --archive off (or run pgdyno on the host)")
        for flag, key in (("--wal-dir", "wal_dir"), ("--pg-bin", "pg_bin")):
            path = values.get(key)
            if path is not None and not str(path).startswith("/"):
                raise UsageError(f"{flag} {path}: with --ssh it is a path on the host; "
                                 "accepted: an absolute path")
    if values.get("ssh_config") is not None and not Path(values["ssh_config"]).is_file():
        raise UsageError(f"--ssh-config {values['ssh_config']}: no such file")
