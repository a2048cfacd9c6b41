"""The search space: which PostgreSQL settings a search varies, over which values.

Built from the config engine's setting specs (types, ranges, enum values, whether a
setting needs a restart) and the hardware profile (RAM, vCPUs, free disk):

- memory knobs are bounded so that the worst corner of the space fits the config engine's
  memory budget (``sizing``: shared_buffers + wal_buffers + max_connections × work_mem ×
  1.5 + autovacuum workers × maintenance_work_mem, at most 90% of RAM), whatever the
  optimiser picks; a value pinned with ``--fix`` takes its share first;
- sizes and delays are sampled on a log scale (64 MB and 128 MB are as far apart as 8 GB
  and 16 GB);
- special values (``-1`` automatic, ``0`` off) are a categorical choice beside the range,
  so the optimiser tries them on purpose instead of never landing on them;
- durability settings (fsync, synchronous_commit, full_page_writes, wal_level) are left
  out unless ``--allow-unsafe``, and naming them in ``--knobs`` or ``--fix`` without it is
  refused;
- OS knobs (layer ``os``: writeback thresholds, transparent huge pages, the data device's
  read-ahead, huge pages for shared_buffers; ``search/os_knobs.py`` bounds them for the
  host) join the space only with ``--allow-os-changes``; ``suggest`` leaves them out of
  the PostgreSQL settings (but for huge_pages, which is both) and ``suggest_os`` draws them.

Settings needing a restart (``context = postmaster``) are grouped by construction: a trial
writes all its settings into the server's include file before the run's one start, so a
trial restarts the server at most once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.model import ConfigPlan, Setting, pg_group
from pgdyno.config.setting_specs import BOOL_WORDS, SettingSpecs, snapshot
from pgdyno.config.sizing import (
    BUDGET_RAM_SHARE,
    BUDGET_WORK_MEM_FACTOR,
    connection_room,
    memory_terms,
)
from pgdyno.config.units import GB, MB, unit_scale
from pgdyno.errors import UsageError
from pgdyno.serde import Serialisable

SCHEMA_VERSION = 1
UNSAFE = ("fsync", "synchronous_commit", "full_page_writes", "wal_level")
"""Settings that trade durability for speed: searched only with --allow-unsafe."""
SHARED_BUFFERS_SHARE = 0.40
"""The largest shared_buffers share of RAM the config engine accepts (check_coherence)."""
MAINTENANCE_SHARE = 0.05
"""maintenance_work_mem's ceiling as a share of RAM (each autovacuum worker may take it)."""
WORK_MEM_CAP = GB
WAL_DISK_SHARE = 0.5
"""max_wal_size at most half the free space of the data directory's filesystem."""
SPECIAL = "~"
"""Suffix of the categorical parameter that picks a special value or the range."""
OS_KNOBS = ("vm.dirty_background_bytes", "vm.dirty_bytes", "transparent_hugepage",
            "read_ahead_kb", "huge_pages")
"""Knobs of the OS layer, searched only with --allow-os-changes (search/os_knobs.py)."""


@dataclass(frozen=True)
class Knob:
    """One searched setting and the values the optimiser may give it."""

    name: str
    kind: str
    """int, real or enum."""
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    unit: str = ""
    """Written after the number: MB, s, ms; '' for the setting's own base unit."""
    choices: tuple[str, ...] = ()
    specials: tuple[str, ...] = ()
    """Values outside the range tried on purpose: -1 (automatic), 0 (off)."""
    restart: bool = False
    group: str = ""
    unsafe: bool = False
    layer: str = "postgresql"
    """postgresql, or os: applied through provision around the trial's runs."""

    @property
    def is_os(self) -> bool:
        return self.layer == "os"

    def describe(self) -> str:
        """The knob's values in words, for the report: '32MB .. 9GB (log), or -1'."""
        if self.kind == "enum":
            return " | ".join(self.choices)
        low, high = (_number(self.low, self.kind), _number(self.high, self.kind))
        text = f"{low}{self.unit} .. {high}{self.unit}" + (" (log)" if self.log else "")
        return text + (", or " + ", ".join(self.specials) if self.specials else "")


