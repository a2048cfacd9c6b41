"""``pgdyno bench``: the one run loop every workload plugs into.

Lifecycle: options are validated before anything is created; then the run directory and
its manifest (so that even a failed start leaves a record), the server when the workload
needs one (with the config applied, rolled back when it does not start), the dataset, and
the iterations — iteration-major (1: c1 c2 c3, 2: c1 c2 c3, ...) so that drift over time
spreads over every client count instead of biasing one — each after a CHECKPOINT and
inside its own telemetry. Whatever happens, the ``finally`` block stops the server, rebuilds
the summary and report from what reached ``raw/``, writes the final status and indexes the
run. The workload (``pgdyno.workloads``) brings everything that differs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from pgdyno import __version__, serde
from pgdyno.config.sizing import PGDYNO_SESSIONS
from pgdyno.config.units import human_bytes
from pgdyno.errors import (
    PgdynoError,
    RunFailed,
    RunInterrupted,
    RunRefused,
    TargetError,
    UsageError,
)
from pgdyno.results.capacity import freeze_into
from pgdyno.results.manifest import (
    MANIFEST_SCHEMA_VERSION,
    BenchOptions,
    Manifest,
    TargetInfo,
    ToolInfo,
    manifest_to_dict,
)
from pgdyno.results.rundir import (
    PLAN_SCHEMA_VERSION,
    IterationRecord,
    RunDirectory,
    RunPlan,
    utc_now,
)
from pgdyno.results.store import RecordingIndex
from pgdyno.runner.environment import (
    HostFacts,
    database_host_facts,
    host_facts,
    server_facts,
    storage_facts,
)
from pgdyno.runner.lock import WorkdirLock, recover
from pgdyno.runner.outcome import RunOutcome, fit_of
from pgdyno.runner.report import index_row
from pgdyno.targets import (
    PgInstall,
    ServerStartError,
    Target,
    host_hardware,
    install_for,
    open_target,
)
from pgdyno.targets.remote import RemoteLock, RemoteServer
from pgdyno.workloads import dataset, registry
from pgdyno.workloads.base import (
    Headline,
    RunContext,
    Step,
    Workload,
)


@dataclass
class BenchResult:
    run_dir: Path
    status: str
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    headline: Headline | None = None
    outcome: RunOutcome | None = None
    """The peak, its interval, saturation, verdict and dataset fit (see runner.outcome)."""


LOCAL_KINDS = ("embedded", "local")
"""Targets whose server runs on this machine: its files, log and workdir are local."""

HARDWARE_NAME_ENV = "PGDYNO_HARDWARE_NAME"
"""The machine's name in default contexts, instead of ``<vcpus>vcpu-<ram>gb``: `pgdyno fleet`
sets it to the inventory host's name, so that every host's runs land in contexts of its own."""


def hardware_label(host: HostFacts) -> str:
    import os

    if name := os.environ.get(HARDWARE_NAME_ENV, "").strip():
        return name
    return f"{host.cpu_count}vcpu-{round(host.ram_bytes / 2**30)}gb"


def context_of(opts: BenchOptions, host: HostFacts | None = None) -> str:
    if opts.context:
        return opts.context
    if opts.target.ssh:  # the database host's name, not this client's hardware
        return f"{opts.target.ssh.rpartition('@')[2]}--{opts.workload}"
    return f"{hardware_label(host or host_facts())}--{opts.workload}"


def run_bench(opts: BenchOptions, console: Console | None = None,
              role: dict[str, Any] | None = None) -> BenchResult:
    """Run one benchmark; ``role`` (compare side, campaign cell) goes into the manifest.

    A failed or interrupted run raises RunFailed / RunInterrupted carrying its run_dir."""
    console = console or Console(stderr=True)
    workload = registry.get(opts.workload)
    host = host_facts()
    context = context_of(opts, host)
    install = install_for(opts.target) if workload.needs_server else None
    transport = _ssh_transport(opts) if install is not None else None
    try:
        remote_hardware = _host_hardware(opts, transport)
        settings, config_record = (
            resolve_settings(opts, workload, install, remote_hardware
                             if opts.target.kind == "remote" else None)
            if install is not None else ({}, {}))
        if install is not None:
            _archive_settings(opts, settings, config_record)
        target = (open_target(opts.target, settings, install, transport)
                  if install is not None else None)
    except BaseException:
        if transport is not None:
            transport.close()
        raise
    preflight(opts, target.install if target is not None else None)
    host.storage = storage_facts(_measured_directories(opts, workload, target))
    if target is not None and target.kind == "dsn":
        # An unreachable server is bad input, found before anything is written: no run
        # directory, no index row (a server pgdyno starts is different: a config that
        # does not start is a result, recorded with its rollback).
        target.start()
        _check_connection_room(opts, target)
    remote = _open_remote(target, transport)
    if target is not None and target.kind in LOCAL_KINDS:
        _check_free_space(workload.dataset_bytes(opts), target.data_dir)
    # The local index, and the shared --results-db (reachable, schema not too new) too.
    index = RecordingIndex(opts.results_dir, opts.results_db, warn=lambda line: console.print(
        f"pgdyno: warning: {line}", markup=False, highlight=False))
    index.check()  # a damaged index is refused (with --reindex offered) before a run dir
    lock = _lock_workdir(opts, target, console, index.shared)
    try:
        run_dir = RunDirectory.create(opts.results_dir, context, opts.workload)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if lock is not None and target is not None:
        lock.hold_for(run_dir.path, opts.results_dir, target.data_dir)
    plan = RunPlan(schema_version=PLAN_SCHEMA_VERSION, workload=opts.workload, context=context)
    manifest = Manifest(
        schema_version=MANIFEST_SCHEMA_VERSION, tool=ToolInfo("pgdyno", __version__),
        workload=opts.workload, context=context, status="running", started_at=utc_now(),
        options=opts, host=serde.to_dict(host), role=dict(role or {}),
        target=_target_info(opts, target), config=config_record,
        database_host=(database_host_facts(remote_hardware, transport.destination)
                       if remote_hardware is not None and transport is not None else None))
    ctx = RunContext(opts=opts, run_dir=run_dir, plan=plan, commands=manifest.commands,
                     target=target, remote=remote, dataset_schema=workload.dataset_schema)
    _save(run_dir, plan, manifest)
    _index(index, run_dir, manifest, workload, None)
    result = BenchResult(run_dir=run_dir.path, status="running")
    error: Exception | None = None
    try:
        _execute(workload, ctx, manifest, console)
        result.status = "ok"
    except KeyboardInterrupt:
        result.status, result.reason = "interrupted", "interrupted by the user (Ctrl-C)"
    except (PgdynoError, OSError) as exc:
        result.status, result.reason = "failed", str(exc)
        error = exc
        if (target is not None and target.kind != "dsn" and not target.is_running()
                and not isinstance(exc.__cause__, ServerStartError)):
            result.reason += f"; server log: {target.log_tail(5)}"
    finally:
        try:
            _finish(workload, ctx, manifest, result, index)
        finally:
            if lock is not None:
                lock.release()
    if result.status == "interrupted":
        raise RunInterrupted(f"run interrupted; partial results kept in {run_dir.path}",
                             run_dir.path)
    if isinstance(error, UsageError):  # bad input found late (e.g. foreign tables): exit 2
        raise RunRefused(f"{error} (run directory {run_dir.path})", run_dir.path) from error
    if result.status == "failed":
        raise RunFailed(f"run failed: {result.reason} (partial results in {run_dir.path})",
                        run_dir.path)
    return result


def preflight(opts: BenchOptions, install: PgInstall | None) -> None:
    """Bad input the options show before any server is looked at, refused before anything
    is created (``run_bench`` before its run directory, a sweep before its own): an archive
    directory that is a file, on a read-only filesystem or out of the server user's reach,
    and the workload's own pre-flight (``check_with_target``: a script pgbench refuses,
    TPROC-H's missing data generator)."""
    from pgdyno.targets import archive
    from pgdyno.targets.osuser import server_user

    spec = archive.spec_of(opts.target)
    if spec.enabled:  # refused with --dsn and --ssh: the server is local, run as server_user()
        archive.check_directory(spec, server_user())
    registry.get(opts.workload).check_with_target(opts, install)


