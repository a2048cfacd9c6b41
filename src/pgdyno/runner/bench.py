"""``pgdyno bench``: the one run loop every workload plugs into, one run at a time.

Lifecycle: options are validated before anything is created (``runner.preflight``: the
options, the server, free space, the workdir's lock); then the run directory and its
manifest (so that even a failed start leaves a record), with the settings the server starts
with (``runner.settings``); then the iterations (``runner.iterations``: the server, the
dataset, every iteration inside its telemetry). Whatever happens, the ``finally`` block
stops the server, rebuilds the summary and report from what reached ``raw/``, writes the
final status and indexes the run. Bad input that only the started run can see (a workdir
the server user cannot reach, a user's tables in the cluster) refuses it; refused before
its first iteration, it leaves no run directory and no index row, like a pre-flight
refusal. The workload (``pgdyno.workloads``) brings everything
that differs; the target (``pgdyno.targets``) answers what its server can do.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno import __version__, serde
from pgdyno.errors import PgdynoError, RunFailed, RunInterrupted, RunRefused, UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import MANIFEST_SCHEMA_VERSION, Manifest, TargetInfo, ToolInfo
from pgdyno.results.rundir import PLAN_SCHEMA_VERSION, RunDirectory, RunPlan, utc_now
from pgdyno.results.store import RecordingIndex
from pgdyno.runner.drivers import open_drivers
from pgdyno.runner.environment import (
    HostFacts,
    database_host_facts,
    describe_directories,
    host_facts,
)
from pgdyno.runner.gate import OWN_PACE, StepGate
from pgdyno.runner.iterations import execute, save
from pgdyno.runner.outcome import RunOutcome
from pgdyno.runner.preflight import check_free_space, check_server, lock_workdir, preflight
from pgdyno.runner.report import build_reports, index_row
from pgdyno.runner.settings import build_settings, database_host_hardware
from pgdyno.targets import ServerStartError, Target, install_for, open_target
from pgdyno.targets.ssh import SshTransport
from pgdyno.telemetry.remote import RemoteHost
from pgdyno.workloads import registry
from pgdyno.workloads.base import Headline, RunContext, Workload


@dataclass
class BenchResult:
    run_dir: Path
    status: str
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    headline: Headline | None = None
    outcome: RunOutcome | None = None
    """The peak, its interval, saturation, verdict and dataset fit (see runner.outcome)."""
    report_error: str = ""
    """Why the summary and reports were not built ('' when they were): the run's raw files
    are kept, and `pgdyno report RUN_DIR` builds them again."""


RUN_OVERHEAD_S = 8.0
"""Measured start, checkpoint, stop and report time of one run on a small machine: what
plans of several runs add to each run's load."""
HARDWARE_NAME_ENV = "PGDYNO_HARDWARE_NAME"
"""The machine's name in default contexts, instead of ``<vcpus>vcpu-<ram>gb``: `pgdyno fleet`
sets it to the inventory host's name, so that every host's runs land in contexts of its own."""


