"""The live system as provisioning reads and writes it: /proc/sys, /sys, block devices,
mounts and the programs that change storage. Nothing here decides anything; the step kinds
(kinds.py) call these so that every read and write goes through one place.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

ABSENT = "(absent)"
UNREADABLE = "(unreadable)"

SYSCTL_ROOT = Path("/proc/sys")
SYS_BLOCK = Path("/sys/block")
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
CPU_DIR = "sys/devices/system/cpu"
"""Under a root (/ on a live host; a directory of the same shape in tests)."""
GOVERNORS = ("performance", "powersave", "ondemand", "conservative", "schedutil", "userspace")
"""The kernel's cpufreq governors, what a host without cpufreq is told it could name."""


class StepFailed(Exception):
    """A write the kernel or a program refused; the message is one line for the user."""


def is_root() -> bool:
    """The euid check every apply and revert makes first (a seam the CLI and tests share)."""
    return os.geteuid() == 0


def sysctl_path(name: str) -> Path:
    return SYSCTL_ROOT / name.replace(".", "/")


def read_text(path: Path) -> str:
    """A kernel file's value, whitespace-normalised; ABSENT or UNREADABLE instead of raising."""
    try:
        return " ".join(path.read_text().split())
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return UNREADABLE


def write_kernel(path: Path, value: str) -> None:
    """Write one value to /proc/sys or /sys; the kernel's refusal becomes StepFailed."""
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        raise StepFailed(f"writing {value!r} to {path}: {exc.strerror or exc}") from None


def chosen(text: str) -> str:
    """The bracketed choice of a sysfs list ('always [madvise] never' -> madvise)."""
    if "[" in text and "]" in text:
        return text[text.index("[") + 1:text.index("]")]
    return text


def governor_files(root: Path) -> dict[str, Path]:
    """cpu name -> its cpufreq/scaling_governor, for every CPU that has one, in CPU order;
    {} where the kernel exposes no cpufreq (most VMs)."""
    try:
        cpus = [p.name for p in (root / CPU_DIR).iterdir()
                if p.name.startswith("cpu") and p.name[3:].isdigit()]
    except OSError:
        return {}
    files = {c: root / CPU_DIR / c / "cpufreq" / "scaling_governor"
             for c in sorted(cpus, key=lambda c: int(c[3:]))}
    return {c: f for c, f in files.items() if f.exists()}


def available_governors(root: Path) -> tuple[str, ...]:
    """The governors cpu0's driver offers (scaling_available_governors); () if unknown."""
    text = read_text(root / CPU_DIR / "cpu0" / "cpufreq" / "scaling_available_governors")
    return () if text in (ABSENT, UNREADABLE) else tuple(text.split())


def run(cmd: list[str], what: str) -> str:
    """Run a program; its failure becomes StepFailed with the program's own last line."""
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StepFailed(f"{what}: {shlex.join(cmd)}: {exc}") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise StepFailed(f"{what}: {shlex.join(cmd)} exited {result.returncode}"
                         + (f": {lines[-1]}" if lines else ""))
    return result.stdout


def probe(device: str) -> dict[str, str]:
    """What blkid finds on a device (TYPE, PTTYPE, UUID, LABEL); {} for a blank device."""
    try:
        result = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True,
                                text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def mounts() -> list[tuple[str, str, str, str]]:
    """(source, mount point, fstype, options) of every line of /proc/mounts."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((_unescape(parts[0]), _unescape(parts[1]), parts[2], parts[3]))
    return out


def _unescape(text: str) -> str:
    return text.encode().decode("unicode_escape") if "\\" in text else text


def device_mounts(device: str) -> list[str]:
    """Mount points of a device or of any of its partitions."""
    real = os.path.realpath(device)
    return [mp for src, mp, _, _ in mounts()
            if src.startswith("/dev/") and (os.path.realpath(src) == real
                                            or os.path.realpath(src).startswith(real + "p")
                                            or _is_partition_of(src, real))]


def _is_partition_of(src: str, device: str) -> bool:
    name = Path(os.path.realpath(src)).name
    base = Path(device).name
    return (SYS_BLOCK / base / name).exists()


def in_use(device: str) -> str:
    """Why a device is busy ('' if it is not): mounted, swap, or held by RAID/device-mapper."""
    mounted = device_mounts(device)
    if mounted:
        return f"mounted on {', '.join(mounted)}"
    real = os.path.realpath(device)
    try:
        swaps = [line.split()[0] for line in Path("/proc/swaps").read_text().splitlines()[1:]]
    except OSError:
        swaps = []
    if any(os.path.realpath(s) == real for s in swaps):
        return "in use as swap"
    holders = SYS_BLOCK / Path(real).name / "holders"
    if holders.is_dir() and any(holders.iterdir()):
        return f"held by {', '.join(p.name for p in holders.iterdir())}"
    return ""


def is_block_device(device: str) -> bool:
    import stat

    try:
        return stat.S_ISBLK(os.stat(device).st_mode)
    except OSError:
        return False


def md_available() -> str:
    """'' when Linux software RAID can be used here, else why not (one phrase)."""
    if not Path("/proc/mdstat").exists():
        return "this kernel has no md driver (no /proc/mdstat; modprobe md_mod, or a kernel " \
               "with md support)"
    if not _which("mdadm"):
        return "mdadm is not installed"
    return ""


def _which(program: str) -> str:
    import shutil

    return shutil.which(program) or ""


def xfs_geometry(device: str) -> dict[str, int]:
    """agcount, bsize, sunit and swidth (in blocks) of the XFS file system on a device (or a
    mount point), from xfs_info; {} when there is none or xfs_info cannot read it."""
    try:
        result = subprocess.run(["xfs_info", device], capture_output=True, text=True,
                                check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if result.returncode != 0:
        return {}
    geo: dict[str, int] = {}
    section = ""
    for raw in result.stdout.splitlines():
        head, _, rest = raw.partition("=")
        if head.strip():
            section = head.strip()
        for token in rest.replace(",", " ").split():
            key, sep, value = token.partition("=")
            if sep and value.isdigit() and section in ("meta-data", "data"):
                geo.setdefault(key, int(value))
    return geo


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace a file whole: a reader (or a crash) sees the old content or the new one."""
    tmp = path.with_name(f".{path.name}.pgdyno-tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