def _ssh_transport(opts: BenchOptions):
    """--ssh: the run's one multiplexed connection to the database host, opened before
    anything is written (an unreachable host is bad input, like an unreachable --dsn)."""
    if not opts.target.ssh:
        return None
    from pgdyno.targets.ssh import SshTransport

    transport = SshTransport(opts.target.ssh, opts.target.ssh_config)
    transport.open()
    return transport


def _host_hardware(opts: BenchOptions, transport):
    """--ssh: the database host's hardware, detected there: what a named config is sized
    for on a server pgdyno starts there, and the database host the manifest and the run
    report describe beside this client (None: no --ssh). Only a config that needs it fails
    the run when the host cannot be detected (no python3 there)."""
    if transport is None:
        return None
    if opts.target.kind == "remote" and (opts.config != "default" or opts.sets):
        return host_hardware(opts.target, transport)
    from pgdyno.targets.remote import detect_hardware

    try:
        return detect_hardware(transport, opts.target.remote_workdir or ".")
    except Exception:  # noqa: BLE001 - a description only: the report says the host is unknown
        return None


def _open_remote(target: Target | None, transport):
    """--ssh: the database host's telemetry view, on the run's connection. A --dsn server
    names its own directories and log; a remote server pgdyno starts is known already."""
    if transport is None or target is None:
        return None
    from pgdyno.telemetry.remote import RemoteHost

    try:
        remote = RemoteHost(transport)
        if target.kind == "remote":
            target.locate()
            remote.directories = target.directories()
            remote.log_path = target.log_path
        else:
            remote.describe_server(target.admin_connection().conninfo())
    except BaseException:
        transport.close()
        raise
    return remote


