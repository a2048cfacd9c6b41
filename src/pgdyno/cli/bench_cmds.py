"""`pgdyno bench`, `pgdyno report` and `pgdyno runs`: argument parsing only."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgdyno.errors import UsageError
from pgdyno.results.index import RunIndex
from pgdyno.results.rundir import STATUSES
from pgdyno.runner import options as o
from pgdyno.targets import TargetSpec, default_workdir


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
    app.command("report")(report)
    app.command("runs")(runs)


def bench(
    workload: str = typer.Argument(
        ..., help="tpcb | simple-update | select-only | tprocc | custom"),
    script: list[str] = typer.Option([], "--script", help="FILE[@WEIGHT], repeatable"),
    scale: int | None = typer.Option(None, help="pgbench scale factor (default 10)"),
    dataset_size: str | None = typer.Option(None, help="dataset size, e.g. 3GB (sets the scale)"),
    clients: str = typer.Option("8", help="client counts, e.g. 4,16,100 (a sweep)"),
    threads: int | None = typer.Option(None, help="pgbench threads (default: min(cores, clients))"),
    duration: int = typer.Option(50, help="measured seconds per iteration"),
    warmup: int = typer.Option(10, help="warm-up seconds before each measured window"),
    iterations: int = typer.Option(3, help="iterations per client count"),
    protocol: str = typer.Option("prepared", help="simple | extended | prepared"),
    rate: float | None = typer.Option(None, help="fixed rate in TPS (pgbench -R)"),
    latency_limit: float | None = typer.Option(None, help="ms; with --rate: count late/skip"),
    max_tries: int = typer.Option(1, help="retries of serialization/deadlock failures"),
    cache: str = typer.Option("warm", help="warm | cold (restart and drop OS cache)"),
    via: str = typer.Option("socket", help="socket | tcp"),
    force: bool = typer.Option(False, help="initialise even over tables pgdyno did not create"),
    results_dir: Path = typer.Option(Path("results"), help="root of run directories"),
    context: str | None = typer.Option(None, help="context name (default HARDWARE--WORKLOAD)"),
    target: str = typer.Option("embedded", help="embedded | local (needs --pg-bin) | dsn"),
    workdir: Path | None = typer.Option(None, help="where pgdyno keeps its clusters"),
    pg_bin: Path | None = typer.Option(None, help="directory of other PostgreSQL binaries"),
    dsn: str | None = typer.Option(None, help="an existing server: never restarted or changed"),
    wal_dir: Path | None = typer.Option(None, help="separate WAL directory (new clusters)"),
    keep: bool = typer.Option(False, help="leave the embedded server running afterwards"),
    config: str = typer.Option("default", help="default | pgtune | tuned | FILE"),
    set_: list[str] = typer.Option([], "--set", help="key=value override, repeatable"),
    telemetry: bool = typer.Option(True, help="sample CPU, disks, waits, checkpoints"),
    warehouses: str | None = typer.Option(None, help="tprocc: warehouses (default 10); "
                                                     "10,20,30 runs a sweep"),
    vus: str | None = typer.Option(None, help="tprocc: virtual users (= --clients), a sweep"),
    rampup: int | None = typer.Option(None, help="tprocc: ramp-up seconds (= --warmup)"),
    mix: str | None = typer.Option(None, help="tprocc: shares NO,P,OS,D,SL e.g. 45,43,4,4,4"),
    all_warehouses: bool = typer.Option(False, help="tprocc: spread over all warehouses"),
    keying_thinking: bool = typer.Option(False, help="tprocc: compliant keying/think times, "
                                                     "10 terminals per warehouse"),
    time_scale: float = typer.Option(1.0, help="tprocc: multiply keying/think times"),
    load_workers: int | None = typer.Option(None, help="tprocc: parallel load connections"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Run a pgbench workload, sample telemetry, and write the run directory and report."""
    from pgdyno.runner.bench import run_bench

    sweep = parse_sweep(workload, warehouses)
    opts = build_options(**locals())
    console = Console(stderr=True)
    if len(sweep) > 1:
        from pgdyno.runner.sweep import run_sweep

        sweep_dir = run_sweep(opts, sweep, console)
        typer.echo(f"report: {sweep_dir / 'report.md'}")
        typer.echo(f"html:   {sweep_dir / 'report.html'}")
        return
    result = run_bench(opts, console)
    typer.echo(f"report: {result.run_dir / 'report.md'}")
    typer.echo(f"html:   {result.run_dir / 'report.html'}")


