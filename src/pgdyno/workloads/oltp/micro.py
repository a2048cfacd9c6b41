"""sysbench's microbenchmarks (``battery.py``) as workload plugins on the sbtest tables.

Each runs one of sysbench's Lua tests as a pgbench script on the tables oltp-read-only and
oltp-read-write use (same dataset, reused, its rows restored before each run: see
``restore.py``). Their figures are the OLTP ones: TPS, sysbench's query rates, latency.
The battery runs range scans at several lengths: ``oltp-random-ranges`` takes sysbench's
``--delta`` (default 5), and ``oltp-random-ranges-100`` / ``-1000`` are the same test with
a longer range by default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno.results.rundir import IterationRecord, RunPlan
from pgdyno.workloads.base import (
    BenchOptions,
    IterationProgress,
    RunContext,
    Step,
    option,
)
from pgdyno.workloads.checks import check_positive
from pgdyno.workloads.engine.pgbench import ScriptSpec
from pgdyno.workloads.oltp import battery, restore, scripts
from pgdyno.workloads.oltp.plugin import Oltp


@dataclass(frozen=True)
class BatteryOptions:
    tables: int = option(4, "oltp: sysbench tables sbtest1..N (default 4)")
    table_size: int = option(100_000, "oltp: rows per table (default 100,000)")
    rand_type: str = option("special", "oltp: id distribution: special (sysbench's "
                                       "default), uniform, gaussian, pareto")
    load_workers: int | None = option(None, "parallel load connections (default: min(4, "
                                            "cores))")
    delta: int | None = option(None, "oltp-random-ranges: each range is k BETWEEN v AND v + "
                                     "DELTA (sysbench's --delta; default 5, 100 and 1000 for "
                                     "oltp-random-ranges, -100 and -1000)")
    random_points: int = option(battery.RANDOM_POINTS, "oltp-random-points: values in the "
                                                       "IN list (sysbench's default 10)")
    number_of_ranges: int = option(battery.NUMBER_OF_RANGES, "oltp-random-ranges: ranges "
                                                             "per SELECT (sysbench's 10)")


class Microbench(Oltp):
    """One of sysbench's microbenchmarks; subclasses say which (``bench``)."""

    options_type: ClassVar[type] = BatteryOptions
    bench: ClassVar[battery.Microbenchmark]
    default_delta: ClassVar[int] = battery.DELTA
    read_write = False

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        for key in ("tables", "table_size", "load_workers", "random_points",
                    "number_of_ranges"):
            check_positive(raw.get(key), "--" + key.replace("_", "-"))
        check_positive(raw.get("delta"), "--delta", allow_zero=True)
        options = BatteryOptions(**raw)
        if options.delta is None:
            options = dataclasses.replace(options, delta=self.default_delta)
        self.battery_options(options)  # refuses a bad --rand-type in one line
        return dataclasses.replace(opts, workload_options=options)

    def id_options(self, o: Any) -> scripts.OltpScriptOptions:
        return scripts.OltpScriptOptions(read_write=False, tables=o.tables,
                                         table_size=o.table_size, rand_type=o.rand_type)

    def battery_options(self, o: BatteryOptions) -> battery.BatteryScriptOptions:
        return battery.BatteryScriptOptions(
            ids=self.id_options(o), delta=o.delta if o.delta is not None else self.default_delta,
            random_points=o.random_points, number_of_ranges=o.number_of_ranges)

    def script_text(self, o: Any, clients: int) -> str:
        return battery.script_text(self.bench, self.battery_options(o), clients)

    def statement_counts(self) -> dict[str, int]:
        return self.bench.statement_counts()

    def parameters(self, o: Any) -> dict[str, Any]:
        if "random_ranges" in self.bench.groups:
            return {"delta": o.delta, "number_of_ranges": o.number_of_ranges}
        if "random_points" in self.bench.groups:
            return {"random_points": o.random_points}
        return {}

    def shape_words(self, plan: RunPlan) -> str:
        p = plan.parameters
        if "delta" in p:
            return (f"; {p.get('number_of_ranges')} ranges k BETWEEN v AND v + {p['delta']} "
                    "per SELECT on sbtest1, each client in its own slice of the ids")
        if "random_points" in p:
            return (f"; {p['random_points']} values of k per SELECT on sbtest1, each client "
                    "in its own slice of the ids")
        return ""

    def prepare_tables(self, ctx: RunContext) -> None:
        if "insert" in self.bench.groups:
            assert ctx.conn is not None
            o = ctx.opts.workload_options
            restore.ensure_sequences(ctx.conn, o.tables, o.table_size)

    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        """A microbenchmark whose clients draw in slices of their own runs the script cut
        for this iteration's client count (kept beside the first under raw/scripts)."""
        if not self.bench.per_client or ctx.prepared is None:
            super().run_iteration(ctx, step, record, progress)
            return
        first = ctx.prepared.scripts[0]
        path = Path(first.path).with_name(f"{self.name}-c{step.clients}.pgbench")
        path.write_text(self.script_text(ctx.opts.workload_options, step.clients))
        ctx.prepared.scripts[0] = ScriptSpec(name=first.name, weight=first.weight, path=path)
        try:
            super().run_iteration(ctx, step, record, progress)
        finally:
            ctx.prepared.scripts[0] = first


def _plugin(bench: battery.Microbenchmark, rank: int, description: str,
            delta: int = battery.DELTA, name: str | None = None) -> type[Microbench]:
    """A registered class per microbenchmark (entry points name classes)."""
    writes = bench.statement_counts()["write"] > 0
    return type(f"Microbench_{(name or bench.name).replace('-', '_')}", (Microbench,), {
        "name": name or bench.name, "rank": rank, "description": description,
        "bench": bench, "default_delta": delta, "__module__": __name__,
        # As oltp-read-only and oltp-read-write are tuned: reads alone, or writes.
        "tuning": ("oltp", True) if writes else ("web", False)})


B = battery.BATTERY
PointSelect = _plugin(B["oltp-point-select"], 42, "sysbench's oltp_point_select: one "
                      "primary-key lookup per transaction")
RandomPoints = _plugin(B["oltp-random-points"], 43, "sysbench's select_random_points: "
                       "one SELECT of 10 values of k (secondary index)")
RandomRanges = _plugin(B["oltp-random-ranges"], 44, "sysbench's select_random_ranges: "
                       "10 ranges of k of length --delta (5) in one SELECT")
RandomRanges100 = _plugin(B["oltp-random-ranges"], 45, "select_random_ranges with "
                          "ranges of length 100", delta=100, name="oltp-random-ranges-100")
RandomRanges1000 = _plugin(B["oltp-random-ranges"], 46, "select_random_ranges with "
                           "ranges of length 1000", delta=1000, name="oltp-random-ranges-1000")
UpdateIndex = _plugin(B["oltp-update-index"], 47, "sysbench's oltp_update_index: "
                      "UPDATE of an indexed column")
UpdateNonIndex = _plugin(B["oltp-update-non-index"], 48, "sysbench's "
                         "oltp_update_non_index: UPDATE of a column without an index")
Insert = _plugin(B["oltp-insert"], 49, "sysbench's oltp_insert: one INSERT of a new row")
Delete = _plugin(B["oltp-delete"], 50, "sysbench's oltp_delete: one DELETE of a drawn id")
WriteOnly = _plugin(B["oltp-write-only"], 51, "sysbench's oltp_write_only: two updates, a "
                    "delete and an insert (6 statements)")
