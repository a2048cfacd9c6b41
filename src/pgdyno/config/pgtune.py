"""pgtune's published formulas (pgtune.leopard.in.ua), the reference peer configuration.

Reimplemented from the published rules: every value is in kB as pgtune computes it and
formatted as pgtune prints it (GB or MB when exact, else kB). Where the target build
lacks a value pgtune assumes (lz4, io_uring), pgtune's own fallback is used and the
rationale says so, so that the peer still starts on the server under test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pgdyno.config.model import Setting, TuneInputs, pg_group
from pgdyno.config.setting_specs import SettingSpecs
from pgdyno.config.sizing import connection_room
from pgdyno.config.units import GB, KB, MB, fmt_kb

MAX_CONNECTIONS = {"web": 200, "oltp": 300, "dw": 40, "desktop": 20, "mixed": 100}
WAL_SIZES_MB = {"web": (1024, 4096), "oltp": (2048, 8192), "dw": (4096, 16384),
                "desktop": (100, 2048), "mixed": (1024, 4096)}
IO_CONCURRENCY = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}
DEFAULT_WORKER_PROCESSES = 8


@dataclass(frozen=True)
class PgtuneInput:
    """pgtune's form: the values a user types into it."""

    db_version: int
    db_type: str
    ram_kb: int
    cpus: int | None
    connections: int | None
    hd_type: str
    db_size: str = "mid"
    """less (fits in RAM), mid, greater (larger than RAM)."""
    os_type: str = "linux"


def db_size_class(dataset_bytes: int | None, ram_bytes: int) -> str:
    """pgdyno's reading of pgtune's 'database size vs RAM' choice.

    pgtune asks the user; pgdyno answers from the dataset size: below half the RAM the
    database fits with room for the OS cache ('less'), above the RAM it cannot ('greater').
    """
    if dataset_bytes is None:
        return "mid"
    if dataset_bytes < ram_bytes / 2:
        return "less"
    if dataset_bytes > ram_bytes:
        return "greater"
    return "mid"


