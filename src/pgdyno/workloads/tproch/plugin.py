"""TPROC-H as a workload plugin: the first whose engine is not pgbench.

``prepare`` loads (or reuses) the TPC-H-derived dataset with ``tpchgen-cli`` streamed into
COPY; each iteration runs the power test (RF1, stream 0, RF2) and a throughput test of
``--streams`` concurrent query streams beside a refresh stream, over psycopg (``streams``).
``--streams`` are the run's clients, so ``--streams 1,2,4`` is a sweep of concurrency like
any other workload's client counts, and compare, campaigns and the run index read TPROC-H
runs the way they read the others.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno.analysis.summary import (
    SCHEMA_VERSION,
    IterationSummary,
    LatencyStats,
    RunSummary,
    stability_warnings,
)
from pgdyno.errors import RunFailed, UsageError
from pgdyno.reports.document import Section
from pgdyno.results import load
from pgdyno.results.rundir import IterationRecord, RunDirectory, RunPlan
from pgdyno.workloads import bulkload
from pgdyno.workloads.base import (
    HIGHER,
    LOWER,
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
from pgdyno.workloads.checks import check_positive, exclusive, parse_int_list, parse_size_option
from pgdyno.workloads.tproch import loader, queries, refresh, schema, streams
from pgdyno.workloads.tproch.metrics import iteration_figures, stream_geomeans, streams_words
from pgdyno.workloads.tproch.model import LoadOptions, LoadProgress

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.

BYTES_PER_SF = 1.8 * 1024**3
"""SF 1 takes about 1.8 GB in PostgreSQL with its keys and indexes (1 GB of raw data)."""
DEFAULT_SEED = 1
"""A fixed default: two runs compared side by side then run the same query texts."""
TESTS = ("power", "throughput")
QUERY_COUNT = 22


@dataclass(frozen=True)
class TprochOptions:
    scale_factor: float = option(1.0, "tproch: TPC-H scale factor (about GB of raw data; "
                                      "0.01 and up)")
    dataset_size: str | None = option(None, "dataset size, e.g. 3GB (sets the scale or the "
                                            "warehouses)")
    streams: str | None = option(None, "tproch: concurrent query streams of the throughput "
                                       "test (= --clients; 1,2,4 runs each)")
    tests: str = option("power,throughput", "tproch: which tests each iteration runs: "
                                            "power, throughput or both")
    queries: str | None = option(None, "tproch: queries to run, e.g. 1,3,5-7 (default all 22)")
    seed: int = option(DEFAULT_SEED, "tproch: seed of the queries' substitution parameters")
    query_timeout: str | None = option(None, "tproch: statement_timeout of each query and "
                                             "refresh function, e.g. 300s or 10min")
    explain_analyze: bool = option(False, "tproch: keep the power stream's executed plans "
                                          "(EXPLAIN ANALYZE, BUFFERS), run once more untimed")
    no_refresh: bool = option(False, "tproch: run no refresh functions (RF1/RF2)")
    load_workers: int | None = option(None, "tproch: parallel load connections")
    query_list: tuple[int, ...] = ()
    """The parsed ``--queries`` (all 22 when empty)."""
    timeout_ms: int | None = None

    def selected(self) -> tuple[int, ...]:
        return self.query_list or tuple(range(1, QUERY_COUNT + 1))

    def tests_run(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.tests.split(",") if t.strip())


def _metrics() -> tuple[MetricSpec, ...]:
    per_query = tuple(MetricSpec(f"q{q:02d}_s", f"Q{q} ({queries.QUERY_NAMES[q]})", "s", LOWER)
                      for q in range(1, QUERY_COUNT + 1))
    return (
        MetricSpec("geomean_s", "Geometric mean of query times", "s", LOWER, headline=True),
        MetricSpec("power_geomean_s", "Power stream geometric mean", "s", LOWER),
        MetricSpec("throughput_geomean_s", "Throughput streams geometric mean", "s", LOWER),
        MetricSpec("power_test_s", "Power test time", "s", LOWER),
        MetricSpec("throughput_test_s", "Throughput test time", "s", LOWER),
        MetricSpec("power_at_sf", "Power@SF (non-audited)", "queries/h", HIGHER),
        MetricSpec("throughput_at_sf", "Throughput@SF (non-audited)", "queries/h", HIGHER),
        MetricSpec("qphh_at_sf", "QphH@SF (non-audited)", "queries/h", HIGHER),
        MetricSpec("rf1_s", "RF1 time", "s", LOWER),
        MetricSpec("rf2_s", "RF2 time", "s", LOWER),
        MetricSpec("queries_missing", "Queries timed out or failed", "queries", 0),
        *per_query)


class Tproch(Workload):
    name: ClassVar[str] = "tproch"
    description: ClassVar[str] = ("TPROC-H: TPC-H-derived analytics, power and throughput "
                                  "tests of 22 queries with refresh functions")
    rank: ClassVar[int] = 30
    dataset_schema: ClassVar[str] = schema.DATASET_SCHEMA
    engine: ClassVar[str] = "psycopg"
    engine_dir: ClassVar[str] = "tproch"
    tuning: ClassVar[tuple[str, bool]] = ("dw", False)
    options_type: ClassVar[type] = TprochOptions
    size_unit: ClassVar[str] = "scale factor"
    bytes_per_size: ClassVar[float | None] = BYTES_PER_SF
    metrics: ClassVar[tuple[MetricSpec, ...]] = _metrics()

    # ----- options ------------------------------------------------------------------
    def default_clients(self) -> tuple[int, ...]:
        """Two throughput streams: the specification's minimum at SF 1."""
        return (2,)

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        exclusive({"--scale-factor": raw.get("scale_factor"),
                   "--dataset-size": raw.get("dataset_size")})
        given = raw.get("scale_factor")
        sf = float(TprochOptions.scale_factor if given is None else given)
        if raw.get("dataset_size"):
            size = parse_size_option(raw["dataset_size"], "--dataset-size")
            sf = round(size / BYTES_PER_SF, 2)
        if not 0.01 <= sf <= 100_000:
            raise UsageError(f"--scale-factor {sf:g}: accepted values are 0.01 to 100000")
        check_positive(raw.get("load_workers"), "--load-workers")
        given_tests = raw.get("tests")
        tests = tuple(t.strip() for t in str("power,throughput" if given_tests is None
                                             else given_tests).split(","))
        if not tests or any(t not in TESTS for t in tests):
            raise UsageError(f"--tests {raw.get('tests')!r}: accepted values are power, "
                             "throughput or power,throughput")
        # An empty --queries is a bad list, not "all 22".
        query_list = (queries.parse_query_list(raw["queries"])
                      if raw.get("queries") is not None else ())
        clients = opts.clients
        if raw.get("streams") is not None:
            clients = parse_int_list(str(raw["streams"]), "--streams")
        if "throughput" not in tests:
            clients = _power_only_streams(clients, raw.get("streams") is not None
                                          or clients != self.default_clients())
        seed = int(raw.get("seed", DEFAULT_SEED))
        if seed < 0:
            raise UsageError(f"--seed {seed}: accepted values are 0 and up")
        options = TprochOptions(
            scale_factor=sf, streams=None, tests=",".join(tests),
            queries=raw.get("queries"), seed=seed,
            query_timeout=raw.get("query_timeout"), explain_analyze=bool(
                raw.get("explain_analyze")), no_refresh=bool(raw.get("no_refresh")),
            load_workers=raw.get("load_workers"), query_list=query_list,
            timeout_ms=_timeout_ms(raw.get("query_timeout")))
        # No warm-up: the power test runs cold after the load, as the specification's.
        # duration_s is only the progress bar's scale here; the report shows real times.
        return dataclasses.replace(opts, workload_options=options, clients=clients,
                                   warmup_s=0, duration_s=max(opts.duration_s, 1))

    def check_with_target(self, opts: BenchOptions, install: object | None) -> None:
        """Before anything is created (no run directory for bad input): the data generator
        is there, and a --dsn database, up already, holds nothing the load would refuse
        (tables pgdyno did not create without --force, or of TPROC-H's names in its own
        schema). A server pgdyno starts is looked into only once it runs."""
        loader.tpchgen_program()
        super().check_with_target(opts, install)

    def dataset_tables(self, opts: BenchOptions) -> tuple[str, str, list[str]]:
        size_key = LoadOptions(scale_factor=opts.workload_options.scale_factor).size_key
        return schema.WORKLOAD, size_key, list(schema.TABLES)

    def dataset_size(self, opts: BenchOptions) -> float | None:
        return opts.workload_options.scale_factor

    clients_label: ClassVar[str] = "Query streams"

    def describe_clients(self, opts: BenchOptions, clients: int) -> str:
        """What an iteration at ``clients`` ran: the power stream, the throughput test's
        streams, or both."""
        return streams_words(opts.workload_options.tests_run(), clients)

    def describe_dataset(self, opts: BenchOptions) -> str:
        return f"SF {opts.workload_options.scale_factor:g}"

    def common_report(self, opts: BenchOptions | None = None) -> bool:
        """No transactions per second: the TPROC-H section brings query times instead."""
        return False

    # ----- the run --------------------------------------------------------------------
    def prepare(self, ctx: RunContext) -> Prepared:
        assert ctx.conn is not None
        t: TprochOptions = ctx.opts.workload_options

        def on_load(p: LoadProgress) -> None:
            steps = f", {p.steps_done}/{p.steps_total}" if p.steps_total else ""
            ctx.status(f"TPROC-H load {p.phase}{steps}: {p.rows:,}/{p.rows_total:,} rows, "
                       f"{p.rows_per_s:,.0f} rows/s")

        with bulkload.minimal_wal(ctx, self.dataset_tables(ctx.opts)) as wal:
            result = loader.load(ctx.conn, LoadOptions(
                scale_factor=t.scale_factor, workers=t.load_workers, force=ctx.opts.force),
                on_load)
        ctx.commands.append(f"{loader.tpchgen_program()} csv -s {t.scale_factor:g} "
                            "-T TABLE --parts N --part K --stdout | COPY TABLE FROM STDIN")
        return Prepared(
            dataset={"kind": "tproch", "scale_factor": t.scale_factor, "reused": result.reused,
                     "build_seconds": round(result.seconds, 3), "load": result.to_dict(),
                     load.RECORD_KEY: wal.stamp(result.load_record()).to_dict()},
            parameters={"scale_factor": t.scale_factor, "seed": t.seed,
                        "queries": list(t.selected()), "tests": list(t.tests_run()),
                        "refresh": not t.no_refresh, "query_timeout_ms": t.timeout_ms,
                        "explain_analyze": t.explain_analyze})

    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        import psycopg

        assert ctx.conn is not None
        t: TprochOptions = ctx.opts.workload_options
        it_dir = step.directory(ctx.run_dir.raw, self.engine_dir)
        plan = streams.StreamsPlan(
            scale_factor=t.scale_factor, seed=t.seed, queries=t.selected(),
            streams=step.clients if "throughput" in t.tests_run() else 0,
            power="power" in t.tests_run(), refresh=not t.no_refresh,
            query_timeout_ms=t.timeout_ms, explain_analyze=t.explain_analyze)
        total = ctx.opts.warmup_s + ctx.opts.duration_s
        with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as db:
            first_pair = refresh.next_pair(db)
        record.threads = step.clients
        record.command = [f"tproch power={plan.power} streams={plan.streams} "
                          f"queries={','.join(map(str, plan.queries))} seed={plan.seed}"]
        record.log_files = [str((it_dir / name).relative_to(ctx.run_dir.path))
                            for name in (streams.QUERIES_CSV, streams.REFRESH_CSV)]
        iteration = streams.Iteration(ctx.conn.conninfo(), plan, it_dir,
                                      lambda f, text: progress(f * total, text), first_pair)
        iteration.run()
        failed = [q for q in streams.read_queries(it_dir) if q.status == streams.ERROR]
        failed_rf = [r for r in streams.read_refresh(it_dir) if r.status == streams.ERROR]
        if failed or failed_rf:
            first = failed[0] if failed else failed_rf[0]
            what = f"Q{first.query}" if failed else f"{failed_rf[0].function}"
            raise RunFailed(f"TPROC-H {what} failed at {step.clients} streams, iteration "
                            f"{step.iteration}: {first.error}")

    # ----- summary and report ---------------------------------------------------------
    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        sf = float(plan.parameters.get("scale_factor", 1.0))
        selected = tuple(plan.parameters.get("queries") or range(1, QUERY_COUNT + 1))
        iterations = []
        for record in plan.records:
            it_dir = run_dir.raw / self.engine_dir / f"c{record.clients}-i{record.iteration}"
            timings = streams.read_queries(it_dir)
            if not timings:
                continue
            tests = streams.read_tests(it_dir)
            figures = iteration_figures(timings, streams.read_refresh(it_dir), tests, sf,
                                        selected)
            it = _iteration(record, figures, timings, tests)
            add_telemetry(it, it_dir, it.duration_s, cpu_count)
            iterations.append(it)
        return RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                          context=plan.context, status=status,
                          client_counts=list(opts.clients), per_clients=[],
                          iterations=iterations, warnings=stability_warnings(iterations))

    def report_sections(self, summary: RunSummary, run_dir: RunDirectory, plan: RunPlan,
                        opts: BenchOptions) -> list[Section]:
        from pgdyno.workloads.tproch.report import tproch_sections

        return tproch_sections(summary, run_dir, plan)

    def compare_detail(self, baseline: list[Path], candidate: list[Path]) -> dict[str, Any]:
        from pgdyno.workloads.tproch.report import compare_detail

        return compare_detail(baseline, candidate)

    def compare_sections(self, detail: dict[str, Any], out_dir: Path) -> list[Section]:
        from pgdyno.workloads.tproch.report import compare_sections

        return compare_sections(detail, out_dir)


