"""The hardware profile of the host pgdyno runs on, as a container sees it.

vCPUs and RAM are the smaller of what the host has and what the cgroup allows (cgroup v2
``cpu.max``/``memory.max`` or v1 ``cpu.cfs_quota_us``/``memory.limit_in_bytes``, along the
whole path of the process's cgroup, since a parent's limit binds its children): sizing
shared_buffers from the host's RAM inside a smaller container is how generators cause
OOM loops. Everything is read from /proc and /sys; nothing is changed.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import socket
from dataclasses import dataclass
from pathlib import Path

from pgdyno.config.hardware import BlockDevice, HardwareProfile, Volume
from pgdyno.config.matrix_keys import MATRIX_KEYS
from pgdyno.config.units import human_bytes

CGROUP_ROOT = Path("/sys/fs/cgroup")
NO_LIMIT = 1 << 60  # cgroup v1 reports "no limit" as a page-rounded 2^63


@dataclass(frozen=True)
class CgroupLimits:
    cpus: float | None
    memory_bytes: int | None
    cpu_file: str = ""
    memory_file: str = ""


@dataclass(frozen=True)
class Mount:
    mount_point: str
    source: str
    fstype: str
    options: str


def detect_profile(data_path: str | Path | None = None,
                   wal_path: str | Path | None = None) -> HardwareProfile:
    host_cpus = len(os.sched_getaffinity(0))
    host_ram = meminfo().get("MemTotal", 0) * 1024
    limits = cgroup_limits()
    cpus = host_cpus
    if limits.cpus is not None:
        cpus = max(1, min(host_cpus, math.ceil(limits.cpus)))
    ram = host_ram if limits.memory_bytes is None else min(host_ram, limits.memory_bytes)
    cpu_source, ram_source = _limit_sources(host_cpus, host_ram, limits)
    devices = block_devices()
    data = volume_for(Path(data_path) if data_path else Path.cwd(), devices)
    wal = None
    if wal_path is not None:
        wal = volume_for(Path(wal_path), devices)
        if wal.device == data.device:
            wal = None
    info = meminfo()
    return HardwareProfile(
        name=socket.gethostname() or "this-host",
        vcpus=cpus,
        ram_bytes=ram,
        description="detected on this host",
        cpu_model=cpu_model(),
        arch=platform.machine(),
        numa_nodes=numa_nodes(),
        data=data,
        wal=wal,
        devices=devices,
        kernel=platform.release(),
        huge_page_size_kb=info.get("Hugepagesize", 2048),
        huge_pages_total=info.get("HugePages_Total", 0),
        transparent_hugepages=_bracketed(_read(Path("/sys/kernel/mm/transparent_hugepage/enabled"))),
        host_vcpus=host_cpus,
        host_ram_bytes=host_ram,
        limits_source=f"{cpu_source}; {ram_source}",
        cpu_source=cpu_source,
        ram_source=ram_source,
        cloud=cloud(),
        os_settings=os_settings(),
        source="detect",
    )


def _limit_sources(host_cpus: int, host_ram: int, limits: CgroupLimits) -> tuple[str, str]:
    """Where the vCPU count and the RAM came from, one line each (each figure has its own)."""
    cpu = f"vCPUs from sched_getaffinity ({host_cpus})"
    if limits.cpu_file:
        cpu += f", CPU quota {limits.cpus:g} from {limits.cpu_file}"
    ram = f"RAM from /proc/meminfo MemTotal ({human_bytes(host_ram)})"
    if limits.memory_file:
        ram += f", memory limit {human_bytes(limits.memory_bytes or 0)} from {limits.memory_file}"
    return cpu, ram


# ----- cloud and OS settings --------------------------------------------------------------------

DMI = Path("/sys/class/dmi/id")


def cloud(dmi: Path = DMI, hypervisor_uuid: Path = Path("/sys/hypervisor/uuid")) -> str:
    """aws on an EC2 instance (DMI vendor, or the Xen uuid of older instance types), else ''."""
    vendors = {_read(dmi / name).strip() for name in ("sys_vendor", "board_vendor",
                                                      "bios_vendor")}
    if "Amazon EC2" in vendors or _read(hypervisor_uuid).strip().lower().startswith("ec2"):
        return "aws"
    return ""


def os_settings(proc_sys: Path = Path("/proc/sys")) -> dict[str, str]:
    """The current values of the OS settings pgdyno's rules set, as this host has them.

    Sysctls from /proc/sys (fields joined by one space: '32000 1024000000 500 32000'),
    nofile and nproc from this process's soft limits ('unlimited' when there is none).
    """
    values: dict[str, str] = {}
    for key in MATRIX_KEYS.values():
        if key.apply != "sysctl":
            continue
        text = _read(proc_sys / key.name.replace(".", "/"))
        if text.strip():
            values[key.name] = " ".join(text.split())
    for name, limit in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft = resource.getrlimit(limit)[0]
        values[name] = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    return values


# ----- CPU and memory ---------------------------------------------------------------------------

def meminfo() -> dict[str, int]:
    """/proc/meminfo values (kB, or counts for HugePages_*)."""
    result = {}
    for line in _read(Path("/proc/meminfo")).splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            result[name] = int(parts[0])
    return result


def cgroup_limits(proc_cgroup: Path = Path("/proc/self/cgroup"),
                  root: Path = CGROUP_ROOT) -> CgroupLimits:
    """The tightest CPU and memory limits on the path of this process's cgroups."""
    cpus: float | None = None
    memory: int | None = None
    cpu_file = memory_file = ""
    for hierarchy, controllers, path in _cgroup_lines(proc_cgroup):
        if hierarchy == "0" and not controllers:  # cgroup v2 (unified)
            base = root if (root / "cgroup.controllers").exists() else root / "unified"
            for directory in _ancestors(base, path):
                quota = _v2_cpu(directory / "cpu.max")
                if quota is not None and (cpus is None or quota < cpus):
                    cpus, cpu_file = quota, str(directory / "cpu.max")
                mem = _int_or_none(_read(directory / "memory.max"))
                if mem is not None and (memory is None or mem < memory):
                    memory, memory_file = mem, str(directory / "memory.max")
            continue
        names = controllers.split(",")
        if "cpu" in names:
            for directory in _ancestors(root / "cpu", path):
                quota = _v1_cpu(directory)
                if quota is not None and (cpus is None or quota < cpus):
                    cpus, cpu_file = quota, str(directory / "cpu.cfs_quota_us")
        if "memory" in names:
            for directory in _ancestors(root / "memory", path):
                mem = _int_or_none(_read(directory / "memory.limit_in_bytes"))
                if mem is not None and mem < NO_LIMIT and (memory is None or mem < memory):
                    memory, memory_file = mem, str(directory / "memory.limit_in_bytes")
    return CgroupLimits(cpus, memory, cpu_file, memory_file)