def _measured_directories(opts: BenchOptions, workload: Workload,
                          target: Target | None) -> dict[str, Path]:
    """Role -> directory whose devices the run's environment table names: the data and WAL
    directories of a server pgdyno manages, and those the workload measures itself."""
    dirs: dict[str, Path] = {}
    if target is not None and target.kind in LOCAL_KINDS:
        dirs["data"] = target.data_dir
        dirs["wal"] = opts.target.wal_dir or target.data_dir / "pg_wal"
        if opts.target.archive_dir is not None:
            dirs["archive"] = opts.target.archive_dir
    dirs.update(workload.storage_directories(opts))
    return dirs


def _check_connection_room(opts: BenchOptions, target: Target) -> None:
    """Clients a --dsn server cannot accept are refused before anything is created."""
    import psycopg

    with psycopg.connect(target.admin_connection().conninfo(), autocommit=True) as db:
        limit, reserved, in_use = db.execute(
            "SELECT current_setting('max_connections')::int, "
            "current_setting('superuser_reserved_connections')::int "
            "+ coalesce(current_setting('reserved_connections', true)::int, 0), "
            "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        ).fetchone()
    free = limit - reserved - (in_use - 1)  # our own connection closes before the run
    if max(opts.clients) + PGDYNO_SESSIONS > free:
        raise UsageError(
            f"--clients {max(opts.clients)}: this server accepts at most "
            f"{max(0, free - PGDYNO_SESSIONS)} (max_connections {limit}, {reserved} reserved, "
            f"{in_use - 1} in use by others, {PGDYNO_SESSIONS} for pgdyno's own sessions)")


SPACE_MARGIN = 1.2
"""Free space a dataset needs beyond its estimated size: WAL written while it is built, and
the estimate's own error."""


def _check_free_space(dataset_bytes: int | None, data_dir: Path) -> None:
    """Refuse, before anything is built, a dataset the data directory's filesystem cannot
    hold (what is already in the cluster counts: a dataset may be reused or replaced)."""
    if not dataset_bytes:
        return
    existing = data_dir
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    needed = dataset_bytes * SPACE_MARGIN
    if needed <= free:
        return
    # Only then walk the cluster: what it already holds may be reused or replaced.
    held = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file()) \
        if data_dir.is_dir() else 0
    if needed > free + held:
        raise UsageError(f"the dataset needs about {human_bytes(int(needed))} and the "
                         f"filesystem of {existing} has {human_bytes(free)} free; choose a "
                         "smaller --scale/--dataset-size or another --workdir")


