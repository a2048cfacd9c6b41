"""The keys of pgdyno's configuration matrix outside PostgreSQL's own settings.

A static table: key (in the KEY=value style of ``pgdyno tune --format env``) -> the group it
is shown in, its native name, layer, how it is applied and its stock value. The .env reader
looks keys up here, so reading a tuning.env needs neither a hardware profile nor the tuning
rules. tuned.py emits the same keys; tests/test_config_engine.py checks the two agree.

Every OS and storage key also says which values it accepts (``Accepts``: a type and a range,
or choices), from the kernel's own limits: `provision plan|apply --set`, a .env config file
and a campaign's ``[config.os]`` refuse anything else before a plan is printed or a file made,
with these accepted values in the one-line error.

PG_<setting> keys are not listed: any PostgreSQL setting is accepted by that prefix and
validated against the setting specs of the target. Only the PG_ keys that describe
the installation (paths, version, port) rather than set a GUC are here.

Standard library only: the module also runs on an --ssh host (pgdyno.targets.remote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INT_MAX = 2**31 - 1
"""The largest value of a kernel ``int`` (most sysctls)."""
LONG_MAX = 2**63 - 1
"""The largest value of a kernel ``unsigned long`` sysctl pgdyno writes (64-bit)."""

UNSET = ("", "n/a")
"""What `pgdyno tune --format env` writes for a key with nothing to set (no RAID: no chunk);
accepted in files, never planned as a change."""

_INT = re.compile(r"^-?[0-9]+$")
_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_SIZE = re.compile(r"^[0-9]+[kmgtbs]?$", re.IGNORECASE)
_PATH = re.compile(r"^/[A-Za-z0-9._/+-]*$")
_OPTION = re.compile(r"^[a-z0-9_]+(=[A-Za-z0-9._:/+-]+)?$")


@dataclass(frozen=True)
class Accepts:
    """The values a key accepts: its type and its range or choices, as the kernel (or the
    tool that applies it) takes them. ``ok`` checks a value; ``describe`` words what is
    accepted for a refusal."""

    kind: str
    """integer, integers (``count`` of them, separated by spaces), choice, size (bytes with
    an optional k, m, g, t suffix, or b for blocks, s for sectors), path, options (mount
    options) or number (a decimal >= 0)."""
    low: int | None = None
    high: int | None = None
    """The range of an integer (or of each of several integers), inclusive."""
    count: int = 1
    choices: tuple[str, ...] = ()
    """The words a choice takes, or the words an integer takes besides numbers (unlimited)."""

    def ok(self, value: str) -> bool:
        value = value.strip()
        if self.kind == "choice" or value in self.choices:
            return value in self.choices
        if self.kind in ("integer", "integers"):
            parts = value.split()
            return len(parts) == self.count and all(self._in_range(p) for p in parts)
        pattern = {"size": _SIZE, "path": _PATH, "number": _NUMBER}.get(self.kind)
        if pattern is not None:
            return bool(pattern.match(value))
        if self.kind == "options":
            return bool(value) and all(_OPTION.match(o) for o in value.split(","))
        raise ValueError(f"Accepts: unknown kind {self.kind}")

    def _in_range(self, text: str) -> bool:
        if not _INT.match(text):
            return False
        number = int(text)
        return (self.low is None or number >= self.low) and (
            self.high is None or number <= self.high)

    def describe(self) -> str:
        """``an integer from 0 to 200``, ``one of always, madvise, never``."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind in ("integer", "integers"):
            if self.low is not None and self.high is not None:
                span = f"from {self.low} to {self.high}"
            elif self.low is not None:
                span = f">= {self.low}"
            else:
                span = f"<= {self.high}" if self.high is not None else ""
            what = "an integer" if self.count == 1 else \
                f"{self.count} integers separated by spaces, each"
            words = f", or {' or '.join(self.choices)}" if self.choices else ""
            return " ".join(filter(None, (what, span))) + words
        return {"size": "a size: digits with an optional k, m, g or t (or b: blocks), "
                        "e.g. 64k",
                "path": "an absolute path, e.g. /data",
                "options": "mount options separated by commas, e.g. defaults,noatime",
                "number": "a number >= 0, e.g. 200"}[self.kind]


def integer(low: int | None = 0, high: int | None = None, *, words: tuple[str, ...] = (),
            count: int = 1) -> Accepts:
    return Accepts("integers" if count > 1 else "integer", low, high, count, words)


def choice(*words: str) -> Accepts:
    return Accepts("choice", choices=words)


SIZE, PATH, OPTIONS, NUMBER = (Accepts("size"), Accepts("path"), Accepts("options"),
                               Accepts("number"))
BOOL = integer(0, 1)
FILE_SYSTEMS = choice("xfs", "ext4", "ext3", "btrfs", "zfs", "f2fs")
"""What FS_TYPE may name (pgdyno itself makes XFS only; a kit's tuning.env may say another)."""
RAID_LEVELS = choice("none", "0", "1", "4", "5", "6", "10", "raid0", "raid1", "raid4", "raid5",
                     "raid6", "raid10")
