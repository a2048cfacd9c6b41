"""Which block devices hold the data and WAL directories.

A directory lives on a filesystem; the filesystem sits on a block device (``st_dev``),
or, for btrfs/overlay/ZFS-like filesystems whose ``st_dev`` is anonymous, on the source
named in /proc/self/mountinfo. That device may be a partition (its disk is the physical
device), a loop device (its backing file lives on yet another device), or a
device-mapper/md device (its ``slaves`` are the members). The *top* device is the one
the filesystem sees, and its /proc/diskstats line is what the role's I/O figures use; the
*physical* devices are the whole disks at the bottom, which SMART is asked about.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SYS_BLOCK_BY_NUMBER = Path("/sys/dev/block")
SYS_CLASS_BLOCK = Path("/sys/class/block")
MOUNTINFO = Path("/proc/self/mountinfo")
MAX_DEPTH = 8  # loop-on-loop-on-dm chains deeper than this are not real setups


@dataclass
class DeviceResolution:
    """How one directory maps to block devices."""

    path: str
    top: str | None = None
    """Name of the device the filesystem is on (as in /proc/diskstats), e.g. ``md0``."""
    chain: list[str] = field(default_factory=list)
    """Every device met from top to bottom, e.g. ``["dm-0", "nvme0n1p2", "nvme0n1"]``."""
    physical: list[str] = field(default_factory=list)
    """Whole disks at the bottom of the chain (SMART candidates)."""
    mount_point: str | None = None
    fstype: str | None = None
    error: str | None = None
    """Why the path could not be resolved, when it could not."""


def resolve_path(path: Path | str) -> DeviceResolution:
    """Never raises: an unresolvable path comes back with ``error`` set."""
    result = DeviceResolution(path=str(path))
    try:
        real = Path(os.path.realpath(path))
        mount = _mount_of(real)
        if mount is not None:
            result.mount_point, result.fstype = mount[0], mount[1]
        st_dev = os.stat(real).st_dev
        major, minor = os.major(st_dev), os.minor(st_dev)
        name = _name_of(major, minor)
        if name is None and mount is not None and mount[2].startswith("/dev/"):
            # Anonymous st_dev (btrfs, overlay...): the mount's source names the device.
            rdev = os.stat(mount[2]).st_rdev
            name = _name_of(os.major(rdev), os.minor(rdev))
        if name is None:
            result.error = (f"{real} is on {major}:{minor} "
                            f"({result.fstype or 'unknown filesystem'}), not a block device")
            return result
        result.top = name
        _walk(name, result, depth=0)
    except OSError as exc:
        result.error = f"{path}: {exc}"
    return result


def _name_of(major: int, minor: int) -> str | None:
    link = SYS_BLOCK_BY_NUMBER / f"{major}:{minor}"
    if major == 0 or not link.exists():
        return None
    return link.resolve().name


def _walk(name: str, result: DeviceResolution, depth: int) -> None:
    if depth > MAX_DEPTH or name in result.chain:
        return
    result.chain.append(name)
    sys_dir = (SYS_CLASS_BLOCK / name).resolve()
    if (sys_dir / "partition").exists():
        _walk(sys_dir.parent.name, result, depth + 1)  # the disk holding the partition
        return
    backing = sys_dir / "loop" / "backing_file"
    if backing.exists():
        inner = resolve_path(backing.read_text().strip())
        for dev in inner.chain:
            _walk(dev, result, depth + 1)
        return
    slaves = sorted(p.name for p in (sys_dir / "slaves").glob("*"))
    if slaves:
        for slave in slaves:
            _walk(slave, result, depth + 1)
        return
    if name not in result.physical:
        result.physical.append(name)


def _mount_of(path: Path) -> tuple[str, str, str] | None:
    """(mount point, fstype, source) of the mount holding path: the longest prefix wins."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return None
    best: tuple[str, str, str] | None = None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        point = fields[4].replace("\\040", " ")
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, tail[0], tail[1])
    return best


def is_virtual(name: str) -> bool:
    """Devices that cannot have SMART data of their own."""
    return name.startswith(("loop", "ram", "zram", "dm-", "md", "nbd", "vd", "xvd"))


# ----- whether a device is in use (before anything writes to it raw) ----------------------

SWAPS = Path("/proc/swaps")


def block_device_name(path: str | Path) -> str | None:
    """The kernel's name (``sdb``, ``nvme1n1``, ``loop3``) of a block device node; None when
    ``path`` is not one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat

    if not stat.S_ISBLK(st.st_mode):
        return None
    return _name_of(os.major(st.st_rdev), os.minor(st.st_rdev))


def partitions_of(name: str) -> list[str]:
    """The device's partitions (``sdb1``, ``nvme0n1p2``): directories of its sysfs entry that
    have a ``partition`` file."""
    sys_dir = SYS_CLASS_BLOCK / name
    return sorted(p.name for p in sys_dir.iterdir() if (p / "partition").exists()) \
        if sys_dir.is_dir() else []


def device_users(name: str) -> list[str]:
    """What uses the device or one of its partitions: mounts, swap, and holders (a
    device-mapper or md device built on it). Empty: nothing the kernel knows of."""
    names = [name, *partitions_of(name)]
    numbers = {_number_of(n): n for n in names}
    users = []
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5:
            continue
        source = os.path.realpath(tail[1]) if len(tail) > 1 and tail[1].startswith("/dev/") \
            else ""
        owner = numbers.get(fields[2]) or next(
            (n for n in names if source == f"/dev/{n}"), None)
        if owner is not None:
            users.append(f"/dev/{owner} is mounted on {fields[4].replace(chr(92) + '040', ' ')}")
    try:
        swaps = SWAPS.read_text().splitlines()[1:]
    except OSError:
        swaps = []
    for line in swaps:
        path = line.split()[0] if line.split() else ""
        if os.path.realpath(path) in {f"/dev/{n}" for n in names}:
            users.append(f"{path} is in use as swap")
    for n in names:
        holders = sorted(p.name for p in (SYS_CLASS_BLOCK / n / "holders").glob("*"))
        if holders:
            users.append(f"/dev/{n} is held by {', '.join(holders)} (device-mapper, md or LVM)")
    return users


def _number_of(name: str) -> str:
    try:
        return (SYS_CLASS_BLOCK / name / "dev").read_text().strip()
    except OSError:
        return ""


def size_bytes(name: str) -> int | None:
    """The device's size from sysfs (always in 512-byte sectors)."""
    try:
        return int((SYS_CLASS_BLOCK / name / "size").read_text()) * 512
    except (OSError, ValueError):
        return None


