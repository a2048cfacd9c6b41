"""The iteration loop of a run: the server brought up (rolled back when its config does not
start), the dataset prepared and measured against memory, then every iteration, after a
CHECKPOINT (the workload's ``before_iteration``) and inside its own telemetry,
iteration-major (1: c1 c2 c3, 2: c1 c2 c3, ...) so that drift over time spreads over every
client count instead of biasing one; with ``--cache cold`` the server restarts and the page
cache is dropped before each iteration but the first.

Under the bars, a live line once a second (``runner.live``: TPS, p99, CPU busy, the leading
wait class); ``--no-progress`` silences it. Where stderr is not a terminal (a log), the line
is printed on its own every ``LIVE_LOG_EVERY_S`` seconds, as ``pgbench -P 10`` writes to a
log, instead of being redrawn.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from pgdyno import serde
from pgdyno.errors import RunFailed, TargetError
from pgdyno.options import BenchOptions
from pgdyno.results.capacity import freeze_into
from pgdyno.results.manifest import Manifest, manifest_to_dict
from pgdyno.results.rundir import IterationRecord, RunDirectory, RunPlan, utc_now
from pgdyno.runner.environment import server_facts
from pgdyno.runner.gate import OWN_PACE, StepGate
from pgdyno.runner.live import (
    LIVE_LOG_NAME,
    LiveFigures,
    LiveModel,
    LiveWatch,
    recording_requested,
)
from pgdyno.runner.longstep import long_step
from pgdyno.runner.outcome import fit_of
from pgdyno.runner.prewarm import prewarm
from pgdyno.targets import ServerStartError, Target, archive
from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder
from pgdyno.telemetry.catalog import DATASET_SIZE_SQL
from pgdyno.workloads import dataset
from pgdyno.workloads.base import RunContext, Step, Workload, counted_nowhere, told_nobody


def save(run_dir: RunDirectory, plan: RunPlan, manifest: Manifest) -> None:
    """The plan (raw/run.json) and the manifest, as they are now."""
    run_dir.save_plan(plan)
    run_dir.write_json("manifest.json", manifest_to_dict(manifest))


TURNS_NOTE = ("this run is one side of a comparison whose two loads took turns of one "
              "second (the alternating design): its load was stopped every other second, "
              "so its TPS over a window is about half its speed, and a transaction in "
              "flight at a pause has the pause in its latency; the comparison's report "
              "compares the seconds it ran in")


def execute(workload: Workload, ctx: RunContext, manifest: Manifest,
            console: Console, gate: StepGate = OWN_PACE) -> None:
    """Bring the server up, prepare the dataset, run every iteration, and let the workload
    finish; the plan and manifest are saved at each stage. ``gate`` says when each
    iteration may start (a comparison's schedule), and may end the run early."""
    opts = ctx.opts
    if workload.needs_server:
        bring_up(ctx, manifest)
    save(ctx.run_dir, ctx.plan, manifest)
    steps = [Step(clients=c, iteration=it, number=n) for n, (it, c) in enumerate(
        (it, c) for it in range(1, opts.iterations + 1) for c in opts.clients)]
    per_step = opts.warmup_s + opts.duration_s
    with _progress(opts, console) as progress:
        # The overall bar counts seconds of planned load, so its ETA is right from the
        # first iteration on; its description counts the iterations.
        overall = progress.add_task("preparing", total=len(steps) * per_step, status="")
        said = [""]  # the preparation's latest word of itself, for a log's lines

        def status(text: str) -> None:
            said[0] = text
            progress.update(overall, status=text)

        ctx.status = status
        with preparing(workload, ctx, console, lambda: said[0]):
            ctx.prepared = workload.prepare(ctx)
        if ctx.conn is not None and ctx.target is not None:
            # A build may restart the server (wal_level minimal and back, a new port): the
            # report describes the server the measured window runs on, read again now.
            describe_server(ctx, manifest)
        elif ctx.conn is not None:
            manifest.connection = ctx.conn.describe()
        progress.update(overall, status="")
        manifest.dataset = {**ctx.prepared.dataset, **dataset_fit(ctx)}
        manifest.commands.extend(ctx.prepared.commands)
        ctx.plan.parameters = ctx.prepared.parameters
        if opts.cache == "prewarmed":
            ctx.plan.notes.append(prewarm_dataset(workload, ctx))
        if gate.wants_seconds:
            ctx.plan.notes.append(TURNS_NOTE)
        save(ctx.run_dir, ctx.plan, manifest)
        for step in steps:
            if not gate.admit(step):
                ctx.plan.notes.append(f"the comparison's schedule ended the run after "
                                      f"{step.number} of {len(steps)} planned iterations")
                break
            progress.update(overall, description=f"iteration {step.number + 1}/{len(steps)}",
                            completed=step.number * per_step)
            if opts.cache == "cold" and step.number > 0 and ctx.target is not None:
                make_cold(ctx)
                # Restarted on a new port: the report names the last window's server.
                describe_server(ctx, manifest)
            run_step(workload, ctx, step, progress, overall, gate)
            if gate.wants_figures:
                record = ctx.plan.records[-1]
                seconds = (workload.headline_seconds(ctx.run_dir, ctx.plan, record, ctx.opts)
                           if gate.wants_seconds else None)
                gate.finished(step, record.status, step_figures(workload, ctx, record),
                              seconds)
        progress.update(overall, completed=len(steps) * per_step)
    workload.finish(ctx)


def preparing(workload: Workload, ctx: RunContext, console: Console,
              detail: Callable[[], str]) -> contextlib.AbstractContextManager:
    """The dataset's preparation announced (a load may take minutes; its length is not
    known before it starts), a line now and then in a log with ``detail()``; on a terminal
    the overall bar's status follows it. ``--no-progress`` keeps a run quiet: nothing."""
    if not workload.needs_server or not ctx.opts.show_progress:
        return contextlib.nullcontext()
    return long_step(console, f"dataset: {workload.name} {workload.describe_dataset(ctx.opts)}",
                     why="loaded unless one of that size is there to reuse", bar=False,
                     detail=detail)


def step_figures(workload: Workload, ctx: RunContext, record: IterationRecord
                 ) -> dict[str, float]:
    """One finished iteration's figures (its metrics, as the run's summary will give
    them), from its raw files: what a scheduler decides on while the run goes on."""
    alone = dataclasses.replace(ctx.plan, records=[record])
    summary = workload.summarise(ctx.run_dir, alone, ctx.opts, record.status)
    found = [it for it in summary.iterations if it.iteration == record.iteration]
    return dict(found[0].metrics) if found else {}


def prewarm_dataset(workload: Workload, ctx: RunContext) -> str:
    """``--cache prewarmed``: the dataset read into shared_buffers (runner.prewarm); the
    note says what was read."""
    found = workload.dataset_tables(ctx.opts)
    if ctx.conn is None or found is None:
        return "cache prewarmed: nothing to read (this workload has no dataset on a server)"
    ctx.status("prewarming the cache")
    try:
        return prewarm(ctx.conn, found[2]).note()
    finally:
        ctx.status("")


def bring_up(ctx: RunContext, manifest: Manifest) -> None:
    """The server under test, started and described in the manifest."""
    target = ctx.target
    assert target is not None
    if target.is_local:  # --archive is refused with --dsn and --ssh
        ctx.plan.notes.extend(archive.prepare(archive.spec_of(ctx.opts.target), target.user))
    target.prepare()
    start_with_rollback(target, manifest, ctx.plan)
    ctx.conn = dataset.scoped(target.connection(ctx.opts.via), ctx.dataset_schema)
    describe_server(ctx, manifest)


def describe_server(ctx: RunContext, manifest: Manifest) -> None:
    """The manifest's connection and server facts (settings, port) read from the server
    as it runs now."""
    assert ctx.target is not None and ctx.conn is not None
    manifest.connection = ctx.conn.describe()
    # The way it really connected (a --dsn naming a TCP host is TCP whatever --via says).
    manifest.options = dataclasses.replace(manifest.options, via=ctx.conn.via)
    manifest.server = serde.to_dict(server_facts(ctx.target.admin_connection()))


def start_with_rollback(target: Target, manifest: Manifest, plan: RunPlan) -> None:
    """Start the server; if the config stops it from starting, roll back and fail the run.

    The server is brought back up with the last settings it started with, so the
    workdir is left usable, and the manifest and notes say what happened (a benchmark
    journal's "Run 3 FAILED → rolled back"). An existing server's settings are not pgdyno's: its
    failure to answer is the run's.
    """
    config_name = manifest.config_name
    try:
        target.start()
    except TargetError as exc:
        if not target.restartable:
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
    target.remember_good_settings(config_name)


def dataset_fit(ctx: RunContext) -> dict[str, Any]:
    """How big the prepared database is against shared_buffers and free memory: what the
    run exercises (a pgbench report states it; a default run that silently fits in
    shared_buffers measures something else than the user thinks)."""
    if ctx.conn is None or ctx.target is None:
        return {}
    with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as db:
        size, shared = db.execute(DATASET_SIZE_SQL).fetchone()
    available = ctx.target.meminfo_available()
    return {"size_bytes": int(size), "shared_buffers_bytes": int(shared),
            "available_bytes": available, "fits": fit_of(int(size), int(shared), available)}


def make_cold(ctx: RunContext) -> None:
    """Restart the server (empty shared_buffers) and drop the OS page cache if permitted."""
    assert ctx.target is not None
    ctx.restart_server()
    why = ctx.target.drop_os_cache()
    note = f"--cache cold: {why}; only shared_buffers were emptied by the restart" if why else ""
    if note and note not in ctx.plan.notes:
        ctx.plan.notes.append(note)


def run_step(workload: Workload, ctx: RunContext, step: Step, progress: LiveProgress,
             overall: Any, gate: StepGate = OWN_PACE) -> None:
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
    recorder = start_telemetry(ctx, it_dir)
    if recorder is not None:
        ctx.count_as_ours = recorder.count_as_ours
    total = opts.warmup_s + opts.duration_s
    task = progress.add_task(f"{step.clients} clients, iteration {step.iteration}",
                             total=total, status="starting")
    live = start_live_view(ctx, it_dir, step, progress)
    try:
        if recorder is not None:
            recorder.mark(f"{workload.engine_dir}_start")

        def report(t: float, text: str) -> None:
            progress.update(task, completed=t, status=text)
            progress.update(overall, completed=step.number * total + min(t, total))

        # The CHECKPOINT done and the samplers up: the load starts on cue (at the epoch
        # the scheduler gives, when it gives one).
        ctx.start_at = gate.arm(step)
        ctx.load_started = lambda pid: gate.load_started(step, pid)
        workload.run_iteration(ctx, step, record, report)
        record.status = "ok"
    except KeyboardInterrupt:
        record.status = "interrupted"
        raise
    except Exception:
        record.status = "failed"
        raise
    finally:
        if live is not None:
            with contextlib.suppress(Exception):  # a view, never the result
                live.stop()
        ctx.start_at, ctx.load_started = None, told_nobody
        if recorder is not None:
            ctx.count_as_ours = counted_nowhere
            # Telemetry is evidence, not the result: its failure (a full disk) must not
            # keep the iteration's own files from being saved.
            with contextlib.suppress(Exception):
                recorder.mark(f"{workload.engine_dir}_end")
                recorder.stop()
        record.ended_at = utc_now()
        progress.update(task, visible=False)
        ctx.run_dir.save_plan(ctx.plan)


def start_telemetry(ctx: RunContext, it_dir: Path) -> TelemetryRecorder | None:
    """Samplers for this iteration, writing under ``it_dir/telemetry`` (None when off).

    Without a server (cpu, fio) the host samplers run alone; the files of a server on this
    machine (its directories, log, WAL archive) are read here, those of one on an --ssh host
    over SSH (``ctx.remote``)."""
    if not ctx.opts.telemetry:
        return None
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


def _archive_watch(ctx: RunContext) -> archive.ArchiveSpec | None:
    """The archive that the iteration's telemetry samples (None when archiving is off)."""
    spec = archive.spec_of(ctx.opts.target)
    return spec if spec.enabled else None


LIVE_LOG_EVERY_S = 10.0
"""Where stderr is a log, not a terminal: a live line every this many seconds."""
PROGRESS_REFRESH_HZ = 2.0
"""Redraws of the progress bars a second, on a terminal."""


class LiveProgress(Progress):
    """The bars, and the live line under them."""

    live_line = ""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield from super().get_renderables()
        if self.live_line:
            yield Text(self.live_line, style="dim", no_wrap=True, overflow="ellipsis")


@contextlib.contextmanager
def _progress(opts: BenchOptions, console: Console):
    # Rich redraws the bars from a thread of its own, 10 times a second by default, and
    # renders them even where nothing is shown (a log): half a percent of a 2-core host's
    # CPU during the measured window. Twice a second on a terminal is
    # enough for bars whose figures change once a second, and a log gets no redraws.
    progress = LiveProgress(TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.percentage:>3.0f}%"),
                            TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                            console=console, disable=not opts.show_progress, transient=False,
                            auto_refresh=console.is_terminal,
                            refresh_per_second=PROGRESS_REFRESH_HZ)
    with progress:
        yield progress


