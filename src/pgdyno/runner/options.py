"""The options of ``pgdyno bench``, in one table, and the one function that validates them.

``COMMON`` lists the options every workload shares, each with its single default (the
CLI, campaigns and ``compare`` all read it from here); the workloads' own options come from
their ``options_type`` dataclasses. ``build_options`` checks everything before anything is
created and raises ``UsageError`` with one line naming the option, the bad value and what
is accepted.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.options import (
    DEFAULT_TX_LOG_CAP,
    SAMPLE_AUTO,
    BenchOptions,
    TargetSpec,
    default_workdir,
)
from pgdyno.results.names import check_dir_name
from pgdyno.results.store import results_db
from pgdyno.targets.spec import TARGET_CHOICES, target_spec
from pgdyno.workloads import registry
from pgdyno.workloads.base import cli_fields, cli_flag
from pgdyno.workloads.checks import check_at_most, check_choice, check_positive, parse_int_list

PROTOCOLS = ("simple", "extended", "prepared")
CACHE_MODES = ("warm", "cold", "prewarmed")
LOAD_WAL_MODES = ("minimal", "configured")
VIA = ("socket", "tcp")


@dataclass(frozen=True)
class CliOption:
    """One ``pgdyno bench`` option: its Python name, default, help and type."""

    name: str
    default: Any
    help: str
    type: Any
    flag: str | None = None
    workloads: tuple[str, ...] = ()
    """The workloads that declare it; empty for the options every workload shares."""

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


COMMON: tuple[CliOption, ...] = (
    CliOption("clients", None, "client counts, e.g. 4,16,100 (default: 1, 2 and 4 per "
                               "core, or the workload's own: threads of a program, streams)",
              str | None),
    CliOption("threads", None, "pgbench threads (default: min(cores, clients))", int | None),
    CliOption("duration", 20, "measured seconds per iteration", int),
    CliOption("warmup", 5, "warm-up seconds before each measured window", int),
    CliOption("iterations", 3, "iterations per client count", int),
    CliOption("protocol", "prepared", "simple | extended | prepared", str),
    CliOption("rate", None, "fixed rate in TPS (pgbench -R)", float | None),
    CliOption("latency_limit", None, "ms; with --rate: count late/skip", float | None),
    CliOption("max_tries", None, "retries of serialization/deadlock failures", int | None),
    CliOption("random_seed", None, "pgbench's --random-seed of the first iteration (the "
              "next ones: +1 each), so that a run draws the same keys, transactions and think "
              "times again (default: from the time; a block comparison gives both sides one "
              "drawn seed)", int | None),
    CliOption("cache", "warm", "warm | cold (restart and drop OS cache) | prewarmed "
                               "(dataset read into shared_buffers with pg_prewarm first)", str),
    CliOption("via", "socket", "socket | tcp", str),
    CliOption("load_wal", "minimal", "dataset builds on a server pgdyno starts here: minimal "
              "(wal_level minimal, wal_buffers >= 64 MB, wal_writer_delay <= 10 ms: tables "
              "filled in the "
              "transaction that made them, and new keys, write no WAL; a restart before and "
              "after the build) | configured (the config's own settings)", str),
    CliOption("force", False, "build beside tables pgdyno did not create, in pgdyno's own "
                              "schema pgdyno_bench (a user's table is never touched)", bool),
    CliOption("results_dir", Path("results"), "root of run directories", Path),
    CliOption("results_db", None, "also keep the run's row in this shared PostgreSQL database "
              "(postgresql://user@host/db; default: $PGDYNO_RESULTS_DB)", str | None),
    CliOption("context", None, "context name (default HARDWARE--WORKLOAD)", str | None),
    CliOption("target", "embedded", "embedded | local (needs --pg-bin) | dsn", str),
    CliOption("workdir", None, "where pgdyno keeps its clusters", Path | None),
    CliOption("pg_bin", None, "directory of other PostgreSQL binaries", Path | None),
    CliOption("dsn", None, "an existing server: never restarted or reconfigured; pgdyno "
                           "creates the workload's tables in its own schema pgdyno_bench of "
                           "that database and refuses a database holding other tables unless "
                           "--force", str | None),
    CliOption("ssh", None, "user@host of the database host: with --dsn, that server's "
                           "machine; else pgdyno starts its server there (the embedded one, "
                           "copied over, or --pg-bin DIR on the host). Its CPU, disks, memory, "
                           "devices, SMART and log are sampled over SSH (OpenSSH, your "
                           "~/.ssh/config), this machine's CPU as the client's", str | None),
    CliOption("ssh_config", None, "ssh_config file for --ssh (ssh -F; default ~/.ssh/config)",
              Path | None),
    CliOption("remote_workdir", None, "with --ssh: where pgdyno keeps clusters on the host "
              "(default ~/.local/share/pgdyno there; /var/lib/pgdyno as root)", str | None),
    CliOption("wal_dir", None, "separate WAL directory (new clusters; with --ssh, on the host)",
              Path | None),
    CliOption("archive", "off", "WAL archiving on a server pgdyno starts: off | buffered (cp, "
              "then fsync) | direct (O_DIRECT copy, source dropped from the page cache) | "
              "'COMMAND' (your archive_command, with %p and %f)", str),
    CliOption("archive_dir", None, "where --archive buffered|direct copy the WAL (created for "
              "the server's user; default WORKDIR/archive); pgdyno only ever removes segments "
              "it archived there", Path | None),
    CliOption("keep", False, "leave the embedded server running afterwards", bool),
    CliOption("config", "default", "default | pgtune | tuned | FILE", str),
    CliOption("set_", (), "key=value override, repeatable", list[str], flag="--set"),
    CliOption("telemetry", True, "sample CPU, disks, waits, checkpoints", bool),
    CliOption("tx_logs", str(DEFAULT_TX_LOG_CAP), "keep pgbench's per-transaction logs for "
              "iterations of up to N transactions, or all | none (per-second counts and "
              "latency histograms are kept always); aggregate: pgbench logs only per-second "
              "aggregates (no percentiles, no logging cost); sample[:R]: pgbench logs a "
              "random fraction R of transactions (default: about 2,000 a second), "
              "percentiles with 95% bounds", str),
    CliOption("drivers", None, "run pgbench on these hosts, the clients split between them, "
              "against the one server (reached over TCP from each): a file of SSH "
              "destinations, one a line, or an Ansible inventory (every host); one result "
              "merged from every driver's logs", Path | None),
    CliOption("drivers_group", None, "with an Ansible inventory as --drivers: only the hosts "
              "of this group (and its child groups)", str | None),
    CliOption("progress", True, "show progress bars", bool),
)


@functools.cache
def workload_options() -> tuple[CliOption, ...]:
    """Every registered workload's own options, merged by name (several workloads may share
    one, such as --scale), with None as the CLI default: a given value is then told apart
    from the workload's own default."""
    merged: dict[str, CliOption] = {}
    for name, workload in registry.WORKLOADS.items():
        hints = typing.get_type_hints(workload.options_type)
        for f in cli_fields(workload.options_type):
            cli_type = f.metadata.get("cli_type") or hints[f.name]
            known = merged.get(f.name)
            if known is None:
                is_bool = cli_type is bool
                merged[f.name] = CliOption(
                    f.name, False if is_bool else None, f.metadata["cli_help"],
                    _cli_type(cli_type), flag=cli_flag(f), workloads=(name,))
            else:
                merged[f.name] = dataclasses.replace(known, workloads=(*known.workloads, name))
    return tuple(merged.values())


