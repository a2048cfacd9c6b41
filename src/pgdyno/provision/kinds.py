"""One handler per kind of step: how to read its live value, the command that changes it,
how to change it, what to save first and how to put it back.

Every handler answers the same five questions, so apply, verify and revert never look at a
step's kind: they ask its handler. A handler's ``apply`` reads the value back and fails when
the kernel kept another (a sysctl clamped, fewer huge pages reserved than asked): a change
that did not happen must stop the apply, not pass as done.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from pathlib import Path

from pgdyno.provision.model import Step
from pgdyno.provision.system import (
    ABSENT,
    CPU_DIR,
    SYS_BLOCK,
    THP_ENABLED,
    StepFailed,
    atomic_write,
    chosen,
    governor_files,
    md_available,
    mounts,
    probe,
    read_text,
    run,
    sysctl_path,
    write_kernel,
    xfs_geometry,
)

PAIRED_SYSCTLS = {
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_ratio": "vm.dirty_bytes",
}
"""Sysctls the kernel keeps in pairs: writing one zeroes the other, and the byte form cannot
be written as 0. Restoring one of them means writing whichever of the pair was in use."""


def same_value(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


class Handler:
    """The interface (and the no-op defaults) of a kind of step."""

    def read(self, step: Step) -> str:
        raise NotImplementedError

    def matches(self, step: Step, live: str) -> bool:
        return same_value(step.value, live)

    def command(self, step: Step) -> str:
        raise NotImplementedError

    def save(self, step: Step) -> dict[str, str]:
        return {"value": self.read(step)}

    def apply(self, step: Step, force: bool = False) -> None:
        raise NotImplementedError

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        """Put back what ``save`` recorded; returns '' or what could not be brought back."""
        raise NotImplementedError


class KernelValue(Handler):
    """A value in /proc/sys or /sys that one write changes and one write restores."""

    def path(self, step: Step) -> Path:
        raise NotImplementedError

    def read(self, step: Step) -> str:
        return read_text(self.path(step))

    def command(self, step: Step) -> str:
        return f"echo {shlex.quote(step.value)} > {self.path(step)}"

    def apply(self, step: Step, force: bool = False) -> None:
        write_kernel(self.path(step), step.value)
        live = self.read(step)
        if not self.matches(step, live):
            raise StepFailed(f"{step.target}: wrote {step.value!r}, the kernel kept {live!r}")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        write_kernel(self.path(step), previous["value"])
        return ""


class Sysctl(KernelValue):
    def path(self, step: Step) -> Path:
        return sysctl_path(step.target)

    def command(self, step: Step) -> str:
        return f"sysctl -w {step.target}={shlex.quote(step.value)}"

    def save(self, step: Step) -> dict[str, str]:
        saved = {"value": self.read(step)}
        pair = PAIRED_SYSCTLS.get(step.target)
        if pair:
            saved.update(pair=pair, pair_value=read_text(sysctl_path(pair)))
        return saved

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        pair = previous.get("pair")
        if pair and previous["value"] == "0" and previous.get("pair_value", "0") != "0":
            write_kernel(sysctl_path(pair), previous["pair_value"])  # zeroes this one again
            return ""
        write_kernel(self.path(step), previous["value"])
        return ""


class HugePages(Sysctl):
    def apply(self, step: Step, force: bool = False) -> None:
        write_kernel(self.path(step), step.value)
        got = self.read(step)
        if not self.matches(step, got):
            raise StepFailed(f"vm.nr_hugepages: the kernel reserved {got} of {step.value} huge "
                             "pages (too little free or unfragmented memory)")


class TransparentHugePages(KernelValue):
    def path(self, step: Step) -> Path:
        return THP_ENABLED

    def read(self, step: Step) -> str:
        return chosen(read_text(THP_ENABLED))


class Queue(KernelValue):
    """/sys/block/DEV/queue/ATTR of one device (params: device, attr)."""

    def path(self, step: Step) -> Path:
        return SYS_BLOCK / step.params["device"].removeprefix("/dev/") / "queue" / \
            step.params["attr"]

    def read(self, step: Step) -> str:
        text = read_text(self.path(step))
        return chosen(text) if step.params["attr"] == "scheduler" else text


NO_CPUFREQ = "(not exposed: no cpufreq)"
"""What a host without cpufreq (most VMs) reads for the governor: nothing to set there."""


class Governor(Handler):
    """The cpufreq governor of every CPU (params: root, "/" on a live host): one live value
    per CPU, each saved before the write and each written back by a revert."""

    def root(self, step: Step) -> Path:
        return Path(step.params.get("root") or "/")

    def per_cpu(self, step: Step) -> dict[str, str]:
        return {cpu: read_text(path) for cpu, path in governor_files(self.root(step)).items()}

    def read(self, step: Step) -> str:
        """The governor when every CPU has the same one; else each governor with how many
        CPUs use it ("powersave on 3 CPUs; performance on 1 CPU"), never equal to a single
        target (the state file keeps each CPU's own)."""
        live = list(self.per_cpu(step).values())
        if not live:
            return NO_CPUFREQ
        governors = list(dict.fromkeys(live))
        if len(governors) == 1:
            return governors[0]
        counts = {g: live.count(g) for g in governors}
        return "; ".join(f"{g} on {n} CPU{'s' if n != 1 else ''}" for g, n in counts.items())

    def pattern(self, step: Step) -> str:
        """Every CPU's governor file as a shell glob."""
        return str(self.root(step) / CPU_DIR / "cpu[0-9]*" / "cpufreq" / "scaling_governor")

    def command(self, step: Step) -> str:
        return f"for f in {self.pattern(step)}; do echo {shlex.quote(step.value)} > \"$f\"; done"

    def save(self, step: Step) -> dict[str, str]:
        """The summary ("value", what rollback compares) and each CPU's own governor."""
        return {"value": self.read(step), **self.per_cpu(step)}

    def apply(self, step: Step, force: bool = False) -> None:
        files = governor_files(self.root(step))
        if not files:
            raise StepFailed("CPU governor: no cpufreq on this host (nothing to set)")
        for cpu, path in files.items():
            write_kernel(path, step.value)
            live = read_text(path)
            if live != step.value:
                raise StepFailed(f"{cpu} scaling_governor: wrote {step.value!r}, the kernel "
                                 f"kept {live!r}")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        files = governor_files(self.root(step))
        for cpu, value in previous.items():
            if cpu in files and read_text(files[cpu]) != value:
                write_kernel(files[cpu], value)
        return ""


class OwnedFile(Handler):
    """A file pgdyno owns whole (sysctl.d, udev rule, tmpfiles.d, limits.d): written whole,
    restored to its previous content or removed, with the directories it had to create."""

    def read(self, step: Step) -> str:
        try:
            return Path(step.target).read_text()
        except FileNotFoundError:
            return ABSENT
        except OSError as exc:
            return f"(unreadable: {exc.strerror})"

    def command(self, step: Step) -> str:
        body = step.value.rstrip("\n")
        return f"cat > {step.target} <<'PGDYNO_EOF'\n{body}\nPGDYNO_EOF"

    def save(self, step: Step) -> dict[str, str]:
        path = Path(step.target)
        saved = {"missing_dirs": ":".join(str(d) for d in _missing_dirs(path.parent))}
        if path.exists():
            saved.update(existed="yes", content=path.read_text(),
                         mode=oct(path.stat().st_mode & 0o7777))
        else:
            saved["existed"] = "no"
        return saved

    def apply(self, step: Step, force: bool = False) -> None:
        path = Path(step.target)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, step.value)
        except OSError as exc:
            raise StepFailed(f"writing {path}: {exc.strerror or exc}") from None

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        path = Path(step.target)
        if previous.get("existed") == "yes":
            atomic_write(path, previous["content"], int(previous.get("mode", "0o644"), 8))
        else:
            path.unlink(missing_ok=True)
        _remove_dirs(previous.get("missing_dirs", ""))
        return ""


