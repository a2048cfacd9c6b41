"""The sizing math behind a configuration: memory budget, cache share, huge pages, I/O, CPU.

Computed from the settings of any plan (pgtune's, pgdyno's or a user's), so the same
checks explain and guard every config. Each figure keeps the formula it came from.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pgdyno.config.model import ConfigPlan, SizingLine, TuneInputs
from pgdyno.config.setting_specs import SettingSpecs
from pgdyno.config.units import MB, human_bytes

BUDGET_WORK_MEM_FACTOR = 1.5
"""Sessions use about 1.5 x work_mem on average at peak (several sort/hash nodes, not all busy)."""
BUDGET_RAM_SHARE = 0.90
"""The rest is the kernel's, page tables and the OS page cache's floor."""
BASE_CONNECTIONS = 300
"""max_connections of a pgdyno-managed server when the config does not set it."""


# ----- what the workloads tell the config engine ------------------------------------------

@dataclass(frozen=True)
class AdviceInputs:
    """What a workload's benchmark advice may look at: the machine and the config's room."""

    vcpus: int
    ram_bytes: int
    dataset_bytes: int | None
    """--dataset-size, when given."""
    max_connections: int
    pgdyno_sessions: int
    reserved_slots: int

    @property
    def client_room(self) -> int:
        """Connections left for a benchmark's clients."""
        return self.max_connections - self.pgdyno_sessions - self.reserved_slots


@dataclass(frozen=True)
class Advice:
    """One line of the tuned matrix's benchmark group: how to run a workload on this
    machine (``PGBENCH_SCALE=1200``, with why)."""

    key: str
    value: object
    why: str


class WorkloadAdvice(Protocol):
    """The installed workloads' advice, which the caller hands the config engine in
    ``TuneInputs.advisor`` (``pgdyno.workloads.registry.ADVICE``): the engine knows no
    workload itself."""

    def advice(self, inputs: AdviceInputs) -> list[Advice]:
        """The tuned matrix's benchmark group."""
        ...

    def dataset_lines(self, dataset_bytes: int) -> list[SizingLine]:
        """Sizing lines of a --dataset-size in the workloads' own units ("pgbench scale of
        that size")."""
        ...


def setting_bytes(plan: ConfigPlan, specs: SettingSpecs, name: str) -> int:
    """A memory setting of the plan in bytes, the stock default when the plan leaves it."""
    setting = plan.get(name)
    spec = specs.spec(name)
    if setting is not None:
        value = specs.to_bytes(name, setting.value)
        if value is not None:
            return value
    if spec is not None and spec.boot_val is not None:
        value = specs.to_bytes(name, spec.default_text())
        if value is not None:
            return value
    return 0


def setting_int(plan: ConfigPlan, specs: SettingSpecs, name: str, fallback: int) -> int:
    setting = plan.get(name)
    text = setting.value if setting is not None else specs.default(name)
    try:
        return int(float(text))
    except ValueError:
        return fallback


def max_connections(plan: ConfigPlan, specs: SettingSpecs) -> int:
    setting = plan.get("max_connections")
    return int(setting.value) if setting is not None else BASE_CONNECTIONS


PGDYNO_SESSIONS = 15
"""Connections pgdyno opens beside a benchmark's clients on the server under test: the
telemetry sampler, snapshots, load workers; the runner refuses a --dsn server without
room for them too."""
RESERVED_SLOT_SETTINGS = ("superuser_reserved_connections", "reserved_connections")
"""Slots PostgreSQL keeps out of max_connections for privileged roles: it refuses to start
unless max_connections exceeds their sum."""


@dataclass(frozen=True)
class ConnectionRoom:
    """The max_connections a benchmark needs: its clients, pgdyno's sessions, reserved slots."""

    clients: int
    reserved: tuple[tuple[str, int], ...]
    """(setting, value) of each reserved-slot setting the target version has."""
    sessions: int = PGDYNO_SESSIONS

    @property
    def reserved_total(self) -> int:
        return sum(value for _name, value in self.reserved)

    @property
    def needed(self) -> int:
        return self.clients + self.sessions + self.reserved_total

    def arithmetic(self) -> str:
        """The sum spelt out, for rationales: '2 clients + 15 pgdyno sessions + 3 reserved ...'."""
        parts = " + ".join(f"{name} {value}" for name, value in self.reserved)
        clients = f"{self.clients} client{'' if self.clients == 1 else 's'}"
        return (f"{clients} + {self.sessions} pgdyno sessions (telemetry, snapshots, load "
                f"workers) + {self.reserved_total} reserved slots ({parts}) = {self.needed}")


