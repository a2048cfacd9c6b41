"""sysbench's OLTP read-only and read-write transactions on sysbench's schema, as plugins
whose engine is pgbench.

The tables (``sbtest1..N``) are built in the server in parallel and reused; the
transaction is one pgbench script (``scripts.py``). Besides TPS and latency the run gives
sysbench's figures: queries per second and the read, write and other query counts, each
``statements per transaction × transactions`` from pgbench's own log.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any, ClassVar

from pgdyno.analysis.summary import RunSummary
from pgdyno.reports.document import Section, Table
from pgdyno.results import load
from pgdyno.results.rundir import RunDirectory, RunPlan
from pgdyno.units import rounded
from pgdyno.workloads import bulkload
from pgdyno.workloads.base import (
    HIGHER,
    LOWER,
    TPS,
    BenchOptions,
    MetricSpec,
    Prepared,
    RunContext,
    option,
)
from pgdyno.workloads.checks import check_positive
from pgdyno.workloads.engine.pgbench import PgbenchWorkload, ScriptSpec
from pgdyno.workloads.oltp import restore, schema, scripts

ROW_BYTES = 250
"""Heap tuple (about 200 bytes with char(120) and char(60)) plus its share of two btrees."""


@dataclass(frozen=True)
class OltpOptions:
    tables: int = option(4, "oltp: sysbench tables sbtest1..N (default 4)")
    table_size: int = option(100_000, "oltp: rows per table (default 100,000)")
    range_size: int = option(100, "oltp: rows per range query (sysbench's 100)")
    rand_type: str = option("special", "oltp: id distribution: special (sysbench's "
                                       "default), uniform, gaussian, pareto")
    load_workers: int | None = option(None, "parallel load connections (default: min(4, "
                                            "cores))")


class Oltp(PgbenchWorkload):
    """One of sysbench's two OLTP transactions; subclasses say which."""

    options_type: ClassVar[type] = OltpOptions
    size_unit: ClassVar[str] = "rows per table"
    default_max_tries: ClassVar[int] = 10
    """Deadlocks between the updates of concurrent transactions are retried, as sysbench
    ignores and retries them."""
    read_write: ClassVar[bool]
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        TPS,
        MetricSpec("qps", "QPS", "queries/s", HIGHER),
        MetricSpec("reads_per_s", "Reads/s", "queries/s", HIGHER),
        MetricSpec("writes_per_s", "Writes/s", "queries/s", HIGHER),
        MetricSpec("latency_avg_ms", "Latency avg", "ms", LOWER),
        MetricSpec("latency_p95_ms", "Latency p95", "ms", LOWER),
        MetricSpec("latency_p99_ms", "Latency p99", "ms", LOWER),
    )

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        for key in ("tables", "table_size", "range_size", "load_workers"):
            check_positive(raw.get(key), "--" + key.replace("_", "-"))
        options = OltpOptions(**raw)
        self.script_options(options)  # refuses a bad --rand-type in one line
        return dataclasses.replace(opts, workload_options=options)

    def script_options(self, o: OltpOptions) -> scripts.OltpScriptOptions:
        return scripts.OltpScriptOptions(read_write=self.read_write, tables=o.tables,
                                         table_size=o.table_size, range_size=o.range_size,
                                         rand_type=o.rand_type)

    def id_options(self, o: Any) -> scripts.OltpScriptOptions:
        """Tables, table size and id distribution of the script (for its description)."""
        return self.script_options(o)

    def script_text(self, o: Any, clients: int) -> str:
        """The pgbench script of one transaction (``clients``: the client count it runs
        at, for scripts that depend on it)."""
        return scripts.script_text(self.script_options(o))

    def statement_counts(self) -> dict[str, int]:
        """Statements per transaction as sysbench counts them: read, write, other, total."""
        return scripts.statement_counts(self.read_write)

    def parameters(self, o: Any) -> dict[str, Any]:
        """The run's own parameters besides tables, table size and ids."""
        return {"range_size": o.range_size}

    def shape_words(self, plan: RunPlan) -> str:
        """What the report says about the statements' shape after the id distribution."""
        return f", ranges of {plan.parameters.get('range_size')} rows"

    def prepare_tables(self, ctx: RunContext) -> None:
        """Anything the transaction needs on the tables beyond the build (none here)."""

    def dataset_bytes(self, opts: BenchOptions) -> int | None:
        o = opts.workload_options
        return o.tables * o.table_size * ROW_BYTES

    def describe_dataset(self, opts: BenchOptions) -> str:
        o = opts.workload_options
        return f"{o.tables} tables × {o.table_size:,} rows"

    def dataset_tables(self, opts: BenchOptions) -> tuple[str, str, list[str]]:
        o = opts.workload_options
        size_key = schema.LoadOptions(tables=o.tables, table_size=o.table_size).size_key
        return schema.DATASET, size_key, schema.table_names(o.tables)

    def prepare_dataset(self, ctx: RunContext) -> Prepared:
        assert ctx.conn is not None
        o: OltpOptions = ctx.opts.workload_options

        def on_load(p: schema.LoadProgress) -> None:
            ctx.status(f"oltp load {p.phase}: {p.rows_done:,}/{p.rows_total:,} rows, "
                       f"{p.rows_per_s:,.0f} rows/s")

        with bulkload.logged_load(ctx, self.dataset_tables(ctx.opts),
                                  schema.LOAD_WAL_PER_ROW * o.tables * o.table_size) as spacing:
            result = schema.load(ctx.conn, schema.LoadOptions(
                tables=o.tables, table_size=o.table_size, workers=o.load_workers,
                force=ctx.opts.force, checkpoint_at_end=spacing.closing_checkpoint), on_load)
        restored = restore.restore_rows(ctx.conn, o.tables, o.table_size)
        self.prepare_tables(ctx)
        path = ctx.run_dir.raw / "scripts" / f"{self.name}.pgbench"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.script_text(o, ctx.opts.clients[0]))
        return Prepared(
            scripts=[ScriptSpec(name=self.name, path=path)],
            dataset={"kind": "oltp", "tables": o.tables, "table_size": o.table_size,
                     "reused": result.reused, "build_seconds": round(result.seconds, 3),
                     "rows_per_s": round(result.rows / result.seconds) if result.seconds
                     else None, "phase_seconds": result.phase_seconds,
                     "restored_rows": {"removed": restored.removed, "added": restored.added},
                     load.RECORD_KEY: spacing.stamp(result.load_record()).to_dict()},
            parameters={"tables": o.tables, "table_size": o.table_size,
                        **self.parameters(o),
                        "rand": scripts.rand_description(self.id_options(o)),
                        "statements": self.statement_counts()})

    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        """pgbench's figures, and sysbench's query rates: statements per transaction ×
        transactions (only committed transactions count, as in sysbench)."""
        summary = super().summarise(run_dir, plan, opts, status, cpu_count)
        counts = self.statement_counts()
        for it in summary.iterations:
            it.metrics.update({
                "qps": counts["total"] * it.tps_mean,
                "reads_per_s": counts["read"] * it.tps_mean,
                "writes_per_s": counts["write"] * it.tps_mean,
                "other_per_s": counts["other"] * it.tps_mean,
            })
        return summary

    def report_sections(self, summary: RunSummary, run_dir: RunDirectory, plan: RunPlan,
                        opts: BenchOptions) -> list[Section]:
        counts = plan.parameters.get("statements") or self.statement_counts()
        rows = []
        for c in summary.per_clients:
            its = [i for i in summary.iterations if i.clients == c.clients]
            qps = statistics.fmean(i.metrics["qps"] for i in its)
            rows.append([str(c.clients), rounded(c.tps_mean, 1), rounded(qps, 0),
                         f"{counts['read'] * c.transactions:,}",
                         f"{counts['write'] * c.transactions:,}",
                         f"{counts['other'] * c.transactions:,}",
                         f"{c.retried:,}", rounded(c.latency.mean_ms, 3),
                         rounded(c.latency.percentiles_ms.get("p95"), 3),
                         rounded(c.latency.percentiles_ms.get("p99"), 3)])
        return [Section(f"sysbench-style {self.name}", paragraphs=[
            f"{plan.parameters.get('tables')} tables × {plan.parameters.get('table_size'):,} "
            f"rows, ids drawn {plan.parameters.get('rand')}{self.shape_words(plan)}. One "
            f"transaction is {counts['total']} statement(s): {counts['read']} reads, "
            f"{counts['write']} writes, {counts['other']} other"
            f"{' (BEGIN, COMMIT)' if counts['other'] else ''}, as sysbench counts them; "
            "QPS = statements per transaction × TPS. Retried: transactions that hit a "
            "deadlock or serialization failure and were retried (sysbench's ignored "
            "errors)."],
            tables=[Table(["Clients", "TPS", "QPS", "Queries read", "Queries written",
                           "Queries other", "Retried", "Latency avg (ms)", "p95 (ms)",
                           "p99 (ms)"], rows)])]


class OltpReadOnly(Oltp):
    name = "oltp-read-only"
    rank = 40
    description = "sysbench's oltp_read_only on sbtest tables (16 statements)"
    tuning = ("web", False)
    read_write = False


class OltpReadWrite(Oltp):
    name = "oltp-read-write"
    rank = 41
    description = "sysbench's oltp_read_write on sbtest tables (20 statements)"
    tuning = ("oltp", True)
    read_write = True
