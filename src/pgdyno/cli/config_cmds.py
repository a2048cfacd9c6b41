"""`pgdyno detect` and `pgdyno tune` (the configuration engine's commands).

Each command turns its arguments into options (pgdyno.provision.tune.TuneOptions, or the
search's SearchOptions through pgdyno.search.command), calls one function (detect_profile,
tune, run_search) and hands the result to a renderer (pgdyno.config.render, the script of
pgdyno.provision). `tune` also takes the search's options and every bench option, for
``--search``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pgdyno.errors import UsageError
from pgdyno.search.command import SEARCH_BENCH_DEFAULTS
from pgdyno.workloads.checks import check_choice

# What a command uses (rich, the runner, the reports, psycopg...) is imported inside it:
# every start builds every command, and start-up stays fast (tests/test_startup.py).

DETECT_FORMATS = ("table", "toml", "json", "env")


def register(app: typer.Typer) -> None:
    """Add the configuration commands to the main app."""
    app.command("detect")(detect)
    app.command("tune")(_tune_command())


def detect(
    data_dir: Path = typer.Option(None, "--data-dir", help="Where the data directory will live."),
    wal_dir: Path = typer.Option(None, "--wal-dir", help="Where WAL will live, if elsewhere."),
    fmt: str = typer.Option("table", "--format", help="table, toml, json or env."),
) -> None:
    """The host's hardware profile (cgroup-aware vCPUs and RAM, storage, kernel, huge pages)."""
    from rich.console import Console

    from pgdyno.config.detect import detect_profile
    from pgdyno.config.envfile import profile_to_env
    from pgdyno.config.profiles import profile_to_toml
    from pgdyno.config.render import profile_table

    check_choice(fmt, "--format", DETECT_FORMATS)
    profile = detect_profile(data_dir, wal_dir)
    if fmt == "json":
        typer.echo(json.dumps(profile.to_dict(), indent=2))
    elif fmt == "toml":
        typer.echo(profile_to_toml(profile), nl=False)
    elif fmt == "env":
        typer.echo(profile_to_env(profile), nl=False)
    else:
        Console().print(profile_table(profile))


def tune(
    hardware: str = typer.Option("detect", "--hardware",
                                 help="Catalogue name (r8g.xlarge, ...), profile file, or detect."),
    workload: str = typer.Option("oltp", "--workload",
                                 help="a tuning class (oltp, web, dw, mixed, desktop) or a "
                                      "benchmark workload (pgdyno bench --help lists them)"),
    config: str = typer.Option("tuned", "--config", help="default, pgtune, tuned or a file."),
    pg_version: int = typer.Option(None, "--pg-version", min=15, max=18,
                                   help="Tune for this major version (else the target's)."),
    pg_bin: Path = typer.Option(None, "--pg-bin", help="PostgreSQL binaries to validate against."),
    connections: int = typer.Option(None, "--connections", min=1),
    dataset_size: str = typer.Option(None, "--dataset-size", help="e.g. 40GB."),
    overrides: list[str] = typer.Option([], "--set", help="key=value, repeatable."),
    fmt: str = typer.Option("table", "--format", help="table, md, conf, sql, sysctl, env, script."),
    diff: bool = typer.Option(False, "--diff", help="Compare with a running server (--dsn)."),
    dsn: str = typer.Option(None, "--dsn", help="The server for --diff."),
    data_dir: Path = typer.Option(None, "--data-dir",
                                  help="A stopped cluster: PostgreSQL reports the huge pages."),
) -> None:
    """The full configuration matrix with rationale and sizing math, in the chosen format."""
    from rich.console import Console

    from pgdyno.config.render import FORMATS, RENDERERS, diff_table, render_table
    from pgdyno.provision.tune import tune as tune_config
    from pgdyno.provision.tune import tune_options
    from pgdyno.workloads.registry import ADVICE, tuning_of

    check_choice(fmt, "--format", FORMATS)
    result = tune_config(tune_options(
        hardware=hardware, workload=workload, config=config, pg_version=pg_version,
        pg_bin=pg_bin, connections=connections, dataset_size=dataset_size, overrides=overrides,
        diff=diff, dsn=dsn, data_dir=data_dir, tuning=tuning_of(workload), advisor=ADVICE))
    resolved = result.resolved
    if result.diff is not None:
        console = Console(width=160)
        console.print(diff_table(resolved, result.diff, result.server))
        console.print(f"{sum(r.differs for r in result.diff)} of {len(result.diff)} settings "
                      "differ")
    elif fmt == "table":
        Console(width=160).print(render_table(resolved))
    elif fmt == "script":
        from pgdyno.provision.script import script_for

        typer.echo(script_for(resolved), nl=False)
    else:
        typer.echo(RENDERERS[fmt](resolved), nl=False)