def _cgroup_lines(proc_cgroup: Path) -> list[tuple[str, str, str]]:
    rows = []
    for line in _read(proc_cgroup).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def _ancestors(base: Path, cgroup_path: str) -> list[Path]:
    """The cgroup directory and its parents up to the mount root (those that exist here)."""
    parts = [p for p in cgroup_path.strip("/").split("/") if p]
    dirs = [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def _v2_cpu(path: Path) -> float | None:
    fields = _read(path).split()
    if len(fields) == 2 and fields[0] != "max":
        return int(fields[0]) / int(fields[1])
    return None


def _v1_cpu(directory: Path) -> float | None:
    quota = _int_or_none(_read(directory / "cpu.cfs_quota_us"))
    period = _int_or_none(_read(directory / "cpu.cfs_period_us"))
    if quota is None or period is None or quota <= 0 or period <= 0:
        return None
    return quota / period


def cpu_model() -> str:
    text = _read(Path("/proc/cpuinfo"))
    for key in ("model name", "Model", "Hardware", "cpu model"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()


def numa_nodes() -> int:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return max(1, len(nodes))


# ----- storage ----------------------------------------------------------------------------------

def block_devices(sys_block: Path = Path("/sys/block")) -> list[BlockDevice]:
    devices = []
    for entry in sorted(sys_block.glob("*")):
        name = entry.name
        if name.startswith(("loop", "ram", "zram", "sr", "fd")):
            continue
        queue = entry / "queue"
        device = BlockDevice(
            name=name,
            model=(_read(entry / "device" / "model") or _read(entry / "md" / "level")).strip(),
            size_bytes=(_int_or_none(_read(entry / "size")) or 0) * 512,
            rotational=_read(queue / "rotational").strip() == "1",
            nvme=name.startswith("nvme"),
            scheduler=_bracketed(_read(queue / "scheduler")),
            schedulers=_read(queue / "scheduler").replace("[", "").replace("]", "").split(),
            nr_requests=_int_or_none(_read(queue / "nr_requests")),
            read_ahead_kb=_int_or_none(_read(queue / "read_ahead_kb")),
            max_sectors_kb=_int_or_none(_read(queue / "max_sectors_kb")),
            rq_affinity=_int_or_none(_read(queue / "rq_affinity")),
            add_random=_int_or_none(_read(queue / "add_random")),
            nomerges=_int_or_none(_read(queue / "nomerges")),
            raid_level=_read(entry / "md" / "level").strip(),
            raid_members=sorted(p.name for p in (entry / "slaves").glob("*")),
            bus=device_bus(entry),
        )
        device.kind = storage_kind(device)
        devices.append(device)
    return devices


def device_bus(entry: Path) -> str:
    """How the kernel reaches a /sys/block entry: the subsystem its device sits on.

    virtio and xen for paravirtual disks, nvme, scsi (SATA, SAS, USB, virtio-scsi), md and
    dm for software RAID and device-mapper; the name (vd*, xvd*, nvme*) when sysfs is bare.
    """
    if (entry / "md").is_dir():
        return "md"
    if (entry / "dm").is_dir():
        return "dm"
    subsystem = entry / "device" / "subsystem"
    if subsystem.exists():
        name = Path(os.path.realpath(subsystem)).name
        return "nvme" if name.startswith("nvme") else name
    for prefix, bus in (("nvme", "nvme"), ("vd", "virtio"), ("xvd", "xen")):
        if entry.name.startswith(prefix):
            return bus
    return ""


VIRTUAL_BUSES = ("virtio", "xen")
"""Paravirtual disks: the hypervisor's storage, whatever it is, behind a software queue."""
VIRTUAL_MODELS = ("QEMU", "VMware", "Virtual disk", "Virtual Disk", "PersistentDisk",
                  "Amazon Elastic Block Store", "VBOX HARDDISK")
"""Models of emulated or network disks that present themselves as SCSI or NVMe devices."""


def storage_kind(device: BlockDevice | None) -> str:
    """pgtune's storage class for a device, from its bus and model first, its flag second.

    A paravirtual or emulated disk (virtio, Xen, QEMU/VMware SCSI, EBS on NVMe) is the
    hypervisor's or the network's storage: ``san``. Its queue/rotational flag says nothing
    about what backs it (virtio-blk reports 1 unless the host says otherwise), so the flag
    decides only for physical SCSI/SATA disks and for md/dm sets, whose flag the kernel
    derives from their members.
    """
    if device is None:
        return "ssd"
    if device.bus in VIRTUAL_BUSES or any(m in device.model for m in VIRTUAL_MODELS):
        return "san"
    if device.nvme or device.bus == "nvme":
        return "nvme"
    return "hdd" if device.rotational else "ssd"


def describe_device(device: BlockDevice) -> str:
    """What a device is, in words that agree with its storage class."""
    flag = int(device.rotational)
    if device.kind == "san" and device.bus in VIRTUAL_BUSES:
        return (f"{device.bus} virtual disk (san); queue/rotational={flag} is the driver's "
                "report, not what backs it")
    bus = device.bus or "an unknown bus"
    if device.kind == "san":
        return f"emulated or network disk {device.model!r} on {bus} (san)"
    if device.kind == "nvme":
        return "NVMe (nvme)"
    what = "spinning disk (hdd)" if device.kind == "hdd" else "solid-state (ssd)"
    return f"{what} on {bus}, queue/rotational={flag}"


def mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Mount]:
    result = []
    for line in _read(mountinfo).splitlines():
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 2:
            continue
        options = lf[5] + ("," + rf[2] if len(rf) > 2 else "")
        result.append(Mount(mount_point=lf[4].replace("\\040", " "), source=rf[1], fstype=rf[0],
                            options=options))
    return result


def mount_for(path: Path, table: list[Mount] | None = None) -> Mount | None:
    """The mount holding a path (the nearest existing ancestor for a path not made yet)."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    real = str(probe.resolve())
    best = None
    for mount in table if table is not None else mounts():
        point = mount.mount_point
        if (real == point or real.startswith(point.rstrip("/") + "/")) and (
                best is None or len(point) >= len(best.mount_point)):
            best = mount
    return best


def device_for(source: str, devices: list[BlockDevice]) -> BlockDevice | None:
    """The whole-disk device behind a mount source such as /dev/vda1 or /dev/nvme0n1p2."""
    name = Path(source).name
    if source.startswith("/dev/") and Path(source).exists():
        sys_entry = Path("/sys/class/block") / Path(os.path.realpath(source)).name
        if (sys_entry / "partition").exists():
            name = sys_entry.resolve().parent.name
        else:
            name = Path(os.path.realpath(source)).name
    return next((d for d in devices if d.name == name), None)


def volume_for(path: Path, devices: list[BlockDevice]) -> Volume:
    mount = mount_for(path)
    device = device_for(mount.source, devices) if mount else None
    return Volume(
        kind=device.kind if device else storage_kind(None),
        bus=device.bus if device else "",
        description=f"detected for {path}",
        mount=mount.mount_point if mount else "",
        device=f"/dev/{device.name}" if device else (mount.source if mount else ""),
        model=device.model if device else "",
        size_bytes=device.size_bytes if device else None,
        disk_count=max(1, len(device.raid_members)) if device else 1,
        raid_level=device.raid_level.removeprefix("raid") if device else "",
        fstype=mount.fstype if mount else "",
        mount_options=mount.options if mount else "",
        scheduler=device.scheduler if device else "",
        nr_requests=device.nr_requests if device else None,
        read_ahead_kb=device.read_ahead_kb if device else None,
        max_sectors_kb=device.max_sectors_kb if device else None,
        rotational=device.rotational if device else None,
    )


# ----- helpers ------------------------------------------------------------------------------------

def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    return None


def _bracketed(text: str) -> str:
    """The active choice in a sysfs list such as 'none [mq-deadline] kyber'."""
    start, end = text.find("["), text.find("]")
    if start >= 0 and end > start:
        return text[start + 1:end]
    return text.strip()