class Fstab(Handler):
    """One line of /etc/fstab under a marker comment line of its own (fstab has no trailing
    comments): added, and removed again with its marker by revert; no other line of the file
    is ever touched."""

    FSTAB = Path("/etc/fstab")
    MARK = "# pgdyno provision (pgdyno provision revert removes this and the next line)"

    def read(self, step: Step) -> str:
        lines = self._lines()
        return step.value if step.value in lines else "(no pgdyno line)"

    def command(self, step: Step) -> str:
        return f"printf '%s\\n' {shlex.quote(self.MARK)} {shlex.quote(step.value)} >> {self.FSTAB}"

    def save(self, step: Step) -> dict[str, str]:
        return {"present": "yes" if step.value in self._lines() else "no"}

    def apply(self, step: Step, force: bool = False) -> None:
        text = self.FSTAB.read_text() if self.FSTAB.exists() else ""
        if text and not text.endswith("\n"):
            text += "\n"
        atomic_write(self.FSTAB, f"{text}{self.MARK}\n{step.value}\n")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        if previous.get("present") == "yes" or not self.FSTAB.exists():
            return ""
        lines = self.FSTAB.read_text().splitlines(keepends=True)
        kept: list[str] = []
        for line in lines:
            if line.rstrip("\n") == step.value:
                if kept and kept[-1].rstrip("\n") == self.MARK:
                    kept.pop()
                continue
            kept.append(line)
        atomic_write(self.FSTAB, "".join(kept))
        return ""

    def _lines(self) -> list[str]:
        try:
            return self.FSTAB.read_text().splitlines()
        except OSError:
            return []


