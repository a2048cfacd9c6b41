"""What a host exposes about its CPU clock, frequency governor, NUMA nodes, the mounts of
the run's directories and its NVMe links: the environment table's platform rows (a drive
qualification report lists each of them).

Everything is read under ``root`` (``/`` on a live host; a recorded tree in tests), and a
fact the host does not expose stays empty (None, {} or []) instead of being guessed: a VM
without cpufreq has no base or maximum clock, and its "cpu MHz" is kept apart as the clock
cpu0 ran at when read. Standard library only, so that the same source runs on an --ssh
database host (``telemetry.remote.platform_of``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
NVME_CLASS = "sys/class/nvme"
MOUNTINFO = "proc/self/mountinfo"
CPUINFO = "proc/cpuinfo"

PCIE_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""Transfer rate per lane (GT/s) -> PCIe generation."""


@dataclass
class MountFact:
    """The file system holding one of the run's directories (longest mount point prefix in
    /proc/self/mountinfo; the last of equal mount points, as the kernel stacks them)."""

    role: str
    path: str
    mount_point: str
    fstype: str
    source: str
    options: str
    """The mount's options then the file system's own (mountinfo's super options), each
    once: what /proc/mounts shows (rw,relatime,discard,...)."""


@dataclass
class NvmeLink:
    """One NVMe controller's PCIe link, from its PCI device's sysfs attributes."""

    controller: str
    model: str = ""
    speed: str = ""
    """current_link_speed as the kernel states it ("16.0 GT/s PCIe"); "" not exposed."""
    width: str = ""
    """current_link_width (lanes, "4"); "" not exposed."""
    generation: int | None = None
    """The PCIe generation of ``speed`` (16.0 GT/s: 4); None when the speed is not one."""
    max_speed: str = ""
    max_width: str = ""
    max_generation: int | None = None


@dataclass
class PlatformFacts:
    """The platform rows of the environment table; empty values: not exposed here."""

    cpu_base_mhz: float | None = None
    cpu_base_source: str = ""
    """Where the base clock comes from: "cpufreq base_frequency", or "model name" (the
    "@ 2.40GHz" Intel states there)."""
    cpu_max_mhz: float | None = None
    """cpu0's cpufreq cpuinfo_max_freq: the highest clock (boost) the kernel may ask for."""
    cpu_current_mhz: float | None = None
    """/proc/cpuinfo "cpu MHz" of the first CPU: the clock when read, neither base nor max
    (on a VM without cpufreq, the only clock there is)."""
    cpufreq_driver: str = ""
    governors: dict[str, int] = field(default_factory=dict)
    """scaling_governor -> how many CPUs use it; {}: no cpufreq (not exposed)."""
    numa_nodes: int | None = None
    """/sys/devices/system/node/node*; None: not exposed (a kernel without NUMA support)."""
    mounts: list[MountFact] = field(default_factory=list)
    nvme_exposed: bool = False
    """Whether /sys/class/nvme exists (the NVMe driver is loaded)."""
    nvme_links: list[NvmeLink] = field(default_factory=list)


def collect_platform(directories: dict[str, str | Path] | None = None,
                     root: str | Path = "/") -> PlatformFacts:
    """The host's platform facts, with the mounts of ``directories`` (role -> path). Never
    raises: what cannot be read stays empty."""
    base = Path(root)
    facts = PlatformFacts()
    _cpu_clock(base, facts)
    facts.governors, facts.cpufreq_driver = cpu_governors(base)
    facts.numa_nodes = numa_nodes(base)
    facts.mounts = mount_facts(directories or {}, base)
    facts.nvme_exposed = (base / NVME_CLASS).is_dir()
    facts.nvme_links = nvme_links(base)
    return facts


def cpu_dirs(root: Path) -> list[Path]:
    """cpu0, cpu1, ... under ``root`` in CPU order (cpufreq, cpuidle and the rest left out)."""
    try:
        names = [p.name for p in (root / CPU_DIR).iterdir() if re.fullmatch(r"cpu\d+", p.name)]
    except OSError:
        return []
    return [root / CPU_DIR / n for n in sorted(names, key=lambda n: int(n[3:]))]


def cpu_governors(root: Path) -> tuple[dict[str, int], str]:
    """(governor -> CPUs using it, the cpufreq driver); ({}, "") without cpufreq."""
    counts: dict[str, int] = {}
    driver = ""
    for cpu in cpu_dirs(root):
        governor = _read(cpu / "cpufreq" / "scaling_governor")
        if governor:
            counts[governor] = counts.get(governor, 0) + 1
            driver = driver or _read(cpu / "cpufreq" / "scaling_driver")
    return counts, driver