# ----- identity ---------------------------------------------------------------------------

NVME_TIMEOUT_S = 10.0


@dataclass
class DeviceIdentity:
    """What a block device is, as a run's environment table records it (sysfs, and
    ``nvme id-ctrl`` for NVMe namespaces)."""

    name: str
    model: str = ""
    firmware: str = ""
    size_bytes: int | None = None
    rotational: bool | None = None
    scheduler: str = ""
    nr_requests: int | None = None
    read_ahead_kb: int | None = None
    max_sectors_kb: int | None = None
    kind: str = ""
    """``nvme``, ``loop`` (with its backing file), ``md``, ``dm``, ``partition``, ``disk``."""
    members: list[str] = field(default_factory=list)
    """md/dm members, a partition's disk, a loop device's backing file."""

    def describe(self) -> str:
        """One line for the environment table."""
        parts = [self.model or self.kind or "block device"]
        if self.firmware:
            parts.append(f"firmware {self.firmware}")
        if self.size_bytes:
            # Imported here: an --ssh host runs this module's source alone (standard
            # library only, telemetry.remote); only the local side words the facts.
            from pgdyno.units import format_bytes
            parts.append(format_bytes(self.size_bytes))
        if self.rotational is not None:
            parts.append("rotational" if self.rotational else "non-rotational")
        if self.scheduler:
            parts.append(f"scheduler {self.scheduler}")
        queue = [f"{k} {v}" for k, v in (("nr_requests", self.nr_requests),
                                         ("read_ahead_kb", self.read_ahead_kb),
                                         ("max_sectors_kb", self.max_sectors_kb)) if v]
        parts += queue
        if self.members:
            parts.append(f"on {', '.join(self.members)}")
        return f"{self.name}: " + ", ".join(parts)


def device_identity(name: str) -> DeviceIdentity:
    """Never raises: what sysfs does not say stays empty."""
    sys_dir = SYS_CLASS_BLOCK / name
    ident = DeviceIdentity(name=name, size_bytes=size_bytes(name))
    queue_owner = sys_dir
    if (sys_dir / "partition").exists():
        disk = sys_dir.resolve().parent.name
        ident.kind, ident.members, queue_owner = "partition", [disk], SYS_CLASS_BLOCK / disk
    elif (sys_dir / "loop" / "backing_file").exists():
        ident.kind = "loop"
        ident.members = [_read(sys_dir / "loop" / "backing_file")]
    elif (sys_dir / "md").exists() or (sys_dir / "dm").exists():
        ident.kind = "md" if (sys_dir / "md").exists() else "dm"
        level = _read(sys_dir / "md" / "level") or _read(sys_dir / "dm" / "name")
        ident.model = f"{ident.kind} {level}".strip()
        ident.members = sorted(p.name for p in (sys_dir / "slaves").glob("*"))
    else:
        ident.kind = "nvme" if name.startswith("nvme") else "disk"
    device = queue_owner / "device"
    ident.model = ident.model or " ".join(
        filter(None, (_read(device / "vendor"), _read(device / "model")))).strip()
    ident.firmware = _read(device / "firmware_rev") or _read(device / "rev")
    queue = queue_owner / "queue"
    rotational = _read(queue / "rotational")
    ident.rotational = rotational == "1" if rotational in ("0", "1") else None
    sched = _read(queue / "scheduler")
    ident.scheduler = sched[sched.find("[") + 1:sched.find("]")] if "[" in sched else sched
    ident.nr_requests = _read_int(queue / "nr_requests")
    ident.read_ahead_kb = _read_int(queue / "read_ahead_kb")
    ident.max_sectors_kb = _read_int(queue / "max_sectors_kb")
    if ident.kind == "nvme":
        _nvme_id_ctrl(ident)
    return ident


def _nvme_id_ctrl(ident: DeviceIdentity) -> None:
    """Model and firmware as the controller states them (``nvme id-ctrl -o json``: mn, fr)."""
    import json
    import shutil
    import subprocess

    if shutil.which("nvme") is None:
        return
    try:
        proc = subprocess.run(["nvme", "id-ctrl", f"/dev/{ident.name}", "-o", "json"],
                              capture_output=True, text=True, timeout=NVME_TIMEOUT_S,
                              check=False)
        data = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return
    ident.model = str(data.get("mn", "")).strip() or ident.model
    ident.firmware = str(data.get("fr", "")).strip() or ident.firmware


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _read_int(path: Path) -> int | None:
    text = _read(path)
    return int(text) if text.lstrip("-").isdigit() else None


def storage_identity(path: Path | str) -> list[DeviceIdentity]:
    """Every device under ``path``, top first (its chain: partition, md/dm, members)."""
    res = resolve_path(path)
    return [device_identity(name) for name in res.chain]
