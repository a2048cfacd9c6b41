"""PostgreSQL's own WAL sync test, ``pg_test_fsync``, from the target's binaries.

It writes 8 kB blocks the ways ``wal_sync_method`` can (open_datasync, fdatasync, fsync,
fsync_writethrough, open_sync) and prints each one's rate::

    Compare file sync methods using one 8kB write:
    (in "wal_sync_method" preference order, except fdatasync is Linux's default)
            open_datasync                      5175.400 ops/sec     193 usecs/op
            fdatasync                          5028.125 ops/sec     199 usecs/op
            fsync_writethrough                              n/a

This module builds its command line and reads that text; the plugin runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PROGRAM = "pg_test_fsync"
MAX_SECONDS_PER_TEST = 5
"""pg_test_fsync's own default; it runs 16 tests, so 5 s each is 80 s in all."""
ONE_WRITE = "Compare file sync methods using one 8kB write:"
SYNC_METHODS = ("open_datasync", "fdatasync", "fsync", "fsync_writethrough", "open_sync")

_SECONDS = re.compile(r"^(\d+) seconds? per test", re.MULTILINE)
_ROW = re.compile(r"^\s*(?P<name>\S.*?)\s+(?P<ops>\d+(?:\.\d+)?) ops/sec\s+"
                  r"(?P<us>\d+) usecs/op\s*$")
_NOT_AVAILABLE = re.compile(r"^\s*(?P<name>\S.*?)\s{2,}n/a(?P<star>\**)\s*$")
_HEADING = re.compile(r"^(Compare .*:|Test if .*:|Non-sync'ed .*:)\s*$")


@dataclass
class FsyncRow:
    name: str
    ops_per_s: float | None
    """None: ``n/a`` (the method does not exist on this platform or file system)."""
    usecs_per_op: int | None


@dataclass
class FsyncGroup:
    title: str
    rows: list[FsyncRow] = field(default_factory=list)


@dataclass
class FsyncResult:
    seconds_per_test: int
    groups: list[FsyncGroup]
    notes: list[str] = field(default_factory=list)
    """pg_test_fsync's remarks (O_DIRECT support, footnotes of ``n/a*``)."""

    def group(self, title: str) -> FsyncGroup | None:
        return next((g for g in self.groups if g.title == title), None)

    def sync_methods(self) -> dict[str, float | None]:
        """Each ``wal_sync_method``'s ops/s with one 8 kB write per commit."""
        group = self.group(ONE_WRITE)
        return {r.name: r.ops_per_s for r in group.rows} if group else {}


def fsync_command(program: str, path: str, seconds: int) -> list[str]:
    return [program, "-f", path, "-s", str(max(1, min(seconds, MAX_SECONDS_PER_TEST)))]


def parse_fsync_output(text: str) -> FsyncResult:
    """pg_test_fsync's stdout; ValueError when it holds no result."""
    seconds = _SECONDS.search(text)
    if seconds is None:
        raise ValueError("no 'N seconds per test' line (not pg_test_fsync output?)")
    groups: list[FsyncGroup] = []
    notes: list[str] = []
    for line in text.splitlines():
        if _HEADING.match(line.strip()):
            groups.append(FsyncGroup(line.strip()))
        elif groups and (m := _ROW.match(line)):
            groups[-1].rows.append(FsyncRow(" ".join(m["name"].split()), float(m["ops"]),
                                            int(m["us"])))
        elif groups and (m := _NOT_AVAILABLE.match(line)):
            groups[-1].rows.append(FsyncRow(m["name"].strip(), None, None))
        elif line.startswith(("O_DIRECT", "*")) or "direct I/O" in line:
            notes.append(line.strip())
    if not any(g.rows for g in groups):
        raise ValueError("no 'ops/sec' results (interrupted?)")
    return FsyncResult(seconds_per_test=int(seconds[1]), groups=groups, notes=notes)