def live_text(fig: LiveFigures) -> str:
    """One live line, ``12 s: 1,234 tps, p99 3.21 ms (5 s), CPU 87% busy, wait CPU 62%``
    (with --drivers: ``12 s: 2,468 tps on 2 drivers, worst driver's mean 1.62 ms, ...``);
    what the run has not (yet: the first second; ever: no telemetry, no transactions) is
    left out."""
    parts = []
    if fig.tps is not None:
        parts.append(f"{fig.tps:,.0f} tps" + (f" on {fig.drivers} drivers" if fig.drivers
                                               else ""))
    if fig.worst_mean_ms is not None:
        parts.append(f"worst driver's mean {_ms(fig.worst_mean_ms)} ms")
    if fig.p99_ms is not None:
        parts.append(f"p99 {_ms(fig.p99_ms)} ms ({fig.p99_seconds} s)")
    if fig.cpu_busy_pct is not None:
        parts.append(f"CPU {fig.cpu_busy_pct:.0f}% busy")
    if fig.wait_class is not None and fig.wait_share_pct is not None:
        parts.append(f"wait {fig.wait_class} {fig.wait_share_pct:.0f}%")
    second = f"{fig.elapsed_s} s: " if fig.elapsed_s is not None else ""
    return second + ", ".join(parts)


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def start_live_view(ctx: RunContext, it_dir: Path, step: Step,
                    progress: LiveProgress) -> LiveView | None:
    """The iteration's live line: under the bars on a terminal, a line every
    LIVE_LOG_EVERY_S seconds in a log, nothing with --no-progress; appended to its
    ``live.log`` too when PGDYNO_LIVE_LOG asks (None: neither shown nor recorded)."""
    opts = ctx.opts
    log_path = it_dir / LIVE_LOG_NAME if recording_requested() else None
    if not opts.show_progress and log_path is None:
        return None
    if log_path is not None:
        it_dir.mkdir(parents=True, exist_ok=True)
    sink = LiveSink(progress, f"{step.clients} clients, iteration {step.iteration}",
                    shown=opts.show_progress, log_path=log_path)
    watch = LiveWatch(LiveModel(it_dir, last_second=opts.warmup_s + opts.duration_s - 1),
                      sink.show)
    watch.start()
    return LiveView(watch, sink)


