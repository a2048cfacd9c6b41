"""``pgdyno bench``: one workload, one target, one config, a sweep of client counts.

Order of work: run directory first (so that even a failed start leaves a record), then
the server, the dataset, and the iterations — iteration-major (1: c1 c2 c3, 2: c1 c2 c3,
...) so that drift over time spreads over every client count instead of biasing one.
Whatever happens, the ``finally`` block stops the server, rebuilds the summary and
report from what reached ``raw/``, and writes the final status.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from pgdyno import __version__, serde
from pgdyno.errors import PgdynoError, RunFailed, RunInterrupted, TargetError, UsageError
from pgdyno.results.index import RunIndex, RunRow
from pgdyno.results.rundir import (
    IterationRecord,
    RunDirectory,
    RunPlan,
    utc_now,
    write_json_atomic,
)
from pgdyno.runner.environment import HostFacts, host_facts, server_facts
from pgdyno.runner.options import BYTES_PER_SCALE, BenchOptions, ScriptSpec
from pgdyno.targets import Target, open_target
from pgdyno.workloads import pgbench
from pgdyno.workloads.drivers import Driver, driver_for

SERIES_INTERVAL_S = 5.0
"""Interval of the database snapshots between the window edges (TPROC-C NOPM over time)."""


@dataclass
class BenchResult:
    run_dir: Path
    status: str
    reason: str = ""
    notes: list[str] = field(default_factory=list)


def hardware_label(host: HostFacts) -> str:
    return f"{host.cpu_count}vcpu-{round(host.ram_bytes / 2**30)}gb"


def run_bench(opts: BenchOptions, console: Console | None = None) -> BenchResult:
    console = console or Console(stderr=True)
    host = host_facts()
    context = opts.context or f"{hardware_label(host)}--{opts.workload}"
    run_dir = RunDirectory.create(opts.results_dir, context, opts.workload)
    settings, config_record = resolve_settings(opts)
    target = open_target(opts.target, settings)
    plan = _plan(opts, context, run_dir)
    manifest = _initial_manifest(opts, host, target, config_record)
    run_dir.write_json("manifest.json", manifest)
    run_dir.save_plan(plan)
    index = RunIndex(opts.results_dir)
    _index(index, run_dir, manifest, None)
    result = BenchResult(run_dir=run_dir.path, status="running")
    error: Exception | None = None
    try:
        _execute(opts, target, run_dir, plan, manifest, console)
        result.status = "ok"
    except KeyboardInterrupt:
        result.status, result.reason = "interrupted", "interrupted by the user (Ctrl-C)"
    except (PgdynoError, OSError) as exc:
        result.status, result.reason = "failed", str(exc)
        error = exc
        if target.kind != "dsn" and not target.is_running():
            result.reason += f"; server log: {target.log_tail(5)}"
    finally:
        _finish(opts, target, run_dir, plan, manifest, result, index, console)
    if result.status == "interrupted":
        raise RunInterrupted(f"run interrupted; partial results kept in {run_dir.path}",
                             run_dir.path)
    if isinstance(error, UsageError):  # bad input found late (e.g. foreign tables): exit 2
        raise UsageError(f"{error} (run directory {run_dir.path})") from error
    if result.status == "failed":
        raise RunFailed(f"run failed: {result.reason} (partial results in {run_dir.path})",
                        run_dir.path)
    return result


def resolve_settings(opts: BenchOptions) -> tuple[dict[str, str], dict]:
    """The PostgreSQL layer of the named config; stock PostgreSQL for ``default``."""
    if opts.config == "default" and not opts.sets:
        settings: dict[str, str] = {}
        record: dict = {"name": "default", "pg_settings": {}, "sources": {}}
    else:
        from pgdyno.config import resolve_config  # the configuration engine

        install = open_target(opts.target).install
        resolved = resolve_config(opts.config, list(opts.sets), install=install,
                                  workload=opts.workload, connections=max(opts.clients),
                                  dataset_bytes=opts.scale * BYTES_PER_SCALE)
        settings, record = dict(resolved.pg_settings), resolved.to_dict()
    _make_room_for_clients(opts, settings, record)
    return settings, record


CONNECTION_HEADROOM = 15
"""Connections beyond pgbench's clients: telemetry samplers, snapshots, reserved slots."""