def _cli_type(tp: Any) -> Any:
    """A field's type as the command line takes it: tuples are repeatable options."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin is tuple:
        return list[args[0]]
    if origin in (typing.Union, type(int | None)) and len(args) == 1:
        return args[0] | None
    return tp if tp is bool else tp | None


def _is_path(tp: Any) -> bool:
    return tp is Path or Path in typing.get_args(tp)


def cli_annotation(opt: CliOption) -> Any:
    """The type the command line parses an option as: a path as text, since Click turns an
    empty path into "." (the current directory), where ``build_options`` refuses it."""
    if not _is_path(opt.type):
        return opt.type
    return str | None if type(None) in typing.get_args(opt.type) else str


def all_options() -> list[CliOption]:
    return [*(_with_defaults(o) for o in COMMON), *workload_options()]


def _with_defaults(opt: CliOption) -> CliOption:
    """--max-tries' help with each workload's own default, from the registry."""
    if opt.name != "max_tries":
        return opt
    retrying: dict[int, list[str]] = {}
    for name, workload in registry.WORKLOADS.items():
        if workload.default_max_tries != 1:
            retrying.setdefault(workload.default_max_tries, []).append(name)
    own = "".join(f"; {', '.join(names)}: {tries}" for tries, names in retrying.items())
    return dataclasses.replace(opt, help=f"{opt.help} (default 1{own})")


def defaults() -> dict[str, Any]:
    """Every option's default by Python name: the one source for CLI, campaign, compare."""
    return {o.name: (list(o.default) if isinstance(o.default, tuple) else o.default)
            for o in all_options()}