# ----- tune --search ----------------------------------------------------------------------

_TUNE_OWN_BENCH = ("config", "set_", "pg_bin", "dsn")
"""bench options `tune` already has under the same flag (--pg-bin keeps its meaning)."""


def _search_params() -> list:
    import inspect

    def opt(name: str, default, annotation, *flags: str, help: str):  # noqa: A002
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                 default=typer.Option(default, *flags, help=help))

    return [
        opt("search", None, str | None, "--search",
            help="search settings for this WORKLOAD's headline metric (pgdyno bench --help "
                 "lists them); "
                 "the bench options below apply to every trial"),
        opt("budget", None, int | None, "--budget", help="--search: trials, baselines "
                                                         "(default, pgtune, tuned) included"),
        opt("time_limit", None, str | None, "--time",
            help="--search: wall time for the whole search, e.g. 45m, 2h"),
        opt("knobs", None, str | None, "--knobs", help="--search: only these settings "
                                                       "(comma-separated), or all"),
        opt("fix", [], list[str], "--fix", help="--search: pin key=value, repeatable"),
        opt("allow_unsafe", False, bool, "--allow-unsafe",
            help="--search: also search fsync, synchronous_commit, full_page_writes, "
                 "wal_level (the report says so on its first line)"),
        opt("allow_os_changes", False, bool, "--allow-os-changes",
            help="--search: also search OS knobs (vm.dirty_*, transparent huge pages, the data "
                 "device's read-ahead, huge pages for shared_buffers), applied through "
                 "pgdyno provision around each trial and reverted after it; root only"),
        opt("top", 3, int, "--top", help="--search: leading candidates measured again"),
        opt("reruns", 2, int, "--reruns", help="--search: re-runs of each leading candidate"),
        opt("compare_pairs", 3, int, "--compare-pairs",
            help="--search: runs per config in the final interleaved comparison"),
        opt("compare_design", "auto", str, "--compare-design",
            help="--search: how the final comparison runs: auto (both servers up at once, "
                 "in blocks, where they fit), interleaved, duet, or sequential (whole runs, "
                 "--compare-pairs each)"),
        opt("trial_design", "auto", str, "--trial-design",
            help="--search: how each trial is measured: auto (against the best config so "
                 "far, both servers up at once, where they fit: in turns of one second "
                 "where the load can be paused, else in interleaved blocks), alternating, "
                 "interleaved, or runs (one run each)"),
        opt("compare_max_pairs", None, int | None, "--compare-max-pairs",
            help="--search: rounds the comparison may grow to while undecided (default: "
                 "twice --compare-pairs)"),
        opt("validate", "30m", str, "--validate",
            help="--search: each config's load in the long-window validation of the winner "
                 "against pgtune and tuned (each run raised to two checkpoint and autovacuum "
                 "cycles, and to four runs a config); "
                 "0 skips it"),
        opt("validate_against", "pgtune,tuned", str, "--validate-against",
            help="--search: the named configs the winner meets in the long validation, "
                 "comma-separated, from default, pgtune, tuned (tuned always: the winner "
                 "holds only by beating it)"),
        opt("search_seed", 0, int, "--search-seed", help="--search: the optimiser's seed"),
        opt("search_name", None, str | None, "--search-name",
            help="--search: name of the search (default: from its options; the same "
                 "command resumes it)"),
        opt("seed_from", None, str | None, "--from",
            help="--search: seed the study with the trials of an earlier search (its "
                 "directory or name) of the same workload and hardware"),
        opt("storage", None, str | None, "--storage",
            help="--search: keep the study in this PostgreSQL database "
                 "(postgresql://user@host/db) so several workers share its trials"),
        opt("study_name", None, str | None, "--study-name",
            help="--search: the study's name in --storage (default: the search's name)"),
        opt("worker", False, bool, "--worker",
            help="--search: run trials of the shared study only; the lead (the same command "
                 "without --worker) selects, compares and reports"),
        opt("workers", 1, int, "--workers",
            help="--search: this command and N-1 local workers on the shared study, each "
                 "with its own workdir (trials at once disturb each other on one host)"),
    ]