@dataclass
class SearchSpace(Serialisable):
    """The knobs, the pinned values and the memory budget the knobs were bounded by."""

    knobs: list[Knob]
    fixed: dict[str, str] = field(default_factory=dict)
    """Settings every searched trial gets: --fix pins and max_connections for the clients."""
    pg_major: int = 18
    ram_bytes: int = 0
    budget_bytes: int = 0
    """BUDGET_RAM_SHARE of RAM: the most the worst corner of the space may need."""
    allow_unsafe: bool = False
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    """The space's own version inside search.json, checked with the record's when the
    record is read (``search.run.read_record``)."""
    allow_os_changes: bool = False

    @property
    def os_knobs(self) -> list[Knob]:
        return [k for k in self.knobs if k.is_os]

    @property
    def specs(self) -> SettingSpecs:
        return snapshot(self.pg_major)

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)

    def suggest(self, trial: Any) -> dict[str, str]:
        """The settings of one trial (postgresql.conf values), drawn through an Optuna trial.

        Both the range value and the special choice are always drawn (so every trial has
        every parameter, which the importance analysis needs); the special wins when
        chosen."""
        settings: dict[str, str] = {}
        for knob in self.knobs:
            value = _suggest(trial, knob)
            if not knob.is_os or knob.name == "huge_pages":  # a PostgreSQL setting too
                settings[knob.name] = value
        if settings.get("wal_level") == "minimal":
            settings["max_wal_senders"] = "0"  # the server refuses minimal with senders
        settings.update(self.fixed)
        return settings

    def suggest_os(self, trial: Any) -> dict[str, str]:
        """The trial's values of the OS knobs, in the knobs' units (``os_knobs`` turns them
        into provision settings); drawing a parameter again gives the value drawn first."""
        return {knob.name: _suggest(trial, knob) for knob in self.os_knobs}

    def params_for(self, settings: dict[str, str]) -> dict[str, Any]:
        """A config's settings as a point of this space: the parameters ``suggest`` would
        have drawn to give them, so a baseline or an earlier search's trial can enter the
        study as a measured point. A setting the config leaves alone takes PostgreSQL's
        stock value; a number outside the knob's range is clipped to it; a special value
        picks its choice (the range part then sits mid-range); an enum value the knob does
        not offer takes the knob's first choice. OS knobs read ``settings`` under their
        names, in the knobs' units (a baseline's: the host's values as they were)."""
        specs = self.specs
        params: dict[str, Any] = {}
        for knob in self.knobs:
            if knob.is_os:
                params[knob.name] = _os_param(knob, settings.get(knob.name))
                continue
            text = str(settings.get(knob.name) or specs.default(knob.name)).strip()
            if knob.kind == "enum":
                params[knob.name] = _enum_choice(knob, text)
                continue
            base = specs.base_units(knob.name, text)
            special = _special_of(knob, base)
            if knob.specials:
                params[knob.name + SPECIAL] = special or "range"
            value = _mid(knob) if special or base is None else base * _unit_factor(
                knob, specs)
            value = min(max(value, knob.low), knob.high)
            params[knob.name] = int(round(value)) if knob.kind == "int" else float(value)
        return params

    def distributions(self) -> dict[str, Any]:
        """Optuna's distribution of every parameter ``suggest`` draws (for recording a
        measured point with ``optuna.trial.create_trial``)."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        out: dict[str, Any] = {}
        for knob in self.knobs:
            if knob.kind == "enum":
                out[knob.name] = CategoricalDistribution(list(knob.choices))
                continue
            if knob.specials:
                out[knob.name + SPECIAL] = CategoricalDistribution(["range", *knob.specials])
            out[knob.name] = (IntDistribution(int(knob.low), int(knob.high), log=knob.log)
                              if knob.kind == "int"
                              else FloatDistribution(knob.low, knob.high, log=knob.log))
        return out

    def random_start(self) -> int:
        """Random trials before TPE models the results: one per four knobs, at least three.

        TPE splits the finished trials into a good and a bad group and models each per
        parameter; it needs a few points in each group, not a grid over the space, so
        the random start grows slowly with the knobs (Optuna's default is a fixed 10).
        Measured points already in the study (baselines, seeded trials) count towards it.
        """
        return max(3, -(-len(self.knobs) // 4))

    def memory_bytes(self, settings: dict[str, str]) -> int:
        """The config engine's worst case for these settings: shared_buffers + wal_buffers +
        max_connections × work_mem × 1.5 + autovacuum workers × their memory + one
        maintenance_work_mem (a manual VACUUM or index build)."""
        return memory_bytes(settings, self.specs)


def memory_bytes(settings: dict[str, str], specs: SettingSpecs) -> int:
    plan = ConfigPlan(name="trial", inputs=None, settings=[
        Setting(group=pg_group(k), key="PG_" + k.upper(), name=k, layer="postgresql",
                apply="pg", value=v) for k, v in settings.items()])
    terms = memory_terms(plan, specs)
    # The budget's terms, plus one maintenance_work_mem (a manual VACUUM or index build).
    return terms.budgeted + terms.maintenance_work_mem


def _number(value: float, kind: str) -> str:
    return f"{int(value)}" if kind == "int" else f"{value:g}"


_ENUM_ALIASES = {"wal_compression": {"on": "pglz", "true": "pglz", "yes": "pglz", "1": "pglz",
                                     "false": "off", "no": "off", "0": "off"}}
"""Words a setting accepts for one of the knob's choices (wal_compression = on is pglz)."""


def _enum_choice(knob: Knob, text: str) -> str:
    word = text.strip("'").lower()
    word = BOOL_WORDS.get(word, word) if set(knob.choices) <= {"on", "off"} else word
    word = _ENUM_ALIASES.get(knob.name, {}).get(word, word)
    return next((c for c in knob.choices if c.lower() == word), knob.choices[0])


def _os_param(knob: Knob, text: str | None) -> Any:
    """An OS knob's parameter for a value in its units: clipped, mid-range when unknown."""
    if knob.kind == "enum":
        return _enum_choice(knob, text or "")
    try:
        value = float(str(text).removesuffix(knob.unit))
    except ValueError:
        value = _mid(knob)
    value = min(max(value, knob.low), knob.high)
    return int(round(value)) if knob.kind == "int" else value


def _special_of(knob: Knob, base: float | None) -> str | None:
    if base is None:
        return None
    return next((s for s in knob.specials if float(s) == base), None)


def _unit_factor(knob: Knob, specs: SettingSpecs) -> float:
    """The knob's unit per unit of the setting's base unit (8kB pages -> MB, s -> s)."""
    spec = specs.spec(knob.name)
    have, want = unit_scale(spec.unit if spec else None), unit_scale(knob.unit)
    if have is None or want is None:
        return 1.0
    return have[1] / want[1]


def _mid(knob: Knob) -> float:
    if knob.log and knob.low > 0:
        return math.sqrt(knob.low * knob.high)
    return (knob.low + knob.high) / 2


def _suggest(trial: Any, knob: Knob) -> str:
    if knob.kind == "enum":
        return trial.suggest_categorical(knob.name, list(knob.choices))
    mode = (trial.suggest_categorical(knob.name + SPECIAL, ["range", *knob.specials])
            if knob.specials else "range")
    if knob.kind == "int":
        value: float = trial.suggest_int(knob.name, int(knob.low), int(knob.high), log=knob.log)
        text = f"{int(value)}{knob.unit}"
    else:
        value = trial.suggest_float(knob.name, knob.low, knob.high, log=knob.log)
        text = f"{float(f'{value:.3g}'):g}{knob.unit}"
    return mode if mode != "range" else text


# ----- building the space ------------------------------------------------------------------

WRITE_KNOBS = ("shared_buffers", "work_mem", "wal_buffers", "max_wal_size", "checkpoint_timeout",
               "checkpoint_completion_target", "checkpoint_flush_after", "backend_flush_after",
               "wal_compression", "wal_writer_delay", "commit_delay", "commit_siblings",
               "bgwriter_delay", "bgwriter_lru_maxpages", "bgwriter_lru_multiplier",
               "autovacuum_naptime", "autovacuum_vacuum_scale_factor",
               "autovacuum_vacuum_cost_limit", "effective_io_concurrency", "random_page_cost")
"""Default knobs of write-heavy workloads (tpcb, tprocc): checkpoints, WAL, writeback."""
READ_KNOBS = ("shared_buffers", "work_mem", "effective_cache_size", "random_page_cost",
              "effective_io_concurrency", "jit", "max_parallel_workers_per_gather",
              "max_wal_size", "checkpoint_timeout", "wal_buffers")
"""Default knobs of read-mostly workloads: memory, planner costs, parallelism."""


def knob_table(hw: HardwareProfile, specs: SettingSpecs, *, connections: int,
               av_workers: int, fixed_bytes: dict[str, int],
               disk_free_bytes: int | None) -> dict[str, Knob]:
    """Every knob pgdyno knows how to search, bounded for this machine."""
    ram = hw.ram_bytes
    budget = ram * BUDGET_RAM_SHARE
    shared_high = fixed_bytes.get("shared_buffers", ram * SHARED_BUFFERS_SHARE)
    wal_high = fixed_bytes.get("wal_buffers", 256 * MB)
    mwm_high = fixed_bytes.get("maintenance_work_mem",
                               min(2 * GB, max(64 * MB, ram * MAINTENANCE_SHARE)))
    # The worst corner: what shared memory and maintenance leave, shared by every session.
    rest = budget - shared_high - wal_high - (av_workers + 1) * mwm_high
    work_high = fixed_bytes.get("work_mem", min(WORK_MEM_CAP, rest / (connections
                                                                      * BUDGET_WORK_MEM_FACTOR)))
    wal_disk = (disk_free_bytes or 64 * GB) * WAL_DISK_SHARE
    max_wal_high = max(2 * GB, min(64 * GB, wal_disk))
    cpus = max(1, hw.vcpus)

    def mb(n_bytes: float) -> int:
        return int(n_bytes // MB)

    def enum(name: str, wanted: tuple[str, ...], restart: bool = False, unsafe: bool = False
             ) -> Knob:
        spec = specs.spec(name)
        have = {v.lower() for v in spec.enumvals} if spec and spec.vartype == "enum" else {
            "on", "off"}
        return Knob(name, "enum", choices=tuple(v for v in wanted if v in have),
                    restart=restart, group=pg_group(name), unsafe=unsafe)

    def num(name: str, kind: str, low: float, high: float, *, log: bool = False, unit: str = "",
            specials: tuple[str, ...] = ()) -> Knob:
        spec = specs.spec(name)
        return Knob(name, kind, low, max(low, high), log, unit, specials=specials,
                    restart=bool(spec and spec.context == "postmaster"), group=pg_group(name))

    knobs = [
        num("shared_buffers", "int", 32, mb(shared_high), log=True, unit="MB"),
        num("work_mem", "int", 1, max(1, mb(work_high)), log=True, unit="MB"),
        num("maintenance_work_mem", "int", 16, max(16, mb(mwm_high)), log=True, unit="MB"),
        num("wal_buffers", "int", 1, mb(wal_high), log=True, unit="MB", specials=("-1",)),
        num("effective_cache_size", "int", mb(ram / 8), mb(ram * 0.9), log=True, unit="MB"),
        num("max_wal_size", "int", 1024, mb(max_wal_high), log=True, unit="MB"),
        num("checkpoint_timeout", "int", 30, 3600, log=True, unit="s"),
        num("checkpoint_completion_target", "real", 0.5, 0.95),
        # 8 kB pages: 64 kB .. 2 MB of writeback before the kernel is asked to flush.
        num("checkpoint_flush_after", "int", 8, 256, log=True, specials=("0",)),
        num("backend_flush_after", "int", 8, 256, log=True, specials=("0",)),
        enum("wal_compression", ("off", "pglz", "lz4", "zstd")),
        num("wal_writer_delay", "int", 1, 1000, log=True, unit="ms"),
        num("commit_delay", "int", 10, 1000, log=True, specials=("0",)),
        num("commit_siblings", "int", 1, 20),
        num("bgwriter_delay", "int", 10, 2000, log=True, unit="ms"),
        num("bgwriter_lru_maxpages", "int", 10, 2000, log=True, specials=("0",)),
        num("bgwriter_lru_multiplier", "real", 0.5, 10.0, log=True),
        num("autovacuum_naptime", "int", 1, 300, log=True, unit="s"),
        num("autovacuum_vacuum_scale_factor", "real", 0.005, 0.4, log=True),
        num("autovacuum_vacuum_cost_limit", "int", 100, 10000, log=True, specials=("-1",)),
        num("effective_io_concurrency", "int", 1, 1000, log=True, specials=("0",)),
        num("random_page_cost", "real", 1.0, 4.0),
        enum("jit", ("on", "off")),
        num("max_parallel_workers_per_gather", "int", 0, cpus),
        enum("io_method", ("sync", "worker", "io_uring"), restart=True),
        enum("synchronous_commit", ("on", "off", "local"), unsafe=True),
        enum("full_page_writes", ("on", "off"), unsafe=True),
        enum("fsync", ("on", "off"), unsafe=True),
        enum("wal_level", ("replica", "minimal"), restart=True, unsafe=True),
    ]
    return {k.name: k for k in knobs if k.name in specs}


def build_space(hw: HardwareProfile, specs: SettingSpecs, *, clients: int,
                write_heavy: bool, knobs: list[str] | None = None,
                fixes: list[str] = (), allow_unsafe: bool = False,
                disk_free_bytes: int | None = None,
                os_table: dict[str, Knob] | None = None,
                os_notes: list[str] = ()) -> SearchSpace:
    """The space for a workload on a machine; ``knobs`` narrows it (names, or ``all``),
    ``fixes`` pins settings (``key=value``, validated against the specs). ``os_table``:
    the OS knobs this host offers (``--allow-os-changes``; None: no OS knob), added to the
    workload's default knobs, searchable by name; ``os_notes``: those it cannot offer."""
    fixed = _parse_fixes(fixes, specs, allow_unsafe)
    room = connection_room(clients, specs)
    fixed.setdefault("max_connections", str(room.needed))
    fixed_bytes = {name: b for name in ("shared_buffers", "work_mem", "wal_buffers",
                                        "maintenance_work_mem")
                   if name in fixed and (b := specs.to_bytes(name, fixed[name])) is not None}
    conns = int(fixed["max_connections"]) if fixed["max_connections"].isdigit() else room.needed
    av_workers = int(fixed.get("autovacuum_max_workers")
                     or specs.default("autovacuum_max_workers") or 3)
    table = knob_table(hw, specs, connections=conns, av_workers=av_workers,
                       fixed_bytes=fixed_bytes, disk_free_bytes=disk_free_bytes)
    if os_table is not None:
        table = {n: k for n, k in table.items() if n not in os_table} | os_table
    names = _knob_names(knobs, table, write_heavy, allow_unsafe)
    if os_table is not None and not knobs:
        names += [n for n in os_table if n not in names]
    chosen = [table[n] for n in names if n not in fixed]
    space = SearchSpace(knobs=chosen, fixed=fixed, pg_major=specs.major,
                        ram_bytes=hw.ram_bytes, budget_bytes=int(hw.ram_bytes * BUDGET_RAM_SHARE),
                        allow_unsafe=allow_unsafe, allow_os_changes=os_table is not None,
                        notes=list(os_notes) if os_table is not None else [])
    worst = space.memory_bytes(worst_corner(space))
    if worst > space.budget_bytes:
        space.notes.append(
            f"the pinned values alone need {worst / GB:.1f} GiB at worst, more than the "
            f"{space.budget_bytes / GB:.1f} GiB budget: trials may be refused or fail")
    return space


def worst_corner(space: SearchSpace) -> dict[str, str]:
    """The settings with every memory knob at its highest: what the budget must hold."""
    settings = {}
    for knob in space.knobs:
        if knob.kind == "int" and knob.unit == "MB" and not knob.is_os:
            settings[knob.name] = f"{int(knob.high)}MB"
    settings.update(space.fixed)
    return settings


def _knob_names(knobs: list[str] | None, table: dict[str, Knob], write_heavy: bool,
                allow_unsafe: bool) -> list[str]:
    accepted = ", ".join(table) + ", all"
    if not knobs:
        names = list(WRITE_KNOBS if write_heavy else READ_KNOBS)
        if allow_unsafe:
            names += [n for n in UNSAFE if n in table]
        return [n for n in names if n in table]
    if knobs == ["all"]:
        return [n for n, k in table.items() if allow_unsafe or not k.unsafe]
    for name in knobs:
        if name in OS_KNOBS and name not in table:
            raise UsageError(f"--knobs {name}: an OS setting; accepted only with "
                             "--allow-os-changes (root), on a host that offers it")
        if name not in table:
            raise UsageError(f"--knobs {name}: not a setting the search knows; accepted: "
                             f"{accepted}")
        if table[name].unsafe and not allow_unsafe:
            raise UsageError(f"--knobs {name}: a durability setting; accepted only with "
                             "--allow-unsafe")
    return list(dict.fromkeys(knobs))


def _parse_fixes(fixes: list[str], specs: SettingSpecs,
                 allow_unsafe: bool) -> dict[str, str]:
    fixed: dict[str, str] = {}
    for item in fixes:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise UsageError(f"--fix {item}: expected key=value, e.g. --fix shared_buffers=4GB")
        if key in UNSAFE and not allow_unsafe:
            raise UsageError(f"--fix {key}: a durability setting; accepted only with "
                             "--allow-unsafe")
        fixed[key] = specs.check(key, value.strip(), f"--fix {key}")
    return fixed