def _lock_workdir(opts: BenchOptions, target: Target | None, console: Console,
                  shared: Any = None) -> WorkdirLock | RemoteLock | None:
    """The workdir's lock for a run on a server pgdyno starts, here or in the remote workdir
    on the --ssh host; a killed predecessor's server is stopped and its run marked failed
    first."""
    if target is None or target.kind not in (*LOCAL_KINDS, "remote"):
        return None
    remote = isinstance(target, RemoteServer)
    lock = target.workdir_lock() if remote else WorkdirLock(opts.target.workdir)
    previous = lock.acquire()
    if previous is not None:
        stop = lock.stop_orphaned_server if isinstance(lock, RemoteLock) else None
        for line in recover(previous, shared, stop):
            console.print(f"[yellow]{line}[/yellow]")
    return lock


def resolve_settings(opts: BenchOptions, workload: Workload, install: PgInstall,
                     hardware: Any = None) -> tuple[dict[str, str], dict]:
    """The PostgreSQL layer of the named config; stock PostgreSQL for ``default``.
    ``hardware``: the profile to size for (None: this machine's)."""
    if opts.config == "default" and not opts.sets:
        settings: dict[str, str] = {}
        record: dict = {"name": "default", "pg_settings": {}, "sources": {}}
    else:
        from pgdyno.config import resolve_config  # the configuration engine

        resolved = resolve_config(opts.config, list(opts.sets), install=install,
                                  workload=opts.workload, connections=max(opts.clients),
                                  dataset_bytes=workload.dataset_bytes(opts) or 0,
                                  tuning=workload.tuning, hardware=hardware,
                                  advisor=registry.ADVICE)
        settings, record = dict(resolved.pg_settings), resolved.to_dict()
    _make_room_for_clients(opts, settings, record, install)
    return settings, record


def _make_room_for_clients(opts: BenchOptions, settings: dict[str, str], record: dict,
                           install: PgInstall) -> None:
    """Raise max_connections of a server pgdyno starts when the clients would not fit,
    by the config engine's one rule (clients + pgdyno's sessions + reserved slots).

    Only when the config leaves max_connections alone (compliant TPROC-C at W = 30 runs 300
    terminals); a config that sets it too low is the user's choice and fails clearly."""
    from pgdyno.config.pgcatalog import for_install
    from pgdyno.config.sizing import connection_room
    from pgdyno.targets.local import BASE_SETTINGS

    if opts.target.kind == "dsn" or "max_connections" in settings:
        return
    room = connection_room(max(opts.clients), for_install(install))
    if room.needed > int(BASE_SETTINGS["max_connections"]):
        settings["max_connections"] = str(room.needed)
        record.setdefault("pg_settings", {})["max_connections"] = str(room.needed)
        record.setdefault("sources", {})["max_connections"] = f"pgdyno: {room.arithmetic()}"


