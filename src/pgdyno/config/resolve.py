"""Named configs to PostgreSQL settings: ``default``, ``pgtune``, ``tuned`` or a user file.

This is the single entry point benchmarks use: it builds the plan for the hardware and
workload, applies ``--set key=value`` overrides, validates every PostgreSQL value against
the target's setting specs and checks the memory budget and huge pages, and returns
the settings ready for the server's include file with where each came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.config.detect import detect_profile
from pgdyno.config.envfile import parse_env, settings_from_env
from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.model import ConfigPlan, Setting, TuneInputs, pg_group
from pgdyno.config.pgtune import pgtune_settings
from pgdyno.config.setting_specs import (
    SettingSpecs,
    available_majors,
    for_install,
    snapshot,
)
from pgdyno.config.sizing import (
    BASE_CONNECTIONS,
    ask_postgres_huge_pages,
    compute_sizing,
    connection_room,
    estimate_shared_memory,
    huge_pages_needed,
    max_connections,
    setting_bytes,
    wal_buffers_bytes,
)
from pgdyno.config.tuned import tuned_settings
from pgdyno.config.units import human_bytes
from pgdyno.config.userfile import read_text, read_toml, toml_type
from pgdyno.config.workloads import classify
from pgdyno.errors import UsageError
from pgdyno.serde import Serialisable

NAMED = ("default", "pgtune", "tuned")
SCHEMA_VERSION = 1


@dataclass
class ResolvedConfig(Serialisable):
    """A config ready to run: PostgreSQL settings in postgresql.conf syntax, and their sources."""

    name: str
    pg_settings: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    """key -> where the value came from and why (``tuned: 25% of RAM 24 GiB ...``)."""
    pg_version: str = ""
    catalogue: str = ""
    """Where the setting specs that validated the values came from (the field keeps its
    first name: run manifests store it)."""
    plan: ConfigPlan | None = None
    """The whole matrix (OS and storage layers included) with the sizing math."""
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION


def resolve_config(name: str, overrides: list[str], *, install: Any | None = None,
                   workload: str, hardware: HardwareProfile | None = None,
                   connections: int | None = None, dataset_bytes: int | None = None,
                   pg_major: int | None = None, data_dir: Path | None = None,
                   server_user: Any | None = None,
                   tuning: tuple[str, bool] | None = None,
                   advisor: Any | None = None) -> ResolvedConfig:
    """Resolve a named config or file for a target (``install``) or a PostgreSQL major version.

    ``tuning`` (pgtune database type, write-heavy) comes from a workload plugin; without
    it ``workload`` names a tuning class (``pgdyno tune --workload oltp``). ``advisor``
    (``sizing.WorkloadAdvice``, the workload registry's ``ADVICE``): the workloads' advice in
    the tuned matrix and their units in the sizing; None: neither.
    ``data_dir`` (an initialised, stopped cluster) lets PostgreSQL itself report the huge pages
    the settings need; ``server_user`` (a ServerUser) runs that query as the cluster's owner.
    """
    if install is None and pg_major is None:
        raise UsageError("resolve_config needs the target's binaries or --pg-version")
    specs = for_install(install) if install is not None else snapshot(int(pg_major or 18))
    if hardware is None:
        hardware = detect_profile()
    db_type, write_heavy = tuning or classify(workload)
    inputs = TuneInputs(hardware=hardware, workload=workload, db_type=db_type,
                        write_heavy=write_heavy, pg_major=specs.major,
                        connections=connections, dataset_bytes=dataset_bytes,
                        advisor=advisor)
    plan = build_plan(name, inputs, specs)
    for item in overrides:
        plan.set(_override(item, specs))
    leave_room(plan, inputs, specs)
    pg_settings, sources = validate_plan(plan, specs)
    server_pages = None
    if data_dir is not None and install is not None and (Path(data_dir) / "PG_VERSION").exists():
        kwargs = server_user.popen_kwargs() if server_user is not None else None
        env = server_user.env() if server_user is not None else None
        server_pages = ask_postgres_huge_pages(install.program("postgres"), Path(data_dir),
                                               pg_settings, kwargs, env)
    plan.sizing = compute_sizing(plan, inputs, specs, server_pages)
    check_coherence(plan, inputs, specs, server_pages)
    plan.warnings += [f"{line.section}: {line.label}: {line.value}" for line in plan.sizing
                      if line.ok is False]
    return ResolvedConfig(name=plan.name, pg_settings=pg_settings, sources=sources,
                          pg_version=specs.version, catalogue=specs.source, plan=plan,
                          warnings=list(plan.warnings))


def build_plan(name: str, inputs: TuneInputs, specs: SettingSpecs) -> ConfigPlan:
    plan = ConfigPlan(name=name, inputs=inputs, catalogue=specs.source)
    if name == "default":
        return plan
    if name == "pgtune":
        plan.settings = pgtune_settings(inputs, specs)
        return plan
    if name == "tuned":
        plan.settings = tuned_settings(inputs, specs)
        return plan
    return _plan_from_file(read_config_file(name), inputs, specs)


GENERATED_SOURCES = ("pgtune", "tuned", "pgdyno")
"""Sources of values pgdyno computed (as opposed to a user file or --set)."""


def leave_room(plan: ConfigPlan, inputs: TuneInputs, specs: SettingSpecs) -> None:
    """max_connections of a generated config holds the clients, pgdyno's sessions and the
    reserved slots (sizing.ConnectionRoom), with the reserved slots as the final plan sets them.

    pgtune and tuned already size it so; this also covers a config that leaves it to the
    server's base value, and --set superuser_reserved_connections raising the reserved part.
    A value the user chose (file, --set) stays theirs: a warning says what will not fit.
    """
    room = connection_room(inputs.connections or 0, specs, plan)
    setting = plan.get("max_connections")
    user_value = setting is not None and setting.source not in GENERATED_SOURCES
    try:
        current = int(setting.value) if setting is not None else BASE_CONNECTIONS
    except ValueError:
        return  # not a number: validation names the key and what is accepted
    if current >= room.needed:
        return
    if user_value:
        plan.warnings.append(
            f"max_connections {current} < {room.arithmetic()}: "
            + ("PostgreSQL will refuse to start" if current <= room.reserved_total
               else "some clients will be refused"))
        return
    plan.set(Setting(group=pg_group("max_connections"), key="PG_MAX_CONNECTIONS",
                     name="max_connections", layer="postgresql", apply="pg",
                     value=str(room.needed), default=specs.default("max_connections"),
                     rationale=(f"raised from {current}: " if setting is not None else
                                f"pgdyno's base {current} is too few: ") + room.arithmetic(),
                     source=setting.source if setting else "pgdyno"))


CONFIG_ACCEPTED = f"{', '.join(NAMED)} or a .toml/.env config file"
CONFIG_TABLES = {"config": ("name", "base"), "postgresql": ()}


@dataclass(frozen=True)
class ConfigFile:
    """A user's config file, read and type-checked: its values are still unvalidated text."""

    path: Path
    name: str
    base: str
    settings: tuple[Setting, ...]


def read_config_file(name: str) -> ConfigFile:
    """Read ``--config FILE`` (TOML or .env); every fault is one line naming file and key."""
    path = Path(name)
    label = f"--config {name}"
    if not path.exists():
        raise UsageError(f"{label}: no such config or file; accepted: {CONFIG_ACCEPTED}")
    origin = str(path)
    if path.suffix == ".env":
        text = read_text(path, label, CONFIG_ACCEPTED)
        settings = settings_from_env(parse_env(text, origin), origin)
        return ConfigFile(path, path.stem, "default", tuple(settings))
    data = read_toml(path, label, CONFIG_ACCEPTED)
    for key, value in data.items():
        if key not in CONFIG_TABLES:
            what = "table" if isinstance(value, dict) else "key"
            raise UsageError(f"{origin}: unknown table(s) {key} (a top-level {what}); accepted: "
                             "[config] (name, base) and [postgresql]")
        if not isinstance(value, dict):
            raise UsageError(f"{origin}: {key} is {toml_type(value)}; accepted: a table "
                             f"[{key}]" + (" (name, base)" if key == "config" else ""))
    meta = data.get("config", {})
    for key, value in meta.items():
        if key not in CONFIG_TABLES["config"]:
            raise UsageError(f"{origin}: [config] {key} unknown; accepted: name, base")
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{origin}: [config] {key} is {toml_type(value)} ({value!r}); "
                             "accepted: a non-empty string")
    base = meta.get("base", "default")
    if base not in NAMED:
        raise UsageError(f"{origin}: [config] base = {base!r}; accepted: {', '.join(NAMED)}")
    settings = tuple(
        Setting(group=pg_group(key), key="PG_" + key.upper(), name=key, layer="postgresql",
                apply="pg", value=text, rationale=f"set in {origin}", source=f"file:{origin}")
        for key, text in _pg_values(data.get("postgresql", {}), origin))
    return ConfigFile(path, meta.get("name", path.stem), base, settings)


