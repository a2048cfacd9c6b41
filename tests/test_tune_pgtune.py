"""pgdyno's pgtune config against pgtune's published formulas, recomputed independently here."""

from __future__ import annotations

import math

import pytest

from pgdyno.config.pgtune import PgtuneInput, pgtune_values

GIB_KB = 1024 * 1024
MIB_KB = 1024

# (version, type, RAM GiB, CPUs, connections, storage, db size)
CASES = [
    (18, "oltp", 32, 4, None, "ssd", "mid"),
    (18, "web", 16, 8, 150, "nvme", "less"),
    (17, "dw", 128, 32, None, "hdd", "greater"),
    (16, "mixed", 8, 2, None, "san", "mid"),
    (15, "desktop", 4, 1, None, "ssd", "mid"),
    (18, "dw", 64, 16, 50, "nvme", "greater"),
    (18, "oltp", 378, 96, 200, "nvme", "less"),
]


def expected(version, db_type, ram_gib, cpus, conns, storage, size) -> dict:
    """pgtune's rules written out one by one, in kB like pgtune."""
    ram = ram_gib * GIB_KB
    e: dict = {}
    e["max_connections"] = conns or {"web": 200, "oltp": 300, "dw": 40, "desktop": 20,
                                     "mixed": 100}[db_type]
    sb = ram // (16 if db_type == "desktop" else 4)
    e["shared_buffers"] = sb
    e["effective_cache_size"] = ram // 4 if db_type == "desktop" else ram * 3 // 4
    e["maintenance_work_mem"] = min(ram // (8 if db_type == "dw" else 16), 8 * GIB_KB)
    e["checkpoint_completion_target"] = 0.9
    wal = min(3 * sb // 100, 16 * MIB_KB)
    if 14 * MIB_KB < wal < 16 * MIB_KB:
        wal = 16 * MIB_KB
    e["wal_buffers"] = max(wal, 32)
    e["default_statistics_target"] = 500 if db_type == "dw" else 100
    rpc = 4.0 if storage == "hdd" else 1.1
    if db_type == "dw" and storage != "hdd" and size == "greater":
        rpc = 4.0
    e["random_page_cost"] = rpc
    e["effective_io_concurrency"] = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}[storage]
    workers = cpus if cpus >= 4 else 8
    wm = (ram - sb) / ((e["max_connections"] + workers) * 3)
    wm /= {"dw": 2, "mixed": 2, "desktop": 6}.get(db_type, 1)
    wm *= {"less": 1.3, "greater": 0.9}.get(size, 1)
    e["work_mem"] = max(math.floor(wm), 4 * MIB_KB)
    e["huge_pages"] = "try" if sb >= 2 * GIB_KB else "off"
    e["min_wal_size"], e["max_wal_size"] = {
        "web": (1024, 4096), "oltp": (2048, 8192), "dw": (4096, 16384), "desktop": (100, 2048),
        "mixed": (1024, 4096)}[db_type]
    e["min_wal_size"] *= MIB_KB
    e["max_wal_size"] *= MIB_KB
    if cpus >= 4:
        e["max_worker_processes"] = cpus
        e["max_parallel_workers"] = cpus
        gather = math.ceil(cpus / 2)
        e["max_parallel_workers_per_gather"] = gather if db_type == "dw" else min(gather, 4)
        e["max_parallel_maintenance_workers"] = min(math.ceil(cpus / 2), 4)
    if db_type == "desktop":
        e["wal_level"], e["max_wal_senders"] = "minimal", 0
    if db_type in ("web", "oltp", "mixed"):
        e["jit"] = "off"
    e["wal_compression"] = "lz4"
    if cpus >= 32:
        e["autovacuum_max_workers"] = 5
    elif cpus >= 16:
        e["autovacuum_max_workers"] = 4
    if e["maintenance_work_mem"] >= 2 * GIB_KB:
        e["autovacuum_work_mem"] = 2 * GIB_KB
    if version >= 18:
        e["io_method"] = "io_uring"
        e["io_workers"] = min(max(cpus // 4, 3), 32)
    return e


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{c[2]}G-{c[3]}cpu-{c[5]}" for c in CASES])
def test_pgtune_matches_published_formulas(case) -> None:
    version, db_type, ram_gib, cpus, conns, storage, size = case
    got = pgtune_values(PgtuneInput(db_version=version, db_type=db_type, ram_kb=ram_gib * GIB_KB,
                                    cpus=cpus, connections=conns, hd_type=storage, db_size=size))
    assert got == expected(*case)


def test_pgtune_known_output_r8g_xlarge() -> None:
    """A hand-checked point: 32 GiB, 4 CPUs, OLTP, SSD (what pgtune's web form prints)."""
    got = pgtune_values(PgtuneInput(18, "oltp", 32 * GIB_KB, 4, None, "ssd"))
    assert got["shared_buffers"] == 8 * GIB_KB
    assert got["effective_cache_size"] == 24 * GIB_KB
    assert got["maintenance_work_mem"] == 2 * GIB_KB
    assert got["work_mem"] == 27594  # (32 GiB - 8 GiB) / ((300 + 4) x 3) in kB, floored
    assert got["wal_buffers"] == 16 * MIB_KB
