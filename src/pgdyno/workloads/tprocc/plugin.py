"""TPROC-C as a workload plugin: parallel server-side load, PL/pgSQL transactions driven by
weighted pgbench scripts, NOPM and TPM from database snapshots at the window's edges,
consistency checks after the last iteration, and a warehouse sweep.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pgdyno.analysis.verdict import Paced
from pgdyno.errors import UsageError
from pgdyno.results import load
from pgdyno.workloads import bulkload
from pgdyno.workloads.base import (
    HIGHER,
    LATENCY_METRICS,
    TPS,
    BenchOptions,
    MetricSpec,
    Prepared,
    RunContext,
    option,
)
from pgdyno.workloads.checks import (
    check_positive,
    exclusive,
    parse_int_list,
    parse_size_option,
)
from pgdyno.workloads.engine.pgbench import PgbenchWorkload, pgbench_seconds
from pgdyno.workloads.tprocc import loader, metrics, model, response, schema, scripts

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

BYTES_PER_WAREHOUSE = 100 * 1024**2
"""A loaded TPROC-C warehouse with its indexes takes about 100 MB (reference facts)."""
DEFAULT_WAREHOUSES = 10
RETRIES = 10
"""Serialization failures and deadlocks are part of TPC-C's contention: retried, counted."""


@dataclass(frozen=True)
class TproccOptions:
    warehouses: int = option(DEFAULT_WAREHOUSES, "tprocc: warehouses (default 10); 10,20,30 "
                                                 "runs a sweep", cli_type=str)
    dataset_size: str | None = option(None, "dataset size, e.g. 3GB (sets the scale or the "
                                            "warehouses)")
    sweep: tuple[int, ...] = ()
    """Every warehouse count of a sweep (``--warehouses 10,20,30``); empty: one run."""
    vus: str | None = option(None, "tprocc: virtual users (= --clients), a sweep")
    rampup: int | None = option(None, "tprocc: ramp-up seconds (= --warmup)")
    mix: str | None = option(None, "tprocc: shares NO,P,OS,D,SL e.g. 45,43,4,4,4")
    all_warehouses: bool = option(False, "tprocc: spread over all warehouses")
    keying_thinking: bool = option(False, "tprocc: compliant keying/think times, "
                                          "10 terminals per warehouse")
    time_scale: float = option(1.0, "tprocc: multiply keying/think times")
    load_workers: int | None = option(None, "tprocc: parallel load connections")


