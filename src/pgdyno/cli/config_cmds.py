"""`pgdyno detect` and `pgdyno tune` (the configuration engine's commands).

Thin wiring: options become a call to the config package, its result goes to a renderer.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pgdyno.errors import UsageError

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
    from pgdyno.config.detect import detect_profile
    from pgdyno.config.envfile import profile_to_env
    from pgdyno.config.profiles import profile_to_toml

    _choice("--format", fmt, DETECT_FORMATS)
    profile = detect_profile(data_dir, wal_dir)
    if fmt == "json":
        typer.echo(json.dumps(profile.to_dict(), indent=2))
    elif fmt == "toml":
        typer.echo(profile_to_toml(profile), nl=False)
    elif fmt == "env":
        typer.echo(profile_to_env(profile), nl=False)
    else:
        Console().print(_profile_table(profile))


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
    from pgdyno.config import load_hardware, resolve_config
    from pgdyno.config.render import FORMATS, RENDERERS, render_table
    from pgdyno.config.units import parse_size

    _choice("--format", fmt, FORMATS)
    if diff and not dsn:
        raise UsageError("--diff needs --dsn URL of the running server to compare with")
    size = None
    if dataset_size:
        try:
            size = parse_size(dataset_size)
        except ValueError as exc:
            raise UsageError(f"--dataset-size: {exc}") from None
    install, user = _install(pg_bin, pg_version)
    profile = load_hardware(hardware)
    resolved = resolve_config(config, list(overrides), install=install, workload=workload,
                              hardware=profile, connections=connections, dataset_bytes=size,
                              pg_major=pg_version, data_dir=data_dir, server_user=user,
                              tuning=_tuning_of(workload), advisor=_advice())
    if diff:
        _print_diff(resolved, dsn, install, pg_version)
        return
    if fmt == "table":
        Console(width=160).print(render_table(resolved))
    elif fmt == "script":
        from pgdyno.provision.script import script_for

        typer.echo(script_for(resolved), nl=False)
    else:
        typer.echo(RENDERERS[fmt](resolved), nl=False)


def _tuning_of(workload: str) -> tuple[str, bool] | None:
    """A benchmark workload's tuning class (tpcb: oltp, write-heavy); None for a class name."""
    from pgdyno.workloads import registry

    plugin = registry.WORKLOADS.get(workload)
    return plugin.tuning if plugin is not None else None


def _advice():
    """Every registered workload's advice for the tuned matrix (its benchmark group)."""
    from pgdyno.workloads import registry

    return registry.ADVICE


def _install(pg_bin: Path | None, pg_version: int | None):
    """Binaries to validate against: --pg-bin, else the embedded ones unless a version is named."""
    from pgdyno.targets.binaries import embedded_install, install_from_dir
    from pgdyno.targets.osuser import server_user

    if pg_bin is not None:
        install = install_from_dir(pg_bin)
        if pg_version is not None and install.major != pg_version:
            raise UsageError(f"--pg-version {pg_version}: --pg-bin {pg_bin} is PostgreSQL "
                             f"{install.major}; give one or the other")
        return install, server_user()
    if pg_version is not None:
        return None, None
    try:
        return embedded_install(), server_user()
    except Exception:  # no wheel: validate against the shipped specs of PostgreSQL 18
        return None, None


def _print_diff(resolved, dsn: str, install, pg_version: int | None) -> None:
    from pgdyno.config.diff import current_settings, diff_rows
    from pgdyno.config.setting_specs import for_install, snapshot
    from pgdyno.targets.binaries import embedded_install
    from pgdyno.targets.dsn import DsnServer

    target = DsnServer(dsn=dsn, install=install or embedded_install())
    target.start()
    specs = for_install(install) if install else snapshot(pg_version or 18)
    current = current_settings(target.connection().conninfo(), list(resolved.pg_settings))
    rows = diff_rows(resolved, current, specs)
    table = Table(title=f"{resolved.name} vs {target.connection().describe()} "
                        "(values within 5% hidden)", title_justify="left")
    for col in ("Setting", "Current", "Recommended", "Restart"):
        table.add_column(col)
    shown = [r for r in rows if r.differs]
    for r in shown:
        table.add_row(r.name, r.current, r.recommended, "yes" if r.restart else "")
    console = Console(width=160)
    console.print(table)
    console.print(f"{len(shown)} of {len(rows)} settings differ")


