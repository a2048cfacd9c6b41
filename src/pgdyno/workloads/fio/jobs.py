"""fio as the engine of ``pgdyno bench fio``: finding it, the job set, each job's command.

The job set measures what a drive qualification reports and a PostgreSQL server asks:

- sequential read and write bandwidth: 1 MiB blocks, ``--jobs`` jobs each on its own
  slice of the test file, queue depth 16 each;
- 4 KiB random read, random write and a 70/30 mix, swept over the total queue depth
  (1, 2, 4, ... up to ``--max-depth``): one job up to depth 32, then more jobs of depth 32
  each, so that the depth-1 point is QD1, the depth-32 point is QD32, and a device that
  needs several submitting threads (NVMe) gets them. A sweep stops once doubling the depth
  raises IOPS by less than ``PEAK_GAIN`` (after the depth-32 point, which is always
  measured when ``--max-depth`` allows it); its best point is the peak;
- the WAL-shaped test: 8 KiB sequential buffered writes with ``fdatasync`` after each
  (what a commit does with ``wal_sync_method = fdatasync``), at 1 job and ``--jobs`` jobs.

Every job is its own fio process with ``--output-format=json+`` (the latency histogram
bins the percentiles are recomputed from) and ``--group_reporting`` (one result per job).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from pgdyno.errors import UsageError

INSTALL_HINT = "fio is not installed: install it with `apt-get install fio` (Debian/Ubuntu)"
IO_ENGINES = ("libaio", "io_uring")
SEQ_BLOCK = "1m"
RANDOM_BLOCK = "4k"
WAL_BLOCK = "8k"
SEQ_DEPTH = 16
"""Per-job queue depth of the bandwidth jobs: enough to keep a device streaming."""
DEPTH_PER_JOB = 32
"""Above this total depth the sweep adds jobs instead of deepening one job's queue."""
QD32 = 32
PEAK_GAIN = 1.05
"""A sweep stops when doubling the depth gains less than 5%: IOPS stopped rising."""
MIX_READ_PCT = 70
WAL_FILE_BYTES = 64 * 2**20
"""Each WAL-test job writes its own file of this size (four WAL segments), wrapping."""
FIO_TIMEOUT_MARGIN_S = 120
"""fio past its runtime plus ramp by this much is hung (a dead device), not slow."""


def find_fio() -> str:
    """The path of ``fio`` on PATH; one line saying how to install it when it is missing."""
    path = shutil.which("fio")
    if path is None:
        raise UsageError(INSTALL_HINT)
    return path