def hardware_label(host: HostFacts) -> str:
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
              role: dict[str, Any] | None = None, gate: StepGate = OWN_PACE) -> BenchResult:
    """Run one benchmark; ``role`` (compare side, campaign cell) goes into the manifest;
    ``gate`` says when each iteration starts (a comparison's schedule: runner.gate).

    A failed or interrupted run raises RunFailed / RunInterrupted carrying its run_dir."""
    console = console or Console(stderr=True)
    workload = registry.get(opts.workload)
    host = host_facts()
    context = context_of(opts, host)
    install = install_for(opts.target) if workload.needs_server else None
    transport = _ssh_transport(opts) if install is not None else None
    try:
        hardware = database_host_hardware(opts, transport)
        settings, config_record = (build_settings(opts, workload, install, hardware)
                                   if install is not None else ({}, {}))
        target = (open_target(opts.target, settings, install, transport)
                  if install is not None else None)
    except BaseException:
        if transport is not None:
            transport.close()
        raise
    preflight(opts, target.install if target is not None else None)
    describe_directories(host, _measured_directories(opts, workload, target))
    if target is not None:
        check_server(opts, target)
    remote = _open_remote(target, transport)
    if target is not None and target.is_local:
        check_free_space(workload.dataset_bytes(opts), target.data_dir)
    # The local index, and the shared --results-db (reachable, schema not too new) too.
    index = RecordingIndex(opts.results_dir, opts.results_db, warn=lambda line: console.print(
        f"pgdyno: warning: {line}", markup=False, highlight=False))
    index.check()  # a damaged index is refused (with --reindex offered) before a run dir
    drivers = open_drivers(opts, target)  # an unreachable driver refuses the run here
    lock = None
    try:
        lock = lock_workdir(target, console, index.shared)
        run_dir = RunDirectory.create(opts.results_dir, context, opts.workload)
    except BaseException:
        if lock is not None:
            lock.release()
        if drivers is not None:
            drivers.close()
        raise
    if lock is not None and target is not None:
        lock.hold_for(run_dir.path, opts.results_dir, target.data_dir)
    plan = RunPlan(schema_version=PLAN_SCHEMA_VERSION, workload=opts.workload, context=context)
    manifest = Manifest(
        schema_version=MANIFEST_SCHEMA_VERSION, tool=ToolInfo("pgdyno", __version__),
        workload=opts.workload, context=context, status="running", started_at=utc_now(),
        options=opts, host=serde.to_dict(host), role=dict(role or {}),
        target=_target_info(opts, target), config=config_record,
        database_host=(database_host_facts(hardware, transport.destination,
                                           remote.platform() if remote else None)
                       if hardware is not None and transport is not None else None))
    ctx = RunContext(opts=opts, run_dir=run_dir, plan=plan, commands=manifest.commands,
                     target=target, remote=remote, dataset_schema=workload.dataset_schema,
                     drivers=drivers)
    save(run_dir, plan, manifest)
    _index(index, run_dir, manifest, workload, None)
    result = BenchResult(run_dir=run_dir.path, status="running")
    error: Exception | None = None
    try:
        execute(workload, ctx, manifest, console, gate)
        result.status = "ok"
    except KeyboardInterrupt:
        result.status, result.reason = "interrupted", "interrupted by the user (Ctrl-C)"
    except (PgdynoError, OSError) as exc:
        result.status, result.reason = "failed", str(exc)
        error = exc
        # A server pgdyno started that stopped: its log says why (an existing server is
        # always "running" to pgdyno, which never reads its log).
        if (target is not None and not target.is_running()
                and not isinstance(exc.__cause__, ServerStartError)):
            result.reason += f"; server log: {target.log_tail(5)}"
    except Exception as exc:  # a bug, pgdyno's or a plugin's: the CLI reports it in one line
        # The run ends as failed, its server stopped, rather than left "running" forever.
        result.status, result.reason = "failed", f"unexpected error: {type(exc).__name__}: {exc}"
        raise
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
        raise _refusal(error, run_dir, plan, index, manifest) from error
    if result.status == "failed":
        raise RunFailed(f"run failed: {result.reason} (partial results in {run_dir.path})",
                        run_dir.path)
    return result


def _refusal(error: UsageError, run_dir: RunDirectory, plan: RunPlan,
             index: RecordingIndex, manifest: Manifest) -> RunRefused:
    """Bad input found once the run had started. Before its first iteration it measured
    nothing: its directory and index row go, as for input refused before it existed (a
    workdir out of the server user's reach, a user's tables in the cluster pgdyno runs);
    after, or when the directory holds more than the run's start wrote, both are kept."""
    if plan.records or not run_dir.discard():
        return RunRefused(f"{error} (run directory {run_dir.path})", run_dir.path)
    with contextlib.suppress(Exception):  # a row left behind is dropped by `runs --reindex`
        index.delete(index.run_id_for(run_dir.path), manifest.host.get("hostname"))
    return RunRefused(str(error))


