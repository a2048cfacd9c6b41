"""The telemetry summary of one run's window: the figures, with their units in their names.

Built by :func:`pgdyno.analysis.telemetry.analyse_telemetry` from the raw files; saved in
``summary.json`` and read back (``TelemetrySummary.from_dict``) by reports and comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.analysis.archive import ArchiveSummary
from pgdyno.analysis.merge import DriverFigures
from pgdyno.serde import Serialisable

SCHEMA_VERSION = 1
CPU_EVENT = "CPU"
"""Class and event name given to an active session with no wait event."""
MB = 1024 * 1024
"""One MiB (2**20 bytes): the unit of every ``*_mb`` and ``*_mb_s`` field below. The names
are kept as saved runs carry them; reports show these figures in binary units (MiB/s)."""


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
class CpuPerUnit:
    """CPU-seconds the server and the load driver spent per unit of work: their cores over
    the measured window divided by the units done per second (TPROC-C: new orders from
    the database's snapshots)."""

    unit: str
    """What one unit is, e.g. "New-Order"."""
    units_per_s: float
    server_cpu_s: float | None
    """Server CPU-seconds per unit; None when the server is not on this host."""
    driver_cpu_s: float
    driver_share_pct: float | None
    """The driver's CPU per unit as a percentage of the server's (the driver's cost)."""


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
    server_cores: float | None = None
    """The server's processes (the postmaster's tree) alone, less the backends of pgdyno's
    own sessions; None: no server on this host, or a run recorded before the split. With
    ``driver_cores`` and ``sampler_server_cores`` it makes
    ``benchmark_cores - sampler_cores``."""
    sampler_server_cores: float | None = None
    """The server backends of pgdyno's own sampling sessions: what its queries cost the
    server. None: not told apart (no server on this host, or an older run)."""
    harness_share_of_busy_pct: float | None = None
    """What measuring cost, as a share of the busy CPU: pgdyno's process and its sessions'
    backends (pgbench's own logging is inside the driver's figure and is measured apart,
    by bench/overhead.py)."""
    driver_cores: float | None = None
    """The load driver alone: the processes pgdyno started outside the server (pgbench)."""
    driver_programs: list[str] = field(default_factory=list)
    """Command names of the driver's processes that used CPU in the window ("pgbench")."""
    per_unit: CpuPerUnit | None = None
    """The server's and the driver's CPU per unit of the workload's work (TPROC-C: per
    New-Order), when the workload names one."""
    other_cores: float = 0.0
    """CPU cores used by every other process on the host."""
    other_share_of_busy_pct: float = 0.0
    steal_cores: float = 0.0
    io_attributed: bool = False
    """The benchmark's processes' I/O counters were readable (root, or the same user)."""
    device_mb_s: float = 0.0
    """Read + written MiB/s (2**20 bytes) of the data and WAL devices."""
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
    """Read MiB/s (2**20 bytes a second, despite the saved name)."""
    wmb_s: Stat = field(default_factory=Stat)
    """Written MiB/s (2**20 bytes a second)."""
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
    """MiB (2**20 bytes) read over the window."""
    written_mb: float = 0.0
    """MiB (2**20 bytes) written over the window."""


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
class TelemetrySummary(Serialisable):
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
    drivers: list[DriverFigures] = field(default_factory=list)
    """--drivers: each driver host's figures and load over the window (``analysis.merge``),
    for the verdict's "driver-bound" and the report's per-driver table."""
    archive: ArchiveSummary | None = None
    """--archive: the WAL archiver and the page cache (pgdyno.analysis.archive)."""
    errors: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Caveats found while analysing (statistics reset, missing files, sampler errors)."""

    def role_device(self, role: str) -> DeviceSummary | None:
        for info in self.roles:
            if info.role == role and info.device:
                for dev in self.devices:
                    if dev.device == info.device:
                        return dev
        return None