def fio_version(path: str) -> str:
    """``fio-3.33`` as ``fio --version`` prints it."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run `{path} --version`: {exc}") from exc
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version.startswith("fio"):
        raise UsageError(f"`{path} --version` did not print a fio version "
                         f"(exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return version


@dataclass(frozen=True)
class FioJob:
    """One fio job of the set: its place in the report and its fio parameters."""

    name: str
    """File-name-safe: ``seq-read``, ``randread-d32``, ``wal-4j``."""
    kind: str
    """``seqread``, ``seqwrite``, ``randread``, ``randwrite``, ``randrw``, ``wal``."""
    rw: str
    block: str
    iodepth: int
    numjobs: int

    @property
    def depth(self) -> int:
        """Total I/Os in flight: queue depth × jobs."""
        return self.iodepth * self.numjobs

    @property
    def sweep(self) -> bool:
        return self.kind in SWEEP_KINDS


SWEEP_KINDS = ("randread", "randwrite", "randrw")
_RW = {"randread": "randread", "randwrite": "randwrite", "randrw": "randrw",
       "seqread": "read", "seqwrite": "write", "wal": "write"}


def bandwidth_jobs(jobs: int) -> list[FioJob]:
    return [FioJob("seq-read", "seqread", "read", SEQ_BLOCK, SEQ_DEPTH, jobs),
            FioJob("seq-write", "seqwrite", "write", SEQ_BLOCK, SEQ_DEPTH, jobs)]


def wal_jobs(jobs: int) -> list[FioJob]:
    counts = sorted({1, jobs})
    return [FioJob(f"wal-{n}j", "wal", "write", WAL_BLOCK, 1, n) for n in counts]


def sweep_depths(max_depth: int) -> list[int]:
    """1, 2, 4, ... up to ``max_depth`` (itself included when it is not a power of two)."""
    depths, d = [], 1
    while d < max_depth:
        depths.append(d)
        d *= 2
    return [*depths, max_depth]


def sweep_job(kind: str, depth: int) -> FioJob:
    """The sweep's point at ``depth``: one job up to DEPTH_PER_JOB, then more jobs."""
    numjobs = max(1, -(-depth // DEPTH_PER_JOB))
    iodepth = max(1, depth // numjobs)
    return FioJob(f"{kind}-d{depth}", kind, _RW[kind], RANDOM_BLOCK, iodepth, numjobs)


def sweep_done(iops: list[float], depths: list[int]) -> bool:
    """Whether the sweep may stop: the QD32 point (when planned) is measured and the last
    doubling raised IOPS by less than PEAK_GAIN over the best before it."""
    done = len(iops)
    if done >= len(depths):
        return True
    if done < 2 or (QD32 in depths and depths[done - 1] < QD32):
        return False
    return iops[-1] < PEAK_GAIN * max(iops[:-1])


@dataclass(frozen=True)
class Place:
    """Where a job set runs: a file pgdyno creates in a directory, or a whole device."""

    label: str
    """``data``, ``wal``, ``data+wal``, ``target``, or the device's name."""
    path: str
    """The test file (in pgdyno's own directory) or the block device."""
    size_bytes: int
    device: str | None
    """The block device whose kernel counters are compared with fio's (/proc/diskstats
    name), None when the path could not be resolved to one."""
    raw_device: bool = False


def job_command(fio: str, job: FioJob, place: Place, *, engine: str, runtime_s: int,
                ramp_s: int, output: str) -> list[str]:
    """fio's command line for ``job`` on ``place``; JSON+ to ``output``."""
    cmd = [fio, f"--name={job.name}", f"--output={output}", "--output-format=json+",
           f"--rw={job.rw}", f"--bs={job.block}", f"--iodepth={job.iodepth}",
           f"--numjobs={job.numjobs}", "--group_reporting", "--time_based",
           f"--runtime={runtime_s}", f"--ramp_time={ramp_s}",
           # fio's random offsets differ per run; the map of touched blocks is not needed.
           "--randrepeat=0", "--norandommap", "--thread"]
    if job.kind == "wal":
        # Buffered writes and fdatasync, as PostgreSQL writes WAL by default; each job its
        # own file (WAL is one writer per segment), or its own slice of a raw device.
        sync = [f"--size={WAL_FILE_BYTES}", "--ioengine=psync", "--direct=0", "--fdatasync=1"]
        if place.raw_device:
            return [*cmd, f"--filename={place.path}", f"--offset_increment={WAL_FILE_BYTES}",
                    *sync]
        directory = place.path.rsplit("/", 1)[0]
        return [*cmd, f"--directory={directory}", "--filename_format=pgdyno-wal.$jobnum",
                *sync]
    cmd += [f"--filename={place.path}", f"--ioengine={engine}", "--direct=1"]
    if job.kind == "randrw":
        cmd.append(f"--rwmixread={MIX_READ_PCT}")
    if job.kind in ("seqread", "seqwrite") and job.numjobs > 1:
        # Each job streams through its own slice: jobs do not read each other's blocks.
        share = place.size_bytes // job.numjobs // 2**20 * 2**20
        return [*cmd, f"--size={share}", f"--offset_increment={share}"]
    return [*cmd, f"--size={place.size_bytes}"]


def layout_command(fio: str, place: Place, *, engine: str, output: str) -> list[str]:
    """Write the test file once, whole, before any job reads it (not counted)."""
    return [fio, "--name=layout", f"--output={output}", "--output-format=json",
            f"--filename={place.path}", f"--size={place.size_bytes}", "--rw=write",
            f"--bs={SEQ_BLOCK}", f"--iodepth={SEQ_DEPTH}", f"--ioengine={engine}",
            "--direct=1", "--end_fsync=1"]
