"""What every workload is: one base class, the run options it receives, the context it runs in.

A workload is a plugin of the one run loop in ``pgdyno.runner.bench``. The loop brings the
target up (when the workload needs a server), applies the config, starts telemetry around
each iteration, keeps the run directory and its status, and writes the report; the workload
brings everything that differs:

- ``options_type``: a frozen dataclass of its own options; fields made with ``option()``
  become ``pgdyno bench`` options (``--warehouses``, ``--tables``...);
- ``needs_server`` and ``engine`` (pgbench scripts, psycopg query streams, or a program);
- ``prepare``: build or reuse its dataset; ``run_iteration``: one measured iteration;
- ``summarise``: its raw files into a ``RunSummary`` whose iterations carry ``metrics``;
- ``metrics``: the figures it declares, with unit and direction, that ``compare``,
  ``campaign``, the run index and the context report read (the first headline one leads);
- ``report_sections``: what its report shows beyond the common sections;
- capabilities the core asks for rather than naming workloads: sweeps over the dataset size
  (``sweep_steps``, their report and their comparison), dataset sizing (``size_unit``,
  ``bytes_per_size``) and the tuned config's advice (``advice``, ``dataset_lines``), a CPU
  baseline (``cpu_baseline_metric``), and what happens before each iteration
  (``before_iteration``: a CHECKPOINT).

``Workload`` gives every hook a default, so a plugin writes only what differs; a pgbench
workload subclasses ``workloads.engine.pgbench.PgbenchWorkload`` and writes little more than
its dataset and scripts. pgdyno finds workloads through the ``pgdyno.workloads`` entry-point
group (``workloads.registry``): a workload is a folder here, or a package of its own that
declares the same entry point (docs/development/adding-a-workload.md).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pgdyno.config.model import SizingLine
from pgdyno.config.sizing import Advice, AdviceInputs
from pgdyno.options import BenchOptions, NoOptions
from pgdyno.reports.document import clients_words
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads.metrics import (  # noqa: F401 - the plugins' names
    HIGHER,
    LATENCY_METRICS,
    LOWER,
    TPS,
    MetricSpec,
    headline_metric,
)

# Re-exported: workloads build their options, advice and sizing lines on them.
__all__ = ["Advice", "AdviceInputs", "BenchOptions", "NoOptions", "SizingLine"]

if TYPE_CHECKING:
    from pgdyno.analysis.summary import IterationSummary, RunSummary
    from pgdyno.analysis.verdict import Paced
    from pgdyno.reports.document import Section
    from pgdyno.results.rundir import IterationRecord, RunDirectory, RunPlan
    from pgdyno.targets import Target





# ----- options ----------------------------------------------------------------------------

def option(default: Any, help: str, *, flag: str | None = None,
           cli_type: type | None = None) -> Any:
    """A workload option field that is also a ``pgdyno bench`` command-line option.

    ``flag`` defaults to the field name with dashes (``load_workers`` -> ``--load-workers``).
    The CLI registers every such field of every registered workload; an option given for a
    workload that does not declare it is refused with one line. ``cli_type``: the type the
    command line takes when it differs from the field's (``--warehouses 10,20`` is text
    that the workload turns into a count and a sweep)."""
    return field(default=default, metadata={"cli_help": help, "cli_flag": flag,
                                            "cli_type": cli_type})


def cli_fields(options_type: type) -> list[dataclasses.Field]:
    """The fields of a workload's options that are command-line options."""
    return [f for f in dataclasses.fields(options_type) if "cli_help" in f.metadata]


def cli_flag(f: dataclasses.Field) -> str:
    return f.metadata.get("cli_flag") or "--" + f.name.replace("_", "-")


@dataclass(frozen=True)
class Headline:
    """A run's headline: the best client count's mean of its headline metric."""

    metric: str
    label: str
    unit: str
    value: float
    clients: int
    p99_ms: float | None = None


