"""A campaign file: configs × workloads × client counts × repetitions, in TOML.

::

    [campaign]
    name = "tuning"              # journal: <results_dir>/campaigns/<name>/journal.jsonl
    context = "box--tpcb"        # optional; default HARDWARE--WORKLOAD, as `pgdyno bench`
    results_dir = "results"      # optional (relative to the current directory)
    hardware = "r8g.xlarge"      # optional: the profile whose prices the context report uses
    workloads = ["tpcb"]
    clients = [4, 16]            # every run sweeps these (pgdyno bench --clients)
    repeat = 3                   # runs per (config, workload): the campaign's iterations

    [bench]                      # any `pgdyno bench` option, named as on the command line
    scale = 10
    duration = 30
    warmup = 5
    iterations = 1               # pgbench iterations inside each run

    [[config]]
    label = "default"

    [[config]]
    label = "async-commit"
    config = "default"           # default | pgtune | tuned | FILE
    set = ["synchronous_commit=off"]

    [[config]]
    label = "pg15"
    pg-bin = "/usr/lib/postgresql/15/bin"   # this config's server build (its cells'
                                           # --pg-bin); its own cluster and dataset

    [[config]]
    label = "dirty-4"
    [config.os]                  # OS settings of this config's cells (needs root and
    "vm.dirty_ratio" = 4         # `pgdyno campaign --allow-os-changes`): applied before
                                 # each cell, reverted after (pgdyno.provision)

    [bench.tprocc]               # options of one workload's cells only, over [bench]
    warehouses = 4

    [size.quick]                 # `pgdyno campaign FILE --size quick`: the same campaign,
    repeat = 1                   # smaller; [campaign] keys (clients, repeat) and
    [size.quick.bench]           # [bench] options (also [size.quick.bench.WORKLOAD])
    duration = 3                 # override the file's; its journal is NAME--quick

    [study]                      # a question and its comparisons: pgdyno.study
    question = "..."

A workload that needs no server (fio, cpu) runs once per repetition under the first of the
configs that differ only in PostgreSQL settings: their settings cannot change its figures.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.config.profiles import catalogue_names, load_hardware
from pgdyno.config.resolve import check_config_source
from pgdyno.config.setting_specs import for_install
from pgdyno.config.userfile import control_character, read_toml, toml_type
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions, TargetSpec
from pgdyno.results.names import check_dir_name
from pgdyno.runner.options import all_options, build_options, defaults
from pgdyno.targets import check_spec, target_class
from pgdyno.targets.binaries import embedded_install, install_from_dir
from pgdyno.targets.local import check_owned_settings
from pgdyno.workloads import registry

CAMPAIGN_KEYS = {"name", "context", "results_dir", "hardware", "workloads", "clients", "repeat"}
CONFIG_KEYS = {"label", "config", "set", "os", "bench", "pg-bin"}
# Options a campaign decides itself, per cell.
CELL_OWNED = {"workload", "clients", "config", "set_", "set", "context", "results_dir",
              "progress"}
ACCEPTED_FILE = "a campaign TOML file with [campaign], [bench] and [[config]]"
TABLES = {"campaign": "a table [campaign]", "bench": "a table [bench]",
          "config": "an array of tables [[config]]", "size": "tables [size.NAME]",
          "study": "a table [study]"}
SIZE_CAMPAIGN_KEYS = {"clients", "repeat"}
"""What a [size.NAME] may change in [campaign]; its bench table changes [bench]."""


@dataclass(frozen=True)
class ConfigEntry:
    label: str
    config: str = "default"
    sets: tuple[str, ...] = ()
    os: tuple[tuple[str, str], ...] = ()
    """``[config.os]``: OS settings (sysctl names or `tune --format env` keys) and values."""
    bench: tuple[tuple[str, Any], ...] = ()
    """``[config.bench]``: `pgdyno bench` options of this config's cells over ``[bench]``
    (``archive = "direct"``), as Python names."""


@dataclass(frozen=True)
class Cell:
    """One run of the campaign."""

    repetition: int
    workload: str
    config: ConfigEntry

    @property
    def key(self) -> str:
        return f"r{self.repetition}:{self.workload}:{self.config.label}"


@dataclass
class CampaignSpec:
    name: str
    path: Path
    workloads: list[str]
    clients: list[int]
    repeat: int
    configs: list[ConfigEntry]
    bench: dict[str, Any] = field(default_factory=dict)
    context: str | None = None
    results_dir: Path = Path("results")
    hardware: str | None = None
    workload_bench: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``[bench.WORKLOAD]``: options of that workload's cells, over ``bench``."""
    size: str | None = None
    """The ``[size.NAME]`` the campaign runs at (None: the file's own size)."""
    study: dict[str, Any] | None = None
    """The ``[study]`` table as written (checked and read by pgdyno.study)."""

    def cells(self) -> list[Cell]:
        """Interleaved: repetition-major; configs reversed every other repetition (ABBA)."""
        out = []
        for rep in range(1, self.repeat + 1):
            configs = self.configs if rep % 2 == 1 else list(reversed(self.configs))
            for workload in self.workloads:
                out += [Cell(rep, workload, c) for c in self.configs_of(workload, configs)]
        return out

    def configs_of(self, workload: str, configs: list[ConfigEntry]) -> list[ConfigEntry]:
        """The configs a workload runs under: all of them, except that a workload without
        a server runs once among configs that differ only in PostgreSQL settings."""
        if registry.get(workload).needs_server:
            return configs
        seen: set[tuple] = set()
        kept = []
        for entry in sorted(configs, key=self.configs.index):
            key = (entry.os, entry.bench)
            if key not in seen:
                seen.add(key)
                kept.append(entry)
        return [c for c in configs if c in kept]

    @property
    def journal_dir(self) -> Path:
        name = self.name if self.size is None else f"{self.name}--{self.size}"
        return self.results_dir / "campaigns" / name

    def options_for(self, cell: Cell, show_progress: bool = False) -> BenchOptions:
        kw: dict[str, Any] = {}
        kw.update({k.replace("-", "_"): v for k, v in self.bench.items()})
        own = dict(self.workload_bench.get(cell.workload, {}))
        clients = own.pop("clients", self.clients)
        kw.update(own)
        kw.update({k: list(v) if isinstance(v, tuple) else v for k, v in cell.config.bench})
        kw.update(workload=cell.workload, clients=",".join(str(c) for c in clients),
                  config=cell.config.config, set_=list(cell.config.sets),
                  results_dir=self.results_dir, context=self.context, progress=show_progress)
        for key in ("workdir", "pg_bin", "wal_dir"):
            if kw.get(key) is not None:
                kw[key] = Path(kw[key])
        workload = kw.pop("workload")
        return build_options(workload, **kw)


