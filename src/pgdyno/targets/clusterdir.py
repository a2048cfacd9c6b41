"""A cluster directory pgdyno makes is either absent or whole.

initdb runs in ``<instance>/data.partial-PID``, beside the cluster's place; pgdyno adds its
include line and writes its include file there, and only then renames the directory to
``<instance>/data`` (same parent, so same filesystem: the rename is atomic). A Ctrl-C at
any moment leaves no ``data`` or a whole one, and at worst a build directory, which the
next start removes. The PID in the name keeps a new build apart from one that an initdb
orphaned by a killed pgdyno may still be writing.

Earlier pgdyno ran initdb in place, so a Ctrl-C there could leave a ``data`` without the
include line: PostgreSQL starts from it but listens on its default socket, where pgdyno
never looks. Such a directory is rebuilt when it holds nothing initdb did not make, and
refused in one line otherwise; so is anything at either path that pgdyno cannot be sure
it made.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import TargetError, UsageError

INCLUDE_FILE = "pgdyno.conf"
INCLUDE_LINE = f"include_if_exists = '{INCLUDE_FILE}'"
INCLUDE_DIRECTIVE = f"\n# Added by pgdyno: the active config lives in this file.\n{INCLUDE_LINE}\n"
"""Appended to a new cluster's postgresql.conf: the include file holds the active config.
Its presence is also what tells a cluster pgdyno finished from one it did not."""
BUILD_SUFFIX = ".partial"
FIRST_NORMAL_OID = 16384
"""PostgreSQL's FirstNormalObjectId: the databases initdb makes have smaller OIDs, every
database made later (pgdyno's own included) a larger one."""

# What initdb puts at the top of a data directory (pg_* covers pg_hba.conf and pg_ident.conf
# too), what a server started from it adds there, and pgdyno's include file (an older pgdyno
# went on writing it at every start).
_CLUSTER_ENTRY = re.compile(r"PG_VERSION|base|global|pg_[\w.]+|postgresql(\.auto)?\.conf"
                            r"|postmaster\.(opts|pid)|current_logfiles|" + re.escape(INCLUDE_FILE))
# What PostgreSQL writes in a WAL directory: segments, timeline histories, backup labels,
# segments being created, and its two subdirectories.
_WAL_ENTRY = re.compile(r"[0-9A-F]{24}(\.partial|\.[0-9A-F]{8}\.backup)?|[0-9A-F]{8}\.history"
                        r"|xlogtemp\.\d+|archive_status|summaries")


@dataclass(frozen=True)
class Leftover:
    """A directory an interrupted first start left: to be removed before initdb runs."""

    path: Path
    wal_dir: Path | None
    """Its WAL directory elsewhere (initdb --waldir): emptied, not removed, since pgdyno
    may not have made the directory itself."""
    is_build: bool
    """A build directory (else a cluster in its place that pgdyno did not finish)."""


def build_dir(data_dir: Path) -> Path:
    """Where this process builds the cluster of ``data_dir`` before renaming it into place."""
    return data_dir.with_name(f"{data_dir.name}{BUILD_SUFFIX}-{os.getpid()}")


def build_dirs(data_dir: Path) -> list[Path]:
    """Every build directory of ``data_dir``, whichever process made it."""
    return sorted(data_dir.parent.glob(f"{data_dir.name}{BUILD_SUFFIX}-*"))


def has_include_line(data_dir: Path) -> bool:
    try:
        text = (data_dir / "postgresql.conf").read_text(errors="replace")
    except OSError:
        return False
    return any(line.strip() == INCLUDE_LINE for line in text.splitlines())


def is_whole(data_dir: Path) -> bool:
    """A cluster pgdyno finished making: initdb's PG_VERSION and pgdyno's include line."""
    return (data_dir / "PG_VERSION").is_file() and has_include_line(data_dir)


def leftovers(data_dir: Path, where: str) -> list[Leftover]:
    """What interrupted first starts left at ``data_dir`` and beside it, build directory
    first (the order ``discard`` needs). Anything there that pgdyno cannot be sure it made,
    or that holds more than initdb made, is refused (UsageError, prefixed with ``where``)
    before anything is removed."""
    try:
        found = [_leftover(build, where, "an unfinished cluster build", True)
                 for build in build_dirs(data_dir)]
        if (data_dir.is_symlink() or data_dir.exists()) and not is_whole(data_dir):
            found.append(_leftover(data_dir, where, "a cluster pgdyno did not finish making "
                                                    "(its postgresql.conf lacks pgdyno's line "
                                                    f"{INCLUDE_LINE})", False))
    except OSError as exc:
        raise UsageError(f"{where}: {exc.filename or data_dir} cannot be read "
                         f"({exc.strerror or exc}); use another --workdir") from None
    return [leftover for leftover in found if leftover is not None]


def _leftover(path: Path, where: str, kind: str, is_build: bool) -> Leftover | None:
    """``path`` judged, or refused; None when it vanished meanwhile (a pgdyno that holds
    the workdir finishing its own build: the lock refuses this one later, in its words)."""
    if not (path.is_symlink() or path.exists()):
        return None
    fix = ("move it away or use another --workdir" if is_build else
           "add that line if the cluster is pgdyno's, else move it away or use another "
           "--workdir")
    if path.is_symlink() or not path.is_dir() or os.path.ismount(path):
        shape = ("a symbolic link" if path.is_symlink() else
                 "a mount point" if path.is_dir() else "not a directory")
        raise UsageError(f"{where}: {path} is {kind}, but {shape}, which pgdyno does not "
                         f"make; {fix}")
    foreign = _foreign_entry(path)
    if foreign:
        raise UsageError(f"{where}: {path} is {kind}, but holds {foreign}, which initdb "
                         f"does not make; {fix}")
    wal_dir = _wal_target(path)
    if wal_dir is not None:
        stray = next((n for n in _names(wal_dir) if not _WAL_ENTRY.fullmatch(n)), "")
        if stray:
            raise UsageError(f"{where}: {path} is {kind}, but its WAL directory {wal_dir} "
                             f"holds {stray}, which PostgreSQL does not write; {fix}")
    return Leftover(path, wal_dir, is_build)


def _foreign_entry(path: Path) -> str:
    """The first thing in a would-be cluster that initdb does not make ('' when none): a
    file of someone else's, a database made after initdb, a tablespace."""
    stray = next((name for name in _names(path) if not _CLUSTER_ENTRY.fullmatch(name)), "")
    if stray:
        return stray
    for name in _names(path / "base"):
        if name != "pgsql_tmp" and (not name.isdigit() or int(name) >= FIRST_NORMAL_OID):
            return f"a database (base/{name})"
    tablespaces = _names(path / "pg_tblspc")
    return f"a tablespace (pg_tblspc/{tablespaces[0]})" if tablespaces else ""


def _names(directory: Path) -> list[str]:
    """The entries of ``directory``, sorted; none when it is missing (or vanished while
    read) or not a directory."""
    if directory.is_symlink() or not directory.is_dir():
        return []
    try:
        return sorted(entry.name for entry in directory.iterdir())
    except FileNotFoundError:
        return []


def _wal_target(path: Path) -> Path | None:
    """The WAL directory a would-be cluster links to (initdb --waldir), if it exists."""
    link = path / "pg_wal"
    if not link.is_symlink():
        return None
    target = link.resolve()
    return target if target.is_dir() else None


def discard(leftover: Leftover, where: str) -> None:
    """Remove a leftover, its WAL directory's content first (left behind, it would make
    the next initdb refuse that directory). A cluster in its place is renamed to the
    build directory first, so an interruption here leaves only what the next start
    removes. An OSError becomes one line that says what to remove by hand."""
    path = leftover.path
    try:
        if not leftover.is_build:
            aside = build_dir(path)
            os.rename(path, aside)
            path = aside
        if leftover.wal_dir is not None:
            _empty_wal_dir(leftover.wal_dir)
        _remove_tree(path)
    except OSError as exc:
        raise TargetError(f"{where}: cannot remove {path}, left unfinished by an interrupted "
                          f"first start ({exc.strerror or exc}); remove it yourself") from None


def _empty_wal_dir(wal_dir: Path) -> None:
    for entry in wal_dir.iterdir():
        if not _WAL_ENTRY.fullmatch(entry.name):
            continue  # checked by _leftover; appeared since: not PostgreSQL's, so kept
        if entry.is_dir() and not entry.is_symlink():
            _remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)


def _remove_tree(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        # An initdb orphaned by a killed pgdyno may be removing its own build meanwhile:
        # what vanished is gone either way; what is left gets a second pass.
        if path.exists():
            shutil.rmtree(path)


def discard_quietly(build: Path) -> None:
    """Best effort, for a build that failed or was interrupted: what remains is removed
    by the next start."""
    if build.is_dir() and not build.is_symlink():
        with contextlib.suppress(OSError, TargetError):
            discard(Leftover(build, _wal_target(build), True), "")


def repair_line(found: list[Leftover], data_dir: Path) -> str:
    """What is done about ``found``, in one line."""
    if any(not leftover.is_build for leftover in found):
        return (f"the cluster {data_dir} had been left unfinished by an interrupted first "
                "start (no pgdyno configuration, no data): removing it and making it again")
    return (f"removed {found[0].path}, a cluster build left unfinished by an interrupted "
            "first start")


def move_into_place(build: Path, data_dir: Path) -> None:
    """The finished build renamed to the cluster's place, the rename made durable (initdb
    has synced the files themselves)."""
    try:
        os.rename(build, data_dir)
        fd = os.open(data_dir.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TargetError(f"cannot move the new cluster {build} to {data_dir} "
                          f"({exc.strerror or exc})") from None