def _archive_settings(opts: BenchOptions, settings: dict[str, str], record: dict) -> None:
    """--archive: archive_mode and archive_command on a server pgdyno starts, recorded with
    the config's settings (their source says --archive)."""
    from pgdyno.targets import archive

    spec = archive.spec_of(opts.target)
    added = archive.archive_settings(spec)
    if not added:
        return
    archive.check_wal_level(settings)
    settings.update(added)
    record.setdefault("pg_settings", {}).update(added)
    record.setdefault("sources", {}).update(
        {key: f"pgdyno: --archive {opts.target.archive}" for key in added})


def _archive_watch(ctx: RunContext):
    """The archive that the iteration's telemetry samples (None when archiving is off)."""
    from pgdyno.targets import archive

    spec = archive.spec_of(ctx.opts.target)
    return spec if spec.enabled else None


def _target_info(opts: BenchOptions, target: Target | None) -> TargetInfo | None:
    if target is None:
        return None
    remote = target.kind == "remote"
    if remote:
        target.locate()
    return TargetInfo(kind=target.kind,
                      pg_bin=target.bin_dir if remote else str(target.install.bin_dir),
                      pgbench_version=target.install.version,
                      wal_dir=str(opts.target.wal_dir) if opts.target.wal_dir else None,
                      ssh=opts.target.ssh, data_dir=target.data_dir if remote else None)


def _save(run_dir: RunDirectory, plan: RunPlan, manifest: Manifest) -> None:
    run_dir.save_plan(plan)
    run_dir.write_json("manifest.json", manifest_to_dict(manifest))


def _start_with_rollback(target: Target, manifest: Manifest, plan: RunPlan) -> None:
    """Start the server; if the config stops it from starting, roll back and fail the run.

    The server is brought back up with the last settings it started with, so the
    workdir is left usable, and the manifest and notes say what happened (seed 002's
    "Run 3 FAILED → rolled back").
    """
    config_name = manifest.config_name
    try:
        target.start()
    except TargetError as exc:
        if target.kind == "dsn":
            raise
        good_name, good = target.last_good_settings()
        target.write_settings(good)
        target.start()
        target.stop()
        line = exc.line if isinstance(exc, ServerStartError) else str(exc)
        manifest.config_rollback = {"failed_config": config_name, "error": str(exc),
                                    "rolled_back_to": good_name}
        plan.notes.append(f"config {config_name} did not start; rolled back to {good_name}")
        log = f"\nserver log: {exc.log_path}" if isinstance(exc, ServerStartError) else ""
        # The server's own line on a line of its own: the journal's root cause keeps it whole.
        raise RunFailed(f"the server did not start with config {config_name} (rolled back "
                        f"to config {good_name}, which starts):\n{line}{log}") from exc
    if target.kind != "dsn":
        target.remember_good_settings(config_name)


def _bring_up(ctx: RunContext, manifest: Manifest) -> None:
    """The server under test, started and described in the manifest."""
    target = ctx.target
    assert target is not None
    if target.kind in LOCAL_KINDS:
        from pgdyno.targets import archive

        ctx.plan.notes.extend(archive.prepare(archive.spec_of(ctx.opts.target), target.user))
    target.prepare()
    _start_with_rollback(target, manifest, ctx.plan)
    ctx.conn = dataset.scoped(target.connection(ctx.opts.via), ctx.dataset_schema)
    manifest.connection = ctx.conn.describe()
    # The way it really connected (a --dsn naming a TCP host is TCP whatever --via says).
    manifest.options = dataclasses.replace(manifest.options, via=ctx.conn.via)
    manifest.server = serde.to_dict(server_facts(target.admin_connection()))