def bench_defaults() -> dict[str, Any]:
    """Every `pgdyno bench` option with its default (the one table in runner/options)."""
    return defaults()


def load_spec(path: Path, results_dir: Path | None = None,
              size: str | None = None) -> CampaignSpec:
    """Read and check a campaign file: every key's type and value, every config and
    option, before anything is created (the journal is written only once this returns).
    ``size``: one of the file's ``[size.NAME]`` tables, applied over ``[campaign]`` and
    ``[bench]``."""
    data = read_toml(path, f"campaign {path}", ACCEPTED_FILE)
    _check_tables(data, path)
    if size is not None:  # its journal is the directory NAME--SIZE
        check_dir_name(size, "--size", "quick")
    camp = data.get("campaign", {})
    bad = set(camp) - CAMPAIGN_KEYS
    if bad:
        raise UsageError(f"campaign {path}: [campaign] {', '.join(sorted(bad))} unknown; "
                         f"accepted: {', '.join(sorted(CAMPAIGN_KEYS))}")
    raw_bench = dict(data.get("bench", {})) if isinstance(data.get("bench"), dict) else {}
    if size is not None:
        camp, raw_bench = _apply_size(data, camp, raw_bench, size, path)
    workload_bench = {w: raw_bench.pop(w) for w in list(raw_bench)
                      if isinstance(raw_bench[w], dict)}
    bench = _bench(raw_bench, path, "[bench]")
    study = _study_table(data.get("study"), path)
    if size is not None and study is not None:
        study.update(_size_study(data, size, path))
    configs = [_config(c, path, study is not None)
               for c in data.get("config", [{"label": "default"}])]
    labels = [c.label for c in configs]
    if len(set(labels)) != len(labels):
        raise UsageError(f"campaign {path}: config labels must be unique ({', '.join(labels)}); "
                         "accepted: a different label for each [[config]]")
    name = _dir_name(camp, "name", path) or check_dir_name(
        Path(path).stem, f"campaign {path}: without [campaign] name, its file's name", "tuning-1")
    given_dir = _optional_str(camp, "results_dir", path)
    spec = CampaignSpec(
        name=name, path=Path(path), workloads=_workloads(camp, path),
        clients=_clients(camp, path), repeat=_repeat(camp, path), configs=configs,
        bench=bench, context=_dir_name(camp, "context", path),
        results_dir=Path(results_dir or given_dir or "results"),
        hardware=_hardware(camp, path),
        workload_bench=_workload_bench(workload_bench, path), size=size,
        study=study)
    _check_options(spec)
    return spec