def _make_room_for_clients(opts: BenchOptions, settings: dict[str, str], record: dict) -> None:
    """Raise max_connections of a server pgdyno starts when the clients would not fit.

    Only when the config leaves max_connections alone (compliant TPROC-C at W = 30 runs 300
    terminals); a config that sets it too low is the user's choice and fails clearly."""
    from pgdyno.targets.local import BASE_SETTINGS

    needed = max(opts.clients) + CONNECTION_HEADROOM
    if opts.target.kind == "dsn" or "max_connections" in settings:
        return
    if needed > int(BASE_SETTINGS["max_connections"]):
        settings["max_connections"] = str(needed)
        record.setdefault("pg_settings", {})["max_connections"] = str(needed)
        record.setdefault("sources", {})["max_connections"] = (
            f"pgdyno: {max(opts.clients)} clients + {CONNECTION_HEADROOM} for its own sessions")


def _plan(opts: BenchOptions, context: str, run_dir: RunDirectory) -> RunPlan:
    return RunPlan(
        workload=opts.workload, context=context,
        scripts=_script_entries(opts.scripts, run_dir), scale=opts.scale,
        client_counts=list(opts.clients), iterations=opts.iterations, duration_s=opts.duration_s,
        warmup_s=opts.warmup_s, protocol=opts.protocol, rate_tps=opts.rate_tps,
        latency_limit_ms=opts.latency_limit_ms, max_tries=opts.max_tries, cache=opts.cache,
        via=opts.via, has_lag_column=opts.has_lag_column,
        has_retries_column=opts.has_retries_column)


def _script_entries(scripts: tuple[ScriptSpec, ...], run_dir: RunDirectory) -> list[dict]:
    """Name, weight and source of each script; files are kept under raw/scripts/."""
    entries = []
    for spec in scripts:
        entry = {"name": spec.name, "weight": spec.weight, "builtin": spec.builtin, "file": None}
        if spec.path is not None:
            dest = run_dir.raw / "scripts" / spec.path.name
            if spec.path.resolve() != dest.resolve():
                dest.parent.mkdir(exist_ok=True)
                shutil.copy2(spec.path, dest)
            entry["file"] = str(dest.relative_to(run_dir.path))
        entries.append(entry)
    return entries


def _initial_manifest(opts: BenchOptions, host: HostFacts, target: Target,
                      config_record: dict) -> dict:
    return {
        "schema_version": 1,
        "tool": {"name": "pgdyno", "version": __version__},
        "status": "running",
        "started_at": utc_now(),
        "ended_at": None,
        "host": serde.to_dict(host),
        "target": {"kind": target.kind, "pg_bin": str(target.install.bin_dir),
                   "pgbench_version": target.install.version,
                   "wal_dir": str(opts.target.wal_dir) if opts.target.wal_dir else None},
        "config": config_record,
        "options": {
            "workload": opts.workload, "scale": opts.scale, "clients": list(opts.clients),
            "threads": opts.threads, "duration_s": opts.duration_s, "warmup_s": opts.warmup_s,
            "iterations": opts.iterations, "protocol": opts.protocol, "rate_tps": opts.rate_tps,
            "latency_limit_ms": opts.latency_limit_ms, "max_tries": opts.max_tries,
            "cache": opts.cache, "via": opts.via, "force": opts.force,
        },
        "server": None,
        "commands": [],
        "dataset": None,
        "notes": [],
    }


def _start_with_rollback(target: Target, manifest: dict, plan: RunPlan) -> None:
    """Start the server; if the config stops it from starting, roll back and fail the run.

    The server is brought back up with the last settings it started with, so the
    workdir is left usable, and the manifest and notes say what happened (seed 002's
    "Run 3 FAILED → rolled back").
    """
    config_name = (manifest.get("config") or {}).get("name", "default")
    try:
        target.start()
    except TargetError as exc:
        if target.kind == "dsn":
            raise
        good_name, good = target.last_good_settings()
        target.write_settings(good)
        target.start()
        target.stop()
        manifest["config_rollback"] = {"failed_config": config_name, "error": str(exc),
                                       "rolled_back_to": good_name}
        plan.notes.append(f"config {config_name} did not start; rolled back to {good_name}")
        raise RunFailed(f"the server did not start with config {config_name} ({exc}); "
                        f"rolled back to config {good_name}, which starts") from exc
    if target.kind != "dsn":
        target.remember_good_settings(config_name)


