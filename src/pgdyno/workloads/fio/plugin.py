"""``pgdyno bench fio``: the storage baseline of seed 000 §3; no server needed.

Each iteration runs the whole job set (see ``jobs``) on every place: the filesystems of
``--data-dir``, ``--wal-dir`` and ``--target-dir`` (the workdir's when none is given), or
a raw ``--device`` with ``--destroy-data``; then ``pg_test_fsync`` from the target's
binaries on each filesystem. fio's json+ files are kept raw under
``raw/fio/c1-iN/<place>/``; ``jobs.json`` records what ran where, with the kernel's disk
counters sampled during each job. The run's figures are recomputed from those files, and
the host's measured capacity (``results.capacity``) is updated from them at the end.

``--clients`` does not apply (the sweep sets its own jobs and depths); ``--duration`` and
``--warmup`` are replaced by ``--runtime`` and ``--ramp`` per job, and the run's duration
becomes the planned length of the job set, so that the progress bar's estimate holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno import serde
from pgdyno.analysis.summary import (
    SCHEMA_VERSION,
    IterationSummary,
    LatencyStats,
    RunSummary,
    stability_warnings,
)
from pgdyno.errors import RunFailed, UsageError
from pgdyno.reports.document import Section
from pgdyno.results.capacity import DeviceCapacity, record_capacity
from pgdyno.results.manifest import read_json_file
from pgdyno.results.rundir import IterationRecord, RunDirectory, RunPlan, utc_now, write_json_atomic
from pgdyno.telemetry.devices import resolve_path
from pgdyno.telemetry.smart import read_smart
from pgdyno.workloads.base import (
    HIGHER,
    LOWER,
    Advice,
    AdviceInputs,
    BenchOptions,
    IterationProgress,
    MetricSpec,
    Prepared,
    RunContext,
    Step,
    Workload,
    add_telemetry,
    option,
)
from pgdyno.workloads.checks import check_at_most, check_choice, check_positive, parse_size_option
from pgdyno.workloads.fio import fsync, jobs, places
from pgdyno.workloads.fio.jobs import FioJob, Place
from pgdyno.workloads.fio.results import (
    JOBS_FILE,
    JOBS_SCHEMA_VERSION,
    KERNEL_SAMPLE_S,
    FioIteration,
    JobRecord,
    JobsFile,
    KernelSample,
    PlaceRecord,
    read_iteration,
)

WINDOW = "window.json"
SMART_FILE = "smart.json"
DEFAULT_SIZE = "2GiB"
MIN_SIZE = 16 * 2**20
MAX_RUNTIME_S = 3600


@dataclass(frozen=True)
class FioOptions:
    data_dir: Path | None = option(None, "fio: the data directory's filesystem to measure")
    target_dir: tuple[str, ...] = option((), "fio: another directory to measure, repeatable")
    device: str | None = option(None, "fio: a raw block device to measure (needs "
                                      "--destroy-data: overwrites it)")
    destroy_data: bool = option(False, "fio: accept that --device is overwritten whole")
    confirm: str | None = option(None, "fio: the --device's name, confirming --destroy-data")
    runtime: int = option(30, "fio: measured seconds per job (default 30)")
    ramp: int = option(0, "fio: seconds per job before it is measured (default 0; a few "
                          "seconds let a device's write cache fill first)")
    size: str = option(DEFAULT_SIZE, "fio: size of the test file (default 2GiB)")
    fio_jobs: int = option(4, "fio: jobs of the bandwidth and WAL tests (default 4)",
                           flag="--fio-jobs")
    max_depth: int = option(256, "fio: largest total queue depth of the sweeps (default 256)")
    ioengine: str = option("libaio", "fio: libaio | io_uring")
    skip_fsync_test: bool = option(False, "fio: do not run pg_test_fsync")
    # Resolved by options_from_cli: the places, by role.
    wal_dir: str | None = None
    workdir_default: bool = False
    """No directory was named: the workdir's filesystem is measured."""
    device_name: str | None = None


