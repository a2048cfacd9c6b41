"""One iteration run by several driver hosts (``--drivers``), merged into one result.

Each driver's pgbench logged its own transactions; its per-second files (``seconds.csv``,
``latency.hlog``, binned from its logs) sit under ``drivers/<name>/`` of the iteration,
counted from that driver's own launch (its clock, so no two hosts' clocks are compared).
``drivers.json`` lists the drivers with their launch epochs and how each ended.

The measured window is the one every driver covered: each driver's first and last second
with a transaction are partial (connecting, stopping), so the window opens after the latest
first second and closes at the earliest last one, inside the planned window (warm-up to
warm-up + duration). No second of it counts a driver that had not started or had stopped.

Merged exactly: each second's counts (successes, failures, retries, skips, latency sums)
are summed over the drivers, and the latency percentiles come from the drivers' HDR
histograms added together (``hdr.merge``), never from averaged percentiles.

Each driver's own figures (its TPS and p99 over the same window, failures, and its host's
load: pgbench's CPU against its capacity, the host's CPU, run queue and network without
loopback, from the ``telemetry.jsonl`` its sampler wrote, as averages over the window and
second by second) are kept for the report's per-driver table and the
"driver-bound" verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis import hdr
from pgdyno.analysis.per_second import SecondRow
from pgdyno.analysis.pgbench_log import LogStats, Seconds, read_kept_seconds, stats_of
from pgdyno.errors import UsageError

DRIVERS_NAME = "drivers.json"
DRIVERS_SCHEMA_VERSION = 2
READS_DRIVERS_SCHEMAS = (1, 2)
"""Version 1 had no ``binned_on`` (every driver's logs were binned here)."""
TELEMETRY_NAME = "telemetry.jsonl"
AT_LIMIT_PCT = 90.0
"""A driver's second counts as at its CPU limit when pgbench used this share of what it
could use (the driver-bound verdict's threshold, second by second)."""
PROGRESS_NAME = "drivers_progress.jsonl"
"""Beside ``drivers.json``: each driver's ``pgbench -P 1`` lines as they arrived during the
iteration (``{"driver", "of", "t", "tps", "lat_ms"}``: ``of`` the iteration's number of
drivers, ``t`` the end of the second since that driver's launch), for the live view."""


@dataclass
class DriverRecord:
    """One driver's part of an iteration, as the engine recorded it."""

    name: str
    destination: str
    clients: int
    threads: int
    directory: str
    """Its files, relative to the iteration's directory."""
    origin_epoch: float | None = None
    """The epoch (the driver's clock) at which it launched pgbench; None: it never did."""
    status: str = "ok"
    """``ok``; ``failed`` (pgbench exited non-zero); ``lost`` (the connection ended without
    pgbench's exit); ``stopped`` (stopped because another driver failed)."""
    returncode: int | None = None
    note: str = ""
    binned_on: str = "here"
    """Where its logs were binned: ``driver`` (pgdyno there) or ``here`` (fetched whole)."""


@dataclass
class DriversFile:
    schema_version: int
    drivers: list[DriverRecord]
    first_failure: str = ""
    """The driver whose failure stopped the others ('' when none failed)."""


@dataclass
class DriverSample:
    """One interval between two of a driver's samples (about a second)."""

    t_s: float
    """The interval's middle, in seconds since the driver launched pgbench."""
    pgbench_cores: float
    host_busy_pct: float
    run_queue: int
    net_mib_s: float
    """Bytes received and sent on every interface but loopback (lo), MiB a second."""


@dataclass
class DriverLoad:
    """A driver host's load over the measured window, from its sampler."""

    name: str
    pgbench_cores: float
    """CPU pgbench used, in cores."""
    capacity_cores: float
    """What pgbench could use: its threads, the host's cores and its cgroup's cpu.max."""
    pgbench_pct: float
    host_busy_pct: float
    run_queue: float
    net_mib_s: float
    throttled_pct: float | None = None
    """Share of the window pgbench's cgroup was throttled by cpu.max (None: no limit)."""
    seconds: int = 0
    """Sampled intervals whose middle is inside the window."""
    seconds_at_limit: int = 0
    """Of them, those in which pgbench used ``AT_LIMIT_PCT`` or more of its capacity."""
    series: list[DriverSample] = field(default_factory=list)
    """The whole iteration, interval by interval (warm-up and the stop included)."""


@dataclass
class DriverFigures:
    """One driver's figures over the iteration's common window (the report's table)."""

    name: str
    clients: int
    status: str
    transactions: int
    tps: float
    p99_ms: float | None
    failed: int
    retried: int
    load: DriverLoad | None = None


@dataclass
class MergedIteration:
    stats: LogStats | None
    """The merged statistics; None when the drivers covered no common second."""
    drivers: list[DriverFigures] = field(default_factory=list)
    window: range = range(0)
    notes: list[str] = field(default_factory=list)


def read_drivers_file(it_dir: Path) -> DriversFile | None:
    path = it_dir / DRIVERS_NAME
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.get("schema_version") not in READS_DRIVERS_SCHEMAS:
        raise UsageError(f"{path}: schema version {data.get('schema_version')}; this pgdyno "
                         f"reads {', '.join(map(str, READS_DRIVERS_SCHEMAS))}")
    return serde.from_dict(DriversFile, data)


def write_drivers_file(it_dir: Path, drivers: DriversFile) -> None:
    tmp = it_dir / (DRIVERS_NAME + ".tmp")
    tmp.write_text(json.dumps(serde.to_dict(drivers), indent=2))
    tmp.replace(it_dir / DRIVERS_NAME)


def driver_seconds(it_dir: Path, rec: DriverRecord) -> Seconds | None:
    directory = it_dir / rec.directory
    if rec.origin_epoch is None or not (directory / "seconds.csv").is_file():
        return None
    return read_kept_seconds(directory, rec.origin_epoch)


def covered(seconds: Seconds) -> tuple[int, int] | None:
    """(first, last) second with any transaction of a driver; None when it ran none."""
    marks = [k[0] for k, r in seconds.rows.items() if r.ok + r.failed + r.skipped > 0]
    return (min(marks), max(marks)) if marks else None


def common_window(spans: list[tuple[int, int] | None], warmup_s: int, duration_s: int) -> range:
    """The whole seconds every driver covered, inside the planned window: after each one's
    first (partial) second, before each one's last (partial) second."""
    if not spans or any(s is None for s in spans):
        return range(0)
    start = max(int(warmup_s), *(s[0] + 1 for s in spans))  # type: ignore[index]
    stop = min(int(warmup_s) + duration_s, *(s[1] for s in spans))  # type: ignore[index]
    return range(start, max(start, stop))


def merge_seconds(parts: list[Seconds]) -> Seconds:
    """Second k of every driver (from its own launch) summed; histograms kept apart, to be
    added by ``hdr.merge`` over whatever span is asked."""
    rows: dict[tuple[int, int], SecondRow] = {}
    intervals: list[hdr.Interval] = []
    for part in parts:
        for key, row in part.rows.items():
            if key in rows:
                rows[key].merge(row)
            else:
                rows[key] = SecondRow(**vars(row))
        intervals.extend(part.intervals)
    return Seconds(min(p.origin_epoch for p in parts), rows, intervals)


def merge_iteration(it_dir: Path, warmup_s: int, duration_s: int) -> MergedIteration | None:
    """The iteration's merged statistics and each driver's figures (None: not a drivers
    iteration)."""
    found = read_drivers_file(it_dir)
    if found is None:
        return None
    parts = [(rec, driver_seconds(it_dir, rec)) for rec in found.drivers]
    notes = [f"driver {rec.name}: no per-second data ({rec.status})"
             for rec, s in parts if s is None]
    spans = [covered(s) if s is not None else None for _, s in parts]
    window = common_window(spans, warmup_s, duration_s)
    if not len(window):
        return MergedIteration(None, window=window, notes=[
            *notes, "the drivers covered no whole second of the measured window together"])
    if window != range(int(warmup_s), int(warmup_s) + duration_s):
        notes.append(f"measured window cut to seconds {window.start}-{window.stop - 1} after "
                     f"launch, the seconds every driver covered (planned {warmup_s}-"
                     f"{warmup_s + duration_s - 1})")
    seconds = [s for _, s in parts if s is not None]
    merged = stats_of(merge_seconds(seconds), warmup_s=window.start, duration_s=len(window))
    figures = []
    for rec, s in parts:
        assert s is not None
        own = stats_of(s, warmup_s=window.start, duration_s=len(window))
        load = driver_load(it_dir / rec.directory / TELEMETRY_NAME, rec,
                           rec.origin_epoch + window.start,  # type: ignore[operator]
                           rec.origin_epoch + window.stop)  # type: ignore[operator]
        figures.append(_figures(rec, own, load))
    return MergedIteration(merged, figures, window, notes)


def _figures(rec: DriverRecord, stats: LogStats, load: DriverLoad | None) -> DriverFigures:
    n = int(stats.interval_ok.sum())
    p99 = stats.overall.histogram.percentiles_us((99.0,))[99.0] if n else math.nan
    return DriverFigures(
        name=rec.name, clients=rec.clients, status=rec.status, transactions=n,
        tps=n / stats.duration_s, p99_ms=None if math.isnan(p99) else p99 / 1000,
        failed=stats.overall.failed, retried=stats.overall.retried, load=load)


# ----- the drivers' load ------------------------------------------------------------------

def driver_load(path: Path, rec: DriverRecord, start: float, end: float) -> DriverLoad | None:
    """A driver's load between two epochs of its own clock, from its sampler's lines: each
    holds the host's cumulative CPU ticks, procs_running, network bytes, pgbench's CPU
    ticks and its cgroup's throttled time."""
    if not path.is_file():
        return None
    samples = []
    for line in path.read_text().splitlines():
        try:
            samples.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the line the sampler was writing when it was stopped
    inside = [s for s in samples if start - 1.0 <= s["t"] <= end + 1.0]
    if len(inside) < 2:
        return None
    a, b = inside[0], inside[-1]
    whole = _interval(a, b, rec.origin_epoch or 0.0)
    if whole is None:
        return None
    ncpu = float(b["ncpu"])
    capacity = min(float(rec.threads), ncpu, b["quota"] or ncpu)
    dt = b["t"] - a["t"]
    throttled = None
    if b.get("quota") and b.get("throttled_us") is not None and a.get("throttled_us") is not None:
        throttled = 100.0 * (b["throttled_us"] - a["throttled_us"]) / 1e6 / dt
    series = [x for p, q in zip(samples, samples[1:], strict=False)
              if (x := _interval(p, q, rec.origin_epoch or 0.0)) is not None]
    in_window = [x for p, q in zip(inside, inside[1:], strict=False)
                 if (x := _interval(p, q, 0.0)) is not None and start <= x.t_s < end]
    return DriverLoad(
        name=rec.name, pgbench_cores=round(whole.pgbench_cores, 4), capacity_cores=capacity,
        pgbench_pct=round(100.0 * whole.pgbench_cores / capacity, 2) if capacity else 0.0,
        host_busy_pct=whole.host_busy_pct,
        run_queue=round(sum(s["running"] for s in inside) / len(inside), 2),
        net_mib_s=whole.net_mib_s,
        throttled_pct=None if throttled is None else round(min(throttled, 100.0), 2),
        seconds=len(in_window),
        seconds_at_limit=sum(100.0 * x.pgbench_cores >= AT_LIMIT_PCT * capacity
                             for x in in_window) if capacity else 0,
        series=series)


def _interval(a: dict, b: dict, origin: float) -> DriverSample | None:
    """The load between two samples (None: no time between them)."""
    dt = b["t"] - a["t"]
    if dt <= 0:
        return None
    total = sum(b["cpu"]) - sum(a["cpu"])
    idle = (b["cpu"][3] + b["cpu"][4]) - (a["cpu"][3] + a["cpu"][4])
    return DriverSample(
        t_s=round((a["t"] + b["t"]) / 2 - origin, 3),
        pgbench_cores=round((b["proc"] - a["proc"]) / b["hz"] / dt, 4),
        host_busy_pct=round(100.0 * (total - idle) / total, 2) if total > 0 else 0.0,
        run_queue=int(b["running"]),
        net_mib_s=round((sum(b["net"]) - sum(a["net"])) / dt / 2**20, 4))