def _execute(workload: Workload, ctx: RunContext, manifest: Manifest,
             console: Console) -> None:
    opts = ctx.opts
    if workload.needs_server:
        _bring_up(ctx, manifest)
    _save(ctx.run_dir, ctx.plan, manifest)
    steps = [Step(clients=c, iteration=it, number=n) for n, (it, c) in enumerate(
        (it, c) for it in range(1, opts.iterations + 1) for c in opts.clients)]
    per_step = opts.warmup_s + opts.duration_s
    with _progress(opts, console) as progress:
        # The overall bar counts seconds of planned load, so its ETA is right from the
        # first iteration on; its description counts the iterations.
        overall = progress.add_task("preparing", total=len(steps) * per_step, status="")
        ctx.status = lambda text: progress.update(overall, status=text)
        ctx.prepared = workload.prepare(ctx)
        progress.update(overall, status="")
        manifest.dataset = {**ctx.prepared.dataset, **_dataset_fit(ctx)}
        manifest.commands.extend(ctx.prepared.commands)
        ctx.plan.parameters = ctx.prepared.parameters
        _save(ctx.run_dir, ctx.plan, manifest)
        for step in steps:
            progress.update(overall, description=f"iteration {step.number + 1}/{len(steps)}",
                            completed=step.number * per_step)
            if opts.cache == "cold" and step.number > 0 and ctx.target is not None:
                _make_cold(ctx)
            _run_step(workload, ctx, step, progress, overall)
        progress.update(overall, completed=len(steps) * per_step)
    workload.finish(ctx)


def _dataset_fit(ctx: RunContext) -> dict[str, Any]:
    """How big the prepared database is against shared_buffers and free memory: what the
    run exercises (seed 001 states it; a default run that silently fits in
    shared_buffers measures something else than the user thinks)."""
    if ctx.conn is None:
        return {}
    import psutil
    import psycopg

    with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as db:
        size, shared = db.execute(
            "SELECT pg_database_size(current_database()), "
            "pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    available = (psutil.virtual_memory().available if ctx.local_server
                 else ctx.target.meminfo_available() if ctx.manages_server else None)
    return {"size_bytes": int(size), "shared_buffers_bytes": int(shared),
            "available_bytes": available, "fits": fit_of(int(size), int(shared), available)}


def _make_cold(ctx: RunContext) -> None:
    """Restart the server (empty shared_buffers) and drop the OS page cache if permitted."""
    assert ctx.target is not None
    ctx.target.restart()
    ctx.conn = dataset.scoped(ctx.target.connection(ctx.opts.via), ctx.dataset_schema)
    note = _drop_os_cache() if ctx.local_server else ctx.target.drop_os_cache()
    if note and note not in ctx.plan.notes:
        ctx.plan.notes.append(note)


def _drop_os_cache() -> str:
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return ""
    except OSError as exc:
        return (f"--cache cold: the OS page cache was not dropped ({exc.strerror}); "
                "only shared_buffers were emptied by the restart (dropping needs root)")


def _run_step(workload: Workload, ctx: RunContext, step: Step, progress: Progress,
              overall: Any) -> None:
    """One iteration inside its telemetry; its record saved however it ends."""
    opts = ctx.opts
    record = IterationRecord(
        clients=step.clients, iteration=step.iteration, threads=0, status="running",
        command=[], log_files=[], stdout_file="", stderr_file="", returncode=None,
        started_at=utc_now())
    ctx.plan.records.append(record)
    ctx.run_dir.save_plan(ctx.plan)
    workload.before_iteration(ctx)
    it_dir = step.directory(ctx.run_dir.raw, workload.engine_dir)
    recorder = _start_telemetry(ctx, it_dir)
    total = opts.warmup_s + opts.duration_s
    task = progress.add_task(f"{step.clients} clients, iteration {step.iteration}",
                             total=total, status="starting")
    try:
        if recorder is not None:
            recorder.mark(f"{workload.engine_dir}_start")
        def report(t: float, text: str) -> None:
            progress.update(task, completed=t, status=text)
            progress.update(overall, completed=step.number * total + min(t, total))

        workload.run_iteration(ctx, step, record, report)
        record.status = "ok"
    except KeyboardInterrupt:
        record.status = "interrupted"
        raise
    except Exception:
        record.status = "failed"
        raise
    finally:
        if recorder is not None:
            # Telemetry is evidence, not the result: its failure (a full disk) must not
            # keep the iteration's own files from being saved.
            with contextlib.suppress(Exception):
                recorder.mark(f"{workload.engine_dir}_end")
                recorder.stop()
        record.ended_at = utc_now()
        progress.update(task, visible=False)
        ctx.run_dir.save_plan(ctx.plan)