def _profile_table(profile) -> Table:
    from pgdyno.config.detect import describe_device
    from pgdyno.config.units import human_bytes

    table = Table(title=f"Hardware profile: {profile.name} ({profile.source})",
                  title_justify="left")
    table.add_column("Item")
    table.add_column("Value", overflow="fold")
    rows = [
        ("vCPUs", f"{profile.vcpus}" + (f" (host {profile.host_vcpus})"
                                        if profile.host_vcpus else "")),
        ("RAM", human_bytes(profile.ram_bytes) + (f" (host {human_bytes(profile.host_ram_bytes)})"
                                                  if profile.host_ram_bytes else "")),
        ("source of vCPUs", profile.cpu_source or profile.source),
        ("source of RAM", profile.ram_source or profile.source),
        ("cloud", profile.cloud or "none detected"),
        ("CPU model", profile.cpu_model), ("architecture", profile.arch),
        ("NUMA nodes", str(profile.numa_nodes)), ("kernel", profile.kernel),
        ("huge pages", f"{profile.huge_pages_total} x {profile.huge_page_size_kb} kB reserved"),
        ("transparent huge pages", profile.transparent_hugepages),
    ]
    for role, vol in (("data", profile.data), ("WAL", profile.wal)):
        if vol is not None:
            rows.append((f"{role} volume", f"{vol.mount} on {vol.device} ({vol.kind}), "
                         f"{vol.fstype} {vol.mount_options}"))
    for dev in profile.devices:
        rows.append((f"device {dev.name}",
                     f"{dev.model or '-'} {human_bytes(dev.size_bytes)} {describe_device(dev)}, "
                     f"scheduler "
                     f"{dev.scheduler}, nr_requests {dev.nr_requests}, read_ahead_kb "
                     f"{dev.read_ahead_kb}, max_sectors_kb {dev.max_sectors_kb}"
                     + (f", {dev.raid_level} of {', '.join(dev.raid_members)}"
                        if dev.raid_level else "")))
    for item, value in rows:
        table.add_row(item, value or "-")
    return table


def _choice(option: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise UsageError(f"{option} {value}: accepted: {', '.join(accepted)}")


# ----- tune --search ----------------------------------------------------------------------

SEARCH_BENCH_DEFAULTS = {"duration": 30, "warmup": 10, "iterations": 1}
"""A search trial is a short run with a warm-up; the bench defaults apply otherwise."""
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
        opt("top", 3, int, "--top", help="--search: leading candidates measured again"),
        opt("reruns", 2, int, "--reruns", help="--search: re-runs of each leading candidate"),
        opt("compare_pairs", 3, int, "--compare-pairs",
            help="--search: runs per config in the final interleaved comparison"),
        opt("compare_max_pairs", None, int | None, "--compare-max-pairs",
            help="--search: rounds the comparison may grow to while undecided (default: "
                 "twice --compare-pairs)"),
        opt("search_seed", 0, int, "--search-seed", help="--search: the optimiser's seed"),
        opt("search_name", None, str | None, "--search-name",
            help="--search: name of the search (default: from its options; the same "
                 "command resumes it)"),
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
    from pgdyno.runner.options import build_options
    from pgdyno.search.run import SearchOptions, parse_knobs, parse_time_limit, run_search

    if tune_kw["overrides"]:
        raise UsageError("tune --search: --set does not apply; pin a setting with --fix "
                         "key=value")
    if tune_kw["dsn"] or tune_kw["diff"]:
        raise UsageError("tune --search restarts the server it tunes; --dsn and --diff do not "
                         "apply")
    if tune_kw["hardware"] != "detect":
        raise UsageError("tune --search runs on this host; --hardware does not apply")
    for name, value in SEARCH_BENCH_DEFAULTS.items():
        if bench_kw.get(name) is None:
            bench_kw[name] = value
    bench = build_options(picked["search"], **bench_kw, pg_bin=tune_kw["pg_bin"])
    opts = SearchOptions(
        bench=bench, budget=picked["budget"],
        time_s=parse_time_limit(picked["time_limit"]) if picked["time_limit"] is not None
        else None, knobs=parse_knobs(picked["knobs"]) if picked["knobs"] is not None
        else None, fixes=tuple(picked["fix"]), allow_unsafe=picked["allow_unsafe"],
        top=picked["top"], reruns=picked["reruns"], compare_pairs=picked["compare_pairs"],
        compare_max_pairs=picked["compare_max_pairs"],
        seed=picked["search_seed"], name=picked["search_name"], show_progress=bench.show_progress)
    outcome = run_search(opts, Console(stderr=True))
    typer.echo(f"trials: {outcome.trials} ({outcome.failed} failed)")
    if outcome.winner_label:
        typer.echo(f"winner: {outcome.winner_label}")
    for line in outcome.verdicts:
        typer.echo(line)
    if outcome.recommendation:
        typer.echo(outcome.recommendation)
    if outcome.winner_file:
        typer.echo(f"winner config: {outcome.winner_file} (pgdyno bench ... --config FILE; "
                   "pgdyno tune --config FILE --format conf|sql|env|md|sysctl|script)")
        fmt = tune_kw["fmt"]
        if fmt != "table":
            from pathlib import Path as _Path

            suffix = {"script": "sh", "md": "md"}.get(fmt, fmt)
            name = "winner-config.md" if fmt == "md" else f"winner.{suffix}"
            typer.echo((_Path(outcome.search_dir) / name).read_text(), nl=False)
    typer.echo(f"report: {outcome.report}")