def run_one(opts: BenchOptions, role: dict, console: Console | None) -> Path | None:
    """One plain run with its role in its manifest (a compare side, a validation, a scaling
    step, a search's confirmation); None when it failed or was refused late (its directory
    is kept)."""
    try:
        return run_bench(opts, console, role=role).run_dir
    except (RunFailed, RunRefused):
        return None


def _ssh_transport(opts: BenchOptions) -> SshTransport | None:
    """--ssh: the run's one multiplexed connection to the database host, opened before
    anything is written (an unreachable host is bad input, like an unreachable --dsn)."""
    if not opts.target.ssh:
        return None
    transport = SshTransport(opts.target.ssh, opts.target.ssh_config)
    transport.open()
    return transport


def _open_remote(target: Target | None, transport: SshTransport | None) -> RemoteHost | None:
    """--ssh: the database host's telemetry view, on the run's connection, told where the
    server's directories and log are: known to a server pgdyno starts there, named by the
    server itself otherwise (--dsn)."""
    if transport is None or target is None:
        return None
    try:
        remote = RemoteHost(transport)
        files = target.server_files()
        if files is None:
            remote.describe_server(target.admin_connection().conninfo())
        else:
            remote.directories, remote.log_path = files
    except BaseException:
        transport.close()
        raise
    return remote


def _measured_directories(opts: BenchOptions, workload: Workload,
                          target: Target | None) -> dict[str, Path]:
    """Role -> directory whose devices the run's environment table names: the data and WAL
    directories of a server pgdyno manages here, and those the workload measures itself."""
    dirs: dict[str, Path] = {}
    if target is not None and target.is_local:
        dirs["data"] = target.data_dir
        dirs["wal"] = opts.target.wal_dir or target.data_dir / "pg_wal"
        if opts.target.archive_dir is not None:
            dirs["archive"] = opts.target.archive_dir
    dirs.update(workload.storage_directories(opts))
    return dirs


def _target_info(opts: BenchOptions, target: Target | None) -> TargetInfo | None:
    """The manifest's record of the server: its kind, the binaries, and its cluster when
    that is not on this machine (on the --ssh host; an existing server's is unknown)."""
    if target is None:
        return None
    target.locate()
    return TargetInfo(kind=target.kind, pg_bin=target.bin_dir,
                      pgbench_version=target.install.version,
                      wal_dir=str(opts.target.wal_dir) if opts.target.wal_dir else None,
                      ssh=opts.target.ssh, data_dir=None if target.is_local else target.data_dir)


def _finish(workload: Workload, ctx: RunContext, manifest: Manifest, result: BenchResult,
            index: RecordingIndex) -> None:
    run_dir, plan = ctx.run_dir, ctx.plan
    for record in plan.records:
        if record.status in ("running", "pending"):
            record.status = result.status
    with contextlib.suppress(Exception):
        run_dir.save_plan(plan)
    if ctx.drivers is not None:
        ctx.drivers.close()
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
        save(run_dir, plan, manifest)
        if plan.records:
            built = build_reports(run_dir.path)
    except Exception as exc:  # the run's data is safe in raw/; the report can be rebuilt
        result.report_error = str(exc) or type(exc).__name__
        result.notes.append(f"report not built: {exc}")
        with contextlib.suppress(Exception):
            manifest.notes.append(f"report not built: {exc}")
            save(run_dir, plan, manifest)
    if built is not None:  # the outcome the report opens with, printed as it is
        result.headline, result.outcome = built.headline, built.outcome
    with contextlib.suppress(Exception):
        _index(index, run_dir, manifest, workload, result.headline,
               result.outcome.verdict if result.outcome is not None else None)


def _index(index: RecordingIndex, run_dir: RunDirectory, manifest: Manifest,
           workload: Workload, head: Headline | None, verdict: str | None = None) -> None:
    index.upsert(index_row(index, run_dir.path, manifest, workload, head, verdict))