class Fio(Workload):
    name: ClassVar[str] = "fio"
    description: ClassVar[str] = ("the storage baseline: fio bandwidth, IOPS at QD1 and "
                                  "peak, latency, WAL fdatasync, pg_test_fsync")
    rank: ClassVar[int] = 95
    needs_server: ClassVar[bool] = False
    engine: ClassVar[str] = "program"
    engine_dir: ClassVar[str] = "fio"
    tuning: ClassVar[tuple[str, bool]] = ("oltp", True)
    options_type: ClassVar[type] = FioOptions
    size_unit: ClassVar[str] = "bytes"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec("randread_peak_iops", "Random read IOPS (peak)", "IOPS", HIGHER,
                   headline=True),
        MetricSpec("randwrite_peak_iops", "Random write IOPS (peak)", "IOPS", HIGHER),
        MetricSpec("randrw_peak_iops", "70/30 mix IOPS (peak)", "IOPS", HIGHER),
        MetricSpec("seq_read_mib_s", "Sequential read", "MiB/s", HIGHER),
        MetricSpec("seq_write_mib_s", "Sequential write", "MiB/s", HIGHER),
        MetricSpec("randread_qd1_iops", "Random read IOPS QD1", "IOPS", HIGHER),
        MetricSpec("randwrite_qd1_iops", "Random write IOPS QD1", "IOPS", HIGHER),
        MetricSpec("randread_qd1_lat_avg_us", "Read latency QD1 avg", "µs", LOWER),
        MetricSpec("randread_qd1_lat_p99_us", "Read latency QD1 p99", "µs", LOWER),
        MetricSpec("randwrite_qd1_lat_avg_us", "Write latency QD1 avg", "µs", LOWER),
        MetricSpec("randwrite_qd1_lat_p99_us", "Write latency QD1 p99", "µs", LOWER),
        MetricSpec("randread_qd32_lat_avg_us", "Read latency QD32 avg", "µs", LOWER),
        MetricSpec("randread_qd32_lat_p99_us", "Read latency QD32 p99", "µs", LOWER),
        MetricSpec("randwrite_qd32_lat_avg_us", "Write latency QD32 avg", "µs", LOWER),
        MetricSpec("randwrite_qd32_lat_p99_us", "Write latency QD32 p99", "µs", LOWER),
        MetricSpec("wal_fdatasync_1job_ops_s", "8 KiB write+fdatasync, 1 job", "ops/s",
                   HIGHER),
        MetricSpec("wal_fdatasync_njobs_ops_s", "8 KiB write+fdatasync, all jobs", "ops/s",
                   HIGHER),
        MetricSpec("pg_test_fsync_fdatasync_ops_s", "pg_test_fsync fdatasync", "ops/s",
                   HIGHER),
    )

    # ----- options --------------------------------------------------------------------
    def default_clients(self) -> tuple[int, ...]:
        return (1,)

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        jobs.find_fio()  # a missing program is one line before anything starts
        if opts.clients != (1,):
            raise UsageError("fio: --clients does not apply (the sweep sets its own jobs and "
                             "queue depths); use --fio-jobs and --max-depth")
        o = _numbers(raw)
        device = raw.get("device")
        dirs = _directories(raw, opts)
        if device is not None:
            if dirs:
                raise UsageError("--device measures a raw device; drop --data-dir, --wal-dir "
                                 "and --target-dir (or measure them in another run)")
            name = places.check_device(device, destroy_data=bool(raw.get("destroy_data")),
                                       confirm=raw.get("confirm"),
                                       ask=places.terminal_prompt())
            o = dataclasses.replace(o, device=device, destroy_data=True, device_name=name)
        elif raw.get("destroy_data") or raw.get("confirm"):
            raise UsageError("--destroy-data and --confirm go with --device /dev/X only")
        else:
            if not dirs:
                workdir = opts.target.workdir
                if not Path(workdir).exists():
                    # pgdyno's own workdir, where its clusters go: made as a server run
                    # would make it, so the first run of a fresh machine can be fio's.
                    with contextlib.suppress(OSError):
                        Path(workdir).mkdir(parents=True, mode=0o755)
                dirs = [places.Directory("data", places.check_directory(workdir,
                                                                         "--workdir"))]
                o = dataclasses.replace(o, workdir_default=True)
            size = parse_size_option(o.size, "--size")
            for _label, path in places.group_by_filesystem(dirs):
                places.check_free_space(path, size, o.fio_jobs)
            o = dataclasses.replace(
                o, data_dir=next((d.path for d in dirs if d.role == "data"), None),
                wal_dir=next((str(d.path) for d in dirs if d.role == "wal"), None),
                target_dir=tuple(str(d.path) for d in dirs if d.role == "target"))
        planned = _planned_seconds(o, places_count=max(1, len(dirs)))
        return dataclasses.replace(opts, workload_options=o, duration_s=planned, warmup_s=0)

    def storage_directories(self, opts: BenchOptions) -> dict[str, Path]:
        """The directories measured, by role (two target dirs: target, target 2...)."""
        out: dict[str, Path] = {}
        for role, path in _roles(opts.workload_options):
            key, n = role, 1
            while key in out:
                n += 1
                key = f"{role} {n}"
            out[key] = Path(path)
        return out

    def describe_dataset(self, opts: BenchOptions) -> str:
        o = opts.workload_options
        where = f"raw device {o.device}" if o.device else ", ".join(
            f"{role} {path}" for role, path in _roles(o))
        return (f"fio on {where}: {o.size} test file, {o.runtime} s per job after a "
                f"{o.ramp} s ramp, {o.ioengine}")

    def advice(self, inputs: AdviceInputs) -> list[Advice]:
        return [Advice("FIO_RUNTIME", 60, "seconds per fio job: past the device's write cache")]

    def common_report(self, opts: BenchOptions | None = None) -> bool:
        return False

    # ----- the run --------------------------------------------------------------------
    def prepare(self, ctx: RunContext) -> Prepared:
        o = ctx.opts.workload_options
        program = jobs.find_fio()
        params: dict[str, Any] = {"fio": program, "fio_version": jobs.fio_version(program),
                                  "pg_test_fsync": None, "pg_test_fsync_note": ""}
        if o.skip_fsync_test:
            params["pg_test_fsync_note"] = "pg_test_fsync not run (--skip-fsync-test)"
        elif o.device:
            params["pg_test_fsync_note"] = "pg_test_fsync needs a file system; not run on a " \
                                           "raw device"
        else:
            params["pg_test_fsync"], params["pg_test_fsync_note"] = _find_pg_test_fsync(ctx)
        return Prepared(dataset={"kind": "none"}, parameters=params)

    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        o: FioOptions = ctx.opts.workload_options
        it_dir = step.directory(ctx.run_dir.raw, self.engine_dir)
        it_dir.mkdir(parents=True, exist_ok=True)
        record.threads = o.fio_jobs
        record.stdout_file = str((it_dir / JOBS_FILE).relative_to(ctx.run_dir.path))
        record.stderr_file = ""
        write_json_atomic(it_dir / WINDOW, {"window_start": time.time()})
        params = ctx.plan.parameters
        book = JobsFile(schema_version=JOBS_SCHEMA_VERSION, fio_version=params["fio_version"],
                        engine=o.ioengine, runtime_s=o.runtime, ramp_s=o.ramp)
        runner = _JobRunner(ctx, it_dir, book, progress, params["fio"], o)
        smart_before = _smart(_physical_of(o))
        try:
            for place in _places(o):
                runner.run_place(place, params.get("pg_test_fsync"),
                                 params.get("pg_test_fsync_note", ""))
        finally:
            _save_smart(it_dir, smart_before, _smart(_physical_of(o)))
            write_json_atomic(it_dir / JOBS_FILE, serde.to_dict(book))
        record.command = [ctx.commands[-1]] if ctx.commands else []
        record.log_files = [str((it_dir / j.output).relative_to(ctx.run_dir.path))
                            for j in book.jobs]
        record.returncode = 0

    def finish(self, ctx: RunContext) -> None:
        """The host's measured capacity, from the iterations that ran."""
        opts = ctx.opts
        its = [read_iteration(_it_dir(ctx.run_dir, r)) for r in ctx.plan.records
               if r.status == "ok" and (_it_dir(ctx.run_dir, r) / JOBS_FILE).is_file()]
        measured = capacity_of(its, run=str(ctx.run_dir.path), when=utc_now())
        if measured:
            path = record_capacity(opts.results_dir, measured)
            ctx.plan.notes.append(f"measured storage capacity recorded in {path}")

    # ----- summary and report ---------------------------------------------------------
    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        iterations = []
        for record in plan.records:
            it_dir = _it_dir(run_dir, record)
            if not (it_dir / JOBS_FILE).is_file():
                continue
            fio_it = read_iteration(it_dir)
            it = _iteration(record, fio_it, it_dir)
            add_telemetry(it, it_dir, it.duration_s, cpu_count)
            iterations.append(it)
        return RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                          context=plan.context, status=status, client_counts=[1],
                          per_clients=[], iterations=iterations,
                          warnings=stability_warnings(iterations))

    def report_sections(self, summary: RunSummary, run_dir: RunDirectory, plan: RunPlan,
                        opts: BenchOptions) -> list[Section]:
        from pgdyno.workloads.fio.report import fio_sections

        its = [(r, read_iteration(_it_dir(run_dir, r))) for r in plan.records
               if (_it_dir(run_dir, r) / JOBS_FILE).is_file()]
        smart = [(r.iteration, _load_smart(_it_dir(run_dir, r))) for r, _ in its]
        return fio_sections([f for _, f in its], run_dir, plan, opts, smart)


