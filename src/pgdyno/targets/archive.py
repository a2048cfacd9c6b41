"""WAL archiving on servers pgdyno starts: ``--archive off|buffered|direct|'COMMAND'``.

``buffered`` and ``direct`` install pgdyno's archive command, a small bash script kept in the
archive directory (``.pgdyno-archive``): PostgreSQL runs it once per WAL segment, so it must
start in milliseconds, and a shell script whose only children are coreutils (cp, dd, sync,
mv) does; a Python interpreter would cost more than the copy (``bench/archive_cost.py``
measures both). Both methods follow PostgreSQL's rules for an archive command: copy to a
temporary name, fsync, rename; an existing segment of the same name is success when its
content is identical and a failure (never overwritten) when it differs; any error exits
non-zero, so PostgreSQL keeps the segment and retries.

- ``buffered`` copies the way ``cp`` does (through the page cache), then fsyncs the copy;
- ``direct`` copies with GNU dd ``oflag=direct`` (the copy bypasses the page cache) and
  ``iflag=nocache`` (the source segment is dropped from the page cache once read:
  posix_fadvise DONTNEED), ``conv=fsync``.

Every invocation appends one line to ``.pgdyno-archive.log`` in the archive directory:
``SEGMENT START END OUTCOME METHOD`` (epoch seconds with microseconds; outcome ok,
identical, conflict or error). That log is also pgdyno's record of what it archived there:
before a run, pgdyno removes the segments the log names as archived by it (and nothing
else), so archived WAL does not accumulate run after run.

A user's own ``COMMAND`` (with ``%p``/``%f``) is set as ``archive_command`` verbatim;
pgdyno then measures the archiver through pg_stat_archiver but has no per-segment times,
and never removes anything from its ``--archive-dir``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.targets.osuser import ServerUser, unreachable_ancestor, writable_by

METHODS = ("off", "buffered", "direct")
SCRIPT_NAME = ".pgdyno-archive"
LOG_NAME = ".pgdyno-archive.log"
TMP_SUFFIX = ".pgdyno-tmp"
OUTCOMES = ("ok", "identical", "conflict", "error")

SCRIPT = r"""#!/bin/bash
# pgdyno's WAL archive command (written by pgdyno; see pgdyno.targets.archive).
# Usage: .pgdyno-archive buffered|direct SOURCE SEGMENT ARCHIVE_DIR LOG
# Copy to a temporary name, fsync, rename; an existing segment is success only when
# identical; any error exits non-zero so that PostgreSQL keeps the segment and retries.
set -u
method=$1 src=$2 name=$3 dir=$4 log=$5
start=$EPOCHREALTIME
dest=$dir/$name
tmp=$dir/.$name.pgdyno-tmp
finish() {  # OUTCOME EXIT_CODE: one line per segment, for pgdyno's archiver telemetry
    printf '%s %s %s %s %s\n' "$name" "$start" "$EPOCHREALTIME" "$1" "$method" \
        >>"$log" 2>/dev/null
    exit "$2"
}
if [ -e "$dest" ]; then
    if cmp -s -- "$src" "$dest"; then finish identical 0; fi
    echo "pgdyno-archive: $dest exists with different content; not overwritten" >&2
    finish conflict 1
fi
case $method in
    buffered) cp -- "$src" "$tmp" && sync -- "$tmp" ;;
    direct) dd if="$src" of="$tmp" bs=1M iflag=nocache oflag=direct conv=fsync status=none ;;
    *) echo "pgdyno-archive: unknown method $method" >&2; false ;;