def _start_telemetry(ctx: RunContext, it_dir: Path):
    """Samplers for this iteration, writing under ``it_dir/telemetry`` (None when off).

    Without a server (cpu, fio) the host samplers run alone."""
    if not ctx.opts.telemetry:
        return None
    from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder

    target, local = ctx.target, ctx.local_server
    it_dir.mkdir(parents=True, exist_ok=True)
    recorder = TelemetryRecorder(
        raw_dir=it_dir, conn=target.admin_connection() if target is not None else None,
        data_dir=target.data_dir if local else None,
        wal_dir=target.effective_wal_dir if local else None,
        server_log=target.log_path if local else None,
        server_log_offset=target.log_size() if target is not None else 0,
        config=TelemetryConfig(),
        # On servers pgdyno runs, sample from the "postgres" database: the samplers' own
        # queries then stay out of the workload database's counters (TPM).
        sample_dbname="postgres" if ctx.manages_server else None, remote=ctx.remote,
        archive=_archive_watch(ctx) if local else None)
    recorder.start()
    with contextlib.suppress(Exception):  # evidence, never the result
        # The host's measured storage capacity (pgdyno bench fio) as it is now, kept with
        # the iteration so a rebuilt report reads the limits it was measured against.
        freeze_into(ctx.opts.results_dir, it_dir / "telemetry")
    return recorder


def _finish(workload: Workload, ctx: RunContext, manifest: Manifest, result: BenchResult,
            index: RecordingIndex) -> None:
    from pgdyno.runner.report import build_reports

    run_dir, plan = ctx.run_dir, ctx.plan
    for record in plan.records:
        if record.status in ("running", "pending"):
            record.status = result.status
    with contextlib.suppress(Exception):
        run_dir.save_plan(plan)
    if ctx.target is not None and not ctx.opts.target.keep:
        ctx.target.stop()
    if ctx.remote is not None:
        with contextlib.suppress(Exception):
            ctx.remote.close()
            ctx.remote.transport.close()
    run_dir.release_reserve()  # room for the final status even when the disk filled up
    manifest.status, manifest.ended_at, manifest.reason = result.status, utc_now(), result.reason
    manifest.notes = list(plan.notes)
    built = None
    try:
        _save(run_dir, plan, manifest)
        if plan.records:
            built = build_reports(run_dir.path)
    except Exception as exc:  # the run's data is safe in raw/; the report can be rebuilt
        result.notes.append(f"report not built: {exc}")
        with contextlib.suppress(Exception):
            manifest.notes.append(f"report not built: {exc}")
            _save(run_dir, plan, manifest)
    if built is not None:  # the outcome the report opens with, printed as it is
        result.headline, result.outcome = built.headline, built.outcome
    with contextlib.suppress(Exception):
        _index(index, run_dir, manifest, workload, result.headline,
               result.outcome.verdict if result.outcome is not None else None)


def _index(index: RecordingIndex, run_dir: RunDirectory, manifest: Manifest,
           workload: Workload, head: Headline | None, verdict: str | None = None) -> None:
    index.upsert(index_row(index, run_dir.path, manifest, workload, head, verdict))


@contextlib.contextmanager
def _progress(opts: BenchOptions, console: Console):
    progress = Progress(TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.percentage:>3.0f}%"),
                        TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                        console=console, disable=not opts.show_progress, transient=False)
    with progress:
        yield progress