# ----- options ----------------------------------------------------------------------------

def _numbers(raw: dict[str, Any]) -> FioOptions:
    o = FioOptions(**{k: v for k, v in raw.items()
                      if k in {f.name for f in dataclasses.fields(FioOptions)}
                      and k not in ("data_dir", "target_dir", "device", "destroy_data",
                                    "confirm")})
    check_positive(o.runtime, "--runtime")
    check_at_most(o.runtime, "--runtime", MAX_RUNTIME_S, "one hour per job")
    check_positive(o.ramp, "--ramp", allow_zero=True)
    check_at_most(o.ramp, "--ramp", MAX_RUNTIME_S, "one hour per job")
    check_positive(o.fio_jobs, "--fio-jobs")
    check_at_most(o.fio_jobs, "--fio-jobs", 256, "fio threads")
    check_positive(o.max_depth, "--max-depth")
    check_at_most(o.max_depth, "--max-depth", 4096, "I/Os in flight")
    check_choice(o.ioengine, "--ioengine", jobs.IO_ENGINES)
    size = parse_size_option(o.size, "--size")
    if size < MIN_SIZE:
        raise UsageError(f"--size {o.size}: at least 16MiB (the bandwidth jobs split it)")
    return o


def _directories(raw: dict[str, Any], opts: BenchOptions) -> list[places.Directory]:
    dirs = []
    if raw.get("data_dir") is not None:
        dirs.append(places.Directory("data", places.check_directory(raw["data_dir"],
                                                                    "--data-dir")))
    if opts.target.wal_dir is not None:
        dirs.append(places.Directory("wal", places.check_directory(opts.target.wal_dir,
                                                                   "--wal-dir")))
    for path in raw.get("target_dir") or ():
        dirs.append(places.Directory("target", places.check_directory(Path(path),
                                                                      "--target-dir")))
    return dirs