def headline_of(summary: RunSummary, metrics: tuple[MetricSpec, ...]) -> Headline | None:
    """The client count whose iterations have the best mean headline value."""
    spec = headline_metric(metrics)
    best: tuple[float, int, list[IterationSummary]] | None = None
    for clients in summary.client_counts:
        its = [it for it in summary.iterations
               if it.clients == clients and _finite(it.metrics.get(spec.name))]
        if not its:
            continue
        mean = statistics.fmean(it.metrics[spec.name] for it in its)
        if best is None or (spec.direction or 1) * (mean - best[0]) > 0:
            best = (mean, clients, its)
    if best is None:
        return None
    p99 = [v for it in best[2] if _finite(v := it.metrics.get("latency_p99_ms"))]
    return Headline(metric=spec.name, label=spec.label, unit=spec.unit, value=best[0],
                    clients=best[1], p99_ms=statistics.fmean(p99) if p99 else None)


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


# ----- the run a workload takes part in ---------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One measured iteration of the run loop."""

    clients: int
    iteration: int
    number: int
    """0-based position in the run (iteration-major order)."""

    @property
    def label(self) -> str:
        return f"c{self.clients}-i{self.iteration}"

    def directory(self, raw: Path, engine_dir: str) -> Path:
        """raw/<engine_dir>/c<clients>-i<iteration>: the iteration's files, its telemetry
        among them."""
        return raw / engine_dir / self.label


@dataclass
class Prepared:
    """What ``prepare`` made: the dataset's record and the parameters the report needs."""

    dataset: dict[str, Any]
    commands: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    """Saved in raw/run.json (warehouses, mix, tables...); read back by summarise/report."""
    scripts: list[Any] = field(default_factory=list)
    """Engine inputs, e.g. pgbench ScriptSpecs (kept for the iterations, not serialised)."""


def counted_nowhere(backend_pid: int) -> None:
    """``RunContext.count_as_ours`` outside an iteration's telemetry."""


def told_nobody(pid: int) -> None:
    """``RunContext.load_started`` of a run at its own pace: nobody pauses its load."""


@dataclass
class RunContext:
    """Everything a workload may use while the run loop runs it."""

    opts: BenchOptions
    run_dir: RunDirectory
    plan: RunPlan
    commands: list[str]
    """The manifest's list of exact commands: append every command the workload runs."""
    target: Target | None = None
    """None for workloads that need no server."""
    conn: ConnectionInfo | None = None
    """The workload's way in: names resolve in ``dataset_schema`` only."""
    dataset_schema: str = "pgdyno_bench"
    """The workload's own schema (``Workload.dataset_schema``)."""
    status: Callable[[str], None] = lambda text: None
    """Shows a short status line under the overall progress bar."""
    prepared: Prepared | None = None
    remote: Any = None
    """--ssh: the database host's view (pgdyno.telemetry.remote.RemoteHost)."""
    drivers: Any = None
    """--drivers: the open driver hosts (pgdyno.targets.drivers.DriverPool) that run the
    load instead of this machine."""
    count_as_ours: Callable[[int], None] = counted_nowhere
    """Tells the iteration's telemetry that a server backend is pgdyno's own session (a
    workload's measuring session, not its load), so that its CPU is counted as the
    harness's; does nothing without telemetry."""
    start_at: float | None = None
    """The epoch at which this iteration's load starts and from which its seconds count (a
    comparison's common start for both sides); None: at once."""
    load_started: Callable[[int], None] = told_nobody
    """To be told the load's process (a process group of its own) as it starts, so that a
    comparison may pause and resume it (``Workload.pausable``)."""

    @property
    def install(self) -> PgInstall | None:
        return self.target.install if self.target is not None else None

    @property
    def manages_server(self) -> bool:
        """A server pgdyno started (it may be restarted; its log is readable, over SSH on
        a remote target)."""
        return self.target is not None and self.target.restartable

    @property
    def local_server(self) -> bool:
        """A server pgdyno started on this machine: its files are local paths."""
        return self.target is not None and self.target.is_local

    def restart_server(self) -> None:
        """Restart the server pgdyno manages with the settings its include file holds now;
        ``conn`` follows it (a restarted server listens on a new port)."""
        assert self.target is not None
        self.target.restart()
        self.conn = self.target.connection(self.opts.via).in_schema(self.dataset_schema)


IterationProgress = Callable[[float, str], None]
"""(seconds done, status text) for the iteration's progress bar."""


CLIENTS_PER_CORE = (1, 2, 4)
NO_CHECKPOINT = ("the role lacks the pg_checkpoint privilege (or superuser): iterations ran "
                 "without a CHECKPOINT before them, so a checkpoint may fall inside a "
                 "measured window")