def connection_room(clients: int, specs: SettingSpecs,
                    plan: ConfigPlan | None = None) -> ConnectionRoom:
    """The room for ``clients``, with the reserved slots the plan sets or the version's defaults.

    A value that does not parse counts as the default: validation reports it on its own.
    """
    reserved = []
    for name in RESERVED_SLOT_SETTINGS:
        if name not in specs:
            continue  # reserved_connections is new in PostgreSQL 16
        setting = plan.get(name) if plan is not None else None
        text = setting.value if setting is not None else specs.default(name)
        try:
            value = int(text.strip().strip("'"))
        except ValueError:
            value = int(specs.default(name) or 0)
        reserved.append((name, value))
    return ConnectionRoom(clients=max(0, clients), reserved=tuple(reserved))


def wal_buffers_bytes(plan: ConfigPlan, specs: SettingSpecs, shared: int) -> int:
    setting = plan.get("wal_buffers")
    if setting is not None and setting.value.strip() not in ("-1", ""):
        return specs.to_bytes("wal_buffers", setting.value) or 0
    return max(64 * 1024, min(shared // 32, 16 * MB))  # PostgreSQL's automatic wal_buffers


def estimate_shared_memory(shared: int, connections: int, wal_buffers: int) -> int:
    """PostgreSQL's shared memory segment, fitted on PostgreSQL 18's own answers.

    shared_buffers plus its descriptors and other per-buffer arrays (~2.6%), the WAL buffers,
    ~43 MB of fixed structures and ~80 kB per connection slot.
    """
    return int(shared * 1.0264 + wal_buffers + 43 * MB + connections * 80 * 1024)


def huge_pages_needed(shared_memory: int, page_kb: int) -> int:
    return math.ceil(shared_memory / (page_kb * 1024))


def ask_postgres_huge_pages(postgres: str, data_dir: Path, pg_settings: dict[str, str],
                            popen_kwargs: dict | None = None,
                            env: dict[str, str] | None = None) -> int | None:
    """``postgres -C shared_memory_size_in_huge_pages`` for these settings (PostgreSQL 15+).

    Needs an initialised, stopped cluster the calling user may read; None when PostgreSQL
    cannot answer (older version, running server, no permission).
    """
    cmd = [postgres, "-D", str(data_dir), "-C", "shared_memory_size_in_huge_pages"]
    for key in ("shared_buffers", "max_connections", "wal_buffers", "max_worker_processes",
                "autovacuum_max_workers", "max_wal_senders", "max_prepared_transactions",
                "max_locks_per_transaction"):
        if key in pg_settings:
            cmd += ["-c", f"{key}={pg_settings[key].strip(chr(39))}"]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60,
                                cwd="/", env=env, **(popen_kwargs or {}))
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = result.stdout.strip()
    if result.returncode != 0 or not text.lstrip("-").isdigit() or int(text) < 0:
        return None
    return int(text)


@dataclass(frozen=True)
class MemoryTerms:
    """A config's memory, term by term, as the budget counts it (bytes)."""

    shared: int
    wal_buffers: int
    connections: int
    work_mem: int
    maintenance_work_mem: int
    autovacuum_workers: int
    autovacuum_mem: int
    """autovacuum_work_mem, or maintenance_work_mem when it is -1."""

    @property
    def sessions(self) -> int:
        return int(self.connections * self.work_mem * BUDGET_WORK_MEM_FACTOR)

    @property
    def vacuum(self) -> int:
        return self.autovacuum_workers * self.autovacuum_mem

    @property
    def budgeted(self) -> int:
        """shared_buffers + wal_buffers + sessions + autovacuum: the budget's total."""
        return self.shared + self.wal_buffers + self.sessions + self.vacuum


def memory_terms(plan: ConfigPlan, specs: SettingSpecs) -> MemoryTerms:
    shared = setting_bytes(plan, specs, "shared_buffers")
    mwm = setting_bytes(plan, specs, "maintenance_work_mem")
    av_mem = setting_bytes(plan, specs, "autovacuum_work_mem")
    return MemoryTerms(
        shared=shared, wal_buffers=wal_buffers_bytes(plan, specs, shared),
        connections=max_connections(plan, specs),
        work_mem=setting_bytes(plan, specs, "work_mem"), maintenance_work_mem=mwm,
        autovacuum_workers=setting_int(plan, specs, "autovacuum_max_workers", 3),
        autovacuum_mem=mwm if av_mem <= 0 else av_mem)


def compute_sizing(plan: ConfigPlan, inputs: TuneInputs, specs: SettingSpecs,
                   server_huge_pages: int | None = None) -> list[SizingLine]:
    hw = inputs.hardware
    lines: list[SizingLine] = []
    ram = hw.ram_bytes
    terms = memory_terms(plan, specs)
    shared, work_mem, conns = terms.shared, terms.work_mem, terms.connections
    av_workers, av_mem, wal_buf = terms.autovacuum_workers, terms.autovacuum_mem, \
        terms.wal_buffers

    # Memory budget
    sessions, vacuum, total = terms.sessions, terms.vacuum, terms.budgeted
    limit = int(ram * BUDGET_RAM_SHARE)
    lines += [
        SizingLine("memory", "RAM for the database", hw.ram_source or hw.limits_source or hw.source,
                   human_bytes(ram)),
        SizingLine("memory", "shared_buffers", "setting", f"{human_bytes(shared)} "
                   f"({100 * shared / ram:.0f}% of RAM)"),
        SizingLine("memory", "sessions", f"{conns} connections x work_mem {human_bytes(work_mem)}"
                   f" x {BUDGET_WORK_MEM_FACTOR}", human_bytes(sessions)),
        SizingLine("memory", "autovacuum", f"{av_workers} workers x {human_bytes(av_mem)}",
                   human_bytes(vacuum)),
        SizingLine("memory", "budget", f"shared_buffers + wal_buffers + sessions + autovacuum <= "
                   f"{BUDGET_RAM_SHARE:.0%} of RAM ({human_bytes(limit)})",
                   f"{human_bytes(total)} ({100 * total / ram:.0f}% of RAM)", ok=total <= limit),
    ]

    # Dataset vs cache
    ecs = setting_bytes(plan, specs, "effective_cache_size")
    if inputs.dataset_bytes:
        data = inputs.dataset_bytes
        lines += [
            SizingLine("cache", "dataset", "--dataset-size", human_bytes(data)),
            SizingLine("cache", "in shared_buffers", "min(1, shared_buffers / dataset)",
                       f"{min(100.0, 100 * shared / data):.0f}%"),
            SizingLine("cache", "in RAM (shared_buffers + page cache)",
                       "min(1, effective_cache_size / dataset)",
                       f"{min(100.0, 100 * ecs / data):.0f}%"),
        ]
        if inputs.advisor is not None:
            lines += inputs.advisor.dataset_lines(data)
    else:
        lines.append(SizingLine("cache", "dataset", "unknown (give --dataset-size)",
                                f"cache holds up to {human_bytes(ecs)}"))

    # Huge pages
    page_kb = hw.huge_page_size_kb or 2048
    estimate = estimate_shared_memory(shared, conns, wal_buf)
    needed = server_huge_pages if server_huge_pages is not None else huge_pages_needed(estimate,
                                                                                       page_kb)
    how = ("postgres -C shared_memory_size_in_huge_pages" if server_huge_pages is not None
           else f"ceil((shared_buffers x 1.026 + wal_buffers + 43MB + {conns} x 80kB) / "
                f"{page_kb}kB)")
    lines.append(SizingLine("huge pages", "pages needed", how, str(needed)))
    hp = plan.get("huge_pages")
    mode = hp.value if hp is not None else specs.default("huge_pages")
    reserved = hw.huge_pages_total
    coherent = not (mode == "on" and reserved < needed)
    lines.append(SizingLine("huge pages", "reserved on the machine", "vm.nr_hugepages",
                            f"{reserved} (huge_pages = {mode})", ok=coherent))

    # I/O budget
    lines += _io_lines(inputs)

    # CPU
    if hw.tps_per_core:
        lines.append(SizingLine("cpu", "CPU-bound TPS", f"{hw.vcpus} vCPUs x {hw.tps_per_core:g} "
                                "TPS per core (measured)", f"{hw.vcpus * hw.tps_per_core:,.0f}"))
    else:
        lines.append(SizingLine("cpu", "CPU-bound TPS", "needs a measured TPS per core "
                                "(tps_per_core in the profile)", "unknown"))
    return lines


def _io_lines(inputs: TuneInputs, results_dir: Path | None = None) -> list[SizingLine]:
    """The I/O budget per volume: the host's measured capacity (``pgdyno bench fio``) for a
    detected profile when there is one, else the catalogue's figures, each labelled."""
    hw = inputs.hardware
    measured = _measured_capacity(hw, results_dir or MEASURED_RESULTS_DIR)
    lines = []
    for role, vol in (("data", hw.data_volume), ("WAL", hw.wal_volume)):
        if role == "WAL" and not hw.separate_wal:
            lines.append(SizingLine("io", "WAL volume", "shares the data volume", "-"))
            continue
        cap = _capacity_for(vol.device, measured)
        if cap is not None:
            lines.append(SizingLine(
                "io", f"{role} volume", f"{vol.kind}, {cap.device}: measured "
                f"{cap.measured_at[:10]} by pgdyno bench fio (4 KiB random at peak, 1 MiB "
                "sequential)", _measured_text(cap)))
            continue
        iops = f"{vol.iops:,} (catalogue)" if vol.iops else "unknown (run the fio baseline)"
        bw = f"{vol.bandwidth_mb_s:g} MB/s (catalogue)" if vol.bandwidth_mb_s else "unknown"
        lines.append(SizingLine("io", f"{role} volume", f"{vol.kind}, {vol.disk_count} device(s)",
                                f"{iops} IOPS, {bw}"))
    if hw.ebs_gbps:
        lines.append(SizingLine("io", "instance storage bandwidth cap",
                                f"{hw.ebs_gbps:g} Gbit/s / 8", f"{hw.ebs_gbps * 125:,.0f} MB/s"))
    if hw.ebs_baseline_iops:
        lines.append(SizingLine("io", "instance baseline IOPS", "instance type",
                                f"{hw.ebs_baseline_iops:,}"))
    if hw.tps_per_core and inputs.write_heavy:
        tps = hw.vcpus * hw.tps_per_core
        wal_mb_s = tps * 8 * 1024 / MB * 1.2  # a TPC-B commit writes about one 8 kB WAL page
        lines.append(SizingLine("io", "WAL write rate at CPU-bound TPS",
                                f"{tps:,.0f} TPS x ~8 kB x 1.2", f"{wal_mb_s:,.0f} MB/s"))
    return lines


MEASURED_RESULTS_DIR = Path("results")
"""Where ``pgdyno bench fio`` keeps the host's capacity by default (its --results-dir)."""


def _measured_capacity(hw, results_dir: Path) -> list:  # noqa: ANN001 - a HardwareProfile
    """The host's measured devices, for a profile detected on this host only."""
    from pgdyno.errors import UsageError
    from pgdyno.results.capacity import load_capacity, store_path

    if hw.source != "detect":
        return []
    try:
        store = load_capacity(store_path(results_dir))
    except UsageError:
        return []  # a damaged store: the catalogue figures, labelled as such
    return list(store.devices) if store is not None else []


def _capacity_for(device: str, measured: list):  # noqa: ANN202, ANN001
    """The measured entry of a volume's device (/dev/vda) or of a partition of it (vda1)."""
    name = Path(device).name if device else ""
    if not name:
        return None
    for cap in measured:
        rest = cap.device[len(name):] if cap.device.startswith(name) else None
        if rest is not None and (rest == "" or rest.lstrip("p").isdigit()):
            return cap
    return None


def _measured_text(cap) -> str:  # noqa: ANN001 - a DeviceCapacity
    def n(value: float | None, unit: str) -> str:
        return f"{value:,.0f} {unit}" if value else f"– {unit}"
    return (f"{n(cap.read_iops_peak, 'read IOPS')}, {n(cap.write_iops_peak, 'write IOPS')}, "
            f"{n(cap.read_mib_s, 'MiB/s read')}, {n(cap.write_mib_s, 'MiB/s write')} (measured)")
