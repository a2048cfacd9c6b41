"""Validated, frozen options for ``pgdyno bench`` and the parsers that build them.

Each parser raises ``UsageError`` with one line naming the option, the bad value and
what is accepted; the CLI does nothing but call them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.targets import TargetSpec

BUILTIN_WORKLOADS = {"tpcb": "tpcb-like", "simple-update": "simple-update",
                     "select-only": "select-only"}
SCRIPT_WORKLOAD = "custom"
TPROCC_WORKLOAD = "tprocc"
PROTOCOLS = ("simple", "extended", "prepared")
CACHE_MODES = ("warm", "cold")
VIA = ("socket", "tcp")
# pgbench's accounts table with its index takes about 15 MB per scale unit
# (100,000 rows of 100-byte tuples plus a btree); measured on PG 18 at scale 10.
BYTES_PER_SCALE = 15_700_000
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class ScriptSpec:
    """A pgbench script: a built-in name or a file, with its weight in the mix."""

    name: str
    weight: int = 1
    path: Path | None = None
    builtin: str | None = None

    def pgbench_args(self) -> list[str]:
        if self.builtin:
            return ["-b", f"{self.builtin}@{self.weight}"]
        return ["-f", f"{self.path}@{self.weight}"]


@dataclass(frozen=True)
class TproccOptions:
    """TPROC-C's own options (``pgdyno bench tprocc``)."""

    warehouses: int
    mix: str | None = None
    """New-Order,Payment,Order-Status,Delivery,Stock-Level shares, e.g. 45,43,4,4,4."""
    all_warehouses: bool = False
    keying_thinking: bool = False
    time_scale: float = 1.0
    """Multiplies keying and think times (compliant mode); 1 is the specification's."""
    load_workers: int | None = None


@dataclass(frozen=True)
class BenchOptions:
    workload: str
    scripts: tuple[ScriptSpec, ...]
    scale: int
    clients: tuple[int, ...]
    threads: int | None
    duration_s: int
    warmup_s: int
    iterations: int
    protocol: str = "simple"
    rate_tps: float | None = None
    latency_limit_ms: float | None = None
    max_tries: int = 1
    cache: str = "warm"
    via: str = "socket"
    force: bool = False
    results_dir: Path = Path("results")
    context: str | None = None
    target: TargetSpec = field(default_factory=TargetSpec)
    config: str = "default"
    sets: tuple[str, ...] = ()
    telemetry: bool = True
    show_progress: bool = True
    tprocc: TproccOptions | None = None

    def threads_for(self, clients: int) -> int:
        """pgbench -j: one thread per core, never more than clients (pgbench requires it)."""
        if self.threads:
            return min(self.threads, clients)
        return max(1, min(clients, os.cpu_count() or 1))

    @property
    def has_lag_column(self) -> bool:
        return self.rate_tps is not None

    @property
    def has_retries_column(self) -> bool:
        return self.max_tries != 1


def parse_workload(name: str, scripts: list[str]) -> tuple[str, tuple[ScriptSpec, ...]]:
    accepted = ", ".join([*BUILTIN_WORKLOADS, TPROCC_WORKLOAD, SCRIPT_WORKLOAD])
    if name == TPROCC_WORKLOAD:
        if scripts:
            raise UsageError("--script cannot be combined with tprocc; use --mix")
        return name, ()
    if name not in BUILTIN_WORKLOADS and name != SCRIPT_WORKLOAD:
        raise UsageError(f"workload {name!r} is unknown; accepted: {accepted}")
    specs = [parse_script(s) for s in scripts]
    if name == SCRIPT_WORKLOAD and not specs:
        raise UsageError("workload custom needs at least one --script FILE[@WEIGHT]")
    if name in BUILTIN_WORKLOADS:
        specs.insert(0, ScriptSpec(name=name, builtin=BUILTIN_WORKLOADS[name]))
    return name, tuple(specs)


def parse_script(text: str) -> ScriptSpec:
    path_text, weight = text, 1
    if "@" in text:
        path_text, _, weight_text = text.rpartition("@")
        if not weight_text.isdigit() or int(weight_text) < 1:
            raise UsageError(f"--script {text}: weight {weight_text!r} is not a positive "
                             "integer; expected FILE[@WEIGHT], e.g. my.sql@3")
        weight = int(weight_text)
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"--script {text}: file {path_text} does not exist; "
                         "expected FILE[@WEIGHT] naming a pgbench script")
    try:
        body = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--script {text}: cannot read {path_text} ({exc})") from exc
    if not any(line.strip() and not line.strip().startswith("--") for line in body.splitlines()):
        raise UsageError(f"--script {text}: {path_text} holds no SQL or meta-command")
    return ScriptSpec(name=path.stem, weight=weight, path=path.absolute())


def parse_clients(text: str) -> tuple[int, ...]:
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part.lstrip("-").isdigit() or int(part) <= 0:
            raise UsageError(f"--clients {text}: {part!r} is not a positive integer; "
                             "expected a comma-separated list such as 4,16,100")
        values.append(int(part))
    return tuple(values)


def parse_size(text: str, option: str) -> int:
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{option} {text}: expected a size such as 500MB, 3GB or 1.5GiB")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.lower()[:1]])


def scale_for_size(size_bytes: int) -> int:
    return max(1, round(size_bytes / BYTES_PER_SCALE))


def check_positive(value: float | None, option: str, allow_zero: bool = False) -> None:
    if value is None:
        return
    if value < 0 or (value == 0 and not allow_zero):
        accepted = "zero or more" if allow_zero else "more than zero"
        raise UsageError(f"{option} {value:g}: must be {accepted}")


def check_choice(value: str, option: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise UsageError(f"{option} {value}: accepted values are {', '.join(accepted)}")