SCHEDULERS = choice("none", "mq-deadline", "kyber", "bfq", "noop", "deadline", "cfq")
"""Block I/O schedulers (the last three: single-queue kernels before 5.0)."""


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
    accepts: Accepts | None = None
    """The values it takes (every OS and storage key has one); None: not checked (the
    instance, path and benchmark keys that only describe)."""


def sysctl_key(name: str) -> str:
    """vm.dirty_bytes -> VM_DIRTY_BYTES: the env-style key of a sysctl."""
    return name.upper().replace(".", "_").replace("-", "_")


def _table(group: str, layer: str, apply: str, rows: dict[str, tuple[str, Accepts | None]],
           key_of: dict[str, str] | None = None) -> dict[str, MatrixKey]:
    """{native name: (stock default, accepted values)} of one group -> {key: MatrixKey}."""
    keys = key_of or {}
    return {keys.get(name, name.upper()): MatrixKey(group, name, layer, apply, default, accepts)
            for name, (default, accepts) in rows.items()}


def _sysctls(group: str, rows: dict[str, tuple[str, Accepts | None]]) -> dict[str, MatrixKey]:
    return {sysctl_key(name): MatrixKey(group, name, "os", "sysctl", default, accepts)
            for name, (default, accepts) in rows.items()}


def _per_volume(kind: str, rows: dict[str, tuple[str, str, Accepts]]) -> dict[str, MatrixKey]:
    """The same rows for the data and the WAL volume: DATA_<NAME> in ``<kind>_data``, ..."""
    out = {}
    for role in ("data", "wal"):
        for name, (apply, default, accepts) in rows.items():
            out[f"{role.upper()}_{name.upper()}"] = MatrixKey(f"{kind}_{role}", name, "storage",
                                                             apply, default, accepts)
    return out


def _info(names: tuple[str, ...]) -> dict[str, tuple[str, Accepts | None]]:
    return dict.fromkeys(names, ("", None))