esac || { rm -f -- "$tmp"; finish error 1; }
mv -f -- "$tmp" "$dest" && sync -- "$dir" || { rm -f -- "$tmp"; finish error 1; }
finish ok 0
"""


@dataclass(frozen=True)
class ArchiveSpec:
    """``--archive`` and ``--archive-dir`` as validated: what the server archives, and where."""

    method: str
    """off, buffered, direct, or command (the user's own ``archive_command``)."""
    directory: Path | None = None
    command: str | None = None

    @property
    def enabled(self) -> bool:
        return self.method != "off"

    @property
    def pgdyno_copies(self) -> bool:
        """pgdyno's own command (buffered, direct): per-segment times and its record."""
        return self.method in ("buffered", "direct")

    @property
    def script(self) -> Path:
        assert self.directory is not None
        return self.directory / SCRIPT_NAME

    @property
    def log(self) -> Path:
        assert self.directory is not None
        return self.directory / LOG_NAME


def parse_archive(value: str | None, directory: Path | None, workdir: Path,
                  dsn: str | None) -> ArchiveSpec:
    """``--archive``/``--archive-dir`` into an ArchiveSpec; bad input is one line (an empty
    value too: it is not "off")."""
    text = "off" if value is None else value.strip()
    if not text:
        raise UsageError(f"--archive {value!r}: an empty value; accepted: off | buffered | "
                         "direct | a shell command using %p and %f")
    method = text.lower() if text.lower() in METHODS else "command"
    if method == "off":
        if directory is not None:
            raise UsageError("--archive-dir needs --archive buffered|direct|'COMMAND'")
        return ArchiveSpec("off")
    if dsn is not None:
        raise UsageError("--archive with --dsn: pgdyno never reconfigures an existing server; "
                         "drop --archive (or let pgdyno start the server)")
    if method == "command":
        if "%p" not in text and "%f" not in text:
            raise UsageError(f"--archive {text!r}: accepted: off | buffered | direct | a "
                             "shell command using %p (the segment's path) and %f (its name)")
        return ArchiveSpec("command", Path(directory).absolute() if directory else None, text)
    return ArchiveSpec(method, Path(directory or Path(workdir) / "archive").absolute())


def archive_settings(spec: ArchiveSpec) -> dict[str, str]:
    """The postgresql.conf lines that turn archiving on (nothing when off)."""
    if not spec.enabled:
        return {}
    if spec.method == "command":
        command = spec.command or ""
    else:
        assert spec.directory is not None
        command = " ".join(shlex.quote(str(p)) for p in (
            spec.script, spec.method)) + ' "%p" "%f" ' + " ".join(
            shlex.quote(str(p)) for p in (spec.directory, spec.log))
    return {"archive_mode": "on", "archive_command": _conf_string(command)}


def _conf_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def check_wal_level(settings: dict[str, str]) -> None:
    """archive_mode needs wal_level replica or logical."""
    if settings.get("wal_level", "").strip("'\" ").lower() == "minimal":
        raise UsageError("--archive needs wal_level replica or logical; the config sets "
                         "wal_level = minimal (override with --set wal_level=replica)")


def check_directory(spec: ArchiveSpec, user: ServerUser) -> None:
    """The archive directory as ``prepare`` will need it, checked before anything is
    created (no run directory is made for bad input): not a file, nor under one, on a
    writable filesystem, writable (or creatable) by pgdyno, and reachable by the server
    user who writes the segments. Nothing is created or changed here."""
    if not spec.enabled or spec.directory is None:
        return
    directory = spec.directory
    label = f"--archive-dir {directory}"
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == directory else f"{existing} "
        raise UsageError(f"{label}: {where}is a file; accepted: a directory (created if "
                         "absent)")
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise UsageError(f"{label}: {existing} is on a read-only filesystem; accepted: a "
                         "directory on a writable one")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "write in it" if existing == directory else f"create it in {existing}"
        raise UsageError(f"{label}: pgdyno may not {what} (permission denied); accepted: a "
                         "directory this user may write")
    blocked = unreachable_ancestor(directory, user)
    if blocked is not None:
        raise UsageError(f"{label}: the server user {user.name} cannot traverse {blocked}; "
                         "choose another directory")
    if directory.exists():
        check_server_may_write(directory, user)


def check_server_may_write(directory: Path, user: ServerUser) -> None:
    """A directory pgdyno did not make keeps its owner and mode: the server user, who
    archives into it, must be able to write there already."""
    if not writable_by(directory, user):
        raise UsageError(f"--archive-dir {directory}: the server user {user.name} cannot "
                         "write to it, and pgdyno does not change the owner of a directory it "
                         f"did not create; accepted: a directory {user.name} may write to "
                         f"(chown {user.name} {directory}) or a new one, which pgdyno creates")


def prepare(spec: ArchiveSpec, user: ServerUser) -> list[str]:
    """Create the archive directory for the server user, install the archive command and
    empty the segments pgdyno archived there before; returns notes for the run."""
    if not spec.enabled or spec.directory is None:
        return []
    directory = spec.directory
    existed = directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--archive-dir {directory}: cannot create it ({exc.strerror or exc})"
                         ) from None
    blocked = unreachable_ancestor(directory, user)
    if blocked is not None:
        raise UsageError(f"--archive-dir {directory}: the server user {user.name} cannot "
                         f"traverse {blocked}; choose another directory")
    if not existed:  # pgdyno made it: the server, which archives into it, gets it
        if not user.is_current:
            os.chown(directory, user.uid, user.gid)
    else:
        check_server_may_write(directory, user)
    if not spec.pgdyno_copies:
        return []
    if spec.method == "direct":
        check_direct_io(directory)
    removed = empty_archived(directory)
    spec.script.write_text(SCRIPT)
    spec.script.chmod(0o755)
    spec.log.touch()
    if not user.is_current:  # the server user appends to it, one line per segment
        os.chown(spec.log, user.uid, user.gid)
    notes = []
    if removed:
        notes.append(f"archive: removed {removed} segments pgdyno had archived in "
                     f"{directory} before this run (its record: {LOG_NAME})")
    return notes


