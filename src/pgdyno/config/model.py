"""The data a configuration is made of: settings on three layers, grouped as reports show them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pgdyno.config.hardware import HardwareProfile
from pgdyno.serde import Serialisable

# (group id, title) in the order of a full configuration matrix.
GROUPS: tuple[tuple[str, str], ...] = (
    ("instance", "Instance Specs"),
    ("os_memory", "OS Tuning - Memory"),
    ("os_files", "OS Tuning - File Descriptors"),
    ("os_network", "OS Tuning - Network/TCP"),
    ("os_scheduler", "OS Tuning - Scheduler"),
    ("raid_data", "RAID Config - DATA Volume"),
    ("raid_wal", "RAID Config - WAL Volume"),
    ("xfs", "XFS Options"),
    ("block_data", "Block Device Tuning - DATA"),
    ("block_wal", "Block Device Tuning - WAL"),
    ("md", "MDADM Tuning"),
    ("pg_paths", "PostgreSQL - Paths"),
    ("pg_memory", "PostgreSQL - Memory"),
    ("pg_io", "PostgreSQL - Disk I/O"),
    ("pg_wal", "PostgreSQL - WAL"),
    ("pg_checkpoint", "PostgreSQL - Checkpoint"),
    ("pg_commit", "PostgreSQL - Sync & Group Commit"),
    ("pg_bgwriter", "PostgreSQL - Background Writer"),
    ("pg_autovacuum", "PostgreSQL - Autovacuum"),
    ("pg_parallel", "PostgreSQL - Parallel Query"),
    ("pg_planner", "PostgreSQL - Planner"),
    ("pg_logging", "PostgreSQL - Logging"),
    ("pg_other", "PostgreSQL - Other"),
    ("benchmark", "Benchmark Config"),
)
GROUP_TITLES = dict(GROUPS)

# Where a PostgreSQL setting is shown when a user file or --set adds it.
PG_GROUP_OF: dict[str, str] = {
    **dict.fromkeys(("max_connections", "shared_buffers", "huge_pages", "work_mem",
                     "maintenance_work_mem", "effective_cache_size", "autovacuum_work_mem",
                     "temp_buffers", "huge_page_size"), "pg_memory"),
    **dict.fromkeys(("random_page_cost", "seq_page_cost", "effective_io_concurrency",
                     "maintenance_io_concurrency", "io_method", "io_workers",
                     "io_combine_limit"), "pg_io"),
    **dict.fromkeys(("wal_compression", "wal_buffers", "wal_writer_delay",
                     "wal_writer_flush_after", "wal_level", "max_wal_senders",
                     "full_page_writes", "wal_sync_method"), "pg_wal"),
    **dict.fromkeys(("max_wal_size", "min_wal_size", "checkpoint_timeout",
                     "checkpoint_completion_target", "checkpoint_flush_after"), "pg_checkpoint"),
    **dict.fromkeys(("synchronous_commit", "commit_delay", "commit_siblings", "fsync"),
                    "pg_commit"),
    **dict.fromkeys(("bgwriter_delay", "bgwriter_lru_maxpages", "bgwriter_lru_multiplier",
                     "bgwriter_flush_after"), "pg_bgwriter"),
    **dict.fromkeys(("max_worker_processes", "max_parallel_workers",
                     "max_parallel_workers_per_gather", "max_parallel_maintenance_workers",
                     "jit"), "pg_parallel"),
    **dict.fromkeys(("default_statistics_target",), "pg_planner"),
}


def pg_group(name: str) -> str:
    if name in PG_GROUP_OF:
        return PG_GROUP_OF[name]
    if name.startswith(("autovacuum", "vacuum")):
        return "pg_autovacuum"
    if name.startswith("log_"):
        return "pg_logging"
    return "pg_other"


@dataclass
class Setting:
    """One setting of a configuration, with where its value came from and why."""

    group: str
    key: str
    """The name in seed-002 .env style: PG_SHARED_BUFFERS, VM_SWAPPINESS, DATA_SCHEDULER."""
    name: str
    """The native name: shared_buffers, vm.swappiness, scheduler (of the data device)."""
    layer: str
    """postgresql, os, storage, instance or benchmark."""
    apply: str
    """How it is applied: pg, sysctl, sysfs, limits, mount, mkfs, mdadm, info."""
    value: str
    """The value as people write it (6GB, 0.9, none); PostgreSQL values unquoted."""
    default: str = ""
    """The stock value (PostgreSQL boot value, kernel default, or the device's current one)."""
    rationale: str = ""
    """One line naming the input the value came from."""
    source: str = ""
    """pgtune, tuned, hardware, a user file, --set."""


@dataclass
class TuneInputs(Serialisable):
    """Everything a rule may look at."""

    hardware: HardwareProfile
    workload: str
    db_type: str
    """pgtune's database type: web, oltp, dw, desktop, mixed."""
    write_heavy: bool
    pg_major: int
    connections: int | None = None
    dataset_bytes: int | None = None
    advisor: Any = field(default=None, compare=False, metadata={"serialise": False})
    """The workloads' advice and dataset units (``sizing.WorkloadAdvice``; the workload
    registry's): the tuned matrix's benchmark group. Not saved with the plan's inputs."""


@dataclass
class SizingLine:
    """One computed figure of the sizing math, with the formula that produced it."""

    section: str
    label: str
    formula: str
    value: str
    ok: bool | None = None
    """For checks (budget fits, pages reserved): True, False; None for plain figures."""


@dataclass
class ConfigPlan(Serialisable):
    """A named configuration: its settings, the sizing behind them and what was checked."""

    name: str
    inputs: TuneInputs | None
    settings: list[Setting] = field(default_factory=list)
    sizing: list[SizingLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    catalogue: str = ""
    """Where the setting specs that validated the PostgreSQL values came from (the field keeps
    its first name: run manifests store it)."""

    def pg(self) -> list[Setting]:
        return [s for s in self.settings if s.apply == "pg"]

    def get(self, name: str) -> Setting | None:
        return next((s for s in self.settings if s.name == name and s.apply == "pg"), None)

    def set(self, setting: Setting) -> None:
        """Add or replace (by layer and native name)."""
        for i, old in enumerate(self.settings):
            same = (old.name, old.apply, old.group) == (setting.name, setting.apply, setting.group)
            if same:
                self.settings[i] = setting
                return
        self.settings.append(setting)
