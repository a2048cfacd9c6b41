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
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.results.manifest import BenchOptions
from pgdyno.runner.options import build_options, defaults

CAMPAIGN_KEYS = {"name", "context", "results_dir", "hardware", "workloads", "clients", "repeat"}
CONFIG_KEYS = {"label", "config", "set"}
# Options a campaign decides itself, per cell.
CELL_OWNED = {"workload", "clients", "config", "set_", "set", "context", "results_dir",
              "progress"}


@dataclass(frozen=True)
class ConfigEntry:
    label: str
    config: str = "default"
    sets: tuple[str, ...] = ()


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

    def cells(self) -> list[Cell]:
        """Interleaved: repetition-major; configs reversed every other repetition (ABBA)."""
        out = []
        for rep in range(1, self.repeat + 1):
            configs = self.configs if rep % 2 == 1 else list(reversed(self.configs))
            for workload in self.workloads:
                out += [Cell(rep, workload, c) for c in configs]
        return out

    @property
    def journal_dir(self) -> Path:
        return self.results_dir / "campaigns" / self.name

    def options_for(self, cell: Cell, show_progress: bool = False) -> BenchOptions:
        kw: dict[str, Any] = {}
        kw.update({k.replace("-", "_"): v for k, v in self.bench.items()})
        kw.update(workload=cell.workload, clients=",".join(str(c) for c in self.clients),
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


def load_spec(path: Path, results_dir: Path | None = None) -> CampaignSpec:
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"campaign {path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        detail = " ".join(str(exc).split())
        raise UsageError(f"campaign {path}: not valid TOML ({detail})") from None
    unknown = set(data) - {"campaign", "bench", "config"}
    if unknown:
        raise UsageError(f"campaign {path}: unknown table(s) {', '.join(sorted(unknown))}; "
                         "accepted: [campaign], [bench], [[config]]")
    camp = data.get("campaign", {})
    bad = set(camp) - CAMPAIGN_KEYS
    if bad:
        raise UsageError(f"campaign {path}: [campaign] {', '.join(sorted(bad))} unknown; "
                         f"accepted: {', '.join(sorted(CAMPAIGN_KEYS))}")
    bench = data.get("bench", {})
    allowed = set(bench_defaults()) - CELL_OWNED
    bad = {k for k in bench if k.replace("-", "_") not in allowed}
    if bad:
        raise UsageError(f"campaign {path}: [bench] {', '.join(sorted(bad))} not accepted; "
                         "workload, clients, config, set, context and results_dir belong to "
                         "[campaign] or [[config]]")
    configs = [_config(c, path) for c in data.get("config", [{"label": "default"}])]
    labels = [c.label for c in configs]
    if len(set(labels)) != len(labels):
        raise UsageError(f"campaign {path}: config labels must be unique ({', '.join(labels)})")
    workloads = _str_list(camp.get("workloads", ["tpcb"]), "workloads", path)
    clients = camp.get("clients", [8])
    if isinstance(clients, int):
        clients = [clients]
    if not clients or not all(isinstance(c, int) and c > 0 for c in clients):
        raise UsageError(f"campaign {path}: clients = {clients!r}; expected positive integers")
    repeat = camp.get("repeat", 1)
    if not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"campaign {path}: repeat = {repeat!r}; expected an integer >= 1")
    name = str(camp.get("name") or Path(path).stem)
    spec = CampaignSpec(
        name=name, path=Path(path), workloads=workloads, clients=list(clients), repeat=repeat,
        configs=configs, bench=dict(bench), context=camp.get("context"),
        results_dir=Path(results_dir or camp.get("results_dir", "results")),
        hardware=camp.get("hardware"))
    for cell in spec.cells()[:len(configs) * len(workloads)]:
        spec.options_for(cell)  # validate every option before the first run starts
    return spec


def _config(entry: dict[str, Any], path: Path) -> ConfigEntry:
    bad = set(entry) - CONFIG_KEYS
    if bad:
        raise UsageError(f"campaign {path}: [[config]] {', '.join(sorted(bad))} unknown; "
                         f"accepted: {', '.join(sorted(CONFIG_KEYS))}")
    config = str(entry.get("config", "default"))
    label = str(entry.get("label") or config)
    sets = tuple(_str_list(entry.get("set", []), "set", path))
    return ConfigEntry(label=label, config=config, sets=sets)


def _str_list(value: Any, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"campaign {path}: {key} = {value!r}; expected a list of strings")
    return list(value)