def _pg_values(table: dict[str, Any], origin: str) -> list[tuple[str, str]]:
    """(setting, value text) of a [postgresql] table. A dotted key such as
    ``pg_stat_statements.max = 1000`` arrives as a nested table: it names an extension's
    setting, one level deep. A core setting's name is never such a prefix: ``shared_buffers
    = { a = 1 }`` (an inline table, or [postgresql.shared_buffers]) is refused, not read as
    a custom setting ``shared_buffers.a``."""
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            if key.lower() in _core_setting_names():
                raise UsageError(
                    f"{origin}: [postgresql] {key} is a table ({_inline(value)}); {key} is a "
                    "PostgreSQL setting, not an extension's prefix; accepted: a string, a "
                    f"number or a boolean (e.g. {key} = \"...\"), or an extension's setting "
                    "as extension.name = value")
            for sub, inner in value.items():
                out.append((f"{key}.{sub}", _pg_value(f"{key}.{sub}", inner, origin)))
        else:
            out.append((key, _pg_value(key, value, origin)))
    return out


def _core_setting_names() -> frozenset[str]:
    """Every setting of every PostgreSQL version pgdyno knows, lower-cased (PostgreSQL
    reads setting names without regard to case)."""
    return frozenset(name.lower() for major in available_majors()
                     for name in snapshot(major).by_name)