def check_direct_io(directory: Path) -> None:
    """O_DIRECT works on the archive directory's filesystem (tmpfs, for one, refuses it)."""
    probe = directory / f".pgdyno-odirect-probe{TMP_SUFFIX}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        os.close(fd)
    except OSError as exc:
        raise UsageError(f"--archive direct: the filesystem of {directory} refuses O_DIRECT "
                         f"({exc.strerror}); use --archive buffered or another "
                         "--archive-dir") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


@dataclass(frozen=True)
class ArchiveLogLine:
    """One run of pgdyno's archive command, from its log."""

    segment: str
    start: float
    end: float
    outcome: str
    method: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


def parse_log_line(line: str) -> ArchiveLogLine | None:
    """A line of ``.pgdyno-archive.log``; None for a damaged or partial line."""
    parts = line.split()
    if len(parts) != 5 or parts[3] not in OUTCOMES:
        return None
    try:
        start, end = float(parts[1]), float(parts[2])
    except ValueError:
        return None
    return ArchiveLogLine(parts[0], start, end, parts[3], parts[4])


def read_log(path: Path, offset: int = 0) -> tuple[list[ArchiveLogLine], int]:
    """The complete lines of the log from ``offset``, and the offset after them."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line being written is read next time
    lines = [parsed for raw in data[:end].decode(errors="replace").splitlines()
             if (parsed := parse_log_line(raw)) is not None]
    return lines, offset + end


def empty_archived(directory: Path) -> int:
    """Remove the segments that pgdyno's log says it archived in ``directory`` (and its
    leftover temporary copies); nothing else. The log is then emptied: what it named is gone."""
    log = directory / LOG_NAME
    lines, _ = read_log(log)
    names = {x.segment for x in lines if x.outcome == "ok" and "/" not in x.segment}
    removed = 0
    for name in sorted(names):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
            removed += 1
    for name in {x.segment for x in lines if "/" not in x.segment}:
        with contextlib.suppress(FileNotFoundError):
            (directory / f".{name}{TMP_SUFFIX}").unlink()
    if log.exists():
        with log.open("r+b") as fh:
            fh.truncate(0)
    return removed


def spec_of(target: object) -> ArchiveSpec:
    """The validated ArchiveSpec of a TargetSpec (its ``archive`` and ``archive_dir``)."""
    value = getattr(target, "archive", "off") or "off"
    directory = getattr(target, "archive_dir", None)
    method = value if value in METHODS else "command"
    return ArchiveSpec(method, Path(directory) if directory else None,
                       value if method == "command" else None)
