"""Facts about the machine and the server, recorded in every manifest."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg

from pgdyno import serde
from pgdyno.config.units import human_bytes
from pgdyno.results.rundir import hostname
from pgdyno.targets import ConnectionInfo
from pgdyno.telemetry.devices import storage_identity
from pgdyno.telemetry.platform_facts import (
    PlatformFacts,
    collect_platform,
    cpu_governors,
    mount_facts,
)


@dataclass
class HostFacts:
    hostname: str
    kernel: str
    os: str
    cpu_model: str
    cpu_count: int
    """CPUs this process may run on (affinity), which cgroup cpusets also restrict."""
    ram_bytes: int
    python: str
    storage: list[StorageFact] = field(default_factory=list)
    """The devices under the run's directories (data, WAL, fio's targets), by role."""
    kernel_settings: dict[str, str] = field(default_factory=dict)
    """The kernel settings that shape a database's I/O and memory, read live when the run
    started (KERNEL_SETTINGS): what an OS change (provision, [config.os]) left in place."""
    platform: PlatformFacts | None = None
    """CPU clock and governor, NUMA nodes, the mounts of the run's directories, NVMe links;
    None: not collected (manifests older than these facts, a host that could not be asked)."""


KERNEL_SETTINGS = (
    "vm.dirty_ratio", "vm.dirty_background_ratio", "vm.dirty_bytes",
    "vm.dirty_background_bytes", "vm.dirty_expire_centisecs", "vm.dirty_writeback_centisecs",
    "vm.swappiness", "vm.overcommit_memory", "vm.overcommit_ratio", "vm.nr_hugepages",
    "vm.zone_reclaim_mode", "vm.min_free_kbytes", "kernel.numa_balancing")
THP_FILES = {"transparent_hugepage": "/sys/kernel/mm/transparent_hugepage/enabled",
             "transparent_hugepage.defrag": "/sys/kernel/mm/transparent_hugepage/defrag"}


@dataclass
class StorageFact:
    """One device under a directory of the run: what the environment table shows."""

    role: str
    path: str
    device: str
    summary: str
    """One line: model, firmware, capacity, rotational, scheduler, queue settings, members
    (``DeviceIdentity.describe``)."""


@dataclass
class ServerFacts:
    version: str
    version_num: int
    data_directory: str | None
    non_default_settings: dict[str, str]
    """Every setting whose source is not the built-in default, with its unit."""
    stock_settings: dict[str, str] = field(default_factory=dict)
    """The stock value (pg_settings.boot_val, with its unit) of each of those settings;
    empty in runs recorded before it was kept."""
    defaults: dict[str, str] = field(default_factory=dict)
    """Every setting's built-in default (pg_settings.boot_val, with its unit): what two
    server builds' stock settings differ in; empty in runs recorded before it was kept."""


def host_facts(directories: dict[str, Path] | None = None) -> HostFacts:
    """The machine; with ``directories`` (role -> path), the devices and mounts under them
    too."""
    return HostFacts(
        hostname=hostname(), kernel=platform.release(), os=platform.platform(),
        cpu_model=_cpu_model(), cpu_count=len(os.sched_getaffinity(0)),
        ram_bytes=psutil.virtual_memory().total, python=platform.python_version(),
        storage=storage_facts(directories or {}), kernel_settings=kernel_settings(),
        platform=collect_platform(directories),
    )


def describe_directories(host: HostFacts, directories: dict[str, Path]) -> None:
    """The devices and the mounts under the run's directories, once they are known."""
    host.storage = storage_facts(directories)
    if host.platform is not None:
        host.platform.mounts = mount_facts(directories, Path("/"))