def _roles(o: FioOptions) -> list[tuple[str, str]]:
    out = []
    if o.data_dir is not None:
        out.append(("data", str(o.data_dir)))
    if o.wal_dir is not None:
        out.append(("wal", o.wal_dir))
    out += [("target", p) for p in o.target_dir]
    return out


def _planned_seconds(o: FioOptions, places_count: int) -> int:
    """The job set's length at most (sweeps may stop early): the progress bar's total."""
    per_job = o.runtime + o.ramp
    count = 2 + 3 * len(jobs.sweep_depths(o.max_depth)) + len(jobs.wal_jobs(o.fio_jobs))
    fsync_s = 0 if (o.skip_fsync_test or o.device) else 16 * min(o.runtime,
                                                                  fsync.MAX_SECONDS_PER_TEST)
    return places_count * (count * per_job + fsync_s)


def _places(o: FioOptions) -> list[tuple[str, Path | None, str | None]]:
    """(label, directory, device name) per place to measure."""
    if o.device_name:
        return [(o.device_name, None, o.device_name)]
    dirs = [places.Directory(role, Path(path)) for role, path in _roles(o)]
    return [(label, path, None) for label, path in places.group_by_filesystem(dirs)]


def _physical_of(o: FioOptions) -> list[str]:
    if o.device_name:
        return [o.device_name]
    found: list[str] = []
    for _role, path in _roles(o):
        for dev in resolve_path(path).physical:
            if dev not in found:
                found.append(dev)
    return found