def _execute(opts: BenchOptions, target: Target, run_dir: RunDirectory, plan: RunPlan,
             manifest: dict, console: Console) -> None:
    target.prepare()
    _start_with_rollback(target, manifest, plan)
    conn = target.connection(opts.via)
    manifest["connection"] = conn.describe()
    manifest["server"] = serde.to_dict(server_facts(target.admin_connection()))
    run_dir.write_json("manifest.json", manifest)
    driver = driver_for(opts)
    steps = [(it, c) for it in range(1, opts.iterations + 1) for c in opts.clients]
    with _progress(opts, console) as progress:
        overall = progress.add_task("preparing the dataset", total=len(steps), status="")
        prepared = driver.prepare(conn, target.install, run_dir.raw,
                                  lambda text: progress.update(overall, status=text))
        progress.update(overall, description="iterations", status="")
        manifest["dataset"] = prepared.dataset
        manifest["commands"].extend(prepared.commands)
        plan.scripts = _script_entries(prepared.scripts, run_dir)
        plan.parameters = prepared.parameters
        run_dir.save_plan(plan)
        run_dir.write_json("manifest.json", manifest)
        for number, (iteration, clients) in enumerate(steps):
            if opts.cache == "cold" and number > 0:
                _make_cold(target, plan)
                conn = target.connection(opts.via)
            _run_iteration(opts, target, conn, run_dir, plan, manifest, progress,
                           iteration, clients, prepared.scripts, driver)
            progress.advance(overall)
    driver.finish(conn, run_dir.raw)


def _make_cold(target: Target, plan: RunPlan) -> None:
    """Restart the server (empty shared_buffers) and drop the OS page cache if permitted."""
    target.restart()
    note = _drop_os_cache()
    if note and note not in plan.notes:
        plan.notes.append(note)


def _drop_os_cache() -> str:
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return ""
    except OSError as exc:
        return (f"--cache cold: the OS page cache was not dropped ({exc.strerror}); "
                "only shared_buffers were emptied by the restart (dropping needs root)")


def _checkpoint(conn) -> None:
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        db.execute("CHECKPOINT")