def parse_sweep(workload: str, warehouses: str | None) -> list[int]:
    """The warehouse counts of ``--warehouses`` (one, or several for a sweep)."""
    if warehouses is None or workload != o.TPROCC_WORKLOAD:
        return []
    from pgdyno.workloads.tprocc import parse_warehouses

    return parse_warehouses(warehouses)


def build_options(**kw) -> o.BenchOptions:
    """Validate every option; each failure is a one-line UsageError."""
    name, scripts = o.parse_workload(kw["workload"], kw["script"])
    tprocc = tprocc_options(name, kw)
    if name != o.TPROCC_WORKLOAD:
        for key in ("warehouses", "vus", "rampup", "mix"):
            if kw.get(key) is not None:
                raise UsageError(f"--{key.replace('_', '-')} belongs to tprocc, not {name}")
    if kw.get("vus") is not None:
        kw["clients"] = kw["vus"]
    if kw.get("rampup") is not None:
        kw["warmup"] = kw["rampup"]
    clients = o.parse_clients(kw["clients"])
    if tprocc is not None and tprocc.keying_thinking:
        from pgdyno.workloads.tprocc import TERMINALS_PER_WAREHOUSE

        terminals = TERMINALS_PER_WAREHOUSE * tprocc.warehouses
        if kw.get("vus") is not None and clients != (terminals,):
            raise UsageError(f"--keying-thinking runs 10 terminals per warehouse: --vus must be "
                             f"{terminals} for {tprocc.warehouses} warehouses (or be left out)")
        clients = (terminals,)
    for key, option, zero_ok in (("duration", "--duration", False), ("warmup", "--warmup", True),
                                 ("iterations", "--iterations", False),
                                 ("threads", "--threads", False), ("rate", "--rate", False),
                                 ("latency_limit", "--latency-limit", False),
                                 ("max_tries", "--max-tries", True), ("scale", "--scale", False)):
        o.check_positive(kw[key], option, allow_zero=zero_ok)
    o.check_choice(kw["protocol"], "--protocol", o.PROTOCOLS)
    o.check_choice(kw["cache"], "--cache", o.CACHE_MODES)
    o.check_choice(kw["via"], "--via", o.VIA)
    o.check_choice(kw["target"], "--target", ("embedded", "local", "dsn"))
    if tprocc is not None and kw["max_tries"] == 1:
        kw["max_tries"] = 10  # serialization failures and deadlocks are retried and counted
    if kw["scale"] is not None and kw["dataset_size"] is not None:
        raise UsageError("--scale and --dataset-size both given; use one of them")
    scale = kw["scale"] or (o.scale_for_size(o.parse_size(kw["dataset_size"], "--dataset-size"))
                            if kw["dataset_size"] else 10)
    if kw["latency_limit"] is not None and kw["rate"] is None and kw["max_tries"] == 1:
        raise UsageError("--latency-limit needs --rate (fixed-rate mode) or --max-tries")
    return o.BenchOptions(
        workload=name, scripts=scripts, scale=scale, clients=clients, threads=kw["threads"],
        duration_s=kw["duration"], warmup_s=kw["warmup"], iterations=kw["iterations"],
        protocol=kw["protocol"], rate_tps=kw["rate"], latency_limit_ms=kw["latency_limit"],
        max_tries=kw["max_tries"], cache=kw["cache"], via=kw["via"], force=kw["force"],
        results_dir=kw["results_dir"], context=kw["context"], target=target_spec(**kw),
        config=kw["config"], sets=tuple(kw["set_"]), telemetry=kw["telemetry"],
        show_progress=kw["progress"], tprocc=tprocc)


# A loaded TPROC-C warehouse with its indexes takes about 100 MB (reference facts).
BYTES_PER_WAREHOUSE = 100 * 1024**2


