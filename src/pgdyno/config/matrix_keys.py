"""The keys of pgdyno's configuration matrix outside PostgreSQL's own settings.

A static table: key (in the KEY=value style of ``pgdyno tune --format env``) -> the group it
is shown in, its native name, layer, how it is applied and its stock value. The .env reader
looks keys up here, so reading a tuning.env needs neither a hardware profile nor the tuning
rules. tuned.py emits the same keys; tests/test_config_engine.py checks the two agree.

PG_<setting> keys are not listed: any PostgreSQL setting is accepted by that prefix and
validated against the settings catalogue of the target. Only the PG_ keys that describe
the installation (paths, version, port) rather than set a GUC are here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatrixKey:
    """What a matrix key is, without a value."""

    group: str
    name: str
    """The native name: vm.swappiness, scheduler (of the device its group names)."""
    layer: str
    apply: str
    default: str = ""
    """The stock value where one exists independently of the machine."""


def sysctl_key(name: str) -> str:
    """vm.dirty_bytes -> VM_DIRTY_BYTES: the env-style key of a sysctl."""
    return name.upper().replace(".", "_").replace("-", "_")


def _table(group: str, layer: str, apply: str, rows: dict[str, str],
           key_of: dict[str, str] | None = None) -> dict[str, MatrixKey]:
    """{native name: stock default} of one group -> {key: MatrixKey}."""
    keys = key_of or {}
    return {keys.get(name, name.upper()): MatrixKey(group, name, layer, apply, default)
            for name, default in rows.items()}


def _sysctls(group: str, rows: dict[str, str]) -> dict[str, MatrixKey]:
    return {sysctl_key(name): MatrixKey(group, name, "os", "sysctl", default)
            for name, default in rows.items()}


def _per_volume(kind: str, rows: dict[str, tuple[str, str]]) -> dict[str, MatrixKey]:
    """The same rows for the data and the WAL volume: DATA_<NAME> in ``<kind>_data``, ..."""
    out = {}
    for role in ("data", "wal"):
        for name, (apply, default) in rows.items():
            out[f"{role.upper()}_{name.upper()}"] = MatrixKey(f"{kind}_{role}", name, "storage",
                                                             apply, default)
    return out


MATRIX_KEYS: dict[str, MatrixKey] = {
    **_table("instance", "instance", "info", dict.fromkeys(
        ("instance_type", "vcpus", "ram_gb", "network_gbps", "ebs_gbps"), ""),
        key_of={"vcpus": "VCPU"}),
    **_sysctls("os_memory", {
        "vm.swappiness": "60", "vm.nr_hugepages": "0",
        "vm.dirty_background_bytes": "0 (ratio 10)", "vm.dirty_bytes": "0 (ratio 20)",
        "vm.dirty_expire_centisecs": "3000", "vm.dirty_writeback_centisecs": "500",
        "vm.overcommit_memory": "0", "vm.overcommit_ratio": "50",
        "vm.min_free_kbytes": "kernel-computed", "vm.zone_reclaim_mode": "0"}),
    "TRANSPARENT_HUGEPAGE": MatrixKey("os_memory", "transparent_hugepage", "os", "sysfs",
                                      "madvise"),
    **_sysctls("os_files", {"fs.file-max": "kernel-computed", "fs.aio-max-nr": "65536"}),
    **_table("os_files", "os", "limits", {"nofile": "1024", "nproc": "distribution default"},
             key_of={"nofile": "ULIMIT_NOFILE", "nproc": "ULIMIT_NPROC"}),
    **_sysctls("os_network", {
        "net.core.somaxconn": "4096", "net.core.netdev_max_backlog": "1000",
        "net.core.rmem_default": "212992", "net.core.rmem_max": "212992",
        "net.core.wmem_default": "212992", "net.core.wmem_max": "212992",
        "net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_wmem": "4096 16384 4194304",
        "net.ipv4.tcp_max_syn_backlog": "kernel-computed", "net.ipv4.tcp_tw_reuse": "2",
        "net.ipv4.tcp_fin_timeout": "60"}),
    **_sysctls("os_scheduler", {
        "kernel.sched_autogroup_enabled": "1", "kernel.numa_balancing": "0",
        "kernel.sem": "32000 1024000000 500 32000"}),
    **_per_volume("raid", {
        "mount": ("mount", ""), "disk_size_gb": ("info", ""), "disk_count": ("info", ""),
        "raid_level": ("mdadm", ""), "raid_device": ("info", ""), "raid_chunk": ("mdadm", ""),
        "stripe_width": ("mdadm", "")}),
    **_table("xfs", "storage", "mkfs", {
        "fs_type": "xfs", "xfs_data_sunit": "", "xfs_wal_sunit": "", "xfs_log_stripe_unit": "",
        "xfs_data_agcount": "4", "xfs_wal_agcount": "4"}),
    **_table("xfs", "storage", "mount", {
        "xfs_mount_opts_data": "defaults", "xfs_mount_opts_wal": "defaults"}),
    **_per_volume("block", {
        "scheduler": ("sysfs", "kernel default"), "rotational": ("sysfs", ""),
        "read_ahead_kb": ("sysfs", "128"), "nr_requests": ("sysfs", ""),
        "max_sectors_kb": ("sysfs", ""), "rq_affinity": ("sysfs", "1"),
        "add_random": ("sysfs", "0"), "nomerges": ("sysfs", "0")}),
    "MD_STRIPE_CACHE_SIZE": MatrixKey("md", "stripe_cache_size", "storage", "sysfs", "256"),
    **_table("pg_paths", "postgresql", "info", {
        "pg_version": "", "data_directory": "", "wal_directory": "",
        "listen_addresses": "localhost", "port": "5432"},
        key_of={"pg_version": "PG_VERSION", "data_directory": "PG_DATA_DIR",
                "wal_directory": "PG_WAL_DIR", "listen_addresses": "PG_LISTEN_ADDRESSES",
                "port": "PG_PORT"}),
    **_table("benchmark", "benchmark", "info", dict.fromkeys(
        ("pgbench_scale", "pgbench_duration", "pgbench_clients_light", "pgbench_clients_medium",
         "pgbench_clients_heavy", "fio_runtime"), "")),
}
