"""Summaries of the telemetry of one run, recomputed from the raw files only.

Averages over the window are ratios of counter deltas (total ticks, total I/Os, total
milliseconds), not means of per-second figures: an average await is "milliseconds spent on
reads ÷ reads", as iostat computes it over a long interval. Peaks and coefficients of
variation come from the per-interval figures. Every figure is recomputed from
``host_raw.jsonl``, ``waits.jsonl``, ``pg_stats.jsonl``, ``checkpoints.csv`` and
``smart.json`` (see :mod:`pgdyno.telemetry` for their layout).
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis import procfs
from pgdyno.analysis.archive import ArchiveSummary, analyse_archive
from pgdyno.analysis.endurance import endurance_projection
from pgdyno.analysis.hosttick import (
    IDLE_PREFIXES,
    HostTick,
    sampler_cores,
    workload_cores,
    workload_io,
)
from pgdyno.results.capacity import DeviceCapacity, HostCapacity, frozen_capacity
from pgdyno.results.rawfiles import read_csv, read_jsonl

SCHEMA_VERSION = 1
CPU_EVENT = "CPU"
"""Class and event name given to an active session with no wait event."""
MB = 1024 * 1024
# Wait samples are bucketed per second for the "top activity" plot.
WAIT_BUCKET_S = 1.0


@dataclass
class Stat:
    """One figure over the window: average (ratio of totals), 95th percentile and extremes
    of the per-interval values."""

    avg: float | None = None
    p95: float | None = None
    peak: float | None = None
    min: float | None = None


@dataclass
class CpuSummary:
    samples: int = 0
    online_cpus: int = 0
    limit_cores: float | None = None
    """cgroup CPU quota in cores, when one applies."""
    effective_cores: float = 0.0
    usr: Stat = field(default_factory=Stat)
    nice: Stat = field(default_factory=Stat)
    sys: Stat = field(default_factory=Stat)
    iowait: Stat = field(default_factory=Stat)
    irq: Stat = field(default_factory=Stat)
    soft: Stat = field(default_factory=Stat)
    steal: Stat = field(default_factory=Stat)
    idle: Stat = field(default_factory=Stat)
    busy: Stat = field(default_factory=Stat)
    """100 - idle - iowait, percent of all online CPUs."""
    busy_of_limit_pct: float | None = None
    """Average busy CPU as a percentage of the effective capacity (cgroup quota aware)."""
    workload_cores: Stat = field(default_factory=Stat)
    """CPU cores used by the benchmark's own processes (server and client when local)."""
    workload_share_of_busy_pct: float | None = None
    """The benchmark's share of the busy CPU: low means a neighbour keeps the host busy."""
    run_queue: Stat = field(default_factory=Stat)
    """procs_running (includes the sampler itself, about 1)."""
    procs_blocked: Stat = field(default_factory=Stat)


@dataclass
class Contamination:
    """Load on the host during the window that was not the benchmark's.

    CPU: the time the CPUs spent in processes (usr + nice + sys, guests included) less the
    benchmark's processes and pgdyno's own; the hypervisor's steal apart. Disk: the bytes
    the run's data and WAL devices moved, less what the benchmark's processes read and
    wrote (/proc/PID/io; writes count when dirtied, so the change in dirty and writeback
    memory over the window is allowed for). ``contaminated`` when one of them is material
    (see OTHER_* below): the run's figures then include another job's effect."""

    contaminated: bool = False
    finding: str = ""
    """The figures that made it contaminated, e.g. "other processes used 0.9 of 2 cores
    (45% of busy CPU)"; several are joined with "; "."""
    cpu_attributed: bool = False
    """The benchmark's processes were sampled, so the CPU figures below mean something."""
    host_cores: int = 0
    busy_cores: float = 0.0
    benchmark_cores: float = 0.0
    """The benchmark's processes and pgdyno's own (its samplers)."""
    sampler_cores: float = 0.0
    other_cores: float = 0.0
    """CPU cores used by every other process on the host."""
    other_share_of_busy_pct: float = 0.0
    steal_cores: float = 0.0
    io_attributed: bool = False
    """The benchmark's processes' I/O counters were readable (root, or the same user)."""
    device_mb_s: float = 0.0
    """Read + written MB/s of the data and WAL devices."""
    benchmark_io_mb_s: float = 0.0
    other_io_mb_s: float = 0.0
    other_io_share_pct: float = 0.0


@dataclass
class DeviceSummary:
    device: str
    roles: list[str] = field(default_factory=list)
    """``data`` and/or ``wal`` when the run's directories are on this device."""
    samples: int = 0
    r_s: Stat = field(default_factory=Stat)
    w_s: Stat = field(default_factory=Stat)
    rmb_s: Stat = field(default_factory=Stat)
    wmb_s: Stat = field(default_factory=Stat)
    r_await_ms: Stat = field(default_factory=Stat)
    w_await_ms: Stat = field(default_factory=Stat)
    aqu_sz: Stat = field(default_factory=Stat)
    util_pct: Stat = field(default_factory=Stat)
    read_iops_cv: float | None = None
    """σ/μ of the 1 s read IOPS samples (None when the mean is below MIN_IOPS_FOR_CV)."""
    write_iops_cv: float | None = None
    read_iops_std: float | None = None
    """Population standard deviation of the 1 s read IOPS samples."""
    write_iops_std: float | None = None
    read_mb: float = 0.0
    written_mb: float = 0.0


@dataclass
class RoleInfo:
    role: str
    path: str
    device: str | None
    chain: list[str] = field(default_factory=list)
    physical: list[str] = field(default_factory=list)
    mount_point: str | None = None
    fstype: str | None = None
    error: str | None = None


@dataclass
class MemorySummary:
    samples: int = 0
    mem_total_kb: float | None = None
    cached_kb: Stat = field(default_factory=Stat)
    dirty_kb: Stat = field(default_factory=Stat)
    writeback_kb: Stat = field(default_factory=Stat)
    shmem_kb: Stat = field(default_factory=Stat)
    hugepages_used: Stat = field(default_factory=Stat)


@dataclass
class WaitShare:
    wait_class: str
    event: str
    """Empty for a per-class row."""
    aas: float
    """Average active sessions spent here."""
    pct: float
    """Share of the client sessions' active time (or of the io workers' busy time)."""


@dataclass
class WaitSummary:
    ticks: int = 0
    sample_hz: float = 0.0
    aas: float = 0.0
    """Average active sessions of client backends and parallel workers."""
    connections_avg: float = 0.0
    """Client backends connected, whatever their state."""
    idle_in_transaction_avg: float = 0.0
    io_workers_busy_avg: float = 0.0
    """PG18 io workers not idle: reads done on behalf of the client sessions."""
    by_class: list[WaitShare] = field(default_factory=list)
    by_event: list[WaitShare] = field(default_factory=list)
    io_workers: list[WaitShare] = field(default_factory=list)


