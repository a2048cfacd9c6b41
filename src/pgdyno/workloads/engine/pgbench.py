"""pgbench as the load engine: one measured iteration, and the summary of its logs.

``PgbenchWorkload`` is the base of every workload whose engine is pgbench (the built-ins,
user scripts, TPROC-C, sysbench-style OLTP). It runs pgbench with per-transaction logs
(``-l``) and ``-P 1`` progress, warm-up and measured window in one invocation. While it
runs, ``txtail`` turns its logs into per-second counts and latency histograms (bounded raw
data, kept always); the logs themselves are kept, gzip'd, up to ``--tx-logs`` transactions
an iteration. stdout, stderr and all of it stay under ``raw/pgbench/c<clients>-i<iteration>/``
and are summarised into TPS and latency percentiles (exact from kept logs). A subclass
brings its dataset (``prepare``), its scripts, and optionally database snapshots at the
window's edges (``open_session`` / ``snapshot``), settings for pgbench's sessions, figures of
its own per iteration (``window_metrics``) and report sections.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno.analysis import hdr
from pgdyno.analysis.merge import MergedIteration, merge_iteration
from pgdyno.analysis.per_second import SECONDS_NAME, LogLayout, read_seconds
from pgdyno.analysis.pgbench_log import (
    PROGRESS_LINE,
    LogStats,
    read_kept_seconds,
    stats_of,
    summarise_logs,
)
from pgdyno.analysis.sampled import (
    SAMPLED,
    choose_sampling_rate,
    progress_counts,
    sampled_latency,
    with_progress_counts,
)
from pgdyno.analysis.summary import (
    SCHEMA_VERSION,
    IterationSummary,
    RunSummary,
    ScriptInfo,
    StabilityWarning,
    pool_client_count,
    stability_warnings,
    summarise_iteration,
)
from pgdyno.analysis.verdict import Paced
from pgdyno.errors import RunFailed, UsageError
from pgdyno.options import SAMPLE_AUTO
from pgdyno.results.rundir import IterationRecord, RunDirectory, RunPlan, write_json_atomic
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads.base import (
    BenchOptions,
    IterationProgress,
    Prepared,
    RunContext,
    Step,
    Workload,
    add_telemetry,
    counted_nowhere,
)
from pgdyno.workloads.engine.drivers import EngineParts, run_on_drivers
from pgdyno.workloads.engine.process import last_error_line, raise_open_files, run_program
from pgdyno.workloads.engine.txtail import LogTail, TailResult

_TPS = re.compile(r"^tps = (?P<tps>[\d.]+)", re.MULTILINE)
_CONNECTION = re.compile(r"^initial connection time = (?P<ms>[\d.]+) ms", re.MULTILINE)
CONNECTION_METRIC = "connection_ms"
"""pgbench's own "initial connection time" of an iteration (every client connected), in
the iteration's metrics. pgbench starts its -T clock once the clients are connected, and
the measured window opens ``warmup_s`` after launch, so the setup is outside the window
while it is shorter than the warm-up (an iteration note says when it is not)."""
OPEN_FILES_SPARE = 64
"""Files pgbench holds beside one socket per client: its logs, scripts, standard streams."""
SERIES_INTERVAL_S = 5.0
PROBE_S = 1
"""--tx-logs sample (auto) with nothing to go by: a bare pgbench this long gives the rate."""
SAMPLING_NAME = "sampling.json"
"""--tx-logs sample: the rate an iteration logged at and where it came from."""
"""Interval of the database snapshots between the window edges (TPROC-C NOPM over time)."""


@dataclass(frozen=True)
class ScriptSpec:
    """A pgbench script: a built-in name or a file, with its weight in the mix."""

    name: str
    weight: int = 1
    path: Path | None = None
    builtin: str | None = None
    defines: tuple[tuple[str, int], ...] = ()
    """Variables the script reads that every client starts with (pgbench's ``-D``)."""

    def pgbench_args(self) -> list[str]:
        if self.builtin:
            return ["-b", f"{self.builtin}@{self.weight}"]
        return ["-f", f"{self.path}@{self.weight}"]


def script_args(scripts: list[ScriptSpec]) -> list[str]:
    """pgbench's arguments for a mix of scripts: the variables they start with, each once,
    then every script with its weight."""
    defines = dict(d for spec in scripts for d in spec.defines)
    return [*(a for name, value in defines.items() for a in ("-D", f"{name}={value}")),
            *(a for spec in scripts for a in spec.pgbench_args())]


NO_SERVER = "/nonexistent-pgdyno-parse-check"
"""A socket directory that cannot exist: pgbench parses its scripts, then fails to connect."""


def check_scripts(install: PgInstall, scripts: list[ScriptSpec]) -> None:
    """Let pgbench itself parse the user's scripts (it does so before connecting) and
    refuse them with its own message, in one line."""
    args = script_args(scripts)
    cmd = [install.program("pgbench"), "-n", "-t", "1", *args, "-h", NO_SERVER, "-p", "1",
           "pgdyno"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--script: pgbench could not check the scripts ({exc})") from None
    lines = [line.strip() for line in out.stderr.splitlines() if line.strip()]
    if lines and NO_SERVER not in lines[0] and "could not create connection" not in lines[0]:
        raise UsageError("--script: pgbench refuses it: " + " | ".join(lines[:3]))


def pgbench_seconds(opts: BenchOptions) -> int:
    """pgbench's ``-T`` for one iteration: warm-up plus measured window."""
    seconds = opts.warmup_s + opts.duration_s
    if opts.tx_aggregate_only or opts.tx_sampling_rate is not None:
        # Each thread's intervals (aggregates, progress lines) start when the thread does,
        # a few ms after the launch: one more second keeps the window's last one whole.
        seconds += 1
    return seconds


def pgbench_command(install: PgInstall, conn: ConnectionInfo, opts: BenchOptions,
                    scripts: list[ScriptSpec], clients: int, log_prefix: Path,
                    sampling_rate: float = 1.0, iteration: int = 1) -> list[str]:
    """pgbench for one iteration: warm-up plus measured window in one -T. With
    ``--tx-logs sample``, ``sampling_rate`` is the fraction of transactions logged; with a
    ``random_seed``, iteration i draws from that seed + i - 1."""
    seconds = pgbench_seconds(opts)
    logging = ["-l", "--log-prefix", str(log_prefix)]
    if opts.tx_aggregate_only:
        logging += ["--aggregate-interval", "1"]
    if opts.tx_sampling_rate is not None:
        # Progress lines with their epoch time: the exact counts of the sampled mode.
        logging += ["--progress-timestamp"]
        if sampling_rate < 1:
            logging += ["--sampling-rate", f"{sampling_rate:g}"]
    # pgbench reads its seed before anything draws only when it comes first.
    seed = ([f"--random-seed={opts.random_seed + iteration - 1}"]
            if opts.random_seed is not None else [])
    cmd = [install.program("pgbench"), *seed, *conn.client_args(),
           "-c", str(clients), "-j", str(opts.threads_for(clients)), "-T", str(seconds),
           "-P", "1", *logging, "-M", opts.protocol]
    if opts.rate_tps is not None:
        cmd += ["-R", f"{opts.rate_tps:g}"]
    if opts.latency_limit_ms is not None:
        cmd += ["--latency-limit", f"{opts.latency_limit_ms:g}"]
    if opts.max_tries != 1:
        cmd += ["--max-tries", str(opts.max_tries)]
    cmd += script_args(scripts)
    cmd.append(conn.dbname)
    return cmd


class PgbenchWorkload(Workload):
    """The pgbench engine's half of a workload; subclasses add their dataset and scripts
    (``prepare_dataset``)."""

    engine: ClassVar[str] = "pgbench"
    engine_dir: ClassVar[str] = "pgbench"
    """raw/pgbench/c<clients>-i<iteration>/ holds each iteration's files."""
    pausable: ClassVar[bool] = True
    """pgbench runs in a process group of its own and counts every transaction in the
    second it ended: stopped and continued, it loses nothing and its seconds say when it
    ran."""

    # ----- hooks for subclasses -------------------------------------------------------
    def prepare(self, ctx: RunContext) -> Prepared:
        """The dataset and scripts; the scripts are kept under raw/ with the run."""
        prepared = self.prepare_dataset(ctx)
        ctx.plan.scripts = copy_scripts(prepared.scripts, ctx.run_dir)
        return prepared

    def prepare_dataset(self, ctx: RunContext) -> Prepared:
        """Build or reuse the dataset; return it with the pgbench scripts to run."""
        raise NotImplementedError

    def open_session(self, conn: ConnectionInfo) -> Any:
        """A psycopg connection for window snapshots; None: this workload takes none."""
        return None

    def snapshot(self, session: Any) -> dict[str, Any] | None:
        return None

    def session_options(self, ctx: RunContext) -> str | None:
        """PGOPTIONS for pgbench's sessions only (None: none)."""
        return None

    def collect(self, ctx: RunContext, it_dir: Path, log_offset: int) -> None:
        """Copy what the iteration left in the server log (from ``log_offset``) to raw/."""

    def window_metrics(self, plan: RunPlan, it_dir: Path) -> dict[str, float]:
        """Per-iteration figures of the workload's own (TPROC-C's NOPM), from raw files."""
        return {}

    def work_unit(self, metrics: dict[str, float]) -> tuple[str, float] | None:
        """(name, units a second) of the workload's unit of work in one iteration, from its
        ``metrics`` (TPROC-C: "New-Order" at NOPM ÷ 60): the whose-CPU table gives the
        server's and the driver's CPU per unit. None: none beyond transactions."""
        return None

    def pacing(self, plan: RunPlan, metrics: dict[str, float]) -> Paced | None:
        """How far a paced workload (sleeps between transactions by design) reached its
        ideal rate in one iteration, from its ``metrics``; None: not paced."""
        return None

    # ----- one iteration --------------------------------------------------------------
    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        if ctx.drivers is not None:  # the load runs on the driver hosts
            return run_on_drivers(self._driver_parts(ctx), ctx, step, record, progress)
        assert ctx.target is not None and ctx.conn is not None and ctx.prepared is not None
        opts = ctx.opts
        it_dir = step.directory(ctx.run_dir.raw, self.engine_dir)
        it_dir.mkdir(parents=True, exist_ok=True)
        env = ctx.conn.client_env()
        if pgoptions := self.session_options(ctx):
            # Added to the connection's own (its search_path: pgdyno's schema), never in
            # place of it.
            env["PGOPTIONS"] = " ".join(filter(None, [env.get("PGOPTIONS"), pgoptions]))
        sampling_rate = self._sampling_rate(ctx, step, it_dir, env)
        cmd = pgbench_command(ctx.target.install, ctx.conn, opts, ctx.prepared.scripts,
                              step.clients, it_dir / "tx", sampling_rate, step.iteration)
        ctx.commands.append(" ".join(cmd))
        record.threads = opts.threads_for(step.clients)
        record.command = cmd
        record.stdout_file = str((it_dir / "stdout.txt").relative_to(ctx.run_dir.path))
        record.stderr_file = str((it_dir / "stderr.txt").relative_to(ctx.run_dir.path))
        window = WindowSnapshots(self, ctx.conn, opts.warmup_s, opts.duration_s,
                                 it_dir / "window.json", count_as_ours=ctx.count_as_ours)
        log_offset = ctx.target.log_size() if ctx.manages_server else 0

        if ctx.start_at is not None:
            # A comparison's common start: both sides' seconds count from one epoch.
            time.sleep(max(0.0, ctx.start_at - time.time()))
        launched = ctx.start_at if ctx.start_at is not None else time.time()

        def on_line(line: str) -> None:
            if match := PROGRESS_LINE.match(line):
                t = float(match["t"])
                if opts.tx_sampling_rate is not None:  # --progress-timestamp: epoch seconds
                    t -= launched
                phase = "warm-up" if t <= opts.warmup_s else "measuring"
                progress(t, f"{phase} {float(match['tps']):,.0f} tps, "
                            f"{float(match['lat']):.2f} ms")

        layout = LogLayout(has_lag=opts.has_lag_column, has_retries=opts.has_retries_column)
        tail = LogTail(it_dir, "tx", launched, layout, opts.latency_limit_ms, opts.tx_log_cap,
                       aggregate=opts.tx_aggregate_only)
        record.origin_epoch = tail.origin_epoch
        _note(record, raise_open_files(step.clients + record.threads + OPEN_FILES_SPARE))
        try:
            tail.start()
            window.start()
            outcome = run_program(cmd, it_dir / "stdout.txt", it_dir / "stderr.txt", env=env,
                                  watch="stderr", on_line=on_line,
                                  on_start=ctx.load_started)
        finally:
            with contextlib.suppress(Exception):  # an interrupted window still has its edges
                window.finish()
            with contextlib.suppress(Exception):  # evidence, never the result
                self.collect(ctx, it_dir, log_offset)
            keep_bounded_logs(tail.finish(), it_dir, ctx.run_dir.path, record)
        record.returncode = outcome.returncode
        stdout = (it_dir / "stdout.txt").read_text(errors="replace")
        match = _TPS.search(stdout)
        record.pgbench_tps = float(match["tps"]) if match else None
        connection_ms = connection_time_ms(stdout)
        if connection_ms is not None and connection_ms / 1000 > opts.warmup_s:
            _note(record, f"connecting the {step.clients} clients took {connection_ms:,.0f} ms, "
                          f"longer than the {opts.warmup_s} s warm-up: the measured window "
                          "began before the first transaction (raise --warmup)")
        if outcome.returncode != 0:
            raise RunFailed(f"pgbench exited with code {outcome.returncode} at {step.clients} "
                            f"clients, iteration {step.iteration}: "
                            f"{last_error_line(it_dir / 'stderr.txt')}")

    def _driver_parts(self, ctx: RunContext) -> EngineParts:
        assert ctx.conn is not None and ctx.target is not None
        conn, opts = ctx.conn, ctx.opts
        log_offset = ctx.target.log_size() if ctx.manages_server else 0
        return EngineParts(
            engine_dir=self.engine_dir, command=pgbench_command, compress=compress_logs,
            collect=lambda it_dir: self.collect(ctx, it_dir, log_offset),
            window=lambda path: WindowSnapshots(self, conn, opts.warmup_s, opts.duration_s,
                                                path, count_as_ours=ctx.count_as_ours),
            session_options=self.session_options(ctx))

    def _sampling_rate(self, ctx: RunContext, step: Step, it_dir: Path,
                       env: dict[str, str]) -> float:
        """The fraction of transactions pgbench logs in this iteration (1: all), saved with
        where it came from in ``sampling.json``. Auto: about LOGGED_PER_SECOND a second at
        the expected rate: --rate, else this client count's previous iteration, else a
        1 s probe of bare pgbench (no log) just before the iteration."""
        chosen = ctx.opts.tx_sampling_rate
        if chosen is None:
            return 1.0
        expected, source = None, "given (--tx-logs sample:R)"
        if chosen == SAMPLE_AUTO:
            expected, source = self._expected_tps(ctx, step, env)
            chosen = choose_sampling_rate(expected)
        write_json_atomic(it_dir / SAMPLING_NAME, {
            "sampling_rate": chosen, "expected_tps": expected, "expected_from": source})
        return chosen

    def _expected_tps(self, ctx: RunContext, step: Step, env: dict[str, str]
                      ) -> tuple[float | None, str]:
        if ctx.opts.rate_tps is not None:
            return ctx.opts.rate_tps, "--rate"
        earlier = [r.pgbench_tps for r in ctx.plan.records
                   if r.clients == step.clients and r.pgbench_tps]
        if earlier:
            return earlier[-1], "the previous iteration at this client count"
        assert ctx.target is not None and ctx.conn is not None and ctx.prepared is not None
        probe = [ctx.target.install.program("pgbench"), *ctx.conn.client_args(),
                 "-c", str(step.clients), "-j", str(ctx.opts.threads_for(step.clients)),
                 "-T", str(PROBE_S), "-M", ctx.opts.protocol,
                 *script_args(ctx.prepared.scripts),
                 ctx.conn.dbname]
        ctx.commands.append(" ".join(probe))
        out = subprocess.run(probe, capture_output=True, text=True, env=env, check=False,
                             timeout=PROBE_S + 300)
        match = _TPS.search(out.stdout)
        return (float(match["tps"]), f"a {PROBE_S} s probe") if match else (None, "unknown")

    def turn_blocker(self, opts: BenchOptions) -> str:
        """pgbench pauses cleanly, but not every way of running it can take turns."""
        if opts.rate_tps is not None:
            return ("--rate: a paused pgbench falls behind its schedule and catches up in "
                    "its next turn, so each turn would count the backlog, not the speed")
        if opts.tx_sampling_rate is not None or opts.tx_aggregate_only:
            return ("--tx-logs sample or aggregate: the seconds would not hold every "
                    "transaction in the second it ended")
        if opts.drivers is not None:
            return "--drivers: the load runs on other hosts, where it cannot be paused"
        return super().turn_blocker(opts)

    def headline_seconds(self, run_dir: RunDirectory, plan: RunPlan, record: IterationRecord,
                         opts: BenchOptions) -> list[float] | None:
        """The headline in each second of the iteration, from its ``seconds.csv`` (every
        transaction counted in the second it ended); None when the iteration logged a
        sample (its seconds hold the sample, not the count) or kept no seconds."""
        if (opts.tx_sampling_rate is not None or opts.tx_aggregate_only
                or not record.latency_files):
            return None
        directory = (run_dir.path / record.latency_files[0]).parent
        if not (directory / SECONDS_NAME).is_file():
            return None
        rows = read_seconds(directory / SECONDS_NAME)
        last = max((second for second, _ in rows), default=-1)
        per_script = [[0] * (last + 1) for _ in plan.scripts]
        for (second, script), row in rows.items():
            if second >= 0 and 0 <= script < len(per_script):
                per_script[script][second] += row.ok
        return self.headline_of_seconds(plan, per_script)

    def headline_of_seconds(self, plan: RunPlan, per_script: list[list[int]]) -> list[float]:
        """The headline of each second from its successful transactions per script
        (``per_script[script][second]``): TPS, their sum."""
        return [float(sum(column)) for column in zip(*per_script, strict=True)]

    # ----- summary --------------------------------------------------------------------
    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        scripts = [ScriptInfo(name=s["name"], weight=s["weight"]) for s in plan.scripts]
        parts: dict[int, list[tuple[IterationSummary, LogStats]]] = {}
        iterations = []
        driver_notes: list[StabilityWarning] = []
        for record in plan.records:
            merged = merged_iteration(run_dir.path, record, opts)
            stats = merged.stats if merged else iteration_stats(run_dir.path, record, opts)
            if stats is None:
                continue
            summary = summarise_iteration(
                stats, clients=record.clients, iteration=record.iteration,
                status=record.status, scripts=scripts, log_files=record.log_files,
                pgbench_tps=record.pgbench_tps)
            it_dir = (run_dir.path / record.stdout_file).parent
            if opts.tx_sampling_rate is not None:
                summary.transactions = int(stats.interval_ok.sum())
                rate, expected = _sampling_of(it_dir, record)
                summary.sampling = sampled_latency(stats.overall.histogram, rate,
                                                   summary.transactions, expected)
            if merged is not None:
                summary.drivers = merged.drivers
                driver_notes += [StabilityWarning(
                    "drivers_window", f"{record.clients} clients, iteration "
                    f"{record.iteration}: {note}", "see the Driver hosts table and "
                    "drivers.json of the iteration") for note in merged.notes]
            summary.metrics.update(self.window_metrics(plan, it_dir))
            connection_ms = connection_time_ms(_read(run_dir.path / record.stdout_file))
            if connection_ms is not None:
                summary.metrics[CONNECTION_METRIC] = connection_ms
            add_telemetry(summary, it_dir, opts.duration_s, cpu_count,
                          paced=self.pacing(plan, summary.metrics))
            self._cpu_per_unit(summary)
            iterations.append(summary)
            parts.setdefault(record.clients, []).append((summary, stats))
        per_clients = [pool_client_count(c, parts[c], scripts)
                       for c in opts.clients if c in parts]
        if opts.tx_sampling_rate is not None:
            for pooled in per_clients:
                pooled.latency_source = SAMPLED
        return RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                          context=plan.context, status=status,
                          client_counts=list(opts.clients), per_clients=per_clients,
                          iterations=iterations,
                          warnings=stability_warnings(iterations) + driver_notes)

    def _cpu_per_unit(self, summary: IterationSummary) -> None:
        from pgdyno.analysis.telemetry import cpu_per_unit

        unit = self.work_unit(summary.metrics)
        if unit is not None and summary.telemetry is not None:
            other = summary.telemetry.contamination
            other.per_unit = cpu_per_unit(other, *unit)


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
    Workloads that take no snapshots get no connection and no thread.
    """

    def __init__(self, workload: PgbenchWorkload, conn: ConnectionInfo, warmup_s: float,
                 duration_s: float, path: Path, interval_s: float = SERIES_INTERVAL_S,
                 count_as_ours: Callable[[int], None] = counted_nowhere) -> None:
        self.workload, self.conn, self.path = workload, conn, path
        # The snapshots' session is pgdyno's measuring, not the load: its backend's CPU
        # goes to the harness in the whose-CPU table.
        self.count_as_ours = count_as_ours
        self.warmup_s, self.duration_s, self.interval_s = warmup_s, duration_s, interval_s
        self.points: dict[str, dict] = {}
        self.series: list[dict] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.session: Any = None

    def _take(self, name: str | None) -> None:
        with contextlib.suppress(Exception):  # a missed snapshot loses one figure, not the run
            point = {"taken_at": time.time(), "snapshot": self.workload.snapshot(self.session)}
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
            self.session = self.workload.open_session(self.conn)
        if self.session is not None:
            self.count_as_ours(self.session.info.backend_pid)
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


def connection_time_ms(stdout: str) -> float | None:
    """pgbench's "initial connection time = X ms" (PostgreSQL 14 and later), or None."""
    match = _CONNECTION.search(stdout)
    return float(match["ms"]) if match else None


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _note(record: IterationRecord, note: str) -> None:
    if note:
        record.note = "; ".join(filter(None, [record.note, note]))


def keep_bounded_logs(result: TailResult, it_dir: Path, root: Path,
                      record: IterationRecord) -> None:
    """What the log tail kept, into the iteration record; the logs gzipped when kept."""
    record.latency_files = [str((it_dir / name).relative_to(root))
                            for name in (SECONDS_NAME, hdr.HLOG_NAME) if (it_dir / name).exists()]
    record.transactions_logged = result.transactions
    record.log_reader_cpu_s = result.cpu_s
    if result.note:
        record.note = "; ".join(filter(None, [record.note, result.note]))
    if result.logs_kept:
        compress_logs(it_dir, root, record.log_files)


def iteration_stats(root: Path, record: IterationRecord, opts: BenchOptions
                    ) -> LogStats | None:
    """One iteration's statistics from its raw files: exact from the per-transaction logs
    when they are all there, else from the per-second files; None when it left neither."""
    logs = [root / f for f in record.log_files]
    # Aggregate logs (--tx-logs aggregate) hold seconds, not transactions: the seconds file.
    kept = bool(logs) and all(p.exists() for p in logs) and not opts.tx_aggregate_only
    if not kept and (record.origin_epoch is None or not record.latency_files):
        return None
    if kept:
        stats = summarise_logs(logs, warmup_s=opts.warmup_s, duration_s=opts.duration_s,
                               has_lag=opts.has_lag_column,
                               has_retries=opts.has_retries_column,
                               latency_limit_ms=opts.latency_limit_ms,
                               origin_epoch=record.origin_epoch)
    else:
        directory = (root / record.latency_files[0]).parent
        stats = stats_of(read_kept_seconds(directory, record.origin_epoch),
                         warmup_s=opts.warmup_s, duration_s=opts.duration_s)
    if opts.tx_sampling_rate is not None and record.origin_epoch is not None:
        # The logs hold a sample: every second's count from pgbench's progress lines.
        stats = with_progress_counts(stats, progress_counts(
            _read(root / record.stderr_file), record.origin_epoch))
    return stats


def merged_iteration(root: Path, record: IterationRecord, opts: BenchOptions
                     ) -> MergedIteration | None:
    """An iteration the driver hosts ran, merged (``analysis.merge``); None: pgbench ran
    here."""
    if not record.stdout_file:
        return None
    return merge_iteration((root / record.stdout_file).parent, opts.warmup_s, opts.duration_s)


def _sampling_of(it_dir: Path, record: IterationRecord) -> tuple[float, float | None]:
    """(R, expected TPS) of an iteration: sampling.json, else the --sampling-rate of its
    command (1 when absent: every transaction logged)."""
    saved = it_dir / SAMPLING_NAME
    if saved.is_file():
        data = json.loads(saved.read_text())
        return float(data["sampling_rate"]), data.get("expected_tps")
    command = record.command or []
    if "--sampling-rate" in command:
        return float(command[command.index("--sampling-rate") + 1]), None
    return 1.0, None


def compress_logs(it_dir: Path, root: Path, out: list[str]) -> None:
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


def copy_scripts(scripts: list[ScriptSpec], run_dir: RunDirectory) -> list[dict]:
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
