"""The WAL archiver and the page cache over an iteration (``--archive`` runs).

Reads what pgdyno.telemetry.archiver and the host sampler wrote into ``telemetry/``:
``archiver.csv`` (pg_stat_archiver, the segment being written, the .ready count),
``archive_commands.csv`` (one line per segment copied by pgdyno's archive command),
``page_cache.csv`` (page-cache residency of the archive directory, pg_wal and the data
directory) and ``host_raw.jsonl`` (the whole /proc/meminfo every second). Figures cover
the measured window; series cover the iteration from its start, for the plots.
"""

from __future__ import annotations

import bisect
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.results.rawfiles import read_csv
from pgdyno.units import format_rate

MIB = 2**20
DECIMAL_MB = 1e6
"""The unit of ArchiveSummary's saved ``*_mb_s`` fields (shown in binary units)."""
LAG_BEHIND_SEGMENTS = 4
"""Segments waiting for the archiver at the end of the window from which, if the backlog
also grew over the window, the archiver is said to have fallen behind."""
SEGMENT_NAME = re.compile(r"^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$")
MEMINFO_FIELDS = {"MemTotal": "total", "MemFree": "free", "Buffers": "buffers",
                  "Cached": "cached", "Shmem": "shmem", "Dirty": "dirty",
                  "Writeback": "writeback", "Active(file)": "active_file",
                  "Inactive(file)": "inactive_file", "AnonPages": "anon"}
"""The /proc/meminfo fields of the memory chart, all in kB."""
CACHE_ROLES = ("data", "wal", "archive")


@dataclass
class CommandStats:
    """pgdyno's archive command over the window: one run per segment."""

    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None
    p90_ms: float | None = None
    max_ms: float | None = None
    mean_ms: float | None = None


@dataclass
class MemorySeries:
    """MiB at each ``t`` (epoch s): /proc/meminfo, and page-cache residency by directory
    (the last sample at or before ``t``; None before the first)."""

    t: list[float] = field(default_factory=list)
    meminfo_mib: dict[str, list[float]] = field(default_factory=dict)
    cached_mib: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass
class ArchiveSummary:
    method: str = ""
    """buffered, direct, or command (the user's own), from the commands' log."""
    segment_bytes: int = 16 * MIB
    archived: int = 0
    """Segments archived in the window (pg_stat_archiver.archived_count's growth)."""
    failed: int = 0
    """Failed archive attempts in the window (failed_count's growth)."""
    archived_mb_s: float | None = None
    """Segments archived in the window times their size, per second, in decimal MB/s (10^6
    bytes): the name and unit saved runs carry. Shown through ``archived_bytes_per_s`` in
    binary units (pgdyno.units)."""
    wal_written_mb_s: float | None = None
    """WAL written in the window (pg_current_wal_lsn's growth) per second, in decimal MB/s
    (10^6 bytes), as saved; shown through ``wal_written_bytes_per_s``."""
    last_archived_wal: str | None = None
    last_failed_wal: str | None = None
    lag_start: int | None = None
    """Segments written but not yet archived at the window's start, its end, and at most."""
    lag_end: int | None = None
    lag_max: int | None = None
    ready_end: int | None = None
    """.ready files in pg_wal/archive_status at the window's end."""
    commands: CommandStats = field(default_factory=CommandStats)
    cache_mib: dict[str, float] = field(default_factory=dict)
    """Role (data, wal, archive) -> MiB in the page cache at the window's end."""
    cache_sample_ms: float | None = None
    """The mean cost of one residency sample of all the directories, ms."""
    fell_behind: bool = False
    failing: bool = False
    evidence: list[str] = field(default_factory=list)
    """Why the archiver is marked as fallen behind or failing (empty when it kept up)."""
    lag_t: list[float] = field(default_factory=list)
    lag_segments: list[int] = field(default_factory=list)
    memory: MemorySeries = field(default_factory=MemorySeries)

    @property
    def archived_bytes_per_s(self) -> float | None:
        return None if self.archived_mb_s is None else self.archived_mb_s * DECIMAL_MB

    @property
    def wal_written_bytes_per_s(self) -> float | None:
        return None if self.wal_written_mb_s is None else self.wal_written_mb_s * DECIMAL_MB


