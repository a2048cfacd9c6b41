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