UPPER_LIMITS = (
    ("duration", "--duration", 30 * 86_400, "30 days; pgbench's -T is a 32-bit count"),
    ("warmup", "--warmup", 86_400, "one day"),
    ("iterations", "--iterations", 1_000, "each is a full warm-up and measured window"),
    ("threads", "--threads", 1_024, "pgbench threads"),
    ("rate", "--rate", 10_000_000, "transactions per second"),
    ("latency_limit", "--latency-limit", 3_600_000, "one hour, in ms"),
    ("max_tries", "--max-tries", 10_000, "more retries than that is a livelock, not a result"),
    ("random_seed", "--random-seed", 2**63 - 2**31, "pgbench's seeds are 64-bit"),
)
"""Ceilings of the shared numeric options: a value above them is a typo, refused before it
allocates a plan of 10^20 iterations or hands pgbench a time it cannot hold."""


def build_options(workload: str, **kw: Any) -> BenchOptions:
    """Validate every option (``kw`` holds any subset, by Python name) into BenchOptions."""
    plugin = registry.get(workload)
    values = {**defaults(), **kw}
    _refuse_foreign_options(workload, values)
    _refuse_empty(values)
    for opt in all_options():  # the command line gives paths as text (see cli_annotation)
        if _is_path(opt.type) and isinstance(values.get(opt.name), str):
            values[opt.name] = Path(values[opt.name])
    clients = (parse_int_list(values["clients"], "--clients") if values["clients"] is not None
               else plugin.default_clients())
    check_clients_fit(clients)
    for key, flag, zero_ok in (("duration", "--duration", False), ("warmup", "--warmup", True),
                               ("iterations", "--iterations", False),
                               ("threads", "--threads", False), ("rate", "--rate", False),
                               ("latency_limit", "--latency-limit", False),
                               ("max_tries", "--max-tries", True),
                               ("random_seed", "--random-seed", True)):
        check_positive(values[key], flag, allow_zero=zero_ok)
    for key, flag, limit, why in UPPER_LIMITS:
        check_at_most(values[key], flag, limit, why)
    check_choice(values["protocol"], "--protocol", PROTOCOLS)
    check_choice(values["cache"], "--cache", CACHE_MODES)
    check_choice(values["load_wal"], "--load-wal", LOAD_WAL_MODES)
    check_choice(values["via"], "--via", VIA)
    check_choice(values["target"], "--target", TARGET_CHOICES)
    if values["context"] is not None:  # the run's directory is RESULTS/CONTEXT/...
        check_dir_name(values["context"], "--context", "box--tpcb")
    max_tries = values["max_tries"] if values["max_tries"] is not None else 1
    if (values["latency_limit"] is not None and values["rate"] is None
            and max_tries == 1 and plugin.default_max_tries == 1):
        raise UsageError("--latency-limit needs --rate (fixed-rate mode) or --max-tries")
    target = target_spec(values) if plugin.needs_server else TargetSpec(
        workdir=values["workdir"] or default_workdir(), wal_dir=values["wal_dir"])
    drivers = check_drivers(values, plugin)
    opts = BenchOptions(
        workload=workload, clients=clients, threads=values["threads"],
        duration_s=values["duration"], warmup_s=values["warmup"],
        iterations=values["iterations"], protocol=values["protocol"], rate_tps=values["rate"],
        latency_limit_ms=values["latency_limit"],
        max_tries=max_tries if values["max_tries"] is not None else plugin.default_max_tries,
        random_seed=values["random_seed"],
        cache=values["cache"], via="tcp" if drivers else values["via"], force=values["force"],
        load_wal=values["load_wal"], results_dir=Path(values["results_dir"]),
        context=values["context"], target=target,
        config=values["config"], sets=tuple(values["set_"] or ()),
        telemetry=values["telemetry"], tx_log_cap=parse_tx_logs(values["tx_logs"]),
        tx_aggregate_only=_aggregate_only(values),
        tx_sampling_rate=parse_tx_sampling(values["tx_logs"]),
        drivers=drivers, drivers_group=values.get("drivers_group"),
        show_progress=values["progress"],
        results_db=results_db(values["results_db"]))
    # Given means not None, not a false flag, not an empty list: a 0 is given (--ramp 0).
    given = {f.name: v for f in cli_fields(plugin.options_type)
             if (v := values.get(f.name)) is not None and v is not False and v not in ((), [])}
    return plugin.options_from_cli(given, opts)