def segment_number(name: str | None, segment_bytes: int) -> int | None:
    """The segment number of a WAL file name (timeline ignored); None for others
    (.history, .partial, .backup)."""
    found = SEGMENT_NAME.match(name or "")
    if not found:
        return None
    per_log = 0x100000000 // segment_bytes
    return int(found.group(2), 16) * per_log + int(found.group(3), 16)


def lag_of(row: dict[str, str], segment_bytes: int) -> int | None:
    """Segments completely written but not yet archived: those between the last archived
    one and the one being written; the .ready count before anything was archived."""
    current = segment_number(row.get("current_wal"), segment_bytes)
    last = segment_number(row.get("last_archived_wal"), segment_bytes)
    if current is not None and last is not None:
        return max(0, current - last - 1)
    ready = row.get("ready_count")
    return int(ready) if ready not in (None, "") else None


def parse_meminfo(text: str) -> dict[str, float]:
    """The memory chart's fields of /proc/meminfo, in MiB."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        name = MEMINFO_FIELDS.get(key.strip())
        if name is not None and rest.split():
            out[name] = int(rest.split()[0]) / 1024
    return out


def analyse_archive(tdir: Path, start: float, end: float,
                    series_from: float | None = None) -> ArchiveSummary | None:
    """The archiver over [start, end]; None when the iteration did not sample it."""
    if not (tdir / "archiver.csv").exists():
        return None
    rows = [r for r in read_csv(tdir / "archiver.csv") if r.get("t")]
    s = ArchiveSummary()
    first = series_from if series_from is not None else start
    if rows:
        s.segment_bytes = int(float(rows[-1].get("segment_bytes") or s.segment_bytes))
    inside = [r for r in rows if start - 1 <= float(r["t"]) <= end + 1]
    if len(inside) >= 2:
        _counts(s, inside[0], inside[-1])
    for r in rows:
        if first - 1 <= float(r["t"]) <= end + 1 and (lag := lag_of(r, s.segment_bytes)) \
                is not None:
            s.lag_t.append(float(r["t"]))
            s.lag_segments.append(lag)
    s.commands, s.method = _commands(tdir, start, end)
    s.memory = memory_series(tdir, first, end)
    _cache_at_end(s, tdir, end)
    judge(s)
    return s


def _counts(s: ArchiveSummary, a: dict[str, str], b: dict[str, str]) -> None:
    seconds = float(b["t"]) - float(a["t"])
    s.archived = int(b["archived_count"]) - int(a["archived_count"])
    s.failed = int(b["failed_count"]) - int(a["failed_count"])
    if seconds > 0:
        s.archived_mb_s = s.archived * s.segment_bytes / DECIMAL_MB / seconds
        s.wal_written_mb_s = ((int(b["wal_lsn_bytes"]) - int(a["wal_lsn_bytes"])) / DECIMAL_MB
                              / seconds)
    s.last_archived_wal = b.get("last_archived_wal") or None
    s.last_failed_wal = b.get("last_failed_wal") or None
    lags = [lag_of(r, s.segment_bytes) for r in (a, b)]
    s.lag_start, s.lag_end = lags
    ready = b.get("ready_count")
    s.ready_end = int(ready) if ready not in (None, "") else None


def _commands(tdir: Path, start: float, end: float) -> tuple[CommandStats, str]:
    rows = [r for r in read_csv(tdir / "archive_commands.csv")
            if r.get("start") and start <= float(r["start"]) <= end]
    stats = CommandStats(runs=len(rows))
    for r in rows:
        stats.outcomes[r["outcome"]] = stats.outcomes.get(r["outcome"], 0) + 1
    ms = sorted(float(r["seconds"]) * 1000 for r in rows if r["outcome"] == "ok")
    if ms:
        stats.p50_ms = statistics.median(ms)
        stats.p90_ms = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
        stats.max_ms, stats.mean_ms = ms[-1], statistics.fmean(ms)
    methods = {r["method"] for r in rows}
    return stats, (methods.pop() if len(methods) == 1 else "command" if not rows else "mixed")


def memory_series(tdir: Path, start: float, end: float) -> MemorySeries:
    """/proc/meminfo at every host tick in [start, end], with the directories' residency."""
    out = MemorySeries()
    path = tdir / "host_raw.jsonl"
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                tick = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            t = float(tick.get("t", 0))
            if not start - 1 <= t <= end + 1:
                continue
            mem = parse_meminfo(tick.get("meminfo", ""))
            out.t.append(t)
            for key in MEMINFO_FIELDS.values():
                out.meminfo_mib.setdefault(key, []).append(mem.get(key, 0.0))
    samples = _residency(tdir)
    for role, points in samples.items():
        times = [t for t, _ in points]
        out.cached_mib[role] = [points[i - 1][1] if (i := bisect.bisect_right(times, t)) else None
                                for t in out.t]
    return out