def _power_only_streams(clients: tuple[int, ...], given: bool) -> tuple[int, ...]:
    """--tests power runs one stream, the power test's, whatever the count: one iteration
    per --iterations, labelled as the one stream it is. Counts given for it (--streams 4,
    or --clients 1,2) would repeat the same test under names of streams that never ran."""
    if given and clients != (1,):
        raise UsageError(f"--streams {','.join(map(str, clients))}: --tests power runs the "
                         "power test's one stream; the streams count the throughput test's "
                         "(add --tests power,throughput, or leave --streams out)")
    return (1,)


def _timeout_ms(text: str | None) -> int | None:
    """``--query-timeout 300s`` / ``10min`` / ``500ms`` / ``90`` (seconds) in ms."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?\s*", str(text))
    if m is None or float(m.group(1)) <= 0:
        raise UsageError(f"--query-timeout {text!r}: accepted values are a positive time "
                         "such as 500ms, 300s, 10min or 1h")
    factor = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000}[m.group(2) or "s"]
    return max(1, round(float(m.group(1)) * factor))


def _iteration(record: IterationRecord, figures, timings: list[streams.QueryTiming],
               tests: dict[str, dict[str, float]]) -> IterationSummary:
    starts = [e["start"] for e in tests.values() if "start" in e] or [t.start for t in timings]
    ends = [e["end"] for e in tests.values() if "end" in e] or [t.end for t in timings]
    window = min(starts)
    lasted = max(ends) - window
    ok = [t for t in timings if t.status == streams.OK]
    none = LatencyStats(count=0, mean_ms=math.nan, median_ms=math.nan, stddev_ms=math.nan,
                        min_ms=math.nan, max_ms=math.nan, percentiles_ms={})
    qps = len(ok) / lasted if lasted > 0 else math.nan
    return IterationSummary(
        clients=record.clients, iteration=record.iteration, status=record.status,
        duration_s=max(1, int(round(lasted))), warmup_s=0, window_start_epoch=window,
        transactions=len(ok), failed=len(timings) - len(ok), serialization_failures=0,
        deadlock_failures=0, retried=0, retries=0, skipped=0, late=0, tps_mean=qps,
        tps_median=qps, tps_stddev=0.0, tps_min=qps, tps_max=qps, interval_tps=[],
        latency=none, lag=None, scripts=[], timeline=[], log_files=record.log_files,
        metrics={k: v for k, v in figures.metrics.items() if not math.isnan(v)},
        samples={"geomean_s": stream_geomeans(figures)})