def pgtune_values(p: PgtuneInput) -> dict[str, int | float | str]:
    """name -> value (memory in kB as int) exactly as pgtune's formulas give them."""
    out: dict[str, int | float | str] = {}
    ram = p.ram_kb
    conns = p.connections or MAX_CONNECTIONS[p.db_type]
    out["max_connections"] = conns
    shared = ram // 16 if p.db_type == "desktop" else ram // 4
    out["shared_buffers"] = shared
    out["effective_cache_size"] = ram // 4 if p.db_type == "desktop" else ram * 3 // 4
    mwm = ram // 8 if p.db_type == "dw" else ram // 16
    out["maintenance_work_mem"] = min(mwm, 8 * GB // KB)
    out["checkpoint_completion_target"] = 0.9
    wal = 3 * shared // 100
    wal = min(wal, 16 * MB // KB)
    if 14 * MB // KB < wal < 16 * MB // KB:
        wal = 16 * MB // KB
    out["wal_buffers"] = max(wal, 32)
    out["default_statistics_target"] = 500 if p.db_type == "dw" else 100
    random_cost: float = 4.0 if p.hd_type == "hdd" else 1.1
    if p.db_type == "dw" and p.hd_type != "hdd" and p.db_size == "greater":
        random_cost = 4.0
    out["random_page_cost"] = random_cost
    if p.os_type == "linux":
        out["effective_io_concurrency"] = IO_CONCURRENCY[p.hd_type]
    parallel = _parallel(p)
    workers = int(parallel.get("max_worker_processes", DEFAULT_WORKER_PROCESSES))
    base = (ram - shared) / ((conns + workers) * 3)
    divisor = {"dw": 2, "mixed": 2, "desktop": 6}.get(p.db_type, 1)
    work_mem = base / divisor
    work_mem *= {"less": 1.3, "greater": 0.9}.get(p.db_size, 1.0)
    out["work_mem"] = max(math.floor(work_mem), 4 * MB // KB)
    out["huge_pages"] = "try" if shared >= 2 * GB // KB else "off"
    min_wal, max_wal = WAL_SIZES_MB[p.db_type]
    out["min_wal_size"] = min_wal * MB // KB
    out["max_wal_size"] = max_wal * MB // KB
    out.update(parallel)
    if p.db_type == "desktop":
        out["wal_level"] = "minimal"
        out["max_wal_senders"] = 0
    if p.db_version >= 12 and p.db_type in ("web", "oltp", "mixed"):
        out["jit"] = "off"
    if p.db_version >= 15:
        out["wal_compression"] = "lz4"
    elif p.db_version >= 10:
        out["wal_compression"] = "on"
    if p.cpus and p.cpus >= 32:
        out["autovacuum_max_workers"] = 5
    elif p.cpus and p.cpus >= 16:
        out["autovacuum_max_workers"] = 4
    if out["maintenance_work_mem"] >= 2 * GB // KB:  # type: ignore[operator]
        out["autovacuum_work_mem"] = 2 * GB // KB
    if p.db_version >= 18:
        out["io_method"] = "io_uring" if p.os_type == "linux" else "worker"
        out["io_workers"] = min(max((p.cpus or 1) // 4, 3), 32)
    return out


def _parallel(p: PgtuneInput) -> dict[str, int]:
    if not p.cpus or p.cpus < 4:
        return {}
    per_gather = math.ceil(p.cpus / 2)
    if p.db_type != "dw":
        per_gather = min(per_gather, 4)
    result = {"max_worker_processes": p.cpus, "max_parallel_workers_per_gather": per_gather}
    if p.db_version >= 10:
        result["max_parallel_workers"] = p.cpus
    if p.db_version >= 11:
        result["max_parallel_maintenance_workers"] = min(math.ceil(p.cpus / 2), 4)
    return result


MEMORY_KEYS = ("shared_buffers", "effective_cache_size", "maintenance_work_mem", "wal_buffers",
               "work_mem", "min_wal_size", "max_wal_size", "autovacuum_work_mem")


def format_value(name: str, value: int | float | str) -> str:
    if name in MEMORY_KEYS:
        return fmt_kb(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def pgtune_input(inputs: TuneInputs, connections: int | None) -> PgtuneInput:
    """pgtune's form as pgdyno fills it; ``connections`` is its 'number of connections'."""
    hw = inputs.hardware
    return PgtuneInput(db_version=inputs.pg_major, db_type=inputs.db_type,
                       ram_kb=hw.ram_bytes // KB, cpus=hw.vcpus, connections=connections,
                       hd_type=hw.data_volume.kind, db_size=db_size_class(inputs.dataset_bytes,
                                                                          hw.ram_bytes),
                       os_type=hw.os)


def pgtune_settings(inputs: TuneInputs, specs: SettingSpecs) -> list[Setting]:
    # pgtune's "number of connections" is the max_connections it writes and divides the
    # RAM by for work_mem: with known clients pgdyno answers with everything that will
    # connect (clients, its own sessions, the reserved slots), so the server starts and
    # work_mem is sized for the connections that really exist.
    room = connection_room(inputs.connections, specs) if inputs.connections else None
    p = pgtune_input(inputs, room.needed if room else None)
    values = pgtune_values(p)
    why = _rationales(p)
    if room is not None:
        why["max_connections"] = f"connections input {room.arithmetic()}"
    settings = []
    for name, raw in values.items():
        value = format_value(name, raw)
        reason = why.get(name, "pgtune formula")
        value, reason = _fit_build(name, value, reason, specs)
        settings.append(Setting(group=pg_group(name), key="PG_" + name.upper(), name=name,
                                layer="postgresql", apply="pg", value=value,
                                default=specs.default(name), rationale=reason,
                                source="pgtune"))
    return settings


def _fit_build(name: str, value: str, reason: str,
               specs: SettingSpecs) -> tuple[str, str]:
    """pgtune's own fallbacks when the target build lacks what pgtune assumes."""
    if name == "wal_compression" and not specs.has_enum_value(name, value):
        return "on", reason + "; lz4 not in this build: pgtune's pre-15 value on (pglz)"
    if name == "io_method" and not specs.has_enum_value(name, value):
        return "worker", reason + "; io_uring not in this build: worker"
    return value, reason


def _rationales(p: PgtuneInput) -> dict[str, str]:
    ram = f"RAM {fmt_kb(p.ram_kb)}"
    return {
        "max_connections": (f"--connections {p.connections}" if p.connections
                            else f"pgtune default for {p.db_type}"),
        "shared_buffers": f"pgtune: {ram} / {16 if p.db_type == 'desktop' else 4}",
        "effective_cache_size": f"pgtune: 3/4 of {ram}" if p.db_type != "desktop"
        else f"pgtune: 1/4 of {ram}",
        "maintenance_work_mem": f"pgtune: {ram} / {8 if p.db_type == 'dw' else 16}, cap 8GB",
        "work_mem": (f"pgtune: ({ram} - shared_buffers) / ((max_connections + workers) x 3)"
                     f", {p.db_type}, database size {p.db_size}, floor 4MB"),
        "wal_buffers": "pgtune: 3% of shared_buffers, cap 16MB",
        "random_page_cost": f"pgtune: storage {p.hd_type}",
        "effective_io_concurrency": f"pgtune: storage {p.hd_type} on Linux",
        "huge_pages": "pgtune: try when shared_buffers >= 2GB",
        "min_wal_size": f"pgtune: {p.db_type}",
        "max_wal_size": f"pgtune: {p.db_type}",
        "jit": f"pgtune: off for {p.db_type}",
        "wal_compression": f"pgtune: PostgreSQL {p.db_version}",
        "io_method": "pgtune: io_uring on Linux (PostgreSQL 18)",
        "io_workers": f"pgtune: clamp({p.cpus} CPUs / 4, 3, 32)",
        "max_worker_processes": f"pgtune: {p.cpus} CPUs",
        "max_parallel_workers": f"pgtune: {p.cpus} CPUs",
        "max_parallel_workers_per_gather": f"pgtune: ceil({p.cpus} CPUs / 2), cap 4 unless dw",
        "max_parallel_maintenance_workers": f"pgtune: ceil({p.cpus} CPUs / 2), cap 4",
        "autovacuum_max_workers": f"pgtune: {p.cpus} CPUs",
        "autovacuum_work_mem": "pgtune: cap autovacuum at 2GB per worker",
        "checkpoint_completion_target": "pgtune: 0.9",
        "default_statistics_target": f"pgtune: {p.db_type}",
    }