def _find_pg_test_fsync(ctx: RunContext) -> tuple[str | None, str]:
    """pg_test_fsync of the target's binaries (--pg-bin, else the embedded PostgreSQL)."""
    from pgdyno.errors import PgdynoError
    from pgdyno.targets import install_for

    try:
        install = install_for(ctx.opts.target)
    except PgdynoError as exc:
        return None, f"pg_test_fsync not run: no PostgreSQL binaries ({exc})"
    program = Path(install.program(fsync.PROGRAM))
    if not program.is_file():
        return None, f"pg_test_fsync not run: {program} does not exist"
    return str(program), f"pg_test_fsync of PostgreSQL {install.version} ({program})"


def _it_dir(run_dir: RunDirectory, record: IterationRecord) -> Path:
    return run_dir.raw / Fio.engine_dir / f"c{record.clients}-i{record.iteration}"


# ----- running the jobs -------------------------------------------------------------------

class _JobRunner:
    """Runs the job set on each place, recording each job as it ends."""

    def __init__(self, ctx: RunContext, it_dir: Path, book: JobsFile,
                 progress: IterationProgress, fio: str, o: FioOptions) -> None:
        self.ctx, self.it_dir, self.book, self.progress = ctx, it_dir, book, progress
        self.fio, self.o = fio, o
        self.started = time.monotonic()

    def run_place(self, spec: tuple[str, Path | None, str | None], fsync_program: str | None,
                  fsync_note: str) -> None:
        label, directory, device = spec
        size = parse_size_option(self.o.size, "--size")
        place = (places.device_place(device, size) if device is not None
                 else places.make_place(label, directory, size))
        physical = resolve_path(directory or place.path).physical if directory else [device]
        entry = PlaceRecord(label=label, path=str(directory or place.path),
                            size_bytes=place.size_bytes, device=place.device,
                            raw_device=place.raw_device, physical=list(physical or []),
                            fsync_note=fsync_note)
        self.book.places.append(entry)
        (self.it_dir / label).mkdir(parents=True, exist_ok=True)
        try:
            if not place.raw_device:
                self._layout(place)
            for job in jobs.bandwidth_jobs(self.o.fio_jobs):
                self._run(job, place)
            for kind in jobs.SWEEP_KINDS:
                self._sweep(kind, place)
            for job in jobs.wal_jobs(self.o.fio_jobs):
                self._run(job, place)
            if fsync_program is not None and not place.raw_device:
                entry.fsync_output = self._pg_test_fsync(fsync_program, place)
        finally:
            places.remove_place(place)

    def _layout(self, place: Place) -> None:
        out = self.it_dir / place.label / "layout.json"
        cmd = jobs.layout_command(self.fio, place, engine=self.o.ioengine, output=str(out))
        self.ctx.commands.append(" ".join(cmd))
        self.progress(self._elapsed(), f"{place.label}: writing the test file")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RunFailed(f"fio could not write its test file {place.path}: "
                            f"{_last_line(proc.stderr)}")

    def _sweep(self, kind: str, place: Place) -> None:
        depths = jobs.sweep_depths(self.o.max_depth)
        iops: list[float] = []
        for depth in depths:
            result = self._run(jobs.sweep_job(kind, depth), place)
            iops.append(result)
            if jobs.sweep_done(iops, depths):
                return

    def _run(self, job: FioJob, place: Place) -> float:
        """Run one job; returns its IOPS (read + write), as the sweep's stopping rule needs."""
        from pgdyno.workloads.fio.results import job_result

        output = f"{place.label}/{job.name}.json"
        cmd = jobs.job_command(self.fio, job, place, engine=self.o.ioengine,
                               runtime_s=self.o.runtime, ramp_s=self.o.ramp,
                               output=str(self.it_dir / output))
        self.ctx.commands.append(" ".join(cmd))
        record = JobRecord(place=place.label, name=job.name, kind=job.kind, block=job.block,
                           iodepth=job.iodepth, numjobs=job.numjobs, output=output,
                           command=cmd, started=time.time(), device=place.device)
        self.book.jobs.append(record)
        self.progress(self._elapsed(), f"{place.label}: {job.name}")
        sampler = _KernelSampler(place.device, record.kernel)
        sampler.start()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False,
                timeout=self.o.runtime + self.o.ramp + jobs.FIO_TIMEOUT_MARGIN_S)
        except subprocess.TimeoutExpired:
            record.error = "fio did not finish (killed after its runtime + 2 minutes)"
            raise RunFailed(f"fio job {job.name} on {place.label}: {record.error}") from None
        finally:
            sampler.stop()
            record.ended = time.time()
            write_json_atomic(self.it_dir / JOBS_FILE, serde.to_dict(self.book))
        record.returncode = proc.returncode
        (self.it_dir / f"{output}.stderr").write_text(proc.stderr)
        if proc.returncode != 0:
            record.error = _last_line(proc.stderr) or f"exit code {proc.returncode}"
            raise RunFailed(f"fio job {job.name} on {place.label} failed: {record.error}")
        result = job_result(self.it_dir, record)
        if result.error:
            raise RunFailed(f"fio job {job.name} on {place.label}: {result.error}")
        return result.iops

    def _pg_test_fsync(self, program: str, place: Place) -> str:
        output = f"{place.label}/pg_test_fsync.txt"
        test_file = str(Path(place.path).parent / "pg_test_fsync.out")
        cmd = fsync.fsync_command(program, test_file, self.o.runtime)
        self.ctx.commands.append(" ".join(cmd))
        self.progress(self._elapsed(), f"{place.label}: pg_test_fsync")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=16 * fsync.MAX_SECONDS_PER_TEST + 120)
        (self.it_dir / output).write_text(proc.stdout)
        if proc.returncode != 0:
            raise RunFailed(f"pg_test_fsync on {place.label} failed: {_last_line(proc.stderr)}")
        return output

    def _elapsed(self) -> float:
        return time.monotonic() - self.started


