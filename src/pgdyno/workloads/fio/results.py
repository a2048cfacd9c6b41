"""Every figure of ``pgdyno bench fio``, recomputed from fio's raw ``json+`` files.

Per job (``--group_reporting``: one entry): IOPS = ``total_ios`` ÷ ``runtime``,
bandwidth = ``io_bytes`` ÷ ``runtime``, completion latency average = ``clat_ns.mean``, and
the percentiles from ``clat_ns.bins`` (the json+ histogram) by fio's own rule: the first
bin whose cumulative count reaches p% of all completions. For the WAL-shaped jobs the
fdatasync latency comes the same way from ``sync.lat_ns``.

Beside fio's figures, the kernel's: /proc/diskstats of the device under the test file,
sampled every ``KERNEL_SAMPLE_S`` while each job ran, read over the whole intervals of
the job's active span (fio's own end stamp comes after its teardown, too late to align
with). Where the two disagree by more than ``AGREEMENT_PCT`` the report says so: a
cache in between, a filesystem's journal writes, or requests merged
or split on their way to the device.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.analysis import procfs
from pgdyno.results.manifest import read_versioned
from pgdyno.workloads.fio.jobs import QD32, SWEEP_KINDS

JOBS_FILE = "jobs.json"
JOBS_SCHEMA_VERSION = 1
KERNEL_SAMPLE_S = 0.1
AGREEMENT_PCT = 10.0
MIB = 2**20
NS_PER_US = 1000.0
PERCENTILES = (50.0, 99.0, 99.9)


# ----- the run's record of its jobs (written while it runs) -------------------------------

@dataclass
class KernelSample:
    t: float
    """Epoch seconds when /proc/diskstats was read."""
    line: str
    """The device's /proc/diskstats line."""


@dataclass
class JobRecord:
    place: str
    name: str
    kind: str
    block: str
    iodepth: int
    numjobs: int
    output: str
    """fio's json+ file, relative to the iteration's directory."""
    command: list[str]
    started: float
    ended: float | None = None
    returncode: int | None = None
    error: str = ""
    device: str | None = None
    kernel: list[KernelSample] = field(default_factory=list)


@dataclass
class PlaceRecord:
    label: str
    path: str
    size_bytes: int
    device: str | None
    raw_device: bool = False
    physical: list[str] = field(default_factory=list)
    fsync_output: str = ""
    """pg_test_fsync's output file, relative to the iteration's directory ('' = not run)."""
    fsync_note: str = ""


@dataclass
class JobsFile:
    """``raw/fio/<iteration>/jobs.json``: what ran where, and the kernel's samples."""

    schema_version: int
    fio_version: str
    engine: str
    runtime_s: int
    ramp_s: int
    places: list[PlaceRecord] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)


def load_jobs(it_dir: Path) -> JobsFile:
    return read_versioned(JobsFile, it_dir / JOBS_FILE, JOBS_SCHEMA_VERSION, "fio job record")


# ----- figures ----------------------------------------------------------------------------

@dataclass
class Latency:
    """One latency distribution from fio's json+, in microseconds."""

    avg_us: float
    p50_us: float
    p99_us: float
    p99_9_us: float
    max_us: float


@dataclass
class Side:
    """One direction (read or write) of a job."""

    ios: int
    bytes: int
    runtime_ms: int
    iops: float
    mib_s: float
    latency: Latency | None


@dataclass
class KernelCheck:
    """The kernel's counters of the device over fio's measured window."""

    device: str
    seconds: float
    r_s: float
    w_s: float
    rmib_s: float
    wmib_s: float
    basis: str
    """``IOPS`` (4 KiB random jobs: one request per I/O) or ``MiB/s`` (large blocks are
    split and merged on the way; WAL writes add the filesystem's journal)."""
    fio_value: float
    kernel_value: float

    @property
    def diff_pct(self) -> float | None:
        if not self.fio_value:
            return None
        return 100.0 * (self.kernel_value - self.fio_value) / self.fio_value

    @property
    def agrees(self) -> bool:
        diff = self.diff_pct
        return diff is not None and abs(diff) <= AGREEMENT_PCT


@dataclass
class JobResult:
    place: str
    name: str
    kind: str
    block: str
    iodepth: int
    numjobs: int
    read: Side | None = None
    write: Side | None = None
    sync: Latency | None = None
    """fdatasync latency (WAL-shaped jobs)."""
    kernel: KernelCheck | None = None
    error: str = ""

    @property
    def depth(self) -> int:
        return self.iodepth * self.numjobs

    @property
    def iops(self) -> float:
        return sum(s.iops for s in (self.read, self.write) if s is not None)

    @property
    def mib_s(self) -> float:
        return sum(s.mib_s for s in (self.read, self.write) if s is not None)

    @property
    def main(self) -> Side | None:
        """The direction the job is about (the read side of a 70/30 mix)."""
        return self.write if self.kind in ("seqwrite", "randwrite", "wal") else self.read


@dataclass
class PlaceResult:
    label: str
    path: str
    device: str | None
    raw_device: bool
    size_bytes: int
    jobs: list[JobResult] = field(default_factory=list)
    fsync: object | None = None
    """A ``fsync.FsyncResult`` when pg_test_fsync ran here."""
    fsync_note: str = ""
    physical: list[str] = field(default_factory=list)

    def job(self, name: str) -> JobResult | None:
        return next((j for j in self.jobs if j.name == name and not j.error), None)

    def sweep(self, kind: str) -> list[JobResult]:
        return sorted((j for j in self.jobs if j.kind == kind and not j.error),
                      key=lambda j: j.depth)

    def at_depth(self, kind: str, depth: int) -> JobResult | None:
        return next((j for j in self.sweep(kind) if j.depth == depth), None)

    def peak(self, kind: str) -> JobResult | None:
        points = self.sweep(kind)
        return max(points, key=lambda j: j.iops) if points else None

    def qd32(self, kind: str) -> JobResult | None:
        return self.at_depth(kind, QD32)