def _residency(tdir: Path) -> dict[str, list[tuple[float, float]]]:
    samples: dict[str, list[tuple[float, float]]] = {}
    for r in read_csv(tdir / "page_cache.csv"):
        if r.get("t") and r.get("cached_bytes"):
            samples.setdefault(r["role"], []).append(
                (float(r["t"]), int(r["cached_bytes"]) / MIB))
    return {role: sorted(points) for role, points in samples.items()}


def _cache_at_end(s: ArchiveSummary, tdir: Path, end: float) -> None:
    rows = [r for r in read_csv(tdir / "page_cache.csv") if r.get("t")]
    for role in CACHE_ROLES:
        before = [r for r in rows if r["role"] == role and float(r["t"]) <= end + 1]
        if before:
            s.cache_mib[role] = int(before[-1]["cached_bytes"]) / MIB
    by_time: dict[str, float] = {}
    for r in rows:
        by_time[r["t"][:10]] = by_time.get(r["t"][:10], 0.0) + float(r["sample_ms"] or 0)
    if by_time:
        s.cache_sample_ms = statistics.fmean(by_time.values())


def judge(s: ArchiveSummary) -> None:
    """Mark an archiver that failed or fell behind, with the evidence."""
    bad = {k: v for k, v in s.commands.outcomes.items() if k in ("conflict", "error")}
    if s.failed > 0 or bad:
        s.failing = True
        detail = ", ".join(f"{n} {k}" for k, n in sorted(bad.items()))
        s.evidence.append(
            f"WAL archiving failed: pg_stat_archiver counted {s.failed} failed attempts in the "
            "window" + (f" (last failed segment {s.last_failed_wal})" if s.last_failed_wal
                        else "") + (f"; the archive command's log: {detail}" if detail else "")
            + "; PostgreSQL keeps the segments in pg_wal and retries")
    if (s.lag_end is not None and s.lag_end >= LAG_BEHIND_SEGMENTS
            and s.lag_end > (s.lag_start or 0)):
        s.fell_behind = True
        rate = (f"; archived {format_rate(s.archived_bytes_per_s)} while WAL was written at "
                f"{format_rate(s.wal_written_bytes_per_s)}" if s.archived_mb_s is not None
                and s.wal_written_mb_s is not None else "")
        s.evidence.append(
            f"the WAL archiver fell behind: {s.lag_end} segments written but not archived "
            f"at the window's end (from {s.lag_start or 0} at its start, at most "
            f"{max(s.lag_segments, default=s.lag_end)}){rate}")