class Tprocc(PgbenchWorkload):
    name = "tprocc"
    description = "TPROC-C: TPC-C-derived OLTP (HammerDB's), NOPM from the database"
    rank = 20
    tuning = ("oltp", True)
    options_type: ClassVar[type] = TproccOptions
    size_unit: ClassVar[str] = "warehouses"
    bytes_per_size: ClassVar[float | None] = BYTES_PER_WAREHOUSE
    default_max_tries: ClassVar[int] = RETRIES
    chart_metrics: ClassVar[tuple[str, ...]] = ("tpm",)
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec("nopm", "NOPM", "new orders/min", HIGHER, headline=True),
        MetricSpec("real_vs_ideal", "Real/ideal", "ratio", HIGHER),
        MetricSpec("tpm", "TPM", "transactions/min", HIGHER),
        dataclasses.replace(TPS, headline=False), *LATENCY_METRICS)
    """In compliant mode ``real_vs_ideal`` is measured and the latency figures are the
    server's response times (pgbench's would include the keying and think sleeps)."""

    # ----- options ------------------------------------------------------------------
    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        exclusive({"--warehouses": raw.get("warehouses"), "--dataset-size":
                   raw.get("dataset_size")})
        sweep = (model.parse_warehouses(str(raw["warehouses"]))
                 if raw.get("warehouses") is not None else [])
        if sweep == [] and raw.get("dataset_size"):
            size = parse_size_option(raw["dataset_size"], "--dataset-size")
            sweep = [self.size_for_bytes(size)]
        warehouses = sweep[0] if sweep else DEFAULT_WAREHOUSES
        check_positive(raw.get("time_scale", 1.0), "--time-scale")
        check_positive(raw.get("load_workers"), "--load-workers")
        # An empty --mix is a bad mix, not "none given".
        if raw.get("mix") is not None:
            model.Mix.parse(raw["mix"])  # raises a one-line UsageError for a bad mix
        keying = bool(raw.get("keying_thinking"))
        clients = opts.clients
        if raw.get("vus") is not None:
            clients = parse_int_list(raw["vus"], "--vus")
        if keying:
            terminals = scripts.TERMINALS_PER_WAREHOUSE * warehouses
            if raw.get("vus") is not None and (len(sweep) > 1 or clients != (terminals,)):
                raise UsageError(
                    "--keying-thinking runs 10 terminals per warehouse: leave --vus out "
                    if len(sweep) > 1 else
                    f"--keying-thinking runs 10 terminals per warehouse: --vus must be "
                    f"{terminals} for {warehouses} warehouses (or be left out)")
            clients = (terminals,)
        options = TproccOptions(
            warehouses=warehouses, sweep=tuple(sweep) if len(sweep) > 1 else (),
            mix=raw.get("mix"), all_warehouses=bool(raw.get("all_warehouses")),
            keying_thinking=keying, time_scale=float(raw.get("time_scale", 1.0)),
            load_workers=raw.get("load_workers"))
        warmup = raw["rampup"] if raw.get("rampup") is not None else opts.warmup_s
        check_positive(warmup, "--rampup", allow_zero=True)
        return dataclasses.replace(opts, workload_options=options, clients=clients,
                                   warmup_s=warmup)

    def sweep_steps(self, opts: BenchOptions) -> list[tuple[int, BenchOptions]]:
        """(W, options) per warehouse count of a sweep, ascending; empty for one run."""
        t = opts.workload_options
        return [(w, self.at_warehouses(opts, w)) for w in sorted(t.sweep)]

    def at_warehouses(self, opts: BenchOptions, warehouses: int) -> BenchOptions:
        """One run of a sweep: its W, and 10 terminals per warehouse in compliant mode."""
        t = dataclasses.replace(opts.workload_options, warehouses=warehouses, sweep=())
        clients = ((scripts.TERMINALS_PER_WAREHOUSE * warehouses,) if t.keying_thinking
                   else opts.clients)
        return dataclasses.replace(opts, workload_options=t, clients=clients)

    def dataset_size(self, opts: BenchOptions) -> float | None:
        return opts.workload_options.warehouses

    # ----- the run --------------------------------------------------------------------
    def dataset_tables(self, opts: BenchOptions) -> tuple[str, str, list[str]]:
        size_key = model.LoadOptions(warehouses=opts.workload_options.warehouses).size_key
        return schema.WORKLOAD, size_key, list(schema.TABLES)

    def prepare_dataset(self, ctx: RunContext) -> Prepared:
        assert ctx.conn is not None
        t: TproccOptions = ctx.opts.workload_options

        def on_load(p: model.LoadProgress) -> None:
            ctx.status(f"TPROC-C load {p.phase}: {p.warehouses_done}/{p.warehouses_total} "
                       f"warehouses, {p.rows_per_s:,.0f} rows/s")

        with bulkload.logged_load(ctx, self.dataset_tables(ctx.opts),
                                  model.LOAD_WAL_PER_WAREHOUSE * t.warehouses) as spacing:
            result = loader.load(ctx.conn, model.LoadOptions(
                warehouses=t.warehouses, workers=t.load_workers, force=ctx.opts.force,
                checkpoint_at_end=spacing.closing_checkpoint), on_load)
        script_set = scripts.generate(model.ScriptOptions(
            warehouses=t.warehouses, mix=model.Mix.parse(t.mix) if t.mix else model.Mix(),
            all_warehouses=t.all_warehouses, keying_thinking=t.keying_thinking,
            time_scale=t.time_scale, protocol=ctx.opts.protocol,
            run_s=pgbench_seconds(ctx.opts)))
        specs = script_set.specs(ctx.run_dir.raw / "scripts")
        return Prepared(
            scripts=specs,
            dataset={"kind": "tprocc", "warehouses": t.warehouses, "reused": result.reused,
                     "build_seconds": round(result.seconds, 3),
                     "warehouses_per_minute": round(result.warehouses_per_minute, 2),
                     "load": result.to_dict(),
                     load.RECORD_KEY: spacing.stamp(result.load_record()).to_dict()},
            parameters={"warehouses": t.warehouses, "mix": t.mix or "45,43,4,4,4",
                        "all_warehouses": t.all_warehouses,
                        "keying_thinking": t.keying_thinking, "time_scale": t.time_scale,
                        "constants": script_set.constants.to_dict()})

    def open_session(self, conn) -> psycopg.Connection:
        import psycopg

        return psycopg.connect(conn.conninfo(), autocommit=True,
                               application_name="pgdyno-snapshot")

    def snapshot(self, session) -> dict[str, Any] | None:
        return metrics.snapshot(session).to_dict()

    def session_options(self, ctx: RunContext) -> str | None:
        """Compliant mode: every call's duration in the server log (response times)."""
        if ctx.opts.workload_options.keying_thinking and ctx.manages_server:
            return response.SESSION_OPTIONS
        return None

    def collect(self, ctx: RunContext, it_dir: Path, log_offset: int) -> None:
        if self.session_options(ctx) is None or ctx.target is None:
            return
        out = it_dir / response.RAW_FILE
        if ctx.local_server:
            response.extract(ctx.target.log_path, log_offset, out)
        else:  # --ssh: the host's log, read there from the iteration's offset
            response.write_samples(ctx.target.log_since(log_offset).splitlines(), out)

    def finish(self, ctx: RunContext) -> None:
        import psycopg

        from pgdyno.workloads.tprocc.consistency import check

        assert ctx.conn is not None
        with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as db:
            report = check(db)
        (ctx.run_dir.raw / "consistency.json").write_text(json.dumps(report.to_dict(), indent=2))

    # ----- figures and report ---------------------------------------------------------
    def window_metrics(self, plan, it_dir: Path) -> dict[str, float]:
        from pgdyno.workloads.tprocc.report import window_metrics

        return window_metrics(plan, it_dir)

    def turn_blocker(self, opts: BenchOptions) -> str:
        if getattr(opts.workload_options, "keying_thinking", False):
            return ("compliant keying and think times pace the terminals: a paused "
                    "terminal's sleeps run on, and it catches up in its next turn")
        return super().turn_blocker(opts)

    def headline_of_seconds(self, plan, per_script: list[list[int]]) -> list[float]:
        """NOPM second by second: the committed New-Orders pgbench finished in each second,
        times 60 (the headline over a window counts the orders the database holds; second
        by second pgbench's count is the one there is, and it counts the same orders)."""
        from pgdyno.workloads.tprocc.scripts import script_for

        committed = [no for no in range(len(per_script))
                     if script_for(no)[1:] == ("new_order", "commit")]
        seconds = len(per_script[0]) if per_script else 0
        return [60.0 * sum(per_script[no][second] for no in committed)
                for second in range(seconds)]

    def work_unit(self, figures: dict[str, float]) -> tuple[str, float] | None:
        return metrics.new_order_rate(figures)

    def pacing(self, plan, figures: dict[str, float]) -> Paced | None:
        """Compliant mode paces the terminals: the verdict judges real/ideal, not idle
        sessions."""
        if not plan.parameters.get("keying_thinking") or "real_vs_ideal" not in figures:
            return None
        return Paced(real_over_ideal=figures["real_vs_ideal"],
                     threshold=metrics.SATURATION_RATIO,
                     rate=f"NOPM {figures['nopm']:,.0f} of {figures['ideal_nopm']:,.0f} ideal")

    def report_sections(self, summary, run_dir, plan, opts) -> list:
        from pgdyno.workloads.tprocc.report import tprocc_sections

        return tprocc_sections(summary, plan, run_dir.path)

    def common_report(self, opts: BenchOptions | None = None) -> bool:
        """Compliant runs have no common transaction sections: pgbench's TPS and latency
        include the keying and think sleeps; the TPROC-C section brings NOPM, real/ideal
        and the server's response times instead."""
        return not (opts is not None and getattr(opts.workload_options, "keying_thinking",
                                                 False))

    def build_sweep_report(self, sweep_dir: Path) -> None:
        """Real against ideal NOPM per warehouse count, and where real/ideal drops below
        90%."""
        from pgdyno.workloads.tprocc.sweep_report import build_sweep_report

        build_sweep_report(sweep_dir)

    def compare_sweeps(self, a: Path, b: Path, at_step: int | None):
        """Both sweeps' real and ideal NOPM, saturation points and the memory charts at one
        warehouse count (``at_step``; default the largest both measured)."""
        from pgdyno.workloads.tprocc.sweep_compare import compare_sweeps

        return compare_sweeps(a, b, at_step)