@dataclass
class CheckpointEvent:
    t_start: float | None
    t_end: float | None
    reason: str
    buffers: int | None = None
    write_s: float | None = None
    sync_s: float | None = None
    total_s: float | None = None
    distance_kb: int | None = None


@dataclass
class CheckpointSummary:
    started: int = 0
    """Checkpoints that started in the window (server log)."""
    timed: int = 0
    requested: int = 0
    """Started for any reason but the timeout (WAL volume, CHECKPOINT, shutdown)."""
    wal_triggered: int = 0
    """Requested because max_wal_size was reached: the checkpoint-storm signature."""
    too_frequent_warnings: int = 0
    write_s: float = 0.0
    sync_s: float = 0.0
    min_interval_s: float | None = None
    """Shortest time between two checkpoint starts."""
    stats_timed: float | None = None
    """pg_stat_checkpointer / pg_stat_bgwriter deltas over the window, from here on."""
    stats_requested: float | None = None
    write_time_ms: float | None = None
    sync_time_ms: float | None = None
    buffers_checkpoint: float | None = None
    buffers_bgwriter: float | None = None
    buffers_backend: float | None = None
    """Buffers written by backends (PG15/16 counter, pg_stat_io on PG17+)."""
    maxwritten_clean: float | None = None
    buffers_alloc: float | None = None
    events: list[CheckpointEvent] = field(default_factory=list)


@dataclass
class WalSummary:
    bytes_per_s: float | None = None
    bytes_total: float | None = None
    records: float | None = None
    fpi: float | None = None
    fpi_ratio: float | None = None
    """Full-page images ÷ WAL records."""
    buffers_full: float | None = None
    writes: float | None = None
    syncs: float | None = None
    syncs_per_s: float | None = None
    write_time_ms: float | None = None
    sync_time_ms: float | None = None


@dataclass
class DatabaseSummary:
    commits_per_s: float | None = None
    rollbacks_per_s: float | None = None
    blks_read_per_s: float | None = None
    cache_hit_pct: float | None = None
    temp_bytes: float | None = None
    deadlocks: float | None = None
    active_time_aas: float | None = None
    """Δactive_time ÷ wall time: average active sessions as the server counts them."""
    blk_read_time_ms: float | None = None
    blk_write_time_ms: float | None = None


@dataclass
class IoRow:
    backend_type: str
    object: str
    reads: float = 0.0
    read_bytes: float = 0.0
    read_time_ms: float = 0.0
    writes: float = 0.0
    write_bytes: float = 0.0
    write_time_ms: float = 0.0
    extends: float = 0.0
    fsyncs: float = 0.0
    fsync_time_ms: float = 0.0
    hits: float = 0.0
    evictions: float = 0.0


@dataclass
class HardwareLimit:
    resource: str
    capacity: float | None
    unit: str
    used_avg: float | None
    used_peak: float | None
    pct_avg: float | None
    """Average use as % of capacity."""
    note: str = ""
    basis: str = ""
    """Where the capacity comes from: ``measured`` (the host's fio baseline), ``catalogue``,
    or '' (the resource's own bound: cores, %util, RAM, max_connections)."""
    kind: str = ""
    """What is measured against the capacity: ``cpu``, ``util``, ``read_iops``,
    ``write_iops``, ``iops``, ``mib_s``, ``memory``, ``connections``."""
    device: str = ""
    role: str = ""


@dataclass
class SmartChange:
    device: str
    available: bool
    reason: str
    temperature_before_c: float | None = None
    temperature_after_c: float | None = None
    written_bytes: float | None = None
    """Host writes during the run (after - before)."""
    read_bytes: float | None = None
    percent_used_before: float | None = None
    percent_used_after: float | None = None
    media_errors_before: int | None = None
    media_errors_after: int | None = None
    throttle_events: int | None = None
    """Thermal throttle transitions during the run."""
    endurance: str = ""
    """The endurance projection at the lifetime average and at this run's write rate, or
    why there is none (``analysis.endurance``)."""


@dataclass
class Mark:
    t: float
    label: str


@dataclass
class TelemetryGap:
    """A stretch without samples from one sampler (--ssh: the connection was lost)."""

    sampler: str
    start: float
    end: float | None
    """None: the samples never came back before the iteration ended."""
    reason: str = ""

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else self.end - self.start


@dataclass
class Series:
    """Per-interval series for plots, on the shared epoch-second axis."""

    host_t: list[float] = field(default_factory=list)
    cpu_usr: list[float] = field(default_factory=list)
    cpu_sys: list[float] = field(default_factory=list)
    cpu_iowait: list[float] = field(default_factory=list)
    cpu_soft: list[float] = field(default_factory=list)
    cpu_other: list[float] = field(default_factory=list)
    """nice + irq + steal."""
    disk_w_s: dict[str, list[float]] = field(default_factory=dict)
    """device -> write IOPS at each host_t (0 when the device had no sample)."""
    disk_r_s: dict[str, list[float]] = field(default_factory=dict)
    wait_t: list[float] = field(default_factory=list)
    wait_aas: dict[str, list[float]] = field(default_factory=dict)
    """wait class -> average active sessions in each 1 s bucket centred on wait_t."""


