"""What limited the run: a ranked bottleneck verdict with the evidence that decided it.

Method: DB time first (ASH/AWR "top timed events"): the share of the client sessions'
active time spent in each group of wait events says where the time went. Each share is
then checked against the resource it points to (USE: utilisation and saturation), because
a wait can be a symptom of something else:

- time "on CPU" only means the CPU is the limit when the CPUs are saturated;
- sessions idle between statements only mean the client is the limit when the server
  has spare CPU (on a saturated host, pgbench itself is starved and the sessions wait);
- WAL waits during frequent WAL-forced checkpoints are largely full-page images, i.e. a
  consequence of the checkpoints: that part is credited to the checkpoint storm.

Each class's evidence names that class's own wait events (``CLASS_EVENTS``, the same
definition the scores use). Two findings qualify every class and lead the evidence: other
load on the host (``TelemetrySummary.contamination``), and, for a paced workload (TPROC-C
with keying and think times, ``Paced``), how far it reached its ideal rate: its terminals
are idle by design, so at or above the threshold it keeps up (``keeps_up``) and below it
the limiting resource is named, never the client.

Scores are in [0, 1] (roughly "fraction of DB time explained"); the thresholds below were
set from the verdict suite's runs on a 2-vCPU VM with a virtio disk (random 8 kB read
≈ 0.1 ms, write + fdatasync ≈ 0.19 ms), tests/test_verdict_bottlenecks.py, 10 s each:

=============  ======  ========  ===========================================  ==========
run            CPU     AAS/cl.   top wait events (share of active time)      top score
=============  ======  ========  ===========================================  ==========
cpu            100%    0.5/8     CPU 40%, Client:ClientRead 60%              cpu 0.40*
reads          94%     2.4/4     IO:DataFileRead 89%, CPU 10%                reads 0.89
wal            98%     13.7/16   LWLock:WALWrite 89%, IO:WalSync 7%          wal 0.96
lock           87%     15.5/16   Lock:transactionid 81%, LWLock:LockMgr 11%  lock 0.94
storm          81%     2.2/4     WALWrite 44%, WalSync 29% (FPI-driven),     storm 1.0
                                 checkpoints forced by WAL every ~0.5 s
client         38%     0.02/1    CPU 100% of a session active 2% of time     client 0.98
=============  ======  ========  ===========================================  ==========

(*) before ClientRead on a saturated host was credited to CPU; 1.0 after. Every run's
runner-up scored below 0.14, so the margins are wide. Re-run with neighbours saturating
the VM (host 99-100% busy, run queue 15-22): the same primaries, top scores 0.96-1.0,
runners-up at most 0.29 (client, in the reads and storm runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.analysis.telemetry import TelemetrySummary, WaitShare
from pgdyno.serde import Serialisable

CPU = "cpu"
DATA_READS = "data_reads"
WAL = "wal"
LOCK = "lock"
CLIENT = "client"
CHECKPOINT_STORM = "checkpoint_storm"
STORAGE = "storage"

DRIVER_BOUND = "driver_bound"
"""Primary of a --drivers run whose driver host saturated before the server did."""
KEEPS_UP = "keeps_up"
"""Primary of a paced run that reaches its ideal: the server is not the limit."""
UNDETERMINED = "undetermined"

LABELS = {
    KEEPS_UP: "keeps up with the paced load (not saturated)",
    CPU: "CPU-bound",
    DATA_READS: "data-file reads",
    WAL: "WAL write/sync",
    LOCK: "lock contention",
    CLIENT: "client/network-bound",
    CHECKPOINT_STORM: "checkpoint storm",
    STORAGE: "storage-bound (device at its measured capacity)",
    DRIVER_BOUND: "driver-bound",
}

NEXT_STEPS = {
    CPU: "Add or use faster cores, or cut CPU per transaction: prepared statements "
         "(pgbench -M prepared), a connection pooler, about 2-4 clients per core.",
    DATA_READS: "Make the working set fit in memory (shared_buffers, RAM) or give the data "
                "volume lower read latency / more IOPS; raise effective_io_concurrency "
                "(and io_workers on PG18).",
    WAL: "Put pg_wal on a device with faster fsync, let commits group (commit_delay with "
         "commit_siblings), raise wal_buffers; synchronous_commit = off only where losing "
         "the last commits on a crash is acceptable.",
    LOCK: "Contention on the same rows: spread the hot rows, shorten the transactions that "
          "hold them, take locks in one order; more clients will not help.",
    CLIENT: "The server waits for the client: add clients or pgbench threads (-j), check "
            "the client host's CPU and the network round trip (Unix socket vs TCP).",
    CHECKPOINT_STORM: "Raise max_wal_size so checkpoints are started by checkpoint_timeout, "
                      "keep checkpoint_completion_target at 0.9, turn on wal_compression to "
                      "shrink full-page images.",
    STORAGE: "The device is at the ceiling fio measured: spread data and WAL over more or "
             "faster devices, or cut the I/O (a working set that fits shared_buffers and the "
             "page cache, fewer checkpoints, wal_compression); tuning the server alone "
             "cannot raise the ceiling.",
    DRIVER_BOUND: "A driver host is at its limit while the server is not: add driver hosts "
                  "(--drivers), give the saturated one more cores or pgbench threads (-j), "
                  "or move it closer to the server.",
    KEEPS_UP: "The server is not the limit at this load: add warehouses (with their "
              "terminals) until real/ideal drops below the threshold to find its ceiling.",
}

# --- thresholds (see the module docstring for where the numbers come from) ---------------
# CPU saturation ramps from 50% to 90% busy (of the effective cores, cgroup aware): below
# 50% the CPUs have a free core's worth on a 2-core host; the CPU-bound runs showed 97-100%
# busy and the I/O- and lock-bound runs 25-75%, so anything above 90% counts as saturated.
CPU_SAT_LOW_PCT = 50.0
CPU_SAT_HIGH_PCT = 90.0
# PostgreSQL's own checkpoint_warning default: checkpoints forced by WAL closer than this
# are "too frequent". The storm runs (max_wal_size 32MB) had them 0-2 s apart.
STORM_INTERVAL_S = 30.0
# The benchmark's own share of the busy CPU, ramped from 5% to 20%: a saturated host is
# only "our" CPU limit when our processes use a real part of it. With neighbours loading
# the VM (load average 10-13, host 99-100% busy) the client-bound run used 1.5% of the busy
# CPU, the CPU-bound run 32% (its client-side share included), the lock/WAL/reads/storm
# runs 14-24%.
OWN_SHARE_LOW_PCT = 5.0
OWN_SHARE_HIGH_PCT = 20.0
# A device is storage-bound from 90% of the capacity fio measured on it (the rule:
# %util says little on devices that serve requests in parallel); the score ramps up from
# 60%. It is weighted by the DB time spent waiting on I/O (reads, WAL, checkpoint writes)
# plus a margin, so that a saturated device outranks the I/O wait class it explains, and a
# busy device behind CPU-bound sessions does not. Measured on a loop device throttled to
# 300 write IOPS with cgroup io.max (tests/test_fio_capacity.py).
STORAGE_USE_LOW = 0.6
STORAGE_USE_HIGH = 0.9
STORAGE_IO_MARGIN = 0.1
# Below this score nothing explains enough of the DB time to name a bottleneck.
MIN_PRIMARY_SCORE = 0.15

DATA_READ_EVENTS = {"datafileread", "datafileprefetch", "aioiocompletion", "datafilereadasync",
                    "aioioreadcompletion"}
WAL_EVENTS = {"walwrite", "walsync", "walinitsync", "walinitwrite", "walinsert",
              "walbufmapping", "walbuffermapping", "walsynclock"}
LOCK_LWLOCKS = {"lockmanager", "buffercontent", "multixactmember", "multixactoffset"}
CHECKPOINT_WRITE_EVENTS = {"datafilewrite", "datafileflush", "datafilesync", "checkpointstart",
                           "checkpointdone", "checkpointdelaystart", "checkpointdelaycomplete"}


@dataclass(frozen=True)
class Paced:
    """A paced workload: terminals sleep between transactions by design (TPROC-C's keying
    and think times), so its sessions are idle most of the time whatever the server does.
    Saturation is judged against the ideal rate, not by idle clients."""

    real_over_ideal: float
    """Achieved rate ÷ the rate the terminals offer with zero response time."""
    threshold: float = 0.9
    """At or above it the run keeps up with the offered load."""
    rate: str = ""
    """The figures in words for the evidence, e.g. "NOPM 1,164 of 1,286 ideal"."""

    @property
    def keeps_up(self) -> bool:
        return self.real_over_ideal >= self.threshold


# What a piece of evidence is about: each kind has its figures (``Evidence.figures``) and
# its names (``Evidence.names``); ``reports.evidence`` words each kind.
OTHER_LOAD = "other_load"
"""names ``finding``: other processes on the host (``Contamination.finding``)."""
ARCHIVER = "archiver"
"""names ``finding``: an archiver that failed or fell behind (``ArchiveSummary.evidence``)."""
PACING = "pacing"
"""figures ``real_over_ideal``, ``threshold``; names ``rate``: a paced run against its ideal."""
CLIENT_HOST = "client_host"
"""figures ``client_busy_pct``, ``server_busy_pct``: a saturated client host (--ssh)."""
DRIVER_HOST = "driver_host"
"""names ``driver``; figures ``pgbench_pct`` (pgbench's CPU of what it could use),
``pgbench_cores``, ``capacity_cores``, ``host_busy_pct``, ``run_queue``, ``server_busy_pct``
and ``throttled_pct`` (of the window, by its cgroup's cpu.max) when limited: a saturated
driver host (--drivers)."""
CPU_USE = "cpu_use"
"""figures ``busy_pct``, ``cores``, ``usr_pct``, ``sys_pct``, ``iowait_pct``, ``run_queue``,
and ``own_pct`` (the benchmark's share of the busy CPU) when known."""
SESSIONS = "sessions"
"""figures ``aas``, ``sessions``: average active sessions for the clients."""
SESSIONS_ACTIVE = "sessions_active"
"""figures ``aas``, ``sessions``, ``active_share``: how much of the time sessions worked."""
PACED_SESSIONS = "paced_sessions"
"""figures ``aas``, ``sessions``: paced terminals, idle by design."""
WAIT_SHARE = "wait_share"
"""names ``class`` (a class of this module); figures ``share`` (of the sessions' active
time), ``aas`` and ``sessions`` beside it for CPU and data reads, ``idle_in_transaction``
for the client; ``waits``: the class's own top wait events."""
DEVICE = "device"
"""names ``role`` and ``device`` (no device: unknown); figures ``util_pct``, ``r_s``,
``r_await_ms``, ``w_s``, ``w_await_ms``, ``aqu_sz``."""
CACHE = "cache"
"""figures ``cache_hit_pct``, ``blocks_read_per_s``."""
IO_WORKERS = "io_workers"
"""figures ``busy``: PG18 I/O workers busy on average."""
WAL_RATE = "wal_rate"
"""figures ``syncs_per_s``, ``bytes_per_s``."""
FPI_CREDITED = "fpi_credited"
"""figures ``fpi_bytes_share``: WAL bytes that are full-page images, credited to the storm."""
CHECKPOINTS = "checkpoints"
"""figures ``started``, ``timed``, ``requested``, ``wal_triggered``,
``too_frequent_warnings``, and ``mean_gap_s`` between WAL-forced ones when known."""
FULL_PAGE_IMAGES = "full_page_images"
"""figures ``fpi_ratio`` (of WAL records) and ``fpi_bytes_share``; none when unknown."""
WRITE_CV = "write_cv"
"""figures ``cv``: the data device's write IOPS coefficient of variation; none when n/a."""
CHECKPOINT_WRITES = "checkpoint_writes"
"""figures ``write_s``, ``sync_s``, ``buffers_checkpoint``, ``buffers_bgwriter``,
``buffers_backend``."""
CAPACITY = "capacity"
"""names ``resource``, ``unit``, ``note``; figures ``used``, ``capacity``, ``pct``: a device
against the capacity fio measured on it."""
UTIL = "util"
"""names ``device``; figures ``util_pct``: %util beside the measured capacity."""
IO_SHARE = "io_share"
"""figures ``reads``, ``wal``, ``checkpoint``: shares of active time waiting on I/O."""
NO_CAPACITY = "no_capacity"
"""No measured capacity for the run's devices."""
QUIET = "quiet"
"""No wait class stands out (a run that keeps up)."""
NOTHING_DOMINANT = "nothing_dominant"
"""figures ``min_score``: no class explains that share of the sessions' time."""


@dataclass
class Evidence:
    """One finding behind a verdict, held as its figures: the report words it
    (``reports.evidence``), and a test reads the figures, not the words."""

    kind: str
    """What it is about: one of the kinds above."""
    figures: dict[str, float] = field(default_factory=dict)
    """Its numbers, in the units their names say (``_pct`` percent, ``share`` a fraction)."""
    names: dict[str, str] = field(default_factory=dict)
    """Its words: a role, a device, a class, another analysis' finding; ``busiest``: the
    label of the class whose evidence this is, in a run that keeps up (``KEEPS_UP``)."""
    waits: list[WaitShare] = field(default_factory=list)
    """A class's own top wait events with their shares of active time."""


@dataclass
class Candidate:
    name: str
    label: str
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    next_step: str = ""


@dataclass
class Verdict(Serialisable):
    primary: str
    """Name of the top class (``cpu``, ``data_reads``, ``wal``, ``lock``, ``client``,
    ``checkpoint_storm``), or ``undetermined`` when no class explains enough DB time."""
    label: str
    ranked: list[Candidate] = field(default_factory=list)
    """Every class, best first."""
    evidence: list[Evidence] = field(default_factory=list)
    """The primary class's evidence, after what qualifies every class (other load on the
    host, the archiver, the pacing, a saturated client host)."""
    next_step: str = ""
    inputs: dict[str, float] = field(default_factory=dict)
    """The figures the scores were computed from, for the report and for audits."""
    contaminated: bool = False
    """Other load on the host during the window (its finding is the first evidence)."""

    def top(self, n: int) -> list[str]:
        return [c.name for c in self.ranked[:n]]


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace(" ", "")


def _share(events: list[WaitShare], match) -> float:  # noqa: ANN001 - a predicate
    return sum(e.pct for e in events if match(e)) / 100.0


# Which wait events belong to which class: one definition for the scores and the evidence.
CLASS_EVENTS = {
    CPU: lambda e: e.wait_class == "CPU",
    DATA_READS: lambda e: e.wait_class == "IO" and _norm(e.event) in DATA_READ_EVENTS,
    WAL: lambda e: e.wait_class in ("IO", "LWLock") and _norm(e.event) in WAL_EVENTS,
    LOCK: lambda e: e.wait_class == "Lock" or (
        e.wait_class == "LWLock" and _norm(e.event) in LOCK_LWLOCKS),
    CLIENT: lambda e: e.wait_class == "Client",
    CHECKPOINT_STORM: lambda e: e.wait_class in ("IO", "IPC")
    and _norm(e.event) in CHECKPOINT_WRITE_EVENTS,
}


def class_events(events: list[WaitShare], name: str, n: int = 3) -> list[WaitShare]:
    """The top ``n`` wait events of one class with their shares of active time."""
    return [e for e in events if CLASS_EVENTS[name](e)][:n]


def _ramp(value: float, low: float, high: float) -> float:
    return max(0.0, min(1.0, (value - low) / (high - low)))


@dataclass
class _Inputs:
    cpu_busy_pct: float
    cpu_sat: float
    """Saturation of the CPU by the benchmark itself (0..1)."""
    own_cpu_pct: float
    """The benchmark's share of the busy CPU (-1 when unknown)."""
    run_queue: float
    cores: float
    aas: float
    sessions: float
    cpu_share: float
    read_share: float
    wal_share: float
    lock_share: float
    client_share: float
    ckpt_write_share: float
    fpi_bytes_share: float
    storage_use: float = 0.0
    """The highest use of a role device against its measured capacity (0..1+; 0: none)."""


def _inputs(s: TelemetrySummary, clients: int, cpu_count: int) -> _Inputs:
    ev = s.waits.by_event
    cores = s.cpu.effective_cores or float(cpu_count or 1)
    busy = s.cpu.busy_of_limit_pct
    if busy is None:
        busy = s.cpu.busy.avg or 0.0
    block = float((s.settings.get("block_size") or "8192").split()[0])
    fpi_bytes = (s.wal.fpi or 0.0) * block
    wal_bytes = s.wal.bytes_total or 0.0
    own = s.cpu.workload_share_of_busy_pct
    # Without process accounting (no samples) the host's CPU is taken to be ours.
    own_factor = 1.0 if own is None else _ramp(own, OWN_SHARE_LOW_PCT, OWN_SHARE_HIGH_PCT)
    return _Inputs(
        cpu_busy_pct=busy,
        cpu_sat=_ramp(busy, CPU_SAT_LOW_PCT, CPU_SAT_HIGH_PCT) * own_factor,
        own_cpu_pct=own if own is not None else -1.0,
        run_queue=s.cpu.run_queue.avg or 0.0,
        cores=cores,
        aas=s.waits.aas,
        sessions=float(max(clients, 1)),
        cpu_share=_share(ev, CLASS_EVENTS[CPU]),
        read_share=_share(ev, CLASS_EVENTS[DATA_READS]),
        wal_share=_share(ev, CLASS_EVENTS[WAL]),
        lock_share=_share(ev, CLASS_EVENTS[LOCK]),
        client_share=_share(ev, CLASS_EVENTS[CLIENT]),
        ckpt_write_share=_share(ev, CLASS_EVENTS[CHECKPOINT_STORM]),
        # With full_page_writes each FPI carries up to one block; an estimate (holes and
        # wal_compression make it smaller) good enough to split WAL time by cause.
        fpi_bytes_share=min(1.0, fpi_bytes / wal_bytes) if wal_bytes > 0 else 0.0,
        storage_use=max((limit.pct_avg / 100.0 for limit in _measured_limits(s)),
                        default=0.0),
    )


def _measured_limits(s: TelemetrySummary) -> list:
    """Hardware-limit rows of role devices read against the host's measured capacity."""
    return [x for x in s.hardware_limits if x.basis == "measured" and x.pct_avg is not None
            and x.kind in ("read_iops", "write_iops", "iops", "mib_s")]


def _storm(s: TelemetrySummary) -> tuple[bool, float | None]:
    """(storm?, mean seconds between WAL-forced checkpoints)."""
    ck = s.checkpoints
    if ck.wal_triggered == 0:
        return False, None
    duration = s.duration_s or 0.0
    mean_gap = duration / ck.wal_triggered if duration else None
    frequent = ck.too_frequent_warnings > 0 or (mean_gap is not None
                                                and mean_gap < STORM_INTERVAL_S)
    return frequent and ck.wal_triggered >= 2, mean_gap


def decide_bottleneck(summary: TelemetrySummary, clients: int, cpu_count: int,
                      paced: Paced | None = None) -> Verdict:
    """The ranked classes and the primary one. ``paced``: the run's terminals sleep by
    design; it keeps up (primary ``keeps_up``) at or above its threshold of the ideal rate,
    and below it the limiting resource is named, never idle clients."""
    x = _inputs(summary, clients, cpu_count)
    storm, mean_gap = _storm(summary)
    # During a storm the FPI part of WAL time is the checkpoints' doing.
    wal_from_fpi = x.wal_share * x.fpi_bytes_share if storm else 0.0
    scores = {
        # First: on a tie (both at 1.0) the saturated device is the cause of the I/O waits
        # it ties with, and the stable sort below keeps it ahead.
        STORAGE: _ramp(x.storage_use, STORAGE_USE_LOW, STORAGE_USE_HIGH)
        * min(1.0, x.read_share + x.wal_share + x.ckpt_write_share + STORAGE_IO_MARGIN),
        # On a saturated host a session "reading from the client" waits for a client that
        # is itself short of CPU (pgbench shares the cores): that time is CPU time too.
        # The select-only run showed 40% CPU + 60% Client:ClientRead with 100% busy CPUs.
        CPU: (x.cpu_share + x.client_share * x.cpu_sat) * x.cpu_sat,
        DATA_READS: x.read_share,
        WAL: x.wal_share - wal_from_fpi,
        LOCK: x.lock_share,
        # Idle sessions (AAS well below the client count) plus active ones reading from the
        # client, discounted when the CPUs are saturated (then the client is starved too).
        # Paced terminals are idle by design: that says nothing about the client.
        CLIENT: 0.0 if paced is not None else
        max(0.0, 1.0 - x.aas / x.sessions + x.client_share * x.aas / x.sessions)
        * (1.0 - x.cpu_sat),
        CHECKPOINT_STORM: (wal_from_fpi + x.ckpt_write_share
                           + (0.25 if storm else 0.1 if summary.checkpoints.wal_triggered else 0)
                           ) if summary.checkpoints.wal_triggered else 0.0,
    }
    scores = {k: round(max(0.0, min(1.0, v)), 4) for k, v in scores.items()}
    evidence = _evidence(summary, x, storm, mean_gap)
    if paced is not None:
        evidence[CLIENT] = [Evidence(PACED_SESSIONS, {"aas": x.aas, "sessions": x.sessions})]
    ranked = sorted((Candidate(name, LABELS[name], score, evidence[name], NEXT_STEPS[name])
                     for name, score in scores.items()), key=lambda c: -c.score)
    top = ranked[0]
    inputs = {k: round(v, 4) for k, v in vars(x).items()} | {"storm": float(storm)}
    first = _first_evidence(summary, paced)
    if paced is not None:
        inputs["real_over_ideal"] = round(paced.real_over_ideal, 4)
    if paced is not None and paced.keeps_up:
        primary, lines, step = KEEPS_UP, [
            _busiest(top) if top.score > 0 else Evidence(QUIET)], NEXT_STEPS[KEEPS_UP]
    elif top.score >= MIN_PRIMARY_SCORE:
        primary, lines, step = top.name, top.evidence, top.next_step
    else:
        primary, lines, step = UNDETERMINED, [
            Evidence(NOTHING_DOMINANT, {"min_score": MIN_PRIMARY_SCORE})], (
            "Run longer or with more load: the telemetry shows no dominant limit.")
    label = LABELS.get(primary, "no dominant bottleneck")
    bound = client_bound(summary)
    if bound is not None:
        # --ssh: the client host's CPU is measured apart; saturated while the server's is
        # not, it is the limit whatever the sessions wait for.
        inputs["client_host_busy_pct"] = round(bound[0], 2)
        first.append(bound[1])
        if primary in (CLIENT, UNDETERMINED):
            primary, label, step = CLIENT, "client-bound", NEXT_STEPS[CLIENT]
    saturated = driver_bound(summary)
    if saturated:
        # --drivers: a driver at its limit while the server is not offers all the load it
        # can; the sessions' idle time is its doing, whatever class scored it.
        inputs["driver_pgbench_pct"] = max(e.figures["pgbench_pct"] for e in saturated)
        first.extend(saturated)
        if primary in (CLIENT, UNDETERMINED, KEEPS_UP):
            primary, label, step = DRIVER_BOUND, LABELS[DRIVER_BOUND], NEXT_STEPS[DRIVER_BOUND]
    return Verdict(
        primary=primary, label=label, ranked=ranked,
        evidence=first + lines, next_step=step, inputs=inputs,
        contaminated=summary.contamination.contaminated)


def _busiest(top: Candidate) -> Evidence:
    """The busiest class's first evidence, named as the busiest class's (a run that keeps
    up has no bottleneck, only a class that is busier than the others)."""
    first = top.evidence[0]
    return Evidence(first.kind, dict(first.figures), {**first.names, "busiest": top.label},
                    list(first.waits))


CLIENT_BOUND_CLIENT_PCT = 90.0
CLIENT_BOUND_SERVER_PCT = 70.0
"""--ssh: a client host busier than the first while the database host stays below the second
is "client-bound" (pgbench cannot offer more load; the server could take it)."""


def client_bound(summary: TelemetrySummary) -> tuple[float, Evidence] | None:
    """(client busy %, the evidence) when the client's CPU is saturated and the server's is
    not; None otherwise, or without a client series (local runs)."""
    client = summary.client_cpu
    if client is None or client.samples < 1:
        return None
    client_busy = client.busy_of_limit_pct if client.busy_of_limit_pct is not None \
        else (client.busy.avg or 0.0)
    server_busy = summary.cpu.busy_of_limit_pct if summary.cpu.busy_of_limit_pct is not None \
        else (summary.cpu.busy.avg or 0.0)
    if client_busy < CLIENT_BOUND_CLIENT_PCT or server_busy >= CLIENT_BOUND_SERVER_PCT:
        return None
    return client_busy, Evidence(CLIENT_HOST, {"client_busy_pct": client_busy,
                                               "server_busy_pct": server_busy})


DRIVER_BOUND_PCT = 90.0
"""--drivers: pgbench using this share of the CPU it could use (its threads, its host's cores,
its cgroup's cpu.max) is a saturated driver; the server is not saturated below
CLIENT_BOUND_SERVER_PCT."""


def driver_bound(summary: TelemetrySummary) -> list[Evidence]:
    """The evidence of each saturated driver while the server's CPU is not; [] otherwise.
    The server's CPU is its own processes' share of the database host's cores when they were
    told apart (a driver or another job on the database host is not the server's load),
    else the host's busy CPU."""
    x = summary.contamination
    cores = summary.cpu.effective_cores or float(x.host_cores or 0)
    if x.cpu_attributed and x.server_cores is not None and cores:
        server_busy = 100.0 * x.server_cores / cores
    else:
        server_busy = summary.cpu.busy_of_limit_pct if summary.cpu.busy_of_limit_pct \
            is not None else (summary.cpu.busy.avg or 0.0)
    if server_busy >= CLIENT_BOUND_SERVER_PCT:
        return []
    out = []
    for d in summary.drivers:
        load = d.load
        if load is None or load.pgbench_pct < DRIVER_BOUND_PCT:
            continue
        figures = {"pgbench_pct": load.pgbench_pct, "pgbench_cores": load.pgbench_cores,
                   "capacity_cores": load.capacity_cores, "host_busy_pct": load.host_busy_pct,
                   "run_queue": load.run_queue, "server_busy_pct": server_busy}
        if load.seconds:  # from its series: how much of the window it spent at the limit
            figures |= {"seconds_at_limit": load.seconds_at_limit, "seconds": load.seconds}
        if load.throttled_pct is not None:
            figures["throttled_pct"] = load.throttled_pct
        out.append(Evidence(DRIVER_HOST, figures, {"driver": d.name}))
    return out


def _first_evidence(summary: TelemetrySummary, paced: Paced | None) -> list[Evidence]:
    """What qualifies every other line: other load on the host, then the pacing."""
    lines = []
    c = summary.contamination
    if c.contaminated:
        lines.append(Evidence(OTHER_LOAD, names={"finding": c.finding}))
    if summary.archive is not None:  # --archive: an archiver that failed or fell behind
        lines += [Evidence(ARCHIVER, names={"finding": e}) for e in summary.archive.evidence]
    if paced is not None:
        lines.append(Evidence(PACING, {"real_over_ideal": paced.real_over_ideal,
                                       "threshold": paced.threshold},
                              names={"rate": paced.rate} if paced.rate else {}))
    return lines


def _evidence(s: TelemetrySummary, x: _Inputs, storm: bool,
              mean_gap: float | None) -> dict[str, list[Evidence]]:
    data, wal = s.role_device("data"), s.role_device("wal")
    cpu = _cpu_use(s, x)
    sessions = {"aas": x.aas, "sessions": x.sessions}
    ev = s.waits.by_event

    def share(name: str, value: float, **figures: float) -> Evidence:
        return Evidence(WAIT_SHARE, {"share": value, **figures}, names={"class": name},
                        waits=class_events(ev, name))

    ck = s.checkpoints
    data_reads = [share(DATA_READS, x.read_share, **sessions), _device("data", data),
                  Evidence(CACHE, {"cache_hit_pct": s.database.cache_hit_pct or 0,
                                   "blocks_read_per_s": s.database.blks_read_per_s or 0})]
    if s.waits.io_workers:
        data_reads.append(Evidence(IO_WORKERS, {"busy": s.waits.io_workers_busy_avg}))
    return {
        STORAGE: _storage_evidence(s, x),
        CPU: [cpu, share(CPU, x.cpu_share, **sessions), _device("data", data)],
        DATA_READS: data_reads,
        WAL: [share(WAL, x.wal_share), _device("wal", wal),
              Evidence(WAL_RATE, {"syncs_per_s": s.wal.syncs_per_s or 0,
                                  "bytes_per_s": s.wal.bytes_per_s or 0})]
             + ([Evidence(FPI_CREDITED, {"fpi_bytes_share": x.fpi_bytes_share})]
                if storm else []),
        LOCK: [share(LOCK, x.lock_share), Evidence(SESSIONS, sessions), cpu],
        CLIENT: [Evidence(SESSIONS_ACTIVE, {**sessions,
                                            "active_share": min(1.0, x.aas / x.sessions)}),
                 cpu, share(CLIENT, x.client_share,
                            idle_in_transaction=s.waits.idle_in_transaction_avg)],
        CHECKPOINT_STORM: [
            Evidence(CHECKPOINTS, {"started": ck.started, "timed": ck.timed,
                                   "requested": ck.requested, "wal_triggered": ck.wal_triggered,
                                   "too_frequent_warnings": ck.too_frequent_warnings}
                     | ({"mean_gap_s": mean_gap} if mean_gap is not None else {})),
            Evidence(FULL_PAGE_IMAGES, {"fpi_ratio": s.wal.fpi_ratio,
                                        "fpi_bytes_share": x.fpi_bytes_share}
                     if s.wal.fpi_ratio is not None else {}),
            Evidence(WRITE_CV, {"cv": data.write_iops_cv}
                     if data is not None and data.write_iops_cv is not None else {}),
            share(CHECKPOINT_STORM, x.ckpt_write_share),
            Evidence(CHECKPOINT_WRITES, {
                "write_s": ck.write_s, "sync_s": ck.sync_s,
                "buffers_checkpoint": ck.buffers_checkpoint or 0,
                "buffers_bgwriter": ck.buffers_bgwriter or 0,
                "buffers_backend": ck.buffers_backend or 0})],
    }


def _cpu_use(s: TelemetrySummary, x: _Inputs) -> Evidence:
    figures = {"busy_pct": x.cpu_busy_pct, "cores": x.cores, "usr_pct": s.cpu.usr.avg or 0,
               "sys_pct": s.cpu.sys.avg or 0, "iowait_pct": s.cpu.iowait.avg or 0,
               "run_queue": x.run_queue}
    if x.own_cpu_pct >= 0:
        figures["own_pct"] = x.own_cpu_pct
    return Evidence(CPU_USE, figures)


def _device(role: str, dev) -> Evidence:  # noqa: ANN001 - a DeviceSummary or None
    if dev is None:
        return Evidence(DEVICE, names={"role": role})
    return Evidence(DEVICE, {"util_pct": dev.util_pct.avg or 0, "r_s": dev.r_s.avg or 0,
                             "r_await_ms": dev.r_await_ms.avg or 0, "w_s": dev.w_s.avg or 0,
                             "w_await_ms": dev.w_await_ms.avg or 0,
                             "aqu_sz": dev.aqu_sz.avg or 0},
                    names={"role": role, "device": dev.device})


def _storage_evidence(s: TelemetrySummary, x: _Inputs) -> list[Evidence]:
    limits = sorted(_measured_limits(s), key=lambda limit: -(limit.pct_avg or 0))
    if not limits:
        return [Evidence(NO_CAPACITY)]
    top = limits[0]
    lines = [Evidence(CAPACITY, {"used": top.used_avg, "capacity": top.capacity,
                                 "pct": top.pct_avg},
                      names={"resource": top.resource, "unit": top.unit, "note": top.note})]
    util = next((u for u in s.hardware_limits if u.kind == "util" and u.device == top.device),
                None)
    if util is not None and util.used_avg is not None:
        lines.append(Evidence(UTIL, {"util_pct": util.used_avg}, names={"device": top.device}))
    lines.append(Evidence(IO_SHARE, {"reads": x.read_share, "wal": x.wal_share,
                                     "checkpoint": x.ckpt_write_share}))
    return lines