class SweepComparison(Protocol):
    """Two sweeps of one workload side by side, as its ``compare_sweeps`` makes them."""

    def write(self, out_dir: Path) -> Path:
        """compare.json, compare.md, compare.html and plots under ``out_dir``; returns the
        Markdown report."""
        ...

    def summary_lines(self) -> list[str]:
        """What ``pgdyno compare`` prints about each side (one line each)."""
        ...


class Workload:
    """The plugin base: every hook has a default, so a plugin writes only what differs.

    A plugin names itself (``name``, ``description``) and writes ``run_iteration`` and
    ``summarise`` (or subclasses an engine that does: ``engine.pgbench.PgbenchWorkload``);
    the rest is optional. Capabilities are asked for, never inferred from the name: a
    workload with dataset-size sweeps returns them from ``sweep_steps``; one whose dataset
    size converts to bytes sets ``bytes_per_size``; one that measures the host's per-core
    speed names the metric in ``cpu_baseline_metric``."""

    # ----- what it is -------------------------------------------------------------------
    name: ClassVar[str]
    """The ``pgdyno bench NAME`` argument; also the name of its entry point."""
    description: ClassVar[str] = ""
    """One line for ``pgdyno bench --help``."""
    rank: ClassVar[int] = 1000
    """Where listings (``pgdyno bench --help``, accepted values) put it: lower first, then
    by name. pgdyno's own are below 100."""
    needs_server: ClassVar[bool] = True
    dataset_schema: ClassVar[str] = "pgdyno_bench"
    """pgdyno's own schema its tables live in (workloads.dataset); a workload whose table
    names another one's already uses (TPROC-H's customer, orders) takes a schema of its
    own, so that both datasets are kept and reused."""
    engine: ClassVar[str] = "program"
    """"pgbench", "psycopg" (query streams) or "program" (sysbench, fio)."""
    tuning: ClassVar[tuple[str, bool]] = ("mixed", True)
    """(pgtune database type, write-heavy) for the config engine's rules."""
    options_type: ClassVar[type] = NoOptions
    metrics: ClassVar[tuple[MetricSpec, ...]] = (TPS, *LATENCY_METRICS)
    chart_metrics: ClassVar[tuple[str, ...]] = ()
    """Metrics a study charts as absolute bars beside the headline (TPROC-C: TPM beside
    NOPM, as TPROC-C reports show them)."""
    pausable: ClassVar[bool] = False
    """Its load is one process group on this machine that may be stopped and continued
    mid-iteration (SIGSTOP, SIGCONT) without harm, started at ``RunContext.start_at`` and
    told to ``RunContext.load_started``, and ``headline_seconds`` gives its headline second
    by second: the alternating comparison design (``compare.alternate``) can run it."""
    default_max_tries: ClassVar[int] = 1
    """--max-tries when not given: workloads that expect serialization failures and
    deadlocks (TPROC-C, OLTP) retry them."""

    engine_dir: ClassVar[str] = ""
    """raw/<engine_dir>/c<clients>-i<iteration>/ holds each iteration's files (by default
    the workload's name); also names the telemetry's marks around each iteration
    (``pgbench_start``, ``sysbench_end``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.engine_dir and "name" in cls.__dict__:
            cls.engine_dir = cls.name

    # ----- capability: dataset size ---------------------------------------------------
    size_unit: ClassVar[str] = ""
    """What its dataset size counts ("scale", "warehouses", "rows"): a sweep's steps."""
    bytes_per_size: ClassVar[float | None] = None
    """Bytes of dataset per size unit (with its keys and indexes): --dataset-size and the
    config engine's memory sizing; None: the size says nothing about bytes."""

    def dataset_size(self, opts: BenchOptions) -> float | None:
        """The dataset size these options build, in ``size_unit``; None: no dataset."""
        return None

    def size_for_bytes(self, size_bytes: int) -> int:
        """The size unit count that holds about ``size_bytes`` (--dataset-size 3GB)."""
        assert self.bytes_per_size
        return max(1, round(size_bytes / self.bytes_per_size))

    def dataset_bytes(self, opts: BenchOptions) -> int | None:
        """Size of the dataset the run builds (the config engine sizes memory by it)."""
        size = self.dataset_size(opts)
        if size is None or not self.bytes_per_size:
            return None
        return int(size * self.bytes_per_size)

    def describe_dataset(self, opts: BenchOptions) -> str:
        """"scale 10", "10 warehouses": for reports and the run index."""
        size = self.dataset_size(opts)
        return f"{size:g} {self.size_unit}".strip() if size is not None else ""

    # ----- capability: the tuned config's advice --------------------------------------
    def advice(self, inputs: AdviceInputs) -> list[Advice]:
        """Its lines of the tuned matrix's benchmark group (how to run it on this machine:
        ``PGBENCH_SCALE``, ``FIO_RUNTIME``); none by default."""
        return []

    def dataset_lines(self, dataset_bytes: int) -> list[SizingLine]:
        """The config sizing's lines for a --dataset-size in its own unit ("pgbench scale
        of that size"); none by default."""
        return []

    # ----- capability: CPU baseline ---------------------------------------------------
    cpu_baseline_metric: ClassVar[str | None] = None
    """The metric whose iterations measure the host's per-core speed (the cpu workload's
    events/s per core): the context report adjusts its projection to other CPUs by it."""

    # ----- options --------------------------------------------------------------------
    clients_label: ClassVar[str] = "Clients"
    """What its client counts count, as the run report's environment table names them
    (TPROC-H: query streams)."""

    def describe_clients(self, opts: BenchOptions, clients: int) -> str:
        """What ran at ``clients``, in words for the run's closing lines and its report:
        "8 clients" by default (TPROC-H: "the power stream alone")."""
        return clients_words(clients)

    def default_clients(self) -> tuple[int, ...]:
        """Client counts (threads, for a program) when --clients is not given: 1, 2 and 4
        per core, enough points for a peak and the count where throughput stops growing."""
        cores = len(os.sched_getaffinity(0))
        return tuple(cores * k for k in CLIENTS_PER_CORE)

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        """Its options from the command line's values (``raw``: field name -> value, only
        those given) into ``opts.workload_options``, checked with one-line UsageErrors;
        it may adjust shared options (TPROC-C's --vus are the clients). By default the
        values go into ``options_type`` as they are."""
        return dataclasses.replace(opts, workload_options=self.options_type(**raw))

    def check_with_target(self, opts: BenchOptions, install: PgInstall | None) -> None:
        """Refuse input only the target can judge, before anything is created: by default,
        a --dsn database that holds what this workload's build would refuse (tables
        pgdyno did not create without --force, a table of its names in pgdyno's schema).
        A server pgdyno starts is looked into once it runs."""
        spec = self.dataset_tables(opts)
        if spec is None or not opts.target.dsn:
            return
        from pgdyno.targets.dsn import dsn_connection
        from pgdyno.workloads import dataset

        name, size_key, tables = spec
        dataset.check_database(dsn_connection(opts.target.dsn), name, size_key, tables,
                               force=opts.force, what=f"{self.name}'s",
                               schema=self.dataset_schema)

    def dataset_tables(self, opts: BenchOptions) -> tuple[str, str, list[str]] | None:
        """(the name its dataset is recorded under, the size key, the tables it builds):
        what the pre-flight of a --dsn database checks; None: no dataset."""
        return None

    def storage_directories(self, opts: BenchOptions) -> dict[str, Path]:
        """Role -> directory this workload measures itself (fio's), for the environment
        table's device rows; the runner adds a managed server's data and WAL."""
        return {}

    # ----- the run --------------------------------------------------------------------
    def prepare(self, ctx: RunContext) -> Prepared:
        """Build or reuse its dataset; by default there is none."""
        return Prepared(dataset={"kind": "none"})

    def before_iteration(self, ctx: RunContext) -> None:
        """Before each iteration, outside its telemetry: a CHECKPOINT on a server, so that
        each iteration starts with the same clean buffers (a --dsn role without the
        privilege runs without, and the run says so)."""
        if ctx.conn is None:
            return
        import psycopg

        try:
            with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as db:
                db.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            if NO_CHECKPOINT not in ctx.plan.notes:
                ctx.plan.notes.append(NO_CHECKPOINT)

    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        """Run one measured iteration; raw files under ``step.directory(ctx.run_dir.raw,
        self.engine_dir)``, ``record`` filled; raise RunFailed when it fails, let
        KeyboardInterrupt through after cleaning up."""
        raise NotImplementedError(f"workload {self.name} has no run_iteration")

    def turn_blocker(self, opts: BenchOptions) -> str:
        """Why this workload's load cannot take turns of a second with another's under
        ``opts`` (the alternating comparison design); "" when it can."""
        if not self.pausable:
            return f"{self.name}'s load cannot be paused and counted second by second"
        return ""

    def headline_seconds(self, run_dir: RunDirectory, plan: RunPlan, record: IterationRecord,
                         opts: BenchOptions) -> list[float] | None:
        """The headline metric in each second of one iteration, counted from its time
        origin (index 0: the first second after ``start_at``), as a rate in the metric's
        unit; None: this workload cannot give it (``pausable`` workloads must)."""
        return None

    def finish(self, ctx: RunContext) -> None:
        """After the last iteration (consistency checks); nothing by default."""

    # ----- summary and report ---------------------------------------------------------
    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        """Raw files to the typed summary; every iteration's ``metrics`` filled."""
        raise NotImplementedError(f"workload {self.name} has no summarise")

    def report_sections(self, summary: RunSummary, run_dir: RunDirectory, plan: RunPlan,
                        opts: BenchOptions) -> list[Section]:
        """Sections of its own, placed after the common throughput and latency ones."""
        return []

    def common_report(self, opts: BenchOptions | None = None) -> bool:
        """Whether the run report's transaction sections (TPS, latency, scripts) apply to a
        run with these options (a paced TPROC-C run's pgbench TPS counts its sleeps)."""
        return True

    # ----- comparison -----------------------------------------------------------------
    def compare_detail(self, baseline: list[Path], candidate: list[Path]) -> dict[str, Any]:
        """What ``pgdyno compare`` shows of this workload beyond the declared metrics, from
        the two sides' run directories (TPROC-H: per-query speedup and plan changes), as
        plain data kept in compare.json; empty: nothing."""
        return {}

    def compare_sections(self, detail: dict[str, Any], out_dir: Path) -> list[Section]:
        """The comparison's sections (and plots under ``out_dir``) from ``detail``."""
        return []

    # ----- capability: sweeps over the dataset size -----------------------------------
    def sweep_steps(self, opts: BenchOptions) -> list[tuple[int, BenchOptions]]:
        """Runs of a sweep over the dataset size (TPROC-C's --warehouses 10,20,30), as
        (size, options) pairs, ascending; empty: these options ask for one run."""
        return []

    def build_sweep_report(self, sweep_dir: Path) -> None:
        """The report of a sweep directory, from its runs' summaries: by default the
        headline metric per size and client count (``workloads.sweeps``)."""
        from pgdyno.workloads.sweeps import build_sweep_report

        build_sweep_report(sweep_dir, self.metrics)

    def compare_sweeps(self, a: Path, b: Path, at_step: int | None) -> SweepComparison:
        """Two of its sweeps side by side (``pgdyno compare SWEEP_A SWEEP_B``); ``at_step``:
        the size to look at closely (--at-step). By default the headline per size."""
        from pgdyno.workloads.sweeps import compare_sweeps

        return compare_sweeps(a, b, at_step, self.metrics)


def add_telemetry(summary: IterationSummary, it_dir: Path, duration_s: float,
                  cpu_count: int, paced: Paced | None = None) -> None:
    """The iteration's telemetry over its measured window, whether other load on the host
    contaminated it, and the bottleneck verdict (which weighs the server's sessions, so a
    run without a server has none). ``paced``: the workload's terminals sleep by design
    (TPROC-C's keying and think times); the verdict judges it against its ideal rate."""
    from pgdyno.analysis.telemetry import analyse_telemetry
    from pgdyno.analysis.verdict import decide_bottleneck

    if (it_dir / "telemetry" / "meta.json").exists():
        window = (summary.window_start_epoch, summary.window_start_epoch + duration_s)
        summary.telemetry = analyse_telemetry(
            it_dir, window, series_from=summary.window_start_epoch - summary.warmup_s)
        other = summary.telemetry.contamination
        summary.contaminated, summary.contamination = other.contaminated, other.finding
        summary.telemetry.drivers = summary.drivers
        if summary.telemetry.server_sampled:
            summary.verdict = decide_bottleneck(summary.telemetry, summary.clients, cpu_count,
                                                paced=paced)