def tprocc_options(name: str, kw: dict) -> o.TproccOptions | None:
    if name != o.TPROCC_WORKLOAD:
        return None
    if kw.get("warehouses") is not None and kw.get("dataset_size") is not None:
        raise UsageError("--warehouses and --dataset-size both given; use one of them")
    sweep = parse_sweep(name, kw.get("warehouses"))
    if len(sweep) > 1 and kw.get("keying_thinking") and kw.get("vus") is not None:
        raise UsageError("--keying-thinking runs 10 terminals per warehouse: leave --vus out "
                         "of a warehouse sweep")
    warehouses = sweep[0] if sweep else None
    if warehouses is None and kw.get("dataset_size"):
        size = o.parse_size(kw["dataset_size"], "--dataset-size")
        warehouses = max(1, round(size / BYTES_PER_WAREHOUSE))
        kw["dataset_size"] = None
    warehouses = 10 if warehouses is None else warehouses
    o.check_positive(warehouses, "--warehouses")
    o.check_positive(kw.get("time_scale", 1.0), "--time-scale")
    if kw.get("load_workers") is not None:
        o.check_positive(kw["load_workers"], "--load-workers")
    if kw.get("mix"):
        from pgdyno.workloads.tprocc import Mix

        Mix.parse(kw["mix"])  # raises a one-line UsageError for a bad mix
    return o.TproccOptions(warehouses=warehouses, mix=kw.get("mix"),
                           all_warehouses=kw.get("all_warehouses", False),
                           keying_thinking=kw.get("keying_thinking", False),
                           time_scale=kw.get("time_scale", 1.0),
                           load_workers=kw.get("load_workers"))


def target_spec(**kw) -> TargetSpec:
    kind = kw["target"]
    if kw["dsn"] is not None:
        kind = "dsn"
    elif kw["pg_bin"] is not None:
        kind = "local"
    if kind == "dsn" and kw["dsn"] is None:
        raise UsageError("--target dsn needs --dsn postgresql://user@host:port/dbname")
    if kind == "local" and kw["pg_bin"] is None:
        raise UsageError("--target local needs --pg-bin DIR, e.g. /usr/lib/postgresql/15/bin")
    if kind == "dsn" and kw["cache"] == "cold":
        raise UsageError("--cache cold restarts the server; with --dsn pgdyno never does that")
    if kind == "dsn" and (kw["wal_dir"] or kw["config"] != "default" or kw["set_"]):
        raise UsageError("--dsn: pgdyno never changes an existing server; drop --wal-dir, "
                         "--config and --set")
    return TargetSpec(kind=kind, workdir=kw["workdir"] or default_workdir(),
                      pg_bin=kw["pg_bin"], dsn=kw["dsn"], wal_dir=kw["wal_dir"], keep=kw["keep"])


def report(
    run_dir: Path | None = typer.Argument(None, help="a run directory (or a sweep's)"),
    context: str | None = typer.Option(None, help="assemble the report of a whole context"),
    results_dir: Path = typer.Option(Path("results"), help="root of run directories"),
    hardware: str | None = typer.Option(None, help="hardware profile for prices (--context)"),
    against: str | None = typer.Option(None, help="another context to compare (--context)"),
) -> None:
    """Rebuild a run's summary, plots and reports from raw files, or a context's report."""
    from pgdyno.reports.build import build_reports

    if context is not None:
        from pgdyno.reports.context import build_context, write_context_report

        rep = build_context(results_dir, context, hardware=hardware, against=against)
        out = write_context_report(rep, results_dir / context)
        typer.echo(f"report: {out}")
        return
    if run_dir is None:
        raise UsageError("report needs a RUN_DIR, or --context NAME for a context report")
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    from pgdyno.results.sweepdir import SWEEP_FILE

    if (run_dir / SWEEP_FILE).is_file():
        from pgdyno.reports.sweep import build_sweep_report

        build_sweep_report(run_dir)
    else:
        build_reports(run_dir)
    typer.echo(f"report: {run_dir / 'report.md'}")


def runs(
    run_id: str | None = typer.Argument(None, help="show one run (id or directory suffix)"),
    workload: str | None = typer.Option(None), context: str | None = typer.Option(None),
    status: str | None = typer.Option(None, help="ok | failed | interrupted | running"),
    results_dir: Path = typer.Option(Path("results")), limit: int = typer.Option(50),
) -> None:
    """List past runs from the results index, or show one."""
    if status is not None:
        o.check_choice(status, "--status", STATUSES)
    index = RunIndex(results_dir)
    console = Console()
    if run_id is not None:
        row = index.get(run_id)
        if row is None:
            raise UsageError(f"run {run_id}: not in {index.path}; list runs with `pgdyno runs`")
        for key, value in row.__dict__.items():
            console.print(f"[bold]{key:>11}[/bold]  {value}")
        return
    table = Table("run", "status", "config", "clients", "TPS", "p99 ms", "PostgreSQL")
    for row in index.query(workload=workload, context=context, status=status, limit=limit):
        table.add_row(row.run_id, row.status, row.config or "", row.clients or "",
                      f"{row.tps:,.0f}" if row.tps is not None else "–",
                      f"{row.p99_ms:.2f}" if row.p99_ms is not None else "–", row.pg_version or "")
    console.print(table)