@dataclasses.dataclass
class LiveSink:
    """Where each second's figures go: the line under the bars (a terminal), a line of its
    own every LIVE_LOG_EVERY_S (a log), and ``live.log`` when recorded."""

    progress: LiveProgress
    label: str
    shown: bool
    log_path: Path | None
    written: LiveFigures | None = None
    printed_at: float = dataclasses.field(default_factory=time.monotonic)

    def show(self, fig: LiveFigures) -> None:
        if fig.empty:
            return
        text = live_text(fig)
        if self.log_path is not None and fig != self.written:  # a new second, or news
            with self.log_path.open("a") as fh:
                fh.write(text + "\n")
            self.written = fig
        if not self.shown:
            return
        if self.progress.console.is_terminal:
            self.progress.live_line = text
        elif time.monotonic() - self.printed_at >= LIVE_LOG_EVERY_S:
            self.printed_at = time.monotonic()
            # One line whatever the width: a log is read by grep, not by eye.
            self.progress.console.print(f"{self.label}, {text}", markup=False,
                                        highlight=False, soft_wrap=True)


@dataclasses.dataclass
class LiveView:
    watch: LiveWatch
    sink: LiveSink

    def stop(self) -> None:
        """The thread stopped, the line cleared, and its cost noted in ``live.log``."""
        self.watch.stop()
        self.sink.progress.live_line = ""
        log_path = self.sink.log_path
        if log_path is not None and log_path.exists():
            with log_path.open("a") as fh:
                fh.write(f"# live view: {self.watch.cpu_s:.3f} s of CPU in "
                         f"{self.watch.ticks} looks\n")