def _run_iteration(opts: BenchOptions, target: Target, conn, run_dir: RunDirectory,
                   plan: RunPlan, manifest: dict, progress: Progress,
                   iteration: int, clients: int, scripts: tuple[ScriptSpec, ...],
                   driver: Driver) -> None:
    label = f"c{clients}-i{iteration}"
    it_dir = run_dir.raw / "pgbench" / label
    it_dir.mkdir(parents=True, exist_ok=True)
    iplan = pgbench.IterationPlan(clients=clients, iteration=iteration,
                                  threads=opts.threads_for(clients),
                                  seconds=opts.warmup_s + opts.duration_s,
                                  log_prefix=it_dir / "tx")
    cmd = pgbench.pgbench_command(target.install, conn, opts, scripts, iplan)
    manifest["commands"].append(" ".join(cmd))
    record = IterationRecord(
        clients=clients, iteration=iteration, threads=iplan.threads, status="running",
        command=cmd, log_files=[],
        stdout_file=str((it_dir / "stdout.txt").relative_to(run_dir.path)),
        stderr_file=str((it_dir / "stderr.txt").relative_to(run_dir.path)), returncode=None,
        started_at=utc_now())
    plan.records.append(record)
    run_dir.save_plan(plan)
    _checkpoint(conn)
    recorder = _start_telemetry(opts, target, it_dir)
    window = WindowSnapshots(driver, conn, opts.warmup_s, opts.duration_s,
                             it_dir / "window.json")
    task = progress.add_task(f"{clients} clients, iteration {iteration}", total=iplan.seconds,
                             status="starting")

    def on_progress(t: float, tps: float, lat: float) -> None:
        phase = "warm-up" if t <= opts.warmup_s else "measuring"
        progress.update(task, completed=t, status=f"{phase} {tps:,.0f} tps, {lat:.2f} ms")

    local = target.kind != "dsn"
    log_offset = target.log_size() if local else 0
    try:
        if recorder is not None:
            recorder.mark("pgbench_start")
        window.start()
        outcome = pgbench.run_pgbench(cmd, conn, it_dir / "stdout.txt", it_dir / "stderr.txt",
                                      on_progress, driver.session_options(local))
    except KeyboardInterrupt:
        record.status = "interrupted"
        raise
    finally:
        with contextlib.suppress(Exception):  # an interrupted window still has its edges
            window.finish()
        with contextlib.suppress(Exception):  # evidence like telemetry, never the result
            driver.collect(it_dir, target.log_path if local else None, log_offset)
        if recorder is not None:
            # Telemetry is evidence, not the result: its failure (a full disk) must not
            # keep the pgbench logs from being saved below.
            with contextlib.suppress(Exception):
                recorder.mark("pgbench_end")
                recorder.stop()
        record.ended_at = utc_now()
        if record.status == "running":
            record.status = "pending"
        progress.update(task, visible=False)
        try:
            _compress_logs(it_dir, run_dir.path, record.log_files)
        finally:
            run_dir.save_plan(plan)
    record.returncode = outcome.returncode
    record.pgbench_tps = outcome.pgbench_tps
    if outcome.returncode != 0:
        record.status = "failed"
        run_dir.save_plan(plan)
        err = (it_dir / "stderr.txt").read_text(errors="replace").strip().splitlines()
        detail = next((line for line in reversed(err) if "error" in line.lower()),
                      err[-1] if err else "")
        raise RunFailed(f"pgbench exited with code {outcome.returncode} at {clients} clients, "
                        f"iteration {iteration}: {detail}")
    record.status = "ok"
    run_dir.save_plan(plan)


class WindowSnapshots:
    """Database snapshots at the start and the end of the measured window, and between.

    pgbench runs warm-up and measurement in one invocation, so a thread takes the start
    snapshot ``warmup_s`` after launch, one every ``interval_s`` (NOPM over time) and the
    end snapshot ``duration_s`` later, on a fixed grid. The end is timed rather than taken
    when pgbench exits because pgbench finishes the ``\\sleep`` under way when -T runs out:
    with think times (up to 120 s) it can exit a minute late, and a window stretched to
    that minute would understate NOPM. If pgbench stops early (an error, Ctrl-C), the end
    snapshot is taken then. All go to ``window.json``: ``start``, ``end``, the ``series``.
    One connection serves every snapshot, one transaction each (TPM subtracts them).
    Drivers that take no snapshots (pgbench's workloads) get no connection and no thread.
    """

    def __init__(self, driver: Driver, conn, warmup_s: float, duration_s: float, path: Path,
                 interval_s: float = SERIES_INTERVAL_S) -> None:
        self.driver, self.conn, self.path = driver, conn, path
        self.warmup_s, self.duration_s, self.interval_s = warmup_s, duration_s, interval_s
        self.points: dict[str, dict] = {}
        self.series: list[dict] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.session: Any = None

    def _take(self, name: str | None) -> None:
        with contextlib.suppress(Exception):  # a missed snapshot loses one figure, not the run
            point = {"taken_at": time.time(), "snapshot": self.driver.snapshot(self.session)}
            if name is not None:
                self.points[name] = point
            self.series.append(point)

    def _sample(self) -> None:
        if self.stopped.wait(self.warmup_s):
            return
        self._take("start")
        started = time.monotonic()
        steps = math.ceil(self.duration_s / self.interval_s)
        for offset in [k * self.interval_s for k in range(1, steps)] + [self.duration_s]:
            if self.stopped.wait(max(0.0, started + offset - time.monotonic())):
                return
            self._take("end" if offset == self.duration_s else None)

    def start(self) -> None:
        with contextlib.suppress(Exception):  # no connection: no snapshots, the run goes on
            self.session = self.driver.open_session(self.conn)
        if self.session is not None:
            self.thread.start()

    def finish(self) -> None:
        self.stopped.set()
        if self.thread.ident is None:
            return
        self.thread.join()
        if "start" in self.points and "end" not in self.points:
            self._take("end")  # pgbench ended before the window did
        with contextlib.suppress(Exception):
            self.session.close()
        if self.points:
            write_json_atomic(self.path, {**self.points, "interval_s": self.interval_s,
                                          "series": self.series})


