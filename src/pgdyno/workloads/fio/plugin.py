"""``pgdyno bench fio``: the storage baseline; no server needed.

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
import time
from pathlib import Path
from typing import Any, ClassVar

from pgdyno import serde
from pgdyno.analysis.summary import SCHEMA_VERSION, RunSummary, stability_warnings
from pgdyno.errors import UsageError
from pgdyno.reports.document import Section
from pgdyno.results.capacity import record_capacity
from pgdyno.results.rundir import (
    IterationRecord,
    RunDirectory,
    RunPlan,
    utc_now,
    write_json_atomic,
    write_window_start,
)
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
)
from pgdyno.workloads.checks import parse_size_option
from pgdyno.workloads.fio import fsync, jobs, places
from pgdyno.workloads.fio.capacity import capacity_of
from pgdyno.workloads.fio.metrics import iteration_summary
from pgdyno.workloads.fio.options import (
    FioOptions,
    directories,
    numbers,
    physical_of,
    places_of,
    planned_seconds,
    roles,
)
from pgdyno.workloads.fio.results import JOBS_FILE, JOBS_SCHEMA_VERSION, JobsFile, read_iteration
from pgdyno.workloads.fio.runner import JobRunner, load_smart, save_smart, smart_reading


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
        o = numbers(raw)
        device = raw.get("device")
        dirs = directories(raw, opts)
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
        planned = planned_seconds(o, places_count=max(1, len(dirs)))
        return dataclasses.replace(opts, workload_options=o, duration_s=planned, warmup_s=0)

    def storage_directories(self, opts: BenchOptions) -> dict[str, Path]:
        """The directories measured, by role (two target dirs: target, target 2...)."""
        out: dict[str, Path] = {}
        for role, path in roles(opts.workload_options):
            key, n = role, 1
            while key in out:
                n += 1
                key = f"{role} {n}"
            out[key] = Path(path)
        return out

    def describe_dataset(self, opts: BenchOptions) -> str:
        o = opts.workload_options
        where = f"raw device {o.device}" if o.device else ", ".join(
            f"{role} {path}" for role, path in roles(o))
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
        write_window_start(it_dir, time.time())
        params = ctx.plan.parameters
        book = JobsFile(schema_version=JOBS_SCHEMA_VERSION, fio_version=params["fio_version"],
                        engine=o.ioengine, runtime_s=o.runtime, ramp_s=o.ramp)
        runner = JobRunner(ctx, it_dir, book, progress, params["fio"], o)
        smart_before = smart_reading(physical_of(o))
        try:
            for place in places_of(o):
                runner.run_place(place, params.get("pg_test_fsync"),
                                 params.get("pg_test_fsync_note", ""))
        finally:
            save_smart(it_dir, smart_before, smart_reading(physical_of(o)))
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
            it = iteration_summary(record, fio_it, it_dir)
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
        smart = [(r.iteration, load_smart(_it_dir(run_dir, r))) for r, _ in its]
        return fio_sections([f for _, f in its], run_dir, plan, opts, smart)

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