def check_drivers(values: dict[str, Any], plugin: Any) -> Path | None:
    """--drivers: a file there, a workload that runs pgbench, per-transaction logs (every
    driver's are merged); the server is then reached over TCP."""
    drivers = values.get("drivers")
    group = values.get("drivers_group")
    if drivers is None:
        if group is not None:
            raise UsageError(f"--drivers-group {group}: needs --drivers INVENTORY")
        return None
    path = Path(drivers).absolute()
    if not path.is_file():
        raise UsageError(f"--drivers {drivers}: no such file; accepted: a file of SSH "
                         "destinations, one a line, or an Ansible inventory")
    if getattr(plugin, "engine", None) != "pgbench":
        raise UsageError(f"--drivers: {plugin.name} does not run pgbench; accepted with the "
                         "workloads whose engine is pgbench")
    if str(values["tx_logs"]).strip().lower() == "aggregate" or \
            parse_tx_sampling(values["tx_logs"]) is not None:
        raise UsageError(f"--drivers --tx-logs {values['tx_logs']}: every driver's "
                         "per-transaction log is merged; accepted: a transaction count, all "
                         "or none")
    if values.get("random_seed") is not None:
        raise UsageError(f"--drivers --random-seed {values['random_seed']}: every driver "
                         "would draw the same keys; accepted: --random-seed without --drivers")
    if group is not None:  # an unknown or empty group refused now, before anything starts
        from pgdyno.targets.drivers import read_drivers

        read_drivers(path, group=group)
    return path


def _aggregate_only(values: dict[str, Any]) -> bool:
    aggregate = str(values["tx_logs"]).strip().lower() == "aggregate"
    if aggregate and values["latency_limit"] is not None:
        raise UsageError("--tx-logs aggregate counts no late transactions: drop "
                         "--latency-limit, or keep pgbench's per-transaction logs")
    if parse_tx_sampling(values["tx_logs"]) is not None and values["latency_limit"] is not None:
        raise UsageError("--tx-logs sample would count late transactions of the sample only: "
                         "drop --latency-limit, or keep every transaction's log")
    return aggregate


def parse_tx_logs(value: str | int | None) -> int | None:
    """--tx-logs: a transaction count, ``all`` (None: no cap), ``none`` or ``aggregate``
    (0: no per-transaction log kept); ``sample[:R]`` keeps the sampled logs up to the
    default cap."""
    text = str(value if value is not None else DEFAULT_TX_LOG_CAP).strip().lower()
    if text == "all":
        return None
    if parse_tx_sampling(text) is not None:
        return DEFAULT_TX_LOG_CAP
    if text in ("none", "aggregate"):
        return 0
    try:
        cap = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        cap = -1
    if cap < 0:
        raise UsageError(f"--tx-logs {value!r}: accepted: a number of transactions (e.g. "
                         "1000000), all, none, aggregate, sample, sample:R (0 < R <= 1)")
    return cap


def parse_tx_sampling(value: str | int | None) -> float | None:
    """--tx-logs sample (auto: SAMPLE_AUTO) or sample:R with 0 < R <= 1; None otherwise."""
    text = str(value).strip().lower() if value is not None else ""
    if text != "sample" and not text.startswith("sample:"):
        return None
    if text == "sample":
        return SAMPLE_AUTO
    try:
        rate = float(text.removeprefix("sample:"))
    except ValueError:
        rate = math.nan
    if not 0 < rate <= 1:
        raise UsageError(f"--tx-logs {value!r}: the sampling rate R of sample:R is a "
                         "fraction, 0 < R <= 1 (e.g. sample:0.05), or sample alone (auto)")
    return rate


def check_clients_fit(clients: tuple[int, ...]) -> None:
    """pgbench holds one file descriptor per client plus three: more clients than the
    process may open files fail only once the run has started."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard - 3 if hard != resource.RLIM_INFINITY else None
    if limit is not None and max(clients) > limit:
        raise UsageError(f"--clients {max(clients)}: at most {limit:,} on this system (pgbench "
                         f"needs one open file per client plus 3; the hard limit is {hard:,}, "
                         "`ulimit -Hn`)")


EMPTY_ACCEPTED = frozenset({"results_db"})
"""Options whose empty value means something: ``--results-db ''`` is the SQLite index even
when PGDYNO_RESULTS_DB is set."""


def _refuse_empty(values: dict[str, Any]) -> None:
    """An empty value (``--archive ''``, ``--queries ''``) is a typo or an unset shell
    variable, not "the default": refused, naming the option and what it takes, before a
    whole job runs with the default in its place."""
    for opt in all_options():
        value = values.get(opt.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        empty = [v for v in items if isinstance(v, str) and not v.strip()]
        if empty and opt.name not in EMPTY_ACCEPTED:
            raise UsageError(f"{opt.cli_flag} {empty[0]!r}: an empty value; accepted: "
                             f"{opt.help} (or leave the option out for its default)")


def _refuse_foreign_options(workload: str, values: dict[str, Any]) -> None:
    for opt in workload_options():
        if workload in opt.workloads:
            continue
        if values.get(opt.name) not in (None, False, (), []):
            owners = ", ".join(opt.workloads)
            raise UsageError(f"{opt.cli_flag} belongs to {owners}, not {workload}")