@dataclass
class FioIteration:
    fio_version: str
    engine: str
    runtime_s: int
    ramp_s: int
    places: list[PlaceResult]


def read_iteration(it_dir: Path) -> FioIteration:
    """The iteration's figures from its raw files (jobs.json and each job's json+)."""
    from pgdyno.workloads.fio.fsync import parse_fsync_output

    record = load_jobs(it_dir)
    places = []
    for p in record.places:
        place = PlaceResult(label=p.label, path=p.path, device=p.device,
                            raw_device=p.raw_device, size_bytes=p.size_bytes,
                            fsync_note=p.fsync_note, physical=list(p.physical))
        if p.fsync_output and (it_dir / p.fsync_output).is_file():
            try:
                place.fsync = parse_fsync_output((it_dir / p.fsync_output).read_text())
            except ValueError as exc:
                place.fsync_note = f"pg_test_fsync output not understood: {exc}"
        place.jobs = [job_result(it_dir, j) for j in record.jobs if j.place == p.label]
        places.append(place)
    return FioIteration(fio_version=record.fio_version, engine=record.engine,
                        runtime_s=record.runtime_s, ramp_s=record.ramp_s, places=places)


def job_result(it_dir: Path, record: JobRecord) -> JobResult:
    out = JobResult(place=record.place, name=record.name, kind=record.kind,
                    block=record.block, iodepth=record.iodepth, numjobs=record.numjobs,
                    error=record.error)
    path = it_dir / record.output
    if out.error or not path.is_file():
        out.error = out.error or f"no fio output ({record.output})"
        return out
    try:
        data = read_fio_json(path)
        job = data["jobs"][0]
        out.read, out.write = side(job["read"]), side(job["write"])
        sync = job.get("sync", {}).get("lat_ns", {})
        out.sync = latency(sync) if sync.get("N") else None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        out.error = f"{record.output}: not fio json+ output ({type(exc).__name__}: {exc})"
        return out
    out.kernel = kernel_check(out, record)
    return out


def read_fio_json(path: Path) -> dict:
    """fio's JSON; fio may print notes ("fio: file hash not empty...") before it."""
    text = path.read_text(errors="replace")
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object")
    return json.loads(text[start:])


def side(data: dict) -> Side | None:
    """One direction of a job; None when the job did none of it."""
    ios, runtime = int(data.get("total_ios", 0)), int(data.get("runtime", 0))
    if ios == 0 or runtime == 0:
        return None
    seconds = runtime / 1000.0
    nbytes = int(data["io_bytes"])
    clat = data.get("clat_ns", {})
    return Side(ios=ios, bytes=nbytes, runtime_ms=runtime, iops=ios / seconds,
                mib_s=nbytes / MIB / seconds, latency=latency(clat) if clat.get("N") else None)


def latency(dist: dict) -> Latency:
    """Average and maximum as fio states them; percentiles from the json+ bins."""
    bins = sorted((int(k), int(v)) for k, v in (dist.get("bins") or {}).items())
    pct = [percentile_from_bins(bins, p) / NS_PER_US for p in PERCENTILES]
    return Latency(avg_us=float(dist["mean"]) / NS_PER_US, p50_us=pct[0], p99_us=pct[1],
                   p99_9_us=pct[2], max_us=float(dist["max"]) / NS_PER_US)


def percentile_from_bins(bins: list[tuple[int, int]], p: float) -> float:
    """fio's rule (stat.c, calc_clat_percentiles): the value of the first bin at which
    the cumulative count reaches p% of the total. NaN without bins (json, not json+)."""
    total = sum(n for _, n in bins)
    if total == 0:
        return math.nan
    running = 0
    for value, n in bins:
        running += n
        if running >= p / 100.0 * total:
            return float(value)
    return float(bins[-1][0])


def kernel_check(job: JobResult, record: JobRecord) -> KernelCheck | None:
    """The device's steady rates while the job ran, from the samples taken around it.

    The job's active span is where the device's completed I/Os moved between samples; its
    first and last intervals are partial (fio starting and stopping inside them), so the
    rates are read between the end of the first and the start of the last."""
    if record.device is None:
        return None
    counters = [(s.t, procfs.parse_diskstats(s.line).get(record.device)) for s in record.kernel]
    counters = [(t, c) for t, c in counters if c is not None]
    moved = [i for i in range(len(counters) - 1)
             if _ios(counters[i + 1][1]) > _ios(counters[i][1])]
    if len(moved) < 3:
        return None
    (t0, c0), (t1, c1) = counters[moved[0] + 1], counters[moved[-1]]
    rates = procfs.disk_rates(c0, c1, t1 - t0) if t1 > t0 else None
    if rates is None:
        return None
    by_iops = job.kind in SWEEP_KINDS
    return KernelCheck(
        device=record.device, seconds=t1 - t0, r_s=rates.r_s, w_s=rates.w_s,
        rmib_s=rates.rkb_s / 1024, wmib_s=rates.wkb_s / 1024,
        basis="IOPS" if by_iops else "MiB/s",
        fio_value=job.iops if by_iops else job.mib_s,
        kernel_value=rates.r_s + rates.w_s if by_iops else (rates.rkb_s + rates.wkb_s) / 1024)


def _ios(c: procfs.DiskCounters) -> int:
    return c.reads + c.writes