def _start_telemetry(opts: BenchOptions, target: Target, it_dir: Path):
    """Samplers for this iteration, writing under ``it_dir/telemetry`` (None when off)."""
    if not opts.telemetry:
        return None
    from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder

    local = target.kind != "dsn"
    recorder = TelemetryRecorder(
        raw_dir=it_dir, conn=target.admin_connection(),
        data_dir=target.data_dir if local else None,
        wal_dir=target.effective_wal_dir if local else None,
        server_log=target.log_path if local else None,
        server_log_offset=target.log_size(), config=TelemetryConfig(),
        # On servers pgdyno runs, sample from the "postgres" database: the samplers' own
        # queries then stay out of the workload database's counters (TPM).
        sample_dbname="postgres" if local else None)
    recorder.start()
    return recorder


def _compress_logs(it_dir: Path, root: Path, out: list[str]) -> None:
    """gzip each pgbench log into ``out``; one that cannot be (disk full) is kept as it is."""
    error = None
    for path in sorted(it_dir.glob("tx.*")):
        if path.suffix == ".gz":
            out.append(str(path.relative_to(root)))
            continue
        gz = path.with_name(path.name + ".gz")
        try:
            with path.open("rb") as src, gzip.open(gz, "wb", compresslevel=3) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as exc:
            gz.unlink(missing_ok=True)
            out.append(str(path.relative_to(root)))
            error = error or exc
            continue
        path.unlink()
        out.append(str(gz.relative_to(root)))
    if error is not None:
        raise error


def _finish(opts: BenchOptions, target: Target, run_dir: RunDirectory, plan: RunPlan,
            manifest: dict, result: BenchResult, index: RunIndex, console: Console) -> None:
    from pgdyno.reports.build import build_reports  # reports depend on the runner's files

    for record in plan.records:
        if record.status in ("running", "pending"):
            record.status = result.status if result.status != "ok" else "ok"
    with contextlib.suppress(Exception):
        run_dir.save_plan(plan)
    if not opts.target.keep:
        target.stop()
    run_dir.release_reserve()  # room for the final status even when the disk filled up
    with contextlib.suppress(Exception):
        run_dir.save_plan(plan)
    manifest["status"] = result.status
    manifest["ended_at"] = utc_now()
    manifest["reason"] = result.reason
    manifest["notes"] = list(plan.notes)
    summary = None
    try:
        run_dir.write_json("manifest.json", manifest)
        if any(r.log_files for r in plan.records):
            summary = build_reports(run_dir.path)
    except Exception as exc:  # the run's data is safe in raw/; the report can be rebuilt
        result.notes.append(f"report not built: {exc}")
        with contextlib.suppress(Exception):
            manifest["notes"].append(f"report not built: {exc}")
            run_dir.write_json("manifest.json", manifest)
    with contextlib.suppress(Exception):
        _index(index, run_dir, manifest, summary)


def _index(index: RunIndex, run_dir: RunDirectory, manifest: dict, summary) -> None:
    tps = p99 = None
    if summary is not None and summary.per_clients:
        best = max(summary.per_clients, key=lambda c: c.tps_mean or 0)
        tps, p99 = best.tps_mean, best.latency.percentiles_ms.get("p99")
    index.upsert(RunRow(
        run_id=index.run_id_for(run_dir.path), context=run_dir.path.parent.name,
        workload=manifest["options"]["workload"], status=manifest["status"],
        started_at=manifest["started_at"], ended_at=manifest["ended_at"],
        config=(manifest.get("config") or {}).get("name"),
        clients=",".join(str(c) for c in manifest["options"]["clients"]), tps=tps, p99_ms=p99,
        pg_version=(manifest.get("server") or {}).get("version")))


@contextlib.contextmanager
def _progress(opts: BenchOptions, console: Console):
    progress = Progress(TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                        console=console, disable=not opts.show_progress, transient=False)
    with progress:
        yield progress
