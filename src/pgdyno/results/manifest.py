"""The run record: the options of a run and its manifest, typed and versioned.

``manifest.json`` is a ``Manifest`` written through ``pgdyno.serde``: the bench options are
embedded once (``options``), the run's role (baseline, candidate, campaign cell) is written
when the run starts, and every reader goes through ``load_manifest``, which refuses a file
of a schema version it does not know with one line instead of misreading it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.targets import TargetSpec

MANIFEST_SCHEMA_VERSION = 2
"""2: typed options embedded once, the role, the workload and context at the top."""


@dataclass(frozen=True)
class NoOptions:
    """For workloads without options of their own."""


@dataclass(frozen=True)
class BenchOptions:
    """One ``pgdyno bench`` run: what every workload shares, and the workload's own options.

    Built and validated by ``pgdyno.runner.options.build_options``; serialised once, into
    the run's manifest (the DSN, which may hold a password, never)."""

    workload: str
    clients: tuple[int, ...]
    """Client counts (a sweep); for a program workload such as cpu, its threads."""
    threads: int | None
    duration_s: int
    warmup_s: int
    iterations: int
    workload_options: Any = field(default_factory=NoOptions)
    """The workload's own frozen options dataclass (its plugin's ``options_type``)."""
    protocol: str = "prepared"
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
    show_progress: bool = field(default=True, metadata={"serialise": False})

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


@dataclass
class TargetInfo:
    kind: str
    pg_bin: str | None = None
    pgbench_version: str | None = None
    wal_dir: str | None = None


@dataclass
class ToolInfo:
    name: str
    version: str


@dataclass
class Manifest:
    """``manifest.json``: environment, settings, commands and status of one run."""

    schema_version: int
    tool: ToolInfo
    workload: str
    context: str
    status: str
    started_at: str
    options: BenchOptions
    host: dict[str, Any]
    ended_at: str | None = None
    reason: str = ""
    role: dict[str, Any] = field(default_factory=dict)
    """Why the run exists: {"compare_side": "A", ...}, {"campaign": ..., "cell": ...}."""
    target: TargetInfo | None = None
    """None for workloads that need no server."""
    config: dict[str, Any] = field(default_factory=dict)
    """The config record: name, pg_settings, sources (rationale per setting)."""
    server: dict[str, Any] | None = None
    connection: str | None = None
    commands: list[str] = field(default_factory=list)
    dataset: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    config_rollback: dict[str, Any] | None = None

    @property
    def config_name(self) -> str:
        return str(self.config.get("name", "default"))


def manifest_to_dict(manifest: Manifest) -> dict[str, Any]:
    return serde.to_dict(manifest)


def manifest_from_dict(data: Any, source: Path | str = "manifest.json") -> Manifest:
    """A Manifest from its JSON; workload options stay a plain dict here (the workload
    registry, above this layer, turns them into the plugin's dataclass)."""
    return from_versioned(Manifest, data, MANIFEST_SCHEMA_VERSION, source, "run manifest",
                          "; rerun the benchmark with this version")


def read_json_file(path: Path, what: str) -> Any:
    """One JSON file of a run, or one line saying why it cannot be read."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; not a complete pgdyno {what}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        detail = " ".join(str(exc).split())
        raise UsageError(f"{path}: cannot read the {what} ({detail})") from None


T = TypeVar("T")


def from_versioned(cls: type[T], data: Any, version: int, source: Path | str, what: str,
                   advice: str = "") -> T:
    """``cls`` from a file's JSON, refused in one line when it is not an object, carries
    another ``schema_version`` or does not fit the dataclass (a damaged file)."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: not a pgdyno {what.split()[-1]} "
                         "(expected a JSON object)")
    found = data.get("schema_version")
    if found != version:
        raise UsageError(f"{source}: {what} schema_version {found!r} is not supported "
                         f"(this pgdyno reads {version}){advice}")
    try:
        return serde.from_dict(cls, data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{source}: damaged {what} ({type(exc).__name__}: {exc}){advice}") \
            from None


def read_versioned(cls: type[T], path: Path, version: int, what: str, advice: str = "") -> T:
    """``from_versioned`` of the JSON file at ``path``."""
    return from_versioned(cls, read_json_file(path, what), version, path, what, advice)


def load_manifest(run_dir: Path) -> Manifest:
    path = Path(run_dir) / "manifest.json"
    return manifest_from_dict(read_json_file(path, "run manifest"), path)
