"""`pgdyno compare`, `campaign`, `note`, `validate`, `scaling-check`, `journal`,
`context-report`: the command line of pgdyno.compare, pgdyno.campaign and pgdyno.study.

Each command turns its arguments into options (the bench options through the same table and
checks as `pgdyno bench`), calls one function of the core (run_compare, run_campaign_or_study,
run_validation, run_scaling_check, build_context...) and prints or writes its result.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from pgdyno.compare.stats import DEFAULT_CONFIDENCE
from pgdyno.errors import UsageError
from pgdyno.results.names import check_dir_name

# What a command uses (rich, the runner, the reports, psycopg...) is imported inside it:
# every start builds every command, and start-up stays fast (tests/test_startup.py).


def _bench_option(name: str) -> Any:
    """A ``pgdyno bench`` option for these commands, with the default and help of the one
    table in pgdyno.runner.options (so `compare` cannot drift from `bench`, and --help
    shows the default that applies)."""
    from pgdyno.runner.options import all_options

    opt = next(o for o in all_options() if o.name == name)
    default = list(opt.default) if isinstance(opt.default, tuple) else opt.default
    flags = [opt.cli_flag] if opt.flag else []
    return typer.Option(default, *flags, help=opt.help)


def _sized_by_scale() -> str:
    """The workloads these commands can size (those with --scale), from the registry."""
    from pgdyno.runner.options import workload_options

    return " | ".join(next(o for o in workload_options() if o.name == "scale").workloads)


AT_SCALE = typer.Argument(..., help=_sized_by_scale())
RESULTS = _bench_option("results_dir")
SCALE = _bench_option("scale")
CLIENTS = _bench_option("clients")
DURATION = _bench_option("duration")
WARMUP = _bench_option("warmup")
ITERATIONS = _bench_option("iterations")
PROTOCOL = _bench_option("protocol")
VIA = _bench_option("via")
CONTEXT = _bench_option("context")
CONFIG = _bench_option("config")
SET = _bench_option("set_")
WORKDIR = _bench_option("workdir")
PG_BIN = _bench_option("pg_bin")
TELEMETRY = _bench_option("telemetry")
PROGRESS = _bench_option("progress")


def register(app: typer.Typer) -> None:
    app.command("compare")(_compare_command())
    app.command("campaign")(campaign)
    app.command("note")(note)
    app.command("validate")(validate)
    app.command("scaling-check")(scaling_check)
    app.command("journal")(journal)
    app.command("context-report")(context_report)


# ----- shared bench options ---------------------------------------------------------------

def _bench_options(workload: str, **kw):
    """BenchOptions through the same validation as `pgdyno bench`."""
    from pgdyno.runner.options import build_options

    return build_options(workload, **kw)


def _run_args(scale: int | None, clients: str | None, duration: int, warmup: int,
              iterations: int, protocol: str, via: str, results_dir: Path,
              context: str | None, config: str, set_: list[str], workdir: Path | None,
              pg_bin: Path | None, telemetry: bool, progress: bool) -> dict:
    return dict(scale=scale, clients=clients, duration=duration, warmup=warmup,
                iterations=iterations, protocol=protocol, via=via, results_dir=results_dir,
                context=context, config=config, set_=list(set_), workdir=workdir,
                pg_bin=pg_bin, telemetry=telemetry, progress=progress)


# ----- compare ----------------------------------------------------------------------------

def compare(
    first: str = typer.Argument(..., help="baseline run(s) (comma-separated), or a WORKLOAD "
                                          "to run both sides"),
    second: str | None = typer.Argument(None, help="candidate run(s), comma-separated"),
    baseline: str | None = typer.Option(None, help="config of A when running: "
                                                   "default | pgtune | tuned | FILE"),
    candidate: str | None = typer.Option(None, help="config of B when running"),
    baseline_set: list[str] = typer.Option([], "--baseline-set", help="key=value for A only"),
    candidate_set: list[str] = typer.Option([], "--candidate-set", help="key=value for B only"),
    pairs: int | None = typer.Option(None, help="pairs to run: blocks per side (block "
                                                "designs, default 10; alternating: blocks "
                                                "of many pairs, default 2), or runs per side "
                                                "in A B B A order (sequential, default 3); "
                                                "with --budget, the fewest"),
    design: str = typer.Option("auto", help="running both sides: auto | alternating | "
                                            "interleaved | duet | sequential. alternating: "
                                            "both loads run at once in blocks of --warmup + "
                                            "--duration s and take turns of one second "
                                            "(the headline only); interleaved: both servers "
                                            "up, the load alternating in blocks, randomized "
                                            "order, paired statistics; duet: both loaded at "
                                            "once; sequential: whole runs A B B A; auto: "
                                            "alternating where the load can be paused, "
                                            "else interleaved or duet where both servers "
                                            "fit here"),
    precision: str | None = typer.Option(None, help="block designs: stop once the headline's "
                                                    "interval is within ± this, e.g. 2%"),
    budget: str | None = typer.Option(None, help="block designs: the most measuring time, "
                                                 "e.g. 10m (default 10m with --precision)"),
    order_seed: int | None = typer.Option(None, help="block designs: the random seed of "
                                                     "the blocks' order (default: drawn and "
                                                     "recorded)"),
    baseline_pg_bin: Path | None = typer.Option(None, help="server binaries of A (a block "
                                                           "design): e.g. "
                                                           "/usr/lib/postgresql/15/bin"),
    candidate_pg_bin: Path | None = typer.Option(None, help="server binaries of B"),
    confidence: float = typer.Option(DEFAULT_CONFIDENCE,
                                     help="confidence level of the intervals"),
    out: Path | None = typer.Option(None, help="directory for compare.md/html/json"),
    at_step: int | None = typer.Option(
        None, "--at-step", "--at-warehouses",
        help="two sweeps: a dataset size both measured, to look at closely (the warehouse "
             "count of TPROC-C's memory charts; default: the largest both measured)"),
    **bench_args: Any,
) -> None:
    """Baseline against candidate: change, interval and verdict for every metric."""
    from rich.console import Console

    from pgdyno.compare.command import compare_options, run_compare
    from pgdyno.compare.render import headline
    from pgdyno.reports.document import plain

    opts = compare_options(
        first, second, baseline=baseline, candidate=candidate, baseline_set=baseline_set,
        candidate_set=candidate_set, pairs=pairs, confidence=confidence, out=out,
        at_step=at_step, results_dir=Path(bench_args["results_dir"]),
        progress=bench_args["progress"], bench_args={**bench_args, "progress": False},
        design=design, precision=precision, budget=budget, seed=order_seed,
        baseline_pg_bin=baseline_pg_bin, candidate_pg_bin=candidate_pg_bin)
    done = run_compare(opts, Console(stderr=True), lambda line: typer.echo(line, err=True))
    if done.sweeps is not None:
        lines = done.sweeps.summary_lines()
    else:
        assert done.comparison is not None
        lines = [plain(line) for line in headline(done.comparison)]
        lines += [f"contaminated: {line}" for line in done.comparison.contaminated]
    for line in lines:
        typer.echo(line)
    typer.echo(f"report: {done.report}")


def _compare_command():
    """``compare`` with every ``pgdyno bench`` option but --config (each side has its own):
    running both sides takes the same workload options as a run (--warehouses, --tables)."""
    from pgdyno.cli.bench_cmds import bench_parameters

    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
           if p.kind == inspect.Parameter.VAR_KEYWORD else p
           for p in inspect.signature(compare).parameters.values()
           if p.kind != inspect.Parameter.VAR_KEYWORD]
    params = [*own, *bench_parameters(leave_out=("config",))]

    def command(**kw: Any) -> None:
        own_names = {p.name for p in own}
        compare(**{k: v for k, v in kw.items() if k in own_names},
                **{k: v for k, v in kw.items() if k not in own_names})

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    command.__doc__ = compare.__doc__
    return command


# ----- campaign, note, validate, scaling check --------------------------------------------

def campaign(
    file: Path = typer.Argument(..., help="campaign TOML file"),
    results_dir: Path | None = typer.Option(None, help="overrides [campaign] results_dir"),
    retry_failed: bool = typer.Option(False, help="run failed cells again on resume"),
    allow_os_changes: bool = typer.Option(
        False, help="apply [config.os] settings before their cells and revert them after "
        "(root)"),
    size: str | None = typer.Option(None, help="run the file's [size.NAME] (e.g. quick): "
                                               "the same campaign or study, smaller"),
    progress: bool = PROGRESS,
) -> None:
    """Run a campaign (configs × workloads × clients × repetitions); resumable. A campaign
    with a [study] question ends with its study report."""
    from rich.console import Console

    from pgdyno.campaign.spec import load_spec
    from pgdyno.study.run import run_campaign_or_study

    spec = load_spec(file, results_dir, size)
    done = run_campaign_or_study(spec, Console(stderr=True), show_progress=progress,
                                 retry_failed=retry_failed, allow_os_changes=allow_os_changes)
    outcome = done.campaign
    typer.echo(f"ran {len(outcome.ran)}, skipped {len(outcome.skipped)} already done, "
               f"failed {len(outcome.failed)}")
    for cell, run_dir in outcome.run_dirs.items():
        typer.echo(f"{cell}: {run_dir}")
    typer.echo(f"journal: {outcome.journal}")
    if done.report is not None:
        typer.echo(f"study: {done.report}")
        typer.echo(f"html:  {done.report.with_suffix('.html')}")


def note(
    run: str = typer.Argument(..., help="run directory or id"),
    text: str = typer.Argument(..., help="the note"),
    results_dir: Path = RESULTS,
) -> None:
    """Add a note to a run (kept in notes.md beside it; shown in the journal)."""
    from pgdyno.compare.runs import add_note, resolve_run
    from pgdyno.results.rundir import utc_now

    path = add_note(resolve_run(run, results_dir), text, utc_now())
    typer.echo(f"note added: {path}")


def validate(
    workload: str = AT_SCALE,
    scale: int | None = SCALE, clients: str | None = CLIENTS, duration: int = DURATION,
    warmup: int = WARMUP, protocol: str = PROTOCOL, via: str = VIA,
    results_dir: Path = RESULTS, context: str | None = CONTEXT, config: str = CONFIG,
    set_: list[str] = SET, workdir: Path | None = WORKDIR, pg_bin: Path | None = PG_BIN,
    telemetry: bool = TELEMETRY, progress: bool = PROGRESS,
) -> None:
    """Validation runs: cold cache, warming, warm, after CHECKPOINT, tabulated."""
    from rich.console import Console

    from pgdyno.campaign.validation import run_validation
    from pgdyno.units import rounded

    opts = _bench_options(workload, **_run_args(
        scale, clients, duration, warmup, 3, protocol, via, results_dir, context, config, set_,
        workdir, pg_bin, telemetry, progress))
    result = run_validation(opts, Console(stderr=True))
    typer.echo(f"{'state':<18}{'TPS':>12}{'latency ms':>12}")
    for s in result.states:
        typer.echo(f"{s.name:<18}{rounded(s.tps, 1):>12}{rounded(s.latency_avg_ms, 3):>12}")
    for n in result.notes:
        typer.echo(f"note: {n}")
    typer.echo(f"run: {result.run_dir}")


def scaling_check(
    workload: str = AT_SCALE,
    scale: int | None = SCALE, clients: str | None = CLIENTS, duration: int = DURATION,
    warmup: int = WARMUP, iterations: int = ITERATIONS, protocol: str = PROTOCOL,
    via: str = VIA, results_dir: Path = RESULTS, context: str | None = CONTEXT,
    config: str = CONFIG, set_: list[str] = SET, workdir: Path | None = WORKDIR,
    pg_bin: Path | None = PG_BIN, telemetry: bool = TELEMETRY, progress: bool = PROGRESS,
    pairs: int = typer.Option(1, help="runs per core count (1 2 2 1 order); 2+ gives an "
                                      "interval"),
) -> None:
    """The same workload with the server pinned to 1 and to 2 cores: is scaling linear?"""
    from rich.console import Console

    from pgdyno.campaign.scaling import run_scaling_check

    opts = _bench_options(workload, **_run_args(
        scale, clients, duration, warmup, iterations, protocol, via, results_dir, context,
        config, set_, workdir, pg_bin, telemetry, progress))
    if pairs < 1:
        raise UsageError(f"--pairs {pairs}: must be 1 or more")
    check = run_scaling_check(opts, Console(stderr=True), pairs=pairs)
    for cores, tps in zip(check.cores, check.tps, strict=True):
        typer.echo(f"{cores} core(s): {tps:,.1f} TPS")
    if check.efficiency is not None:
        extra = (f" (95% interval {100 * check.efficiency_low:.0f}-"
                 f"{100 * check.efficiency_high:.0f}%)" if check.efficiency_low else "")
        typer.echo(f"efficiency: {100 * check.efficiency:.0f}% of linear{extra}")


# ----- journal and context report ---------------------------------------------------------

def journal(context: str = typer.Argument(..., help="context name"),
            results_dir: Path = RESULTS) -> None:
    """Print the journal of a context (runs in order, changes, notes, failures)."""
    from pgdyno.campaign.context_report import journal_document
    from pgdyno.reports.markdown import render_document

    check_dir_name(context, "journal CONTEXT", "box--tpcb")  # a folder of --results-dir
    typer.echo(render_document(journal_document(results_dir, context)))


def context_report(
    context: str = typer.Argument(..., help="context name (a folder of the results dir)"),
    results_dir: Path = RESULTS,
    hardware: str | None = typer.Option(None, help="hardware profile for prices "
                                                   "(catalogue name or file)"),
    against: str | None = typer.Option(None, help="another context to compare with"),
    out: Path | None = typer.Option(None, help="output directory (default: the context's "
                                               "folder)"),
) -> None:
    """The context report from every run of a context: configuration matrix, journal,
    findings, price/performance, scaling projection, limits, recommendations."""
    from pgdyno.campaign.context import build_context
    from pgdyno.campaign.context_report import write_context_report

    for name, what in ((context, "context-report CONTEXT"), (against, "--against")):
        if name is not None:  # folders of --results-dir; the report goes into the first
            check_dir_name(name, what, "box--tpcb")
    rep = build_context(results_dir, context, hardware=hardware, against=against)
    path = write_context_report(rep, out or results_dir / context)
    typer.echo(f"report: {path}")
    typer.echo(f"html:   {path.with_suffix('.html')}")