def _inline(table: dict[str, Any]) -> str:
    """A table as TOML's inline syntax, shortened: what the message shows of it."""
    text = "{ " + ", ".join(f"{k} = {v!r}" for k, v in table.items()) + " }"
    return text if len(text) <= 60 else text[:57] + "..."


def _pg_value(key: str, value: Any, origin: str) -> str:
    if isinstance(value, str | int | float):  # bool is an int
        return _toml_scalar(value)
    raise UsageError(f"{origin}: [postgresql] {key} is {toml_type(value)}; accepted: a "
                     "string, a number or a boolean (e.g. shared_buffers = \"4GB\")")


def _plan_from_file(config: ConfigFile, inputs: TuneInputs,
                    specs: SettingSpecs) -> ConfigPlan:
    if config.path.suffix == ".env":
        plan = ConfigPlan(name=config.name, inputs=inputs, catalogue=specs.source)
    else:
        plan = build_plan(config.base, inputs, specs)
        plan.name = config.name
    for setting in config.settings:
        plan.set(_with_default(setting, specs))
    return plan


def check_config_source(name: str, overrides: list[str],
                        specs: SettingSpecs) -> dict[str, str]:
    """Validate a config name or file and ``--set`` items without building the plan (no
    hardware needed): what a campaign checks before its first run. Returns the settings
    the file and the overrides give, in postgresql.conf syntax."""
    given: list[Setting] = []
    if name not in NAMED:
        given += read_config_file(name).settings
    given += [_override(item, specs) for item in overrides]
    plan = ConfigPlan(name=name, inputs=None, settings=list(given))
    return validate_plan(plan, specs)[0]


def _toml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _with_default(setting: Setting, specs: SettingSpecs) -> Setting:
    if setting.apply == "pg" and not setting.default:
        setting.default = specs.default(setting.name)
    return setting


def _override(item: str, specs: SettingSpecs) -> Setting:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--set {item}: expected key=value, e.g. --set shared_buffers=4GB")
    return Setting(group=pg_group(key), key="PG_" + key.upper(), name=key, layer="postgresql",
                   apply="pg", value=value.strip(), default=specs.default(key),
                   rationale="--set on the command line", source="--set")


def validate_plan(plan: ConfigPlan,
                  specs: SettingSpecs) -> tuple[dict[str, str], dict[str, str]]:
    """Every PostgreSQL value checked against the setting specs; conf-syntax values and sources."""
    pg_settings: dict[str, str] = {}
    sources: dict[str, str] = {}
    for s in plan.pg():
        origin = s.source if s.source.startswith(("file:", "--set")) else f"config {plan.name}"
        origin = origin.removeprefix("file:")
        if s.source == "--set":
            origin = f"--set {s.name}"
        pg_settings[s.name] = specs.check(s.name, s.value, origin)
        sources[s.name] = f"{s.source}: {s.rationale}" if s.rationale else s.source
    return pg_settings, sources


def check_coherence(plan: ConfigPlan, inputs: TuneInputs, specs: SettingSpecs,
                    server_pages: int | None) -> None:
    """Refuse what cannot work: a budget beyond the RAM, huge_pages=on without the pages."""
    hw = inputs.hardware
    shared = setting_bytes(plan, specs, "shared_buffers")
    work_mem = setting_bytes(plan, specs, "work_mem")
    conns = max_connections(plan, specs)
    if shared >= hw.ram_bytes:
        raise UsageError(f"config {plan.name}: shared_buffers {human_bytes(shared)} does not fit "
                         f"in the {human_bytes(hw.ram_bytes)} of RAM of {hw.name}; accepted: "
                         "at most about 40% of RAM")
    sessions = conns * work_mem * 1.5
    if shared + sessions > hw.ram_bytes:
        raise UsageError(
            f"config {plan.name}: memory budget exceeded: shared_buffers {human_bytes(shared)} + "
            f"{conns} connections x work_mem {human_bytes(work_mem)} x 1.5 > RAM "
            f"{human_bytes(hw.ram_bytes)}; accepted: lower work_mem or max_connections")
    hp = plan.get("huge_pages")
    if hp is not None and hp.value.strip("'") == "on":
        needed = server_pages
        if needed is None:
            wal = wal_buffers_bytes(plan, specs, shared)
            needed = huge_pages_needed(estimate_shared_memory(shared, conns, wal),
                                       hw.huge_page_size_kb or 2048)
        if hw.huge_pages_total < needed:
            raise UsageError(
                f"config {plan.name}: huge_pages = on needs {needed} huge pages for "
                f"shared_buffers {human_bytes(shared)}, {hw.name} has {hw.huge_pages_total} "
                "reserved; accepted: huge_pages = try, or reserve vm.nr_hugepages first")