class _KernelSampler:
    """The device's /proc/diskstats line every KERNEL_SAMPLE_S while a job runs."""

    def __init__(self, device: str | None, into: list[KernelSample]) -> None:
        self.device, self.into = device, into
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pgdyno-fio-diskstats",
                                        daemon=True)

    def start(self) -> None:
        if self.device is not None:
            self._thread.start()

    def stop(self) -> None:
        if self.device is not None:
            self._stop.set()
            self._thread.join(5)

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(KERNEL_SAMPLE_S):
                self._sample()  # the last one after fio ended: the window is covered
                return

    def _sample(self) -> None:
        try:
            text = Path("/proc/diskstats").read_text()
        except OSError:
            return
        for line in text.splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == self.device:
                self.into.append(KernelSample(time.time(), line))
                return


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ----- SMART around the iteration ---------------------------------------------------------

def _smart(devices: list[str]) -> dict:
    return {"t": time.time(), "readings": [read_smart(d).to_dict() for d in devices]}


def _save_smart(it_dir: Path, before: dict, after: dict) -> None:
    write_json_atomic(it_dir / SMART_FILE, {"before": before, "after": after})


def _load_smart(it_dir: Path) -> dict:
    try:
        return json.loads((it_dir / SMART_FILE).read_text())
    except (OSError, ValueError):
        return {}


# ----- the summary ------------------------------------------------------------------------

def iteration_metrics(fio_it: FioIteration) -> dict[str, float]:
    """The declared metrics of one iteration, from its first place (the data directory's,
    or the device's); figures a run did not measure are left out, never zero."""
    if not fio_it.places:
        return {}
    p = fio_it.places[0]
    out: dict[str, float | None] = {}
    for kind in ("randread", "randwrite", "randrw"):
        peak = p.peak(kind)
        out[f"{kind}_peak_iops"] = peak.iops if peak else None
    for name, key in (("seq-read", "seq_read_mib_s"), ("seq-write", "seq_write_mib_s")):
        job = p.job(name)
        out[key] = job.mib_s if job else None
    for kind in ("randread", "randwrite"):
        qd1 = p.at_depth(kind, 1)
        out[f"{kind}_qd1_iops"] = qd1.iops if qd1 else None
        for depth_name, job in (("qd1", qd1), ("qd32", p.qd32(kind))):
            lat = job.main.latency if job is not None and job.main is not None else None
            out[f"{kind}_{depth_name}_lat_avg_us"] = lat.avg_us if lat else None
            out[f"{kind}_{depth_name}_lat_p99_us"] = lat.p99_us if lat else None
    wal = sorted((j for j in p.jobs if j.kind == "wal" and not j.error),
                 key=lambda j: j.numjobs)
    out["wal_fdatasync_1job_ops_s"] = wal[0].iops if wal else None
    out["wal_fdatasync_njobs_ops_s"] = wal[-1].iops if len(wal) > 1 else None
    methods = p.fsync.sync_methods() if p.fsync is not None else {}
    out["pg_test_fsync_fdatasync_ops_s"] = methods.get("fdatasync")
    return {k: float(v) for k, v in out.items() if v is not None and not math.isnan(v)}