def kernel_settings(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """KERNEL_SETTINGS (and ``extra`` sysctl names) with transparent huge pages and the CPU
    governor, as the kernel reports them now; a setting this kernel lacks is left out."""
    out: dict[str, str] = {}
    for name in (*KERNEL_SETTINGS, *extra):
        path = Path("/proc/sys") / name.replace(".", "/")
        try:
            out[name] = " ".join(path.read_text().split())
        except OSError:
            continue
    for name, file in THP_FILES.items():
        try:
            text = Path(file).read_text()
        except OSError:
            continue
        chosen = [w.strip("[]") for w in text.split() if w.startswith("[")]
        if chosen:
            out[name] = chosen[0]
    governors, _driver = cpu_governors(Path("/"))
    if governors:  # provision sets it too (CPU_GOVERNOR): named as its step names it
        out["scaling_governor"] = next(iter(governors)) if len(governors) == 1 else "; ".join(
            f"{g} on {n} CPU{'s' if n != 1 else ''}" for g, n in governors.items())
    return out


def storage_facts(directories: dict[str, Path]) -> list[StorageFact]:
    """Each role's chain of devices (a directory that does not exist yet: its nearest
    existing parent, where it will be created). A device met twice is listed once."""
    facts: list[StorageFact] = []
    seen: set[str] = set()
    for role, path in directories.items():
        existing = Path(path)
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        for ident in storage_identity(existing):
            if ident.name in seen:
                continue
            seen.add(ident.name)
            facts.append(StorageFact(role=role, path=str(path), device=ident.name,
                                     summary=ident.describe()))
    return facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def server_facts(conn: ConnectionInfo) -> ServerFacts:
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        version = db.execute("SHOW server_version").fetchone()[0]
        num = int(db.execute("SHOW server_version_num").fetchone()[0])
        rows = db.execute(
            "SELECT name, setting, coalesce(unit, ''), boot_val FROM pg_settings "
            "WHERE source NOT IN ('default', 'override') ORDER BY name").fetchall()
        defaults = db.execute("SELECT name, coalesce(boot_val, ''), coalesce(unit, '') "
                              "FROM pg_settings ORDER BY name").fetchall()
        try:
            data_dir = db.execute("SHOW data_directory").fetchone()[0]
        except psycopg.Error:
            data_dir = None  # needs superuser or pg_read_all_settings
    return ServerFacts(version=version, version_num=num, data_directory=data_dir,
                       non_default_settings={n: f"{s}{u and ' ' + u}" for n, s, u, _ in rows},
                       stock_settings={n: f"{b}{u and ' ' + u}" for n, _, u, b in rows
                                       if b is not None},
                       defaults={n: f"{b}{u and ' ' + u}" for n, b, u in defaults})


def database_host_facts(profile: Any, destination: str,
                        platform_facts: PlatformFacts | None = None) -> dict[str, Any]:
    """The database host of an --ssh run in ``HostFacts``' terms (the run report's second
    column beside this machine's), from the ``HardwareProfile`` detected on that host
    (``targets.remote.detect_hardware``, which the config engine sizes for), with the
    ssh destination it was reached at and the platform facts read there (None: not read)."""
    storage = []
    if profile.data is not None and profile.data.device:
        volume = profile.data
        words = [w for w in (volume.model, human_bytes(volume.size_bytes)
                             if volume.size_bytes else "", volume.fstype,
                             f"scheduler {volume.scheduler}" if volume.scheduler else "") if w]
        storage.append(StorageFact(role="data", path=volume.mount, device=volume.device,
                                   summary=f"{volume.device}: {', '.join(words)}" if words
                                   else volume.device))
    facts = HostFacts(
        hostname=profile.name, kernel=profile.kernel,
        os=" ".join(w for w in (profile.os.capitalize(), profile.arch) if w),
        cpu_model=profile.cpu_model or "unknown",
        cpu_count=profile.host_vcpus or profile.vcpus,
        ram_bytes=profile.host_ram_bytes or profile.ram_bytes, python="", storage=storage,
        kernel_settings=dict(profile.os_settings), platform=platform_facts)
    return {**serde.to_dict(facts), "destination": destination,
            "limits": profile.limits_source}