class Mount(Handler):
    """A device mounted at a mount point with options (params: mountpoint, fstype, options)."""

    def read(self, step: Step) -> str:
        real = os.path.realpath(step.target)
        found = [f"{mp} {opts}" for src, mp, _, opts in mounts()
                 if src.startswith("/dev/") and os.path.realpath(src) == real]
        return "; ".join(found) or "not mounted"

    def matches(self, step: Step, live: str) -> bool:
        want = mount_options(step.params["options"])
        for entry in live.split("; "):
            mp, _, opts = entry.partition(" ")
            if mp == step.params["mountpoint"] and want <= mount_options(opts):
                return True
        return False

    def command(self, step: Step) -> str:
        p = step.params
        return (f"mkdir -p {shlex.quote(p['mountpoint'])} && mount -t {p['fstype']} -o "
                f"{shlex.quote(p['options'])} {step.target} {shlex.quote(p['mountpoint'])}")

    def save(self, step: Step) -> dict[str, str]:
        mp = Path(step.params["mountpoint"])
        return {"value": self.read(step),
                "missing_dirs": ":".join(str(d) for d in _missing_dirs(mp))}

    def apply(self, step: Step, force: bool = False) -> None:
        p = step.params
        Path(p["mountpoint"]).mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", p["fstype"], "-o", p["options"], step.target, p["mountpoint"]],
            "mount")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        mp = step.params["mountpoint"]
        if any(m == mp for _, m, _, _ in mounts()):
            run(["umount", mp], "umount")
        _remove_dirs(previous.get("missing_dirs", ""))
        return ""


class Mkfs(Handler):
    """mkfs.xfs on a device (params: su, sw, agcount, log_su, label, uuid): destructive."""

    def read(self, step: Step) -> str:
        found = probe(step.target)
        if not found:
            return "blank (no file system or partition table)"
        if found.get("TYPE") == "xfs":
            return describe_xfs(xfs_geometry(step.target))
        if "PTTYPE" in found:
            return f"partition table {found['PTTYPE']}"
        return found.get("TYPE", "unknown signature")

    def matches(self, step: Step, live: str) -> bool:
        """XFS with every figure the step names (others, e.g. agcount when unplanned, free)."""
        return set(describe_xfs(self.wanted(step)).split()) <= set(live.split())

    def wanted(self, step: Step) -> dict[str, int]:
        """The geometry the step asks for, in xfs_info's terms (4 kB blocks)."""
        p = step.params
        geo: dict[str, int] = {"bsize": 4096}
        if p.get("agcount"):
            geo["agcount"] = int(p["agcount"])
        if p.get("su"):
            sunit = parse_bytes(p["su"]) // 4096
            geo.update(sunit=sunit, swidth=sunit * int(p.get("sw") or 1))
        return geo

    def command(self, step: Step) -> str:
        return shlex.join(self.argv(step, force=False))

    def argv(self, step: Step, force: bool) -> list[str]:
        p = step.params
        data = []
        if p.get("su"):
            data += [f"su={p['su']}", f"sw={p.get('sw') or 1}"]
        if p.get("agcount"):
            data.append(f"agcount={p['agcount']}")
        cmd = ["mkfs.xfs", "-q"] + (["-f"] if force else [])
        cmd += ["-d", ",".join(data)] if data else []
        cmd += ["-l", f"su={p['log_su']}"] if p.get("log_su") else []
        cmd += ["-m", f"uuid={p['uuid']}"] if p.get("uuid") else []
        cmd += ["-L", p["label"]] if p.get("label") else []
        return cmd + [step.target]

    def save(self, step: Step) -> dict[str, str]:
        found = probe(step.target)
        return {"value": self.read(step), "uuid": found.get("UUID", "")}

    def apply(self, step: Step, force: bool = False) -> None:
        run(self.argv(step, force), "mkfs.xfs")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        return (f"{step.target}: what mkfs.xfs replaced ({previous.get('value', 'unknown')}) "
                "cannot be brought back")