@dataclass
class TelemetrySummary:
    schema_version: int = SCHEMA_VERSION
    window_start: float | None = None
    window_end: float | None = None
    duration_s: float = 0.0
    server_version_num: int | None = None
    server_sampled: bool = True
    """False for a run without a server (cpu, fio): only the host was sampled, so there are
    no wait events, statistics views or checkpoints to summarise."""
    settings: dict[str, str] = field(default_factory=dict)
    cpu: CpuSummary = field(default_factory=CpuSummary)
    devices: list[DeviceSummary] = field(default_factory=list)
    roles: list[RoleInfo] = field(default_factory=list)
    memory: MemorySummary = field(default_factory=MemorySummary)
    contamination: Contamination = field(default_factory=Contamination)
    """Other load on the host during the window: read ``contamination.contaminated``."""
    waits: WaitSummary = field(default_factory=WaitSummary)
    checkpoints: CheckpointSummary = field(default_factory=CheckpointSummary)
    wal: WalSummary = field(default_factory=WalSummary)
    database: DatabaseSummary = field(default_factory=DatabaseSummary)
    io: list[IoRow] = field(default_factory=list)
    hardware_limits: list[HardwareLimit] = field(default_factory=list)
    smart: list[SmartChange] = field(default_factory=list)
    series: Series = field(default_factory=Series)
    marks: list[Mark] = field(default_factory=list)
    gaps: list[TelemetryGap] = field(default_factory=list)
    client_cpu: CpuSummary | None = None
    """--ssh: the CPU of the machine that ran the load (``cpu`` is the database host's)."""
    archive: ArchiveSummary | None = None
    """--archive: the WAL archiver and the page cache (pgdyno.analysis.archive)."""
    errors: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Caveats found while analysing (statistics reset, missing files, sampler errors)."""

    def to_dict(self) -> dict:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TelemetrySummary:
        return serde.from_dict(cls, data)

    def role_device(self, role: str) -> DeviceSummary | None:
        for info in self.roles:
            if info.role == role and info.device:
                for dev in self.devices:
                    if dev.device == info.device:
                        return dev
        return None


# ===== entry point ========================================================================

def analyse_telemetry(raw_dir: Path, window: tuple[float, float] | None,
                      series_from: float | None = None) -> TelemetrySummary:
    """Summarise ``raw_dir/telemetry`` over ``window`` (epoch seconds; None = everything).

    The figures cover the window; the time series (``summary.series``) start at
    ``series_from`` when given (the iteration's start, warm-up included), so that plots put
    every series on the same time axis as the iteration's TPS."""
    tdir = Path(raw_dir) / "telemetry"
    summary = TelemetrySummary()
    meta = _load_json(tdir / "meta.json")
    if not meta:
        summary.notes.append(f"no telemetry in {tdir}")
        return summary
    marks = [Mark(float(r["t"]), r["label"]) for r in _csv_rows(tdir / "marks.csv", "t", "label")]
    start = window[0] if window else float(meta.get("started_at", 0.0))
    end = window[1] if window else float(meta.get("stopped_at") or math.inf)
    summary.window_start, summary.window_end = (start, end) if window else (None, None)
    summary.marks = marks
    _gaps_and_client(summary, tdir, meta, start, end)
    summary.errors = {k: int(v) for k, v in (meta.get("errors") or {}).items()}
    if summary.errors:
        summary.notes.append("sampler errors: " + ", ".join(
            f"{k} ×{v}" for k, v in sorted(summary.errors.items())) + " (errors.jsonl)")
    summary.server_sampled = meta.get("server") is not None
    server = meta.get("server") or {}
    summary.server_version_num = server.get("version_num")
    summary.settings = {k: _setting_text(v) for k, v in (server.get("settings") or {}).items()}
    summary.roles = _roles(meta)
    interval_s = float((meta.get("config") or {}).get("interval_s", 1.0))

    ticks = _host_ticks(tdir, start, end, interval_s)
    if len(ticks) >= 2:
        summary.duration_s = ticks[-1].t - ticks[0].t
        _host_summaries(summary, ticks, meta)
        series_start = min(series_from, start) if series_from is not None else start
        _host_series(summary, _host_ticks(tdir, series_start, end, interval_s))
    else:
        summary.notes.append("fewer than two host samples in the window")
    if summary.server_sampled:
        summary.waits, wait_t, wait_aas = _waits(tdir, start, end, meta)
        summary.series.wait_t, summary.series.wait_aas = wait_t, wait_aas
        if series_from is not None and series_from < start:
            _, wait_t, wait_aas = _waits(tdir, series_from, end, meta)
            summary.series.wait_t, summary.series.wait_aas = wait_t, wait_aas
        _pg_stats(summary, tdir, start, end, interval_s)
        _checkpoint_log(summary, tdir, start, end)
        summary.archive = analyse_archive(tdir, start, end, series_from)
    summary.smart = _smart(tdir)
    summary.hardware_limits = _hardware_limits(summary, frozen_capacity(tdir))
    if not summary.duration_s and window:
        summary.duration_s = max(0.0, end - start)
    return summary


def _gaps_and_client(summary: TelemetrySummary, tdir: Path, meta: dict, start: float,
                     end: float) -> None:
    """--ssh runs: the telemetry gaps (a lost connection, marked by the sampler) that touch
    the window, as notes too; and the client host's CPU from ``client/host_raw.jsonl``."""
    errors = list(read_jsonl(tdir / "errors.jsonl"))
    open_gaps: dict[str, float] = {}
    for mark in summary.marks:
        kind, _, sampler = mark.label.partition(" ")
        if kind == "telemetry_gap_start":
            open_gaps[sampler] = mark.t
        elif kind == "telemetry_gap_end" and sampler in open_gaps:
            summary.gaps.append(TelemetryGap(sampler, open_gaps.pop(sampler), mark.t))
    summary.gaps += [TelemetryGap(s, t, None) for s, t in open_gaps.items()]
    summary.gaps = [g for g in summary.gaps if g.start <= end and (g.end or end) >= start]
    for gap in summary.gaps:
        first = next((e for e in errors if e.get("sampler") == gap.sampler
                      and float(e.get("t", 0)) >= gap.start - 0.5), None)
        gap.reason = str(first.get("error", "")) if first else ""
        span = (f"{gap.seconds:.1f} s" if gap.seconds is not None
                else "until the end of the iteration")
        summary.notes.append(f"telemetry gap: {gap.sampler} samples missing for {span} from "
                             f"{time.strftime('%H:%M:%S', time.gmtime(gap.start))} UTC"
                             + (f" ({gap.reason})" if gap.reason else ""))
    client_dir = tdir / "client"
    if (client_dir / "host_raw.jsonl").exists():
        interval_s = float((meta.get("config") or {}).get("interval_s", 1.0))
        ticks = _host_ticks(client_dir, start, end, interval_s)
        if len(ticks) >= 2:
            stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
            summary.client_cpu = _cpu(stats, ticks, {"cpu": (meta.get("client") or {})
                                                     .get("cpu") or {}})


def _load_json(path: Path) -> dict:
    """A telemetry JSON file's object; {} when absent or damaged (binary, cut short, not an
    object): telemetry is context, and a report without it is still a report."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # ValueError: undecodable bytes, bad JSON
        return {}
    return data if isinstance(data, dict) else {}


def _csv_rows(path: Path, number: str, *columns: str) -> list[dict[str, str]]:
    """The rows of a telemetry CSV that hold every column named and a number in
    ``number``: a damaged row (or a file of garbage) is skipped, as ``read_jsonl`` skips
    a damaged line, and every whole sample stays usable."""
    rows = []
    for row in read_csv(path):
        if any(row.get(c) is None for c in (number, *columns)):
            continue
        try:
            float(row[number])
        except ValueError:
            continue
        rows.append(row)
    return rows


def _setting_text(value: dict | str) -> str:
    if isinstance(value, dict):
        unit = value.get("unit") or ""
        return f"{value.get('setting')}{(' ' + unit) if unit else ''}"
    return str(value)


def _roles(meta: dict) -> list[RoleInfo]:
    out = []
    for role, res in (meta.get("devices") or {}).items():
        out.append(RoleInfo(role=role, path=res.get("path", ""), device=res.get("top"),
                            chain=list(res.get("chain") or []),
                            physical=list(res.get("physical") or []),
                            mount_point=res.get("mount_point"), fstype=res.get("fstype"),
                            error=res.get("error")))
    return out


def _in_window(t: float, start: float, end: float, slack: float) -> bool:
    return start - slack <= t <= end + slack


# ===== statistics helpers ================================================================

def _stat(values: list[float], avg: float | None = None) -> Stat:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return Stat(avg=avg)
    ordered = sorted(vals)
    p95 = ordered[min(len(ordered) - 1, max(0, math.ceil(0.95 * len(ordered)) - 1))]
    return Stat(avg=avg if avg is not None else sum(vals) / len(vals), p95=p95,
                peak=ordered[-1], min=ordered[0])


def _std(values: list[float]) -> float | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


MIN_IOPS_FOR_CV = 10.0
"""Below this mean IOPS a coefficient of variation is noise (3 ± 9 IOPS gives "300%", which
reads like a checkpoint storm): the CV is left out and reports say the activity was too low."""


def coefficient_of_variation(values: list[float], floor: float = 0.0) -> float | None:
    """Population σ ÷ μ of the samples; None when the mean is zero or below ``floor``."""
    if not values:
        return None
    mean = sum(values) / len(values)
    if mean <= 0 or mean < floor:
        return None
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(var) / mean


# ===== host ==============================================================================

def _host_ticks(tdir: Path, start: float, end: float, interval_s: float) -> list[HostTick]:
    """The window's host samples, partial intervals dropped: a tick less than half an
    interval after the previous one (the final tick taken when the load stops) makes a
    rate over a few milliseconds, a cliff in every plot and noise in every CV."""
    # A tick at most half an interval outside the window still describes the window's edge.
    slack = interval_s / 2
    ticks = [HostTick.from_raw(r) for r in read_jsonl(tdir / "host_raw.jsonl")
             if _in_window(float(r["t"]), start, end, slack)]
    kept: list[HostTick] = []
    for tick in ticks:
        if not kept or tick.mono - kept[-1].mono >= interval_s / 2:
            kept.append(tick)
    return kept


def _host_summaries(summary: TelemetrySummary, ticks: list[HostTick], meta: dict) -> None:
    stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
    disks = [procfs.parse_diskstats(t.diskstats) for t in ticks]
    summary.cpu = _cpu(stats, ticks, meta)
    role_of: dict[str, list[str]] = defaultdict(list)
    for info in summary.roles:
        if info.device:
            role_of[info.device].append(info.role)
    summary.devices = _devices(disks, ticks, role_of)
    summary.memory = _memory(ticks)
    summary.contamination = contamination(summary, ticks)


def _host_series(summary: TelemetrySummary, ticks: list[HostTick]) -> None:
    """Per-interval CPU and disk rates over ``ticks`` (which may start before the window)."""
    stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
    disks = [procfs.parse_diskstats(t.diskstats) for t in ticks]
    s = summary.series
    s.host_t = [t.t for t in ticks[1:]]
    for prev, cur in zip(stats, stats[1:], strict=False):
        pct = procfs.cpu_percent(prev.cpu, cur.cpu)
        s.cpu_usr.append(pct.usr if pct else 0.0)
        s.cpu_sys.append(pct.sys if pct else 0.0)
        s.cpu_iowait.append(pct.iowait if pct else 0.0)
        s.cpu_soft.append(pct.soft if pct else 0.0)
        s.cpu_other.append(pct.nice + pct.irq + pct.steal if pct else 0.0)
    for dev in summary.devices:
        s.disk_w_s[dev.device], s.disk_r_s[dev.device] = _rate_series(disks, ticks, dev.device)


def _cpu(stats: list[procfs.StatSnapshot], ticks: list[HostTick], meta: dict) -> CpuSummary:
    cpu_meta = meta.get("cpu") or {}
    out = CpuSummary(samples=len(stats) - 1, online_cpus=int(cpu_meta.get("online") or 0),
                     limit_cores=cpu_meta.get("limit_cores"),
                     effective_cores=float(cpu_meta.get("effective_cores") or 0.0))
    intervals = [p for p in (procfs.cpu_percent(a.cpu, b.cpu)
                             for a, b in zip(stats, stats[1:], strict=False)) if p]
    whole = procfs.cpu_percent(stats[0].cpu, stats[-1].cpu)
    for name in ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle", "busy"):
        avg = getattr(whole, name) if whole else None
        setattr(out, name, _stat([getattr(p, name) for p in intervals], avg))
    if out.busy.avg is not None and out.effective_cores and out.online_cpus:
        busy_cores = out.busy.avg / 100.0 * out.online_cpus
        out.busy_of_limit_pct = 100.0 * busy_cores / out.effective_cores
    workload = [c for c in (workload_cores(a, b)
                            for a, b in zip(ticks, ticks[1:], strict=False))
                if c is not None]
    out.workload_cores = _stat(workload)
    if workload and out.busy.avg and out.online_cpus:
        busy_cores = out.busy.avg / 100.0 * out.online_cpus
        out.workload_share_of_busy_pct = min(100.0, 100.0 * (out.workload_cores.avg or 0.0)
                                             / busy_cores)
    out.run_queue = _stat([float(s.procs_running) for s in stats[1:]])
    out.procs_blocked = _stat([float(s.procs_blocked) for s in stats[1:]])
    return out


# ===== other load on the host ===========================================================

# Another job's load is material when it takes more than this share of what the host did
# and at least this much in absolute terms (a fifth of the busy CPU moved TPS by half in
# the runs of issue 11; a quarter core is well above the idle host's background).
OTHER_SHARE_PCT = 20.0
OTHER_MIN_CORES = 0.25
# Below this the devices' unexplained traffic is housekeeping (journal commits, writeback
# of older pages, the odd log line), not a job competing for the disk.
OTHER_MIN_IO_MB_S = 5.0
# The I/O comparison needs the benchmark's counters in nearly every interval.
IO_COMPLETE_SHARE = 0.8


def contamination(summary: TelemetrySummary, ticks: list[HostTick]) -> Contamination:
    """Other processes' CPU and disk traffic over the window (see ``Contamination``)."""
    out = Contamination()
    cpu = summary.cpu
    cores = cpu.online_cpus
    if cpu.busy.avg is None or not cores or len(ticks) < 2:
        return out
    wall = ticks[-1].mono - ticks[0].mono
    out.host_cores = cores
    out.busy_cores = cpu.busy.avg / 100.0 * cores
    out.steal_cores = (cpu.steal.avg or 0.0) / 100.0 * cores
    findings = []
    spans = [(b.mono - a.mono, workload_cores(a, b), sampler_cores(a, b))
             for a, b in zip(ticks, ticks[1:], strict=False)]
    if any(w is not None for _, w, _ in spans) and wall > 0:
        # Core-seconds over the window, so the figures are ratios of totals as the CPU
        # percentages are.
        used = sum(dt * w for dt, w, _ in spans if w is not None)
        mine = sum(dt * own for dt, _, own in spans if own is not None)
        out.cpu_attributed = True
        out.sampler_cores = mine / wall
        out.benchmark_cores = (used + mine) / wall
        # Interrupt work (irq, softirq) is not any process's and steal is the hypervisor's.
        process_pct = cpu.busy.avg - (cpu.irq.avg or 0) - (cpu.soft.avg or 0) - (
            cpu.steal.avg or 0)
        out.other_cores = max(0.0, process_pct / 100.0 * cores - out.benchmark_cores)
        if out.busy_cores > 0:
            out.other_share_of_busy_pct = min(100.0, 100.0 * out.other_cores / out.busy_cores)
        if (out.other_cores >= OTHER_MIN_CORES
                and out.other_share_of_busy_pct > OTHER_SHARE_PCT):
            findings.append(f"other processes used {out.other_cores:.1f} of {cores} cores "
                            f"({out.other_share_of_busy_pct:.0f}% of busy CPU)")
    if (out.busy_cores and out.steal_cores >= OTHER_MIN_CORES
            and 100.0 * out.steal_cores / out.busy_cores > OTHER_SHARE_PCT):
        findings.append(f"the hypervisor gave {out.steal_cores:.1f} of {cores} cores to other "
                        f"machines (steal, {100 * out.steal_cores / out.busy_cores:.0f}% of "
                        "busy CPU)")
    findings += _other_io(out, summary, ticks, wall)
    out.finding = "; ".join(findings)
    out.contaminated = bool(findings)
    return out


def _other_io(out: Contamination, summary: TelemetrySummary, ticks: list[HostTick],
              wall: float) -> list[str]:
    """Fills the I/O figures; the finding when another job's disk traffic is material."""
    devices = [d for d in summary.devices if d.roles]
    deltas = [workload_io(a, b) for a, b in zip(ticks, ticks[1:], strict=False)]
    known = [d for d in deltas if d is not None and d.complete]
    if not devices or wall <= 0 or not deltas or len(known) < IO_COMPLETE_SHARE * len(deltas):
        return []
    out.io_attributed = True
    ours_read = sum(d.read for d in deltas if d is not None) / MB
    ours_written = sum(d.written for d in deltas if d is not None) / MB
    dev_read = sum(d.read_mb for d in devices)
    dev_written = sum(d.written_mb for d in devices)
    # Pages dirtied before the window and written back during it are not ours to explain
    # (nor anyone's in it); pages we dirtied that are still in memory never reached a device.
    m0, m1 = procfs.parse_meminfo(ticks[0].meminfo), procfs.parse_meminfo(ticks[-1].meminfo)
    pending = ((m1.get("dirty_kb", 0) + m1.get("writeback_kb", 0))
               - (m0.get("dirty_kb", 0) + m0.get("writeback_kb", 0))) / 1024
    other = max(0.0, dev_read - ours_read) + max(0.0, dev_written + pending - ours_written)
    total = dev_read + dev_written
    out.device_mb_s = total / wall
    out.benchmark_io_mb_s = (ours_read + ours_written) / wall
    out.other_io_mb_s = min(other, total) / wall
    out.other_io_share_pct = 100.0 * min(other, total) / total if total > 0 else 0.0
    if out.other_io_mb_s < OTHER_MIN_IO_MB_S or out.other_io_share_pct <= OTHER_SHARE_PCT:
        return []
    names = "+".join(d.device for d in devices)
    return [f"other processes did {out.other_io_mb_s:.1f} MB/s of the {names} device's "
            f"{out.device_mb_s:.1f} MB/s ({out.other_io_share_pct:.0f}%)"]


def _devices(disks: list[dict[str, procfs.DiskCounters]], ticks: list[HostTick],
             role_of: dict[str, list[str]]) -> list[DeviceSummary]:
    first, last = disks[0], disks[-1]
    wall = ticks[-1].mono - ticks[0].mono
    out = []
    for name, end in last.items():
        begin = first.get(name)
        if begin is None:
            continue
        moved = end.reads != begin.reads or end.writes != begin.writes
        if not moved and name not in role_of and (name.startswith(IDLE_PREFIXES)
                                                   or end.reads + end.writes == 0):
            continue
        rates = [r for r in (procfs.disk_rates(d0[name], d1[name], t1.mono - t0.mono)
                             for d0, d1, t0, t1 in zip(disks, disks[1:], ticks, ticks[1:],
                                                       strict=False)
                             if name in d0 and name in d1) if r]
        whole = procfs.disk_rates(begin, end, wall)
        if whole is None:
            continue
        out.append(DeviceSummary(
            device=name, roles=role_of.get(name, []), samples=len(rates),
            r_s=_stat([r.r_s for r in rates], whole.r_s),
            w_s=_stat([r.w_s for r in rates], whole.w_s),
            rmb_s=_stat([r.rkb_s / 1024 for r in rates], whole.rkb_s / 1024),
            wmb_s=_stat([r.wkb_s / 1024 for r in rates], whole.wkb_s / 1024),
            r_await_ms=_stat([r.r_await_ms for r in rates if r.r_s > 0], whole.r_await_ms),
            w_await_ms=_stat([r.w_await_ms for r in rates if r.w_s > 0], whole.w_await_ms),
            aqu_sz=_stat([r.aqu_sz for r in rates], whole.aqu_sz),
            util_pct=_stat([r.util_pct for r in rates], whole.util_pct),
            read_iops_cv=coefficient_of_variation([r.r_s for r in rates], MIN_IOPS_FOR_CV),
            write_iops_cv=coefficient_of_variation([r.w_s for r in rates], MIN_IOPS_FOR_CV),
            read_iops_std=_std([r.r_s for r in rates]),
            write_iops_std=_std([r.w_s for r in rates]),
            read_mb=(end.sectors_read - begin.sectors_read) * procfs.SECTOR_BYTES / MB,
            written_mb=(end.sectors_written - begin.sectors_written) * procfs.SECTOR_BYTES / MB,
        ))
    # Role devices first, then the busiest.
    out.sort(key=lambda d: (not d.roles, -((d.r_s.avg or 0) + (d.w_s.avg or 0))))
    return out


def _rate_series(disks: list[dict[str, procfs.DiskCounters]], ticks: list[HostTick],
                 name: str) -> tuple[list[float], list[float]]:
    w, r = [], []
    for d0, d1, t0, t1 in zip(disks, disks[1:], ticks, ticks[1:], strict=False):
        rates = (procfs.disk_rates(d0[name], d1[name], t1.mono - t0.mono)
                 if name in d0 and name in d1 else None)
        w.append(rates.w_s if rates else 0.0)
        r.append(rates.r_s if rates else 0.0)
    return w, r


def _memory(ticks: list[HostTick]) -> MemorySummary:
    mems = [procfs.parse_meminfo(t.meminfo) for t in ticks]
    out = MemorySummary(samples=len(mems), mem_total_kb=mems[-1].get("mem_total_kb"))
    for name in ("cached_kb", "dirty_kb", "writeback_kb", "shmem_kb"):
        setattr(out, name, _stat([float(m.get(name, 0)) for m in mems]))
    out.hugepages_used = _stat([float(procfs.hugepages_used(m)) for m in mems])
    return out


# ===== wait events =======================================================================

def classify_wait(wait_type: str, wait_event: str) -> tuple[str, str]:
    """(class, event) of an active session; no wait event means running on CPU."""
    if not wait_type:
        return CPU_EVENT, CPU_EVENT
    return wait_type, wait_event


def _waits(tdir: Path, start: float, end: float,
           meta: dict) -> tuple[WaitSummary, list[float], dict[str, list[float]]]:
    hz = float((meta.get("config") or {}).get("wait_sample_hz") or 0.0)
    out = WaitSummary(sample_hz=hz)
    client: dict[tuple[str, str], int] = defaultdict(int)
    workers: dict[tuple[str, str], int] = defaultdict(int)
    buckets: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    bucket_ticks: dict[int, int] = defaultdict(int)
    connections = idle_in_xact = 0
    for tick in read_jsonl(tdir / "waits.jsonl"):
        t = float(tick["t"])
        if not start <= t <= end:
            continue
        out.ticks += 1
        bucket = int(t // WAIT_BUCKET_S)
        bucket_ticks[bucket] += 1
        for backend_type, state, wtype, wevent, count in tick.get("rows", []):
            count = int(count)
            if backend_type == "io worker":
                if wtype != "Activity":  # Activity:IoWorkerMain is an idle worker
                    workers[classify_wait(wtype, wevent)] += count
                continue
            if backend_type == "client backend":
                connections += count
                if state.startswith("idle in transaction"):
                    idle_in_xact += count
            if state == "active":
                key = classify_wait(wtype, wevent)
                client[key] += count
                buckets[bucket][key[0]] += count
    if out.ticks == 0:
        return out, [], {}
    out.aas = sum(client.values()) / out.ticks
    out.connections_avg = connections / out.ticks
    out.idle_in_transaction_avg = idle_in_xact / out.ticks
    out.io_workers_busy_avg = sum(workers.values()) / out.ticks
    out.by_event = _shares(client, out.ticks)
    out.by_class = _class_shares(client, out.ticks)
    out.io_workers = _shares(workers, out.ticks)
    classes = sorted({c for b in buckets.values() for c in b})
    times = sorted(bucket_ticks)
    series = {c: [buckets[b].get(c, 0) / bucket_ticks[b] for b in times] for c in classes}
    return out, [(b + 0.5) * WAIT_BUCKET_S for b in times], series


def _shares(counts: dict[tuple[str, str], int], ticks: int) -> list[WaitShare]:
    total = sum(counts.values()) or 1
    rows = [WaitShare(c, e, n / ticks, 100.0 * n / total) for (c, e), n in counts.items()]
    return sorted(rows, key=lambda r: -r.aas)


def _class_shares(counts: dict[tuple[str, str], int], ticks: int) -> list[WaitShare]:
    per_class: dict[tuple[str, str], int] = defaultdict(int)
    for (cls, _event), n in counts.items():
        per_class[(cls, "")] += n
    return _shares(per_class, ticks)


# ===== PostgreSQL statistics =============================================================

def _pg_stats(summary: TelemetrySummary, tdir: Path, start: float, end: float,
              interval_s: float) -> None:
    snaps = [s for s in read_jsonl(tdir / "pg_stats.jsonl")
             if _in_window(float(s["t"]), start, end, interval_s / 2)]
    if len(snaps) < 2:
        summary.notes.append("fewer than two statistics snapshots in the window")
        return
    first, last = snaps[0], snaps[-1]
    wall = float(last["mono"]) - float(first["mono"])
    for view in ("database", "checkpointer", "wal"):
        a, b = (first.get(view) or {}), (last.get(view) or {})
        if a.get("stats_reset") != b.get("stats_reset"):
            summary.notes.append(f"{view} statistics were reset during the window: "
                                 "its deltas are not meaningful")
    summary.database = _database(first.get("database") or {}, last.get("database") or {}, wall)
    summary.wal = _wal(first.get("wal") or {}, last.get("wal") or {}, wall)
    summary.io = _io_delta(first.get("io") or [], last.get("io") or [])
    _checkpoint_stats(summary.checkpoints, first.get("checkpointer") or {},
                      last.get("checkpointer") or {}, summary.io)


def _delta(before: dict, after: dict, key: str) -> float | None:
    """after[key] - before[key]: how much a counter moved, None when either side lacks it."""
    if before.get(key) is None or after.get(key) is None:
        return None
    return float(after[key]) - float(before[key])


def _per_s(value: float | None, wall: float) -> float | None:
    return value / wall if value is not None and wall > 0 else None


def _database(a: dict, b: dict, wall: float) -> DatabaseSummary:
    read, hit = _delta(a, b, "blks_read"), _delta(a, b, "blks_hit")
    active = _delta(a, b, "active_time")
    return DatabaseSummary(
        commits_per_s=_per_s(_delta(a, b, "xact_commit"), wall),
        rollbacks_per_s=_per_s(_delta(a, b, "xact_rollback"), wall),
        blks_read_per_s=_per_s(read, wall),
        cache_hit_pct=100.0 * hit / (hit + read) if read is not None and hit and hit + read
        else None,
        temp_bytes=_delta(a, b, "temp_bytes"),
        deadlocks=_delta(a, b, "deadlocks"),
        # active_time is in ms and is flushed by each backend when its transaction ends.
        active_time_aas=active / 1000.0 / wall if active is not None and wall > 0 else None,
        blk_read_time_ms=_delta(a, b, "blk_read_time"),
        blk_write_time_ms=_delta(a, b, "blk_write_time"),
    )


def _wal(a: dict, b: dict, wall: float) -> WalSummary:
    records, fpi = _delta(a, b, "wal_records"), _delta(a, b, "wal_fpi")
    nbytes, syncs = _delta(a, b, "wal_bytes"), _delta(a, b, "wal_sync")
    return WalSummary(
        bytes_per_s=_per_s(nbytes, wall), bytes_total=nbytes, records=records, fpi=fpi,
        fpi_ratio=fpi / records if fpi is not None and records else None,
        buffers_full=_delta(a, b, "wal_buffers_full"), writes=_delta(a, b, "wal_write"),
        syncs=syncs, syncs_per_s=_per_s(syncs, wall),
        write_time_ms=_delta(a, b, "wal_write_time_ms"),
        sync_time_ms=_delta(a, b, "wal_sync_time_ms"),
    )


IO_FIELDS = {"reads": "reads", "read_bytes": "read_bytes", "read_time": "read_time_ms",
             "writes": "writes", "write_bytes": "write_bytes", "write_time": "write_time_ms",
             "extends": "extends", "fsyncs": "fsyncs", "fsync_time": "fsync_time_ms",
             "hits": "hits", "evictions": "evictions"}


def _io_delta(a_rows: list[dict], b_rows: list[dict]) -> list[IoRow]:
    """pg_stat_io deltas summed over contexts, per backend type and object."""
    totals: dict[tuple[str, str], IoRow] = {}
    for sign, rows in ((-1.0, a_rows), (1.0, b_rows)):
        for row in rows:
            key = (row["backend_type"], row["object"])
            acc = totals.setdefault(key, IoRow(*key))
            for src, dst in IO_FIELDS.items():
                if row.get(src) is not None:
                    setattr(acc, dst, getattr(acc, dst) + sign * float(row[src]))
    moved = [r for r in totals.values()
             if any(getattr(r, f) for f in ("reads", "writes", "extends", "fsyncs", "hits"))]
    return sorted(moved, key=lambda r: (r.backend_type, r.object))


BACKEND_WRITERS = ("client backend", "autovacuum worker", "background worker", "parallel worker")


def _checkpoint_stats(out: CheckpointSummary, a: dict, b: dict, io: list[IoRow]) -> None:
    out.stats_timed = _delta(a, b, "num_timed")
    out.stats_requested = _delta(a, b, "num_requested")
    out.write_time_ms = _delta(a, b, "write_time_ms")
    out.sync_time_ms = _delta(a, b, "sync_time_ms")
    out.buffers_checkpoint = _delta(a, b, "buffers_checkpoint")
    out.buffers_bgwriter = _delta(a, b, "buffers_clean")
    out.maxwritten_clean = _delta(a, b, "maxwritten_clean")
    out.buffers_alloc = _delta(a, b, "buffers_alloc")
    out.buffers_backend = _delta(a, b, "buffers_backend")
    if out.buffers_backend is None and io:
        # PG17+ dropped buffers_backend; pg_stat_io counts the same writes.
        out.buffers_backend = sum(r.writes for r in io
                                  if r.backend_type in BACKEND_WRITERS and r.object == "relation")


# ===== checkpoints from the log ==========================================================

def _checkpoint_log(summary: TelemetrySummary, tdir: Path, start: float, end: float) -> None:
    out = summary.checkpoints
    rows = _csv_rows(tdir / "checkpoints.csv", "t", "event")
    pending: CheckpointEvent | None = None
    events: list[CheckpointEvent] = []
    for row in rows:
        t = float(row["t"])
        if row["event"] == "start":
            pending = CheckpointEvent(t_start=t, t_end=None, reason=row.get("reason") or "")
            events.append(pending)
        elif row["event"] == "complete":
            ev = pending or CheckpointEvent(t_start=None, t_end=None, reason="")
            if pending is None:
                events.append(ev)
            ev.t_end = t
            ev.buffers = _opt_int(row.get("buffers"))
            ev.write_s = _opt_float(row.get("write_s"))
            ev.sync_s = _opt_float(row.get("sync_s"))
            ev.total_s = _opt_float(row.get("total_s"))
            ev.distance_kb = _opt_int(row.get("distance_kb"))
            pending = None
        elif row["event"] == "too_frequent" and start <= t <= end:
            out.too_frequent_warnings += 1
    # A checkpoint belongs to the window when it overlaps it.
    inside = [e for e in events
              if (e.t_start or e.t_end or 0) <= end and (e.t_end or e.t_start or 0) >= start]
    out.events = inside
    started = [e for e in inside if e.t_start is not None and start <= e.t_start <= end]
    out.started = len(started)
    out.timed = sum(1 for e in started if "time" in e.reason.split())
    out.requested = out.started - out.timed
    out.wal_triggered = sum(1 for e in started if "wal" in e.reason.split())
    out.write_s = sum(e.write_s or 0.0 for e in inside)
    out.sync_s = sum(e.sync_s or 0.0 for e in inside)
    starts = sorted(e.t_start for e in started if e.t_start is not None)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    out.min_interval_s = min(gaps) if gaps else None


def _opt_float(text: str | None) -> float | None:
    """A number of a telemetry row; None when empty, absent or damaged."""
    try:
        return float(text) if text not in ("", None) else None
    except ValueError:
        return None


def _opt_int(text: str | None) -> int | None:
    value = _opt_float(text)
    return int(value) if value is not None and math.isfinite(value) else None


# ===== SMART and limits ==================================================================

def _smart(tdir: Path) -> list[SmartChange]:
    data = _load_json(tdir / "smart.json")
    before = {r["device"]: r for r in (data.get("before") or {}).get("readings", [])}
    after = {r["device"]: r for r in (data.get("after") or {}).get("readings", [])}
    out = []
    for device in sorted(set(before) | set(after)):
        b, a = before.get(device, {}), after.get(device, {})
        available = bool(b.get("available") and a.get("available"))
        reason = (a or b).get("reason", "")
        change = SmartChange(device=device, available=available, reason=reason)
        if available:
            change.temperature_before_c = b.get("temperature_c")
            change.temperature_after_c = a.get("temperature_c")
            change.written_bytes = _delta(b, a, "host_written_bytes")
            change.read_bytes = _delta(b, a, "host_read_bytes")
            change.percent_used_before = b.get("percent_used")
            change.percent_used_after = a.get("percent_used")
            change.media_errors_before = b.get("media_errors")
            change.media_errors_after = a.get("media_errors")
            throttles = _delta(b, a, "thermal_throttle_events")
            change.throttle_events = int(throttles) if throttles is not None else None
            hours = ((data.get("after") or {}).get("t", 0) - (data.get("before") or {}).get(
                "t", 0)) / 3600
            change.endurance = endurance_projection(b, a, hours).text
        out.append(change)
    return out


def _hardware_limits(s: TelemetrySummary,
                     capacity: HostCapacity | None = None) -> list[HardwareLimit]:
    """CPU, each role device, memory and connections against their limits. A device's
    IOPS and bandwidth are read against the host's measured capacity (``pgdyno bench fio``,
    the copy the run froze when it started) when there is one; %util is kept beside them,
    since it understates devices that serve requests in parallel (NVMe, cloud volumes)."""
    rows = []
    cpu = s.cpu
    if cpu.busy.avg is not None and cpu.online_cpus:
        cap = cpu.effective_cores or float(cpu.online_cpus)
        used = cpu.busy.avg / 100.0 * cpu.online_cpus
        peak = (cpu.busy.peak or 0.0) / 100.0 * cpu.online_cpus
        note = f"cgroup quota {cpu.limit_cores:g} cores" if cpu.limit_cores else "online CPUs"
        rows.append(HardwareLimit("CPU", cap, "cores", used, peak, 100.0 * used / cap, note,
                                  kind="cpu"))
    for role, dev in _role_devices(s):
        measured = capacity.device(dev.device) if capacity is not None else None
        iops = (dev.r_s.avg or 0) + (dev.w_s.avg or 0)
        mib_s = (dev.rmb_s.avg or 0) + (dev.wmb_s.avg or 0)
        note = (f"{iops:,.0f} IOPS, {mib_s:,.1f} MiB/s, aqu-sz {dev.aqu_sz.avg or 0:.2f}; "
                + ("%util understates devices that serve requests in parallel: see the "
                   "measured rows" if measured is not None else
                   f"IOPS limit unknown: no fio measurement of {dev.device} "
                   "(run `pgdyno bench fio`)"))
        rows.append(HardwareLimit(
            f"{role} device {dev.device} busy time", 100.0, "%util", dev.util_pct.avg,
            dev.util_pct.peak, dev.util_pct.avg, note, kind="util", device=dev.device,
            role=role))
        if measured is not None:
            rows += _measured_rows(role, dev, measured)
    mem = s.memory
    mem = s.memory
    if mem.mem_total_kb and mem.cached_kb.avg is not None:
        total_gb = mem.mem_total_kb / MB
        cached = (mem.cached_kb.avg or 0) / MB
        rows.append(HardwareLimit("Memory (page cache incl. shared memory)", total_gb, "GiB",
                                  cached, (mem.cached_kb.peak or 0) / MB,
                                  100.0 * cached / total_gb if total_gb else None,
                                  f"shared memory {(mem.shmem_kb.avg or 0) / MB:.2f} GiB",
                                  kind="memory"))
    max_conn = s.settings.get("max_connections")
    if max_conn and s.waits.ticks:
        cap_conn = float(max_conn.split()[0])
        rows.append(HardwareLimit("Connections", cap_conn, "backends", s.waits.connections_avg,
                                  None, 100.0 * s.waits.connections_avg / cap_conn,
                                  f"{s.waits.aas:.1f} active on average",
                                  kind="connections"))
    return rows


def _role_devices(s: TelemetrySummary) -> list[tuple[str, DeviceSummary]]:
    """(roles, device) once per device: data and WAL on one device are one row, "data+wal"."""
    out: dict[str, tuple[list[str], DeviceSummary]] = {}
    for info in s.roles:
        dev = s.role_device(info.role)
        if dev is not None:
            out.setdefault(dev.device, ([], dev))[0].append(info.role)
    return [("+".join(roles), dev) for roles, dev in out.values()]


def _measured_rows(role: str, dev: DeviceSummary,
                   cap: DeviceCapacity) -> list[HardwareLimit]:
    """Reads, writes, their mix and bandwidth against what fio measured on the device.

    The mix's ceiling weighs the measured peaks by this run's own shares of reads and
    writes (time per I/O adds up: 1 / (reads/R + writes/W)); the same for bandwidth."""
    when = f"measured {cap.measured_at[:10]} by fio"
    rows = []
    r_s, w_s = dev.r_s.avg or 0.0, dev.w_s.avg or 0.0
    peak_r, peak_w = dev.r_s.peak, dev.w_s.peak
    for kind, label, used, peak, limit in (
            ("read_iops", "random read IOPS", r_s, peak_r, cap.read_iops_peak),
            ("write_iops", "random write IOPS", w_s, peak_w, cap.write_iops_peak)):
        if limit:
            rows.append(HardwareLimit(
                f"{role} device {dev.device} {label}", limit, "IOPS", used, peak,
                100.0 * used / limit, f"{when} (4 KiB, peak of its queue-depth sweep)",
                basis="measured", kind=kind, device=dev.device, role=role))
    mix = _mixed_limit(r_s, w_s, cap.read_iops_peak, cap.write_iops_peak)
    if mix is not None and r_s and w_s:
        total = r_s + w_s
        rows.append(HardwareLimit(
            f"{role} device {dev.device} IOPS at this run's mix", mix, "IOPS", total,
            None, 100.0 * total / mix,
            f"{when}; {100 * r_s / total:.0f}% reads: 1 / (reads/R + writes/W)",
            basis="measured", kind="iops", device=dev.device, role=role))
    rmb, wmb = dev.rmb_s.avg or 0.0, dev.wmb_s.avg or 0.0
    bandwidth = _mixed_limit(rmb, wmb, cap.read_mib_s, cap.write_mib_s)
    if bandwidth is not None and rmb + wmb > 0:
        rows.append(HardwareLimit(
            f"{role} device {dev.device} bandwidth", bandwidth, "MiB/s", rmb + wmb, None,
            100.0 * (rmb + wmb) / bandwidth,
            f"{when} (1 MiB sequential, weighted by this run's read/write bytes)",
            basis="measured", kind="mib_s", device=dev.device, role=role))
    return rows


def _mixed_limit(reads: float, writes: float, read_cap: float | None,
                 write_cap: float | None) -> float | None:
    total = reads + writes
    if total <= 0:
        return read_cap if not writes else None
    time_per_unit = 0.0
    for share, cap in ((reads / total, read_cap), (writes / total, write_cap)):
        if share > 0:
            if not cap:
                return None
            time_per_unit += share / cap
    return 1.0 / time_per_unit if time_per_unit else None