def _apply_size(data: dict[str, Any], camp: dict[str, Any], bench: dict[str, Any],
                size: str, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """[campaign] and [bench] with ``[size.SIZE]`` over them."""
    sizes = data.get("size", {})
    if not isinstance(sizes, dict) or not isinstance(sizes.get(size), dict):
        names = sorted(k for k, v in sizes.items() if isinstance(v, dict)) \
            if isinstance(sizes, dict) else []
        raise UsageError(f"campaign {path}: --size {size}: no [size.{size}] table; accepted: "
                         f"{', '.join(names) or 'none (this file has no [size.NAME] table)'}")
    table = dict(sizes[size])
    extra = table.pop("bench", {})
    table.pop("study", None)  # read by _size_study
    bad = set(table) - SIZE_CAMPAIGN_KEYS
    if bad or not isinstance(extra, dict):
        raise UsageError(f"campaign {path}: [size.{size}] {', '.join(sorted(bad)) or 'bench'} "
                         f"not accepted; accepted: {', '.join(sorted(SIZE_CAMPAIGN_KEYS))}, "
                         f"a table [size.{size}.bench] and a table [size.{size}.study]")
    merged = dict(bench)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return {**camp, **table}, merged


SIZE_STUDY_KEYS = {"design", "pairs", "budget", "precision"}
"""What a [size.NAME.study] may change in [study]: how the sides are compared."""


def _size_study(data: dict[str, Any], size: str, path: Path) -> dict[str, Any]:
    """``[size.SIZE.study]``: the comparison's design keys at this size."""
    table = data["size"][size].get("study", {})
    if not isinstance(table, dict) or set(table) - SIZE_STUDY_KEYS:
        bad = sorted(set(table) - SIZE_STUDY_KEYS) if isinstance(table, dict) else ["study"]
        raise UsageError(f"campaign {path}: [size.{size}.study] {', '.join(bad)} not "
                         f"accepted; accepted: {', '.join(sorted(SIZE_STUDY_KEYS))}")
    return dict(table)


def _workload_bench(tables: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for workload, table in tables.items():
        if workload not in registry.WORKLOADS:
            raise UsageError(f"campaign {path}: [bench.{workload}]: {workload!r} is not a "
                             f"workload; accepted: {', '.join(registry.names())}")
        table = dict(table)
        clients = table.pop("clients", None)
        out[workload] = _bench(table, path, f"[bench.{workload}]")
        if clients is not None:  # this workload's own client counts (fio: 1)
            out[workload]["clients"] = _clients({"clients": clients}, path)
    return out


def _study_table(table: Any, path: Path) -> dict[str, Any] | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise _wrong(path, "", "study", table, "a table [study]")
    return dict(table)


# ----- tables and keys -------------------------------------------------------------------------

def _check_tables(data: dict[str, Any], path: Path) -> None:
    unknown = set(data) - set(TABLES)
    if unknown:
        raise UsageError(f"campaign {path}: unknown table(s) {', '.join(sorted(unknown))}; "
                         "accepted: [campaign], [bench], [[config]]")
    for key, accepted in TABLES.items():
        if key not in data:
            continue
        value = data[key]
        ok = (all(isinstance(v, dict) for v in value) if isinstance(value, list)
              else False) if key == "config" else isinstance(value, dict)
        if not ok:
            raise UsageError(f"campaign {path}: {key} is {toml_type(value)}; accepted: "
                             f"{accepted}")
    if data.get("config") == []:
        raise UsageError(f"campaign {path}: config is an empty array; accepted: one or more "
                         "[[config]] tables (or none at all: the stock config)")


def _wrong(path: Path, where: str, key: str, value: Any, accepted: str) -> UsageError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return UsageError(f"campaign {path}: {where} {key} = {shown} is {toml_type(value)}; "
                      f"accepted: {accepted}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_str(table: dict[str, Any], key: str, path: Path) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or control_character(value):
        raise _wrong(path, "[campaign]", key, value, "a non-empty string on one line")
    return value


def _dir_name(table: dict[str, Any], key: str, path: Path) -> str | None:
    """A name that becomes a directory of its own under the results directory."""
    value = _optional_str(table, key, path)
    if value is not None:
        check_dir_name(value, f"campaign {path}: [campaign] {key} =", "tuning-1")
    return value


def _workloads(camp: dict[str, Any], path: Path) -> list[str]:
    value = camp.get("workloads", ["tpcb"])
    if isinstance(value, str):
        value = [value]
    accepted = f"a list of one or more of {', '.join(registry.names())}"
    if not isinstance(value, list) or not value:
        raise _wrong(path, "[campaign]", "workloads", value, accepted)
    for item in value:
        if not isinstance(item, str) or item not in registry.WORKLOADS:
            raise UsageError(f"campaign {path}: [campaign] workloads: {item!r} is not a "
                             f"workload; accepted: {accepted}")
    if len(set(value)) != len(value):
        raise UsageError(f"campaign {path}: [campaign] workloads = {value!r} names one twice; "
                         "accepted: each workload once")
    return list(value)


def _clients(camp: dict[str, Any], path: Path) -> list[int]:
    value = camp.get("clients", [8])
    if _is_int(value):
        value = [value]
    accepted = "a positive integer or a list of them, each once (e.g. [4, 16])"
    if (not isinstance(value, list) or not value
            or not all(_is_int(c) and c > 0 for c in value) or len(set(value)) != len(value)):
        raise _wrong(path, "[campaign]", "clients", value, accepted)
    return list(value)


def _repeat(camp: dict[str, Any], path: Path) -> int:
    value = camp.get("repeat", 1)
    if not _is_int(value) or value < 1:
        raise _wrong(path, "[campaign]", "repeat", value, "an integer >= 1")
    return value


def _hardware(camp: dict[str, Any], path: Path) -> str | None:
    value = _optional_str(camp, "hardware", path)
    if value is not None and value != "detect" and value not in catalogue_names():
        try:
            load_hardware(value)
        except UsageError as exc:
            raise UsageError(f"campaign {path}: [campaign] hardware: {exc}") from None
    return value


def _bench(table: Any, path: Path, where: str) -> dict[str, Any]:
    """[bench] (or a config's [config.bench]), keys as Python names, each value of its
    option's type."""
    if not isinstance(table, dict):
        raise _wrong(path, where, "", table, "a table of `pgdyno bench` options")
    options = {o.name: o for o in all_options()}
    allowed = set(bench_defaults()) - CELL_OWNED
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in allowed:
            raise UsageError(f"campaign {path}: {where} {key} not accepted; workload, clients, "
                             "config, set, context and results_dir belong to [campaign] or "
                             "[[config]]; accepted: the long options of `pgdyno bench`")
        if name in out:
            raise UsageError(f"campaign {path}: {where} {key} given twice (with - and _); "
                             "accepted: one of them")
        out[name] = _typed(value, options[name].type, key, path, where)
    return out


def _typed(value: Any, tp: Any, key: str, path: Path, where: str = "[bench]") -> Any:
    """``value`` as option type ``tp`` takes it (TOML has no null, so None never comes)."""
    kinds = [t for t in typing.get_args(tp) if t is not type(None)] if isinstance(
        tp, types.UnionType) else [tp]
    kind = kinds[0]
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and _is_int(value):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is str and isinstance(value, str):
        return value
    if kind is str and _is_int(value):
        return str(value)  # warehouses = 10 means "10"
    if kind is Path and isinstance(value, str) and value:
        return value
    if typing.get_origin(kind) is list:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and all(isinstance(v, str) for v in items):
            return list(items)
    accepted = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
                Path: "a path (a string)"}.get(kind, "a list of strings")
    raise _wrong(path, where, key, value, accepted)


def _config(entry: dict[str, Any], path: Path, in_study: bool = False) -> ConfigEntry:
    """One [[config]]; ``in_study``: its label also names a file of the study's."""
    bad = set(entry) - CONFIG_KEYS
    if bad:
        raise UsageError(f"campaign {path}: [[config]] {', '.join(sorted(bad))} unknown; "
                         f"accepted: {', '.join(sorted(CONFIG_KEYS))}")
    for key in ("label", "config"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()
                                  or control_character(value)):
            raise _wrong(path, "[[config]]", key, value, "a non-empty string on one line")
    config = entry.get("config", "default")
    label = entry.get("label") or config
    if in_study:  # the study keeps each config's provisioning plan as plan-LABEL.json
        what = "[[config]] label =" if entry.get("label") else \
            "[[config]] without a label takes its config as label:"
        check_dir_name(label, f"campaign {path}: {what}", "tuned-4gb")
    sets = tuple(_str_list(entry.get("set", []), "set", path))
    bench = _bench(entry.get("bench", {}), path, f"[[config]] {label} [config.bench]")
    if "pg-bin" in entry:  # the config's own server build: its cells' --pg-bin
        bench["pg_bin"] = _pg_bin(entry["pg-bin"], "pg_bin" in bench, label, path)
    return ConfigEntry(label=label, config=config, sets=sets,
                       os=_os_settings(entry.get("os", {}), label, path),
                       bench=tuple((k, tuple(v) if isinstance(v, list) else v)
                                   for k, v in bench.items()))


def _pg_bin(value: Any, in_bench: bool, label: str, path: Path) -> str:
    """``pg-bin``: the directory of the server programs this config's cells run, checked
    to hold PostgreSQL's programs when the file is read."""
    where = f"[[config]] {label}"
    if in_bench:
        raise UsageError(f"campaign {path}: {where}: pg-bin given twice (also in "
                         "[config.bench]); accepted: one of them")
    if not isinstance(value, str) or not value.strip() or control_character(value):
        raise _wrong(path, where, "pg-bin", value, "a directory of PostgreSQL programs, "
                     "e.g. \"/usr/lib/postgresql/15/bin\"")
    try:
        install_from_dir(value)
    except UsageError as exc:
        raise UsageError(f"campaign {path}: {where} pg-bin: {exc}") from None
    return value


def _os_settings(table: Any, label: str, path: Path) -> tuple[tuple[str, str], ...]:
    """``[config.os]`` as (key, value) text pairs, each checked when the file is loaded,
    before anything runs: unknown keys, values outside the matrix's type and range
    (pgdyno.config.matrix_keys), sysctls this kernel lacks or will not let root write,
    storage layout and settings that would change nothing here are refused."""
    from pgdyno.provision import check_settings

    where = f"campaign {path}: [[config]] {label} [config.os]"
    if not isinstance(table, dict):
        raise _wrong(path, f"[[config]] {label}", "os", table,
                     "a table [config.os] of OS settings (\"vm.dirty_ratio\" = 4)")
    pairs = []
    for key, value in table.items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        if not isinstance(value, str | int | float) or isinstance(value, str) and (
                not value.strip() or control_character(value)):
            raise _wrong(path, f"[[config]] {label} [config.os]", key, value,
                         "a number or a string on one line")
        pairs.append((str(key), str(value)))
    if pairs:
        plan = check_settings(dict(pairs), origin=where)
        skipped = [k for st in plan.steps if st.status == "skipped" for k in st.keys]
        if skipped:
            raise UsageError(f"{where} {', '.join(skipped)}: would change nothing here "
                             "(no device named); accepted: sysctls and transparent huge pages")
        # As the kernel names them (vm.dirty_ratio, not VM_DIRTY_RATIO): the names runs
        # record the live values under, so a cell's setting and its reading line up.
        pairs = [(st.target, st.value) for st in plan.steps]
    return tuple(pairs)


def _str_list(value: Any, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _wrong(path, "[[config]]", key, value, "a list of strings such as "
                     "[\"synchronous_commit=off\"]")
    return list(value)


# ----- options, target and configs, as the runs will use them -----------------------------------

def _check_options(spec: CampaignSpec) -> None:
    """Every cell's options, the server they name and every config, as the first run would
    check them: a mistake is found before the journal exists, not at cell 5."""
    first: dict[str, BenchOptions] = {}  # config label -> its first cell's options
    for cell in spec.cells()[:len(spec.configs) * len(spec.workloads)]:
        try:
            opts = spec.options_for(cell)
        except UsageError as exc:
            raise UsageError(f"campaign {spec.path}: {cell.workload} [[config]] "
                             f"{cell.config.label}: {exc}") from None
        first.setdefault(cell.config.label, opts)
    assert first  # workloads and configs are never empty
    # Each config's settings against its own server build (its pg-bin, if it names one).
    for entry in spec.configs:
        opts = first.get(entry.label) or next(iter(first.values()))
        try:
            _check_target(opts.target, [entry])
        except UsageError as exc:
            raise UsageError(f"campaign {spec.path}: {exc}") from None


def _check_target(target: TargetSpec, configs: list[ConfigEntry]) -> None:
    check_spec(target)  # a DSN libpq cannot use; the directories of a server here
    # Configs and sets with a DSN are refused by the options already; those of a server on
    # an --ssh host are checked there, when a run starts.
    if not target_class(target).is_local or all(c.config == "default" and not c.sets
                                                 for c in configs):
        return
    install = install_from_dir(target.pg_bin) if target.pg_bin else embedded_install()
    specs = for_install(install)
    for entry in configs:
        try:
            check_owned_settings(check_config_source(entry.config, list(entry.sets),
                                                     specs))
        except UsageError as exc:
            raise UsageError(f"[[config]] {entry.label}: {exc}") from None