def _cpu_clock(root: Path, facts: PlatformFacts) -> None:
    cpufreq = root / CPU_DIR / "cpu0" / "cpufreq"
    base_khz = _read_number(cpufreq / "base_frequency")
    max_khz = _read_number(cpufreq / "cpuinfo_max_freq")
    if base_khz:
        facts.cpu_base_mhz, facts.cpu_base_source = base_khz / 1000, "cpufreq base_frequency"
    if max_khz:
        facts.cpu_max_mhz = max_khz / 1000
    model, current = _cpuinfo(root)
    facts.cpu_current_mhz = current
    stated = re.search(r"@\s*([0-9.]+)\s*GHz", model)
    if facts.cpu_base_mhz is None and stated:
        facts.cpu_base_mhz, facts.cpu_base_source = float(stated.group(1)) * 1000, "model name"


def _cpuinfo(root: Path) -> tuple[str, float | None]:
    """(model name, cpu MHz) of the first processor in /proc/cpuinfo."""
    model, mhz = "", None
    for line in _read(root / CPUINFO).splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not key and (model or mhz is not None):
            break  # the blank line after the first processor
        if key == "model name" and not model:
            model = value
        elif key == "cpu MHz" and mhz is None:
            mhz = _number(value)
    return model, mhz


def numa_nodes(root: Path) -> int | None:
    nodes = root / NODE_DIR
    try:
        return sum(1 for p in nodes.iterdir() if re.fullmatch(r"node\d+", p.name))
    except OSError:
        return None


def mount_facts(directories: dict[str, str | Path], root: Path) -> list[MountFact]:
    """The mount holding each directory; a directory not created yet: its nearest existing
    parent's (where it will be created). On a recorded tree (``root`` not /) the paths are
    taken as they are named."""
    table = parse_mountinfo(_read(root / MOUNTINFO))
    out = []
    for role, path in directories.items():
        where = _existing(Path(path)) if Path(root) == Path("/") else Path(path)
        found = mount_of(table, str(where))
        if found is not None:
            point, fstype, source, options = found
            out.append(MountFact(role=role, path=str(path), mount_point=point, fstype=fstype,
                                 source=source, options=options))
    return out


def parse_mountinfo(text: str) -> list[tuple[str, str, str, str]]:
    """(mount point, fstype, source, options) per line of /proc/self/mountinfo, in its
    order; options as /proc/mounts joins them: the mount's, then the super block's new ones."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 2:
            continue
        options = fields[5].split(",")
        options += [o for o in (tail[2].split(",") if len(tail) > 2 else [])
                    if o not in options and o not in ("rw", "ro")]
        out.append((_unescape(fields[4]), tail[0], _unescape(tail[1]), ",".join(options)))
    return out


def mount_of(table: list[tuple[str, str, str, str]], path: str
             ) -> tuple[str, str, str, str] | None:
    """The entry whose mount point is the longest prefix of ``path`` (the last one of equal
    mount points: a later mount hides an earlier one on the same point)."""
    best = None
    for entry in table:
        point = entry[0]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = entry
    return best


def nvme_links(root: Path) -> list[NvmeLink]:
    """Every NVMe controller under /sys/class/nvme, with what its PCI device states."""
    try:
        names = sorted((p.name for p in (root / NVME_CLASS).iterdir()
                        if re.fullmatch(r"nvme\d+", p.name)), key=lambda n: int(n[4:]))
    except OSError:
        return []
    out = []
    for name in names:
        ctrl = root / NVME_CLASS / name
        device = ctrl / "device"
        speed, top = _read(device / "current_link_speed"), _read(device / "max_link_speed")
        out.append(NvmeLink(controller=name, model=_read(ctrl / "model"), speed=speed,
                            width=_read(device / "current_link_width"),
                            generation=pcie_generation(speed), max_speed=top,
                            max_width=_read(device / "max_link_width"),
                            max_generation=pcie_generation(top)))
    return out


def pcie_generation(speed: str) -> int | None:
    """"16.0 GT/s PCIe" (or "8 GT/s") -> 4; None for anything else ("Unknown", "")."""
    match = re.match(r"\s*([0-9.]+)\s*GT/s", speed)
    return PCIE_GENERATIONS.get(float(match.group(1))) if match else None


def _existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return Path(os.path.realpath(path))


def _unescape(text: str) -> str:
    """mountinfo's octal escapes (\\040 space, \\011 tab, \\012 newline, \\134 backslash)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _read_number(path: Path) -> float | None:
    return _number(_read(path))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