def _tune_command():
    """`tune` with the search's options and every bench option (for the trials' runs)."""
    import inspect

    from pgdyno.runner.options import all_options, cli_annotation

    params = list(inspect.signature(tune).parameters.values())
    own = {p.name for p in params}
    search = _search_params()
    bench_names = []
    for o in all_options():
        if o.name in _TUNE_OWN_BENCH or o.name in own:
            continue
        flag = f"{o.cli_flag}/--no-{o.cli_flag[2:]}" if o.type is bool else o.cli_flag
        default = list(o.default) if isinstance(o.default, tuple) else o.default
        if cli_annotation(o) is not o.type and default is not None:  # a path, as text
            default = str(default)
        help_text = o.help
        if o.name in SEARCH_BENCH_DEFAULTS:
            default = None
            help_text += f" (--search default: {SEARCH_BENCH_DEFAULTS[o.name]})"
        bench_names.append(o.name)
        search.append(inspect.Parameter(
            o.name, inspect.Parameter.KEYWORD_ONLY, annotation=cli_annotation(o) | None
            if o.name in SEARCH_BENCH_DEFAULTS else cli_annotation(o),
            default=typer.Option(default, flag, help="--search: " + help_text)))

    def command(**kw) -> None:
        picked = {p.name: kw.pop(p.name) for p in search}
        if picked["search"] is None:
            given = [p.name for p in search if picked[p.name] != p.default.default]
            if given:
                raise UsageError(f"tune: --{given[0].replace('_', '-')} needs --search "
                                 "WORKLOAD")
            tune(**kw)
            return
        _tune_search(picked, {n: picked[n] for n in bench_names}, kw)

    all_params = params + search
    command.__signature__ = inspect.Signature(all_params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in all_params} | {"return": None}
    command.__doc__ = (tune.__doc__ or "") + (
        " With --search WORKLOAD: a noise-aware search of the settings for the workload's "
        "headline metric (Optuna TPE), ending with an interleaved comparison of the winner "
        "against pgtune and tuned.")
    return command


def _tune_search(picked: dict, bench_kw: dict, tune_kw: dict) -> None:
    """Arguments to SearchOptions, one call to the search, its result to stdout."""
    from rich.console import Console

    from pgdyno.search.command import search_options
    from pgdyno.search.report import noise_line
    from pgdyno.search.run import run_search, winner_path

    opts = search_options(picked["search"], picked, bench_kw, tune_kw)
    outcome = run_search(opts, Console(stderr=True))
    typer.echo(f"trials: {outcome.trials} ({outcome.failed} failed)")
    if outcome.winner_label:
        typer.echo(f"winner: {outcome.winner_label}")
    for line in outcome.verdicts:
        typer.echo(line)
    if outcome.recommendation:
        typer.echo(outcome.recommendation)
    if outcome.noise is not None:
        typer.echo(noise_line(outcome.noise))
    if outcome.winner_file:
        typer.echo(f"winner config: {outcome.winner_file} (pgdyno bench ... --config FILE; "
                   "pgdyno tune --config FILE --format conf|sql|env|md|sysctl|script)")
        if tune_kw["fmt"] != "table":
            typer.echo(winner_path(outcome.search_dir, tune_kw["fmt"]).read_text(), nl=False)
    if outcome.report:
        typer.echo(f"report: {outcome.report}")