class Mdadm(Handler):
    """An md RAID set (params: level, chunk, members): destructive for its members."""

    def read(self, step: Step) -> str:
        why = md_available()
        if why and "not installed" not in why:
            return "md unavailable"
        name = Path(step.target).name
        try:
            lines = Path("/proc/mdstat").read_text().splitlines()
        except OSError:
            return ABSENT
        active = any(line.startswith(f"{name} : active") for line in lines)
        return "active" if active else ABSENT

    def matches(self, step: Step, live: str) -> bool:
        return live == "active"

    def command(self, step: Step) -> str:
        return shlex.join(self.argv(step))

    def argv(self, step: Step) -> list[str]:
        p = step.params
        members = p["members"].split(",")
        return ["mdadm", "--create", step.target, "--run", "--metadata=1.2",
                f"--level={p['level']}", f"--raid-devices={len(members)}",
                f"--chunk={p['chunk']}", *members]

    def apply(self, step: Step, force: bool = False) -> None:
        why = md_available()
        if why:
            raise StepFailed(f"RAID {step.params['level']} on {step.target}: {why}")
        run(self.argv(step), "mdadm")

    def restore(self, step: Step, previous: dict[str, str]) -> str:
        run(["mdadm", "--stop", step.target], "mdadm --stop")
        members = step.params["members"].split(",")
        run(["mdadm", "--zero-superblock", *members], "mdadm --zero-superblock")
        return (f"{', '.join(members)}: the data the RAID set replaced cannot be brought back")


HANDLERS: dict[str, Handler] = {
    "sysctl": Sysctl(), "hugepages": HugePages(), "thp": TransparentHugePages(),
    "queue": Queue(), "governor": Governor(), "sysctl.d": OwnedFile(), "udev": OwnedFile(),
    "tmpfiles": OwnedFile(),
    "limits": OwnedFile(), "fstab": Fstab(), "mount": Mount(), "mkfs": Mkfs(), "mdadm": Mdadm(),
}


def handler(step: Step) -> Handler:
    return HANDLERS[step.kind]


# ----- helpers ----------------------------------------------------------------------------------

_SIZE = re.compile(r"^(\d+)([kmgt]?)b?$", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """64k, 256K, 1m, 4096 -> bytes (the units mkfs.xfs and mount options use)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a size (e.g. 64k, 1m)")
    power = " kmgt".index(match.group(2).lower() or " ")
    return int(match.group(1)) * 1024 ** power


def mount_options(text: str) -> set[str]:
    """Options as a set, sizes in bytes (256k = 262144) and 'defaults'/'rw' dropped, so the
    planned options compare with what /proc/mounts shows (allocsize=64m -> 65536k)."""
    out = set()
    for opt in text.split(","):
        key, sep, value = opt.strip().partition("=")
        if not key or key in ("defaults", "rw"):
            continue
        if sep and _SIZE.match(value):
            value = str(parse_bytes(value))
        out.add(f"{key}={value}" if sep else key)
    return out


def describe_xfs(geo: dict[str, int]) -> str:
    """One comparable line for an XFS geometry: 'xfs agcount=8 su=64k sw=2'."""
    if not geo:
        return "xfs (geometry unreadable)"
    parts = ["xfs"]
    if "agcount" in geo:
        parts.append(f"agcount={geo['agcount']}")
    sunit = geo.get("sunit", 0)
    if sunit:
        parts.append(f"su={sunit * geo.get('bsize', 4096) // 1024}k")
        parts.append(f"sw={geo.get('swidth', sunit) // sunit}")
    return " ".join(parts)


def _missing_dirs(path: Path) -> list[Path]:
    """The directories mkdir -p would create for ``path``, deepest first."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    return missing


def _remove_dirs(joined: str) -> None:
    for name in filter(None, joined.split(":")):
        with contextlib.suppress(OSError):  # not empty or already gone: leave it
            Path(name).rmdir()