MATRIX_KEYS: dict[str, MatrixKey] = {
    **_table("instance", "instance", "info", _info(
        ("instance_type", "vcpus", "ram_gb", "network_gbps", "ebs_gbps")),
        key_of={"vcpus": "VCPU"}),
    **_sysctls("os_memory", {
        "vm.swappiness": ("60", integer(0, 200)),
        "vm.nr_hugepages": ("0", integer(0, LONG_MAX)),
        # the kernel refuses 0 for the byte forms (0 is what it shows while the ratio rules)
        # and fewer than two pages for dirty_bytes
        "vm.dirty_background_bytes": ("0 (ratio 10)", integer(1, LONG_MAX)),
        "vm.dirty_bytes": ("0 (ratio 20)", integer(8192, LONG_MAX)),
        "vm.dirty_expire_centisecs": ("3000", integer(0, INT_MAX)),
        "vm.dirty_writeback_centisecs": ("500", integer(0, INT_MAX)),
        "vm.overcommit_memory": ("0", integer(0, 2)),
        "vm.overcommit_ratio": ("50", integer(0, INT_MAX)),
        "vm.min_free_kbytes": ("kernel-computed", integer(0, INT_MAX)),
        "vm.zone_reclaim_mode": ("0", integer(0, 7))}),
    "TRANSPARENT_HUGEPAGE": MatrixKey("os_memory", "transparent_hugepage", "os", "sysfs",
                                      "madvise", choice("always", "madvise", "never")),
    **_sysctls("os_files", {"fs.file-max": ("kernel-computed", integer(0, LONG_MAX)),
                            "fs.aio-max-nr": ("65536", integer(0, LONG_MAX))}),
    **_table("os_files", "os", "limits", {
        "nofile": ("1024", integer(1, 1073741816)),
        "nproc": ("distribution default", integer(1, INT_MAX, words=("unlimited",)))},
        key_of={"nofile": "ULIMIT_NOFILE", "nproc": "ULIMIT_NPROC"}),
    **_sysctls("os_network", {
        "net.core.somaxconn": ("4096", integer(0, INT_MAX)),
        "net.core.netdev_max_backlog": ("1000", integer(0, INT_MAX)),
        # the kernel's floors: SOCK_MIN_RCVBUF and SOCK_MIN_SNDBUF
        "net.core.rmem_default": ("212992", integer(2304, INT_MAX)),
        "net.core.rmem_max": ("212992", integer(2304, INT_MAX)),
        "net.core.wmem_default": ("212992", integer(4608, INT_MAX)),
        "net.core.wmem_max": ("212992", integer(4608, INT_MAX)),
        "net.ipv4.tcp_rmem": ("4096 131072 6291456", integer(1, INT_MAX, count=3)),
        "net.ipv4.tcp_wmem": ("4096 16384 4194304", integer(1, INT_MAX, count=3)),
        "net.ipv4.tcp_max_syn_backlog": ("kernel-computed", integer(0, INT_MAX)),
        "net.ipv4.tcp_tw_reuse": ("2", integer(0, 2)),
        "net.ipv4.tcp_fin_timeout": ("60", integer(0, INT_MAX // 1000))}),  # s, as jiffies
    **_sysctls("os_scheduler", {
        "kernel.sched_autogroup_enabled": ("1", BOOL),
        "kernel.numa_balancing": ("0", integer(0, 3)),
        "kernel.sem": ("32000 1024000000 500 32000", integer(0, INT_MAX, count=4))}),
    **_per_volume("raid", {
        "mount": ("mount", "", PATH), "disk_size_gb": ("info", "", NUMBER),
        "disk_count": ("info", "", integer(1, 1024)), "raid_level": ("mdadm", "", RAID_LEVELS),
        "raid_device": ("info", "", PATH), "raid_chunk": ("mdadm", "", SIZE),
        "stripe_width": ("mdadm", "", integer(1, 1024))}),
    **_table("xfs", "storage", "mkfs", {
        "fs_type": ("xfs", FILE_SYSTEMS), "xfs_data_sunit": ("", SIZE),
        "xfs_wal_sunit": ("", SIZE), "xfs_log_stripe_unit": ("", SIZE),
        "xfs_data_agcount": ("4", integer(1, INT_MAX)),
        "xfs_wal_agcount": ("4", integer(1, INT_MAX))}),
    **_table("xfs", "storage", "mount", {
        "xfs_mount_opts_data": ("defaults", OPTIONS), "xfs_mount_opts_wal": ("defaults", OPTIONS)}),
    **_per_volume("block", {
        "scheduler": ("sysfs", "kernel default", SCHEDULERS),
        "rotational": ("sysfs", "", BOOL),
        "read_ahead_kb": ("sysfs", "128", integer(0, INT_MAX)),
        # the kernel raises fewer than 4 requests to 4, and refuses sectors below a page
        "nr_requests": ("sysfs", "", integer(4, INT_MAX)),
        "max_sectors_kb": ("sysfs", "", integer(4, INT_MAX)),
        "rq_affinity": ("sysfs", "1", integer(0, 2)),
        "add_random": ("sysfs", "0", BOOL), "nomerges": ("sysfs", "0", integer(0, 2))}),
    "MD_STRIPE_CACHE_SIZE": MatrixKey("md", "stripe_cache_size", "storage", "sysfs", "256",
                                      integer(17, 32768)),
    **_table("pg_paths", "postgresql", "info", _info(
        ("pg_version", "data_directory", "wal_directory", "listen_addresses", "port")),
        key_of={"pg_version": "PG_VERSION", "data_directory": "PG_DATA_DIR",
                "wal_directory": "PG_WAL_DIR", "listen_addresses": "PG_LISTEN_ADDRESSES",
                "port": "PG_PORT"}),
    **_table("benchmark", "benchmark", "info", _info(
        ("pgbench_scale", "pgbench_duration", "pgbench_clients_light", "pgbench_clients_medium",
         "pgbench_clients_heavy", "fio_runtime"))),
}

OTHER_SYSCTLS: dict[str, Accepts] = {
    "vm.dirty_ratio": integer(0, 100),
    "vm.dirty_background_ratio": integer(0, 100),
    "vm.vfs_cache_pressure": integer(0, INT_MAX),
    "vm.max_map_count": integer(0, INT_MAX),
}
"""Sysctls outside the matrix whose range is known (a campaign's ``[config.os]`` may set any
sysctl of the running kernel; these are checked as the matrix's are)."""

_SYSCTLS = {k.name: k for k in MATRIX_KEYS.values() if k.apply == "sysctl"}


def accepts_of(key: str) -> Accepts | None:
    """What a key of the matrix (VM_SWAPPINESS) or a sysctl named natively (vm.swappiness,
    vm.dirty_ratio) accepts; None when the matrix does not know it."""
    spec = MATRIX_KEYS.get(key.upper()) or _SYSCTLS.get(key)
    if spec is not None:
        return spec.accepts
    return OTHER_SYSCTLS.get(key)


def refusal(key: str, value: str, *, unset_ok: bool = False) -> str:
    """'' when the matrix accepts ``value`` for ``key`` (or does not know the key), else
    what it accepts: ``accepted: an integer from 0 to 200 (vm.swappiness)``. ``unset_ok``:
    '' and n/a pass (a file's key with nothing to set)."""
    accepts = accepts_of(key)
    if accepts is None or (unset_ok and value.strip() in UNSET) or accepts.ok(value):
        return ""
    spec = MATRIX_KEYS.get(key.upper())
    sysctl = spec is not None and spec.apply == "sysctl" and spec.name != key
    return f"accepted: {accepts.describe()}" + (f" ({spec.name})" if sysctl else "")