def _window_start(path: Path) -> float:
    """When the iteration's measured jobs began (epoch seconds); a damaged file is one line
    naming it."""
    data = read_json_file(path, "iteration window")
    try:
        return float(data["window_start"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{path}: not a pgdyno iteration window (expected "
                         "{\"window_start\": epoch seconds})") from None


def _iteration(record: IterationRecord, fio_it: FioIteration,
               it_dir: Path) -> IterationSummary:
    metrics = iteration_metrics(fio_it)
    head = metrics.get("randread_peak_iops", math.nan)
    window = _window_start(it_dir / WINDOW) if (it_dir / WINDOW).is_file() else 0.0
    jobs_done = [j for p in fio_it.places for j in p.jobs]
    lasted = _lasted(it_dir)
    none = LatencyStats(count=0, mean_ms=math.nan, median_ms=math.nan, stddev_ms=math.nan,
                        min_ms=math.nan, max_ms=math.nan, percentiles_ms={})
    return IterationSummary(
        clients=record.clients, iteration=record.iteration, status=record.status,
        duration_s=int(round(lasted)), warmup_s=0, window_start_epoch=float(window),
        transactions=len(jobs_done), failed=sum(1 for j in jobs_done if j.error),
        serialization_failures=0, deadlock_failures=0, retried=0, retries=0, skipped=0,
        late=0, tps_mean=head, tps_median=head, tps_stddev=0.0, tps_min=head, tps_max=head,
        interval_tps=[], latency=none, lag=None, scripts=[], timeline=[],
        log_files=record.log_files, metrics=metrics)


def _lasted(it_dir: Path) -> float:
    """Seconds from the first job's start to the last one's end."""
    try:
        book = json.loads((it_dir / JOBS_FILE).read_text())
        times = [(j["started"], j["ended"]) for j in book.get("jobs", []) if j.get("ended")]
    except (OSError, ValueError, KeyError):
        return 0.0
    return max(e for _, e in times) - min(s for s, _ in times) if times else 0.0


def capacity_of(its: list[FioIteration], run: str, when: str) -> list[DeviceCapacity]:
    """Per device measured: each figure's mean over the iterations."""
    by_device: dict[str, list[tuple[Any, dict[str, float]]]] = {}
    for fio_it in its:
        for place in fio_it.places:
            if place.device is None:
                continue
            one = FioIteration(fio_it.fio_version, fio_it.engine, fio_it.runtime_s,
                               fio_it.ramp_s, [place])
            by_device.setdefault(place.device, []).append((place, iteration_metrics(one)))
    out = []
    for device, entries in by_device.items():
        def mean(key: str, entries=entries) -> float | None:
            values = [m[key] for _, m in entries if key in m]
            return statistics.fmean(values) if values else None
        place = entries[0][0]
        out.append(DeviceCapacity(
            device=device, measured_at=when, run=run, path=place.path,
            read_iops_peak=mean("randread_peak_iops"),
            write_iops_peak=mean("randwrite_peak_iops"),
            mixed_iops_peak=mean("randrw_peak_iops"),
            read_iops_qd1=mean("randread_qd1_iops"), write_iops_qd1=mean("randwrite_qd1_iops"),
            read_mib_s=mean("seq_read_mib_s"), write_mib_s=mean("seq_write_mib_s"),
            read_lat_qd1_us=mean("randread_qd1_lat_avg_us"),
            write_lat_qd1_us=mean("randwrite_qd1_lat_avg_us"),
            fdatasync_ops_s=mean("wal_fdatasync_1job_ops_s")))
    return out
