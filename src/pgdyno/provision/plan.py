"""What to change: the OS and storage settings of a configuration as steps, with the value
each has on the live system now.

The settings come from the config engine (pgdyno.config) for a hardware profile, so `tune`,
`provision plan` and `tune --format script` show one set of values. Devices named on the
command line become the profile's volumes before the config is resolved: two data devices
make the engine plan a RAID set, its chunk, and the XFS stripe unit that matches it.
"""

from __future__ import annotations

import copy
import re
import socket
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pgdyno.config import HardwareProfile, Setting, Volume, load_hardware, resolve_config
from pgdyno.config.matrix_keys import MATRIX_KEYS, accepts_of, refusal, sysctl_key
from pgdyno.errors import UsageError
from pgdyno.provision.kinds import NO_CPUFREQ, handler
from pgdyno.provision.model import (
    AT_TARGET,
    CHANGE,
    DESTRUCTIVE,
    LIVE,
    PERSISTENT,
    SKIPPED,
    ProvisionPlan,
    Step,
)
from pgdyno.provision.system import (
    ABSENT,
    GOVERNORS,
    available_governors,
    read_text,
    sysctl_path,
)

SYSCTL_FILE = "/etc/sysctl.d/90-pgdyno.conf"
UDEV_FILE = "/etc/udev/rules.d/90-pgdyno-queue.rules"
TMPFILES_FILE = "/etc/tmpfiles.d/90-pgdyno-thp.conf"
LIMITS_FILE = "/etc/security/limits.d/90-pgdyno.conf"
LIMIT_USERS = ("pgdyno", "postgres")
"""Who the limits are for: pgdyno's own server user and the usual packaged one."""

OWNED_FILES = (SYSCTL_FILE, UDEV_FILE, TMPFILES_FILE, LIMITS_FILE)

GOVERNOR_KEY = "CPU_GOVERNOR"
GOVERNOR_NAMES = ("CPU_GOVERNOR", "cpu_governor", "scaling_governor")
"""How --set, --only and [config.os] name the CPU frequency governor."""
TUNED_GOVERNOR = ("performance", "every core at its highest clock: no ramp-up latency after "
                  "an idle moment, and figures that do not depend on the governor's load history")
"""The governor the tuned config provisions, and why (benchmark-grade hosts are set so)."""

_VALUE = re.compile(r"^[A-Za-z0-9 ._:/,=+-]*$")
_SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$")
_INTEGER = re.compile(r"^-?[0-9]+$")


@dataclass(frozen=True)
class PlanOptions:
    """What `pgdyno provision plan|apply|verify` were asked for, validated."""

    config: str = "tuned"
    hardware: str = "detect"
    workload: str = "oltp"
    data_devices: tuple[str, ...] = ()
    wal_devices: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    """--set KEY=VALUE: OS and storage keys (VM_SWAPPINESS, vm.swappiness) change the plan,
    others go to the config engine as PostgreSQL settings."""
    only: tuple[str, ...] = ()
    """Keys or native names to keep (empty: all)."""
    live_only: bool = False
    """No persistent files (sysctl.d, udev, tmpfiles.d, limits.d, fstab)."""
    pg_version: int | None = None
    data_dir: Path | None = None
    """An initialised, stopped cluster: PostgreSQL reports the huge pages it needs."""
    tuning: tuple[str, bool] | None = field(default=None, compare=False)
    sysfs_root: Path = Path("/")
    """Where /sys is read and written: / on a live host; a directory of the same shape in
    tests (the CPU governor's files)."""


def plan_for_config(opts: PlanOptions) -> ProvisionPlan:
    """The plan of a named config (or file) for a hardware profile and the named devices."""
    profile = with_devices(load_hardware(opts.hardware), opts.data_devices, opts.wal_devices)
    if not profile.os_settings:
        # The plan is for this host: limits are never planned below what it already allows.
        from pgdyno.config.detect import os_settings

        profile.os_settings = os_settings()
    os_over, pg_over = split_overrides(opts.overrides, opts.sysfs_root)
    install, user = _install(opts)
    resolved = resolve_config(opts.config, pg_over, install=install, workload=opts.workload,
                              hardware=profile, pg_major=opts.pg_version or (
                                  None if install else 18),
                              data_dir=opts.data_dir, server_user=user, tuning=opts.tuning)
    plan = resolved.plan
    settings = [s for s in (plan.settings if plan else []) if s.layer in ("os", "storage")]
    if resolved.name == "tuned":
        settings.append(governor_setting(TUNED_GOVERNOR[0], "tuned", TUNED_GOVERNOR[1]))
    for setting in os_over:
        settings = [s for s in settings if (s.key, s.group) != (setting.key, setting.group)]
        settings.append(setting)
    if plan is not None:
        _server_huge_pages(settings, plan.sizing)
    result = plan_from_settings(settings, config=resolved.name, hardware=profile.name,
                                data_devices=opts.data_devices, wal_devices=opts.wal_devices,
                                live_only=opts.live_only, only=opts.only,
                                sysfs_root=opts.sysfs_root)
    result.warnings += resolved.warnings
    result.machine = profile.name if not profile.source.startswith("detect") else \
        f"{profile.vcpus}vcpu-{round(profile.ram_bytes / 2**30)}gb"
    return result


def _install(opts: PlanOptions):
    """Binaries to ask about huge pages: only with --data-dir (a stopped cluster)."""
    if opts.data_dir is None:
        return None, None
    from pgdyno.targets.binaries import embedded_install
    from pgdyno.targets.osuser import server_user

    return embedded_install(), server_user()


def _server_huge_pages(settings: list[Setting], sizing: list) -> None:
    """vm.nr_hugepages from `postgres -C shared_memory_size_in_huge_pages` where the server
    answered (pgdyno tune's sizing says so); else the config engine's estimate stays."""
    told = next((line for line in sizing if line.label == "pages needed"
                 and line.formula.startswith("postgres -C")), None)
    if told is None:
        return
    for s in settings:
        if s.name == "vm.nr_hugepages" and s.apply == "sysctl":
            s.value = told.value
            s.rationale = f"{told.formula}: {told.value} pages for these settings"


def with_devices(profile: HardwareProfile, data: tuple[str, ...],
                 wal: tuple[str, ...]) -> HardwareProfile:
    """The profile with its volumes on the named devices (several: a RAID set)."""
    overlap = set(data) & set(wal)
    if overlap:
        raise UsageError(f"--wal-devices {','.join(sorted(overlap))}: also named by "
                         "--data-devices; accepted: separate devices for data and WAL")
    profile = copy.deepcopy(profile)
    if data:
        profile.data = _volume(profile.data or Volume(), data, "/dev/md0")
    if wal:
        profile.wal = _volume(profile.wal or copy.deepcopy(profile.data or Volume()), wal,
                              "/dev/md1")
        if profile.wal.mount == (profile.data.mount if profile.data else ""):
            profile.wal.mount = ""
    return profile


def _volume(vol: Volume, devices: tuple[str, ...], md: str) -> Volume:
    vol = copy.deepcopy(vol)
    vol.disk_count = len(devices)
    vol.device = devices[0] if len(devices) == 1 else md
    return vol


def split_overrides(items: tuple[str, ...], sysfs_root: Path = Path("/")
                    ) -> tuple[list[Setting], list[str]]:
    """--set items: (OS/storage settings, PostgreSQL key=value items for the engine)."""
    os_settings, pg = [], []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {item}: expected KEY=value, e.g. --set VM_SWAPPINESS=10 "
                             "or --set shared_buffers=4GB")
        setting = os_setting(key, value.strip(), "--set", sysfs_root)
        if setting is None:
            pg.append(item)
        else:
            os_settings.append(setting)
    return os_settings, pg


def os_setting(key: str, value: str, origin: str,
               sysfs_root: Path = Path("/")) -> Setting | None:
    """An OS or storage setting from a matrix key (VM_SWAPPINESS, DATA_READ_AHEAD_KB), a
    native name (vm.swappiness, transparent_hugepage) or the CPU governor (CPU_GOVERNOR);
    None for anything else.

    The value is checked first (UsageError naming what is accepted): against the matrix's
    type and range, or, for a sysctl the matrix does not know, against this kernel (it must
    exist, and a numeric sysctl takes as many integers as it holds)."""
    if key in GOVERNOR_NAMES:
        _check_governor(key, value, origin, sysfs_root)
        return governor_setting(value, origin, f"{origin} {key}={value}")
    spec = MATRIX_KEYS.get(key.upper())
    if spec is None and key == "transparent_hugepage":
        key, spec = "TRANSPARENT_HUGEPAGE", MATRIX_KEYS["TRANSPARENT_HUGEPAGE"]
    if spec is not None and spec.layer in ("os", "storage"):
        _check_value(key, value, origin)
        if spec.apply == "sysctl":
            _check_writable(spec.name, origin)
        return Setting(group=spec.group, key=key.upper(), name=spec.name, layer=spec.layer,
                       apply=spec.apply, value=value, default=spec.default, source=origin,
                       rationale=f"{origin} {key}={value}")
    if _SYSCTL_NAME.match(key):
        _check_value(key, value, origin)
        if accepts_of(key) is None:
            _check_live_sysctl(key, value, origin)
        _check_writable(key, origin)
        group = {"vm": "os_memory", "fs": "os_files", "net": "os_network"}.get(
            key.split(".")[0], "os_scheduler")
        return Setting(group=group, key=sysctl_key(key), name=key, layer="os", apply="sysctl",
                       value=value, source=origin, rationale=f"{origin} {key}={value}")
    return None


def governor_setting(value: str, source: str, rationale: str) -> Setting:
    """The CPU frequency governor of every CPU, as a setting of the OS scheduler group."""
    return Setting(group="os_scheduler", key=GOVERNOR_KEY, name="scaling_governor", layer="os",
                   apply="cpufreq", value=value, source=source, rationale=rationale)


def _check_governor(key: str, value: str, origin: str, sysfs_root: Path) -> None:
    """A governor this host's cpufreq driver offers; without cpufreq, one the kernel has (the
    plan then says it cannot be set here)."""
    offered = available_governors(sysfs_root) or GOVERNORS
    if value not in offered:
        raise UsageError(f"{origin} {key}={value}: accepted values are {', '.join(offered)}")


def _check_value(key: str, value: str, origin: str) -> None:
    why = refusal(key, value)
    if why:
        raise UsageError(f"{origin} {key}={value}: {why}")


def _check_writable(name: str, origin: str) -> None:
    """A read-only sysctl (kernel.ngroups_max) is refused now, not by the kernel mid-apply;
    one this kernel lacks is left to the plan's note and apply's check."""
    path = sysctl_path(name)
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not path.is_dir() and not mode & 0o222:
        raise UsageError(f"{origin} {name}: read-only on this kernel ({path}); accepted: a "
                         "sysctl this kernel lets root write")


def _check_live_sysctl(name: str, value: str, origin: str) -> None:
    """A sysctl outside the matrix: it must exist here, and where it holds integers the
    value must be as many integers (what the kernel would refuse, refused first)."""
    path = sysctl_path(name)
    if not path.exists() or path.is_dir():
        what = "a directory of sysctls" if path.is_dir() else "no such sysctl"
        raise UsageError(f"{origin} {name}: {what} on this kernel ({path}); accepted: a "
                         "sysctl this kernel has (sysctl -a) or a key of `pgdyno tune "
                         "--format env` (VM_SWAPPINESS)")
    live = read_text(path).split()
    if not live or not all(_INTEGER.match(f) for f in live):
        return  # a word (tcp_congestion_control) or unreadable here: the kernel decides
    given = value.split()
    if len(given) != len(live) or not all(_INTEGER.match(f) for f in given):
        what = "an integer" if len(live) == 1 else f"{len(live)} integers separated by spaces"
        raise UsageError(f"{origin} {name}={value}: accepted: {what}, as {path} holds "
                         f"({' '.join(live)})")


# ----- settings -> steps ------------------------------------------------------------------------

def plan_from_settings(settings: list[Setting], *, config: str, hardware: str,
                       data_devices: tuple[str, ...] = (), wal_devices: tuple[str, ...] = (),
                       live_only: bool = False, only: tuple[str, ...] = (),
                       sysfs_root: Path = Path("/")) -> ProvisionPlan:
    """Steps for these settings on these devices, each with its live value and status
    (``sysfs_root``: where the CPU governor's files are, / on a live host)."""
    chosen = _only(settings, only)
    for s in chosen:
        if not _VALUE.match(s.value):
            raise UsageError(f"{s.key}={s.value!r}: accepted: numbers, words and sizes "
                             "(letters, digits, spaces and . _ : / , = + -)")
    steps: list[Step] = []
    steps += _storage_steps(chosen, "data", data_devices, wal_devices)
    steps += _storage_steps(chosen, "wal", wal_devices, data_devices)
    steps += _queue_steps(chosen, "data", data_devices)
    steps += _queue_steps(chosen, "wal", wal_devices)
    steps += _kernel_steps(chosen, sysfs_root)
    steps += _skipped_rest(chosen, steps, wal_shared=_wal_shared(chosen, wal_devices))
    if not live_only:
        steps += _persistent_steps(steps, chosen)
    for step in steps:
        _read_live(step)
    plan = ProvisionPlan(config=config, hardware=hardware, steps=steps,
                         created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                         host=socket.gethostname())
    adopt_live_uuid(plan)
    return plan


def _wal_shared(settings: list[Setting], wal_devices: tuple[str, ...]) -> bool:
    by = {s.key: s.value for s in settings}
    return not wal_devices and by.get("WAL_MOUNT", "") == by.get("DATA_MOUNT", "")


def _only(settings: list[Setting], only: tuple[str, ...]) -> list[Setting]:
    if not only:
        return list(settings)
    wanted = {k.upper() for k in only} | set(only)
    kept = [s for s in settings if s.key in wanted or s.name in wanted]
    known = {s.key for s in settings} | {s.name for s in settings}
    unknown = [k for k in only if k not in known and k.upper() not in known]
    if unknown:
        raise UsageError(f"--only {','.join(unknown)}: not an OS or storage setting of this "
                         "config; accepted: keys of `pgdyno tune --format env` (VM_SWAPPINESS) "
                         "or native names (vm.swappiness)")
    return kept


def _read_live(step: Step) -> None:
    if step.status == SKIPPED:
        return
    h = handler(step)
    step.command = h.command(step)
    step.current = h.read(step)
    if step.kind == "governor" and step.current == NO_CPUFREQ:
        step.status, step.command = SKIPPED, ""
        step.note = ("the CPU governor cannot be set here: not exposed (no "
                     "/sys/devices/system/cpu/cpu0/cpufreq)")
    elif h.matches(step, step.current):
        step.status = AT_TARGET
    elif step.kind in ("sysctl", "hugepages") and step.current == ABSENT:
        step.note = "no such sysctl on this kernel"


def _kernel_steps(settings: list[Setting], sysfs_root: Path = Path("/")) -> list[Step]:
    steps = []
    for s in settings:
        if s.apply == "sysctl" and s.value not in ("", "n/a"):
            kind = "hugepages" if s.name == "vm.nr_hugepages" else "sysctl"
            steps.append(Step(kind=kind, target=s.name, value=s.value, keys=[s.key],
                              rationale=s.rationale, reversibility=LIVE))
        elif s.name == "transparent_hugepage" and s.value:
            steps.append(Step(kind="thp", target="transparent_hugepage", value=s.value,
                              keys=[s.key], rationale=s.rationale, reversibility=LIVE,
                              note="boot: kept by the tmpfiles.d entry (or the kernel's "
                                   "transparent_hugepage= option)"))
        elif s.apply == "cpufreq" and s.value:
            steps.append(Step(kind="governor", target="scaling_governor", value=s.value,
                              keys=[s.key], rationale=s.rationale, reversibility=LIVE,
                              params={"root": str(sysfs_root)},
                              note="every CPU; boot: the driver's default again (no file "
                                   "keeps it)"))
    return steps


def _queue_steps(settings: list[Setting], role: str, devices: tuple[str, ...]) -> list[Step]:
    rows = [s for s in settings if s.group == f"block_{role}" and s.apply == "sysfs"
            and s.value not in ("", "n/a")]
    steps = []
    for s in rows:
        if not devices:
            steps.append(Step(kind="queue", target=f"/sys/block/<{role} device>/queue/{s.name}",
                              value=s.value, keys=[s.key], rationale=s.rationale,
                              status=SKIPPED, note=f"no {role} device named "
                              f"(--{role}-devices)", params={"attr": s.name}))
            continue
        for dev in devices:
            steps.append(Step(kind="queue", target=f"{dev}:{s.name}", value=s.value,
                              keys=[s.key], rationale=s.rationale, reversibility=LIVE,
                              params={"device": dev, "attr": s.name}))
    return steps


def _storage_steps(settings: list[Setting], role: str, devices: tuple[str, ...],
                   other: tuple[str, ...]) -> list[Step]:
    """RAID, mkfs, mount and fstab of one volume (data or WAL)."""
    by = {s.key: s for s in settings}
    up = role.upper()
    mount = by.get(f"{up}_MOUNT")
    fs = by.get("FS_TYPE")
    if role == "wal" and not devices and mount is not None and by.get("DATA_MOUNT") and \
            mount.value == by["DATA_MOUNT"].value:
        return []  # WAL shares the data volume: one file system, planned with the data
    if not any(k in by for k in (f"{up}_MOUNT", f"{up}_RAID_LEVEL", f"XFS_{up}_AGCOUNT",
                                 f"XFS_{up}_SUNIT", f"XFS_MOUNT_OPTS_{up}")):
        return []
    if fs is not None and fs.value != "xfs":
        return [Step(kind="mkfs", target=f"<{role} device>", value=fs.value, keys=[fs.key],
                     status=SKIPPED, note="pgdyno provisions XFS only")]
    steps = []
    level = by.get(f"{up}_RAID_LEVEL")
    device = devices[0] if len(devices) == 1 else ""
    if level is not None and level.value not in ("", "none") and len(devices) > 1:
        chunk = by.get(f"{up}_RAID_CHUNK")
        md = (by.get(f"{up}_RAID_DEVICE").value if by.get(f"{up}_RAID_DEVICE") else "") or (
            "/dev/md0" if role == "data" else "/dev/md1")
        device = md
        steps.append(Step(
            kind="mdadm", target=md,
            value=f"raid{level.value} chunk {chunk.value if chunk else ''}",
            keys=[k for k in (level.key, chunk.key if chunk else "") if k],
            rationale=level.rationale, reversibility=DESTRUCTIVE, device=",".join(devices),
            params={"level": level.value, "chunk": chunk.value if chunk else "64K",
                    "members": ",".join(devices)},
            note="not in mdadm.conf: the superblock lets the kernel assemble it at boot"))
    steps += _mkfs_and_mount(by, role, device, devices)
    return steps


def _mkfs_and_mount(by: dict[str, Setting], role: str, device: str,
                    devices: tuple[str, ...]) -> list[Step]:
    up = role.upper()
    placeholder = f"<{role} device>"
    target = device or placeholder
    mount = by.get(f"{up}_MOUNT")
    mountpoint = mount.value if mount and mount.value else f"/{role}"
    sunit = by.get(f"XFS_{up}_SUNIT")
    params = {
        "su": sunit.value if sunit else "",
        "sw": (by[f"{up}_STRIPE_WIDTH"].value if f"{up}_STRIPE_WIDTH" in by and sunit
               and sunit.value else ""),
        "agcount": by[f"XFS_{up}_AGCOUNT"].value if f"XFS_{up}_AGCOUNT" in by else "",
        "log_su": by["XFS_LOG_STRIPE_UNIT"].value if "XFS_LOG_STRIPE_UNIT" in by else "",
        "label": f"pgdyno-{role}",
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL,
                               f"pgdyno:{socket.gethostname()}:{target}:{mountpoint}")),
    }
    keys = [k for k in ("FS_TYPE", f"XFS_{up}_SUNIT", f"{up}_STRIPE_WIDTH", f"XFS_{up}_AGCOUNT",
                        "XFS_LOG_STRIPE_UNIT") if k in by]
    skipped = "" if device else f"no {role} device named (--{role}-devices)"
    status = SKIPPED if skipped else CHANGE
    on_new_raid = len(devices) > 1
    mkfs = Step(kind="mkfs", target=target, value=_xfs_value(params), keys=keys,
                rationale=_join_rationale(by, keys), reversibility=DESTRUCTIVE,
                device="" if on_new_raid else device, params=params, status=status,
                note=skipped or ("on the RAID set made above" if on_new_raid else ""))
    opts = by.get(f"XFS_MOUNT_OPTS_{up}")
    mparams = {"mountpoint": mountpoint, "fstype": "xfs",
               "options": opts.value if opts else "defaults"}
    mkeys = [k for k in (f"{up}_MOUNT", f"XFS_MOUNT_OPTS_{up}") if k in by]
    mnt = Step(kind="mount", target=target, value=f"{mountpoint} {mparams['options']}",
               keys=mkeys, rationale=_join_rationale(by, mkeys), reversibility=LIVE,
               params=mparams, status=status, note=skipped)
    if skipped:
        mkfs.command = handler(mkfs).command(mkfs)
        mnt.command = handler(mnt).command(mnt)
    return [mkfs, mnt]


def _xfs_value(params: dict[str, str]) -> str:
    parts = ["xfs"]
    if params["agcount"]:
        parts.append(f"agcount={params['agcount']}")
    if params["su"]:
        parts += [f"su={params['su']}", f"sw={params['sw'] or 1}"]
    return " ".join(parts)


def _join_rationale(by: dict[str, Setting], keys: list[str]) -> str:
    return "; ".join(f"{k}: {by[k].rationale}" for k in keys if by[k].rationale)


def _skipped_rest(settings: list[Setting], steps: list[Step], wal_shared: bool) -> list[Step]:
    """Every OS/storage setting of the config no step implements, shown with why."""
    covered = {k for step in steps for k in step.keys}
    out = []
    for s in settings:
        if s.key in covered or s.apply == "info" or s.layer not in ("os", "storage"):
            continue
        if s.apply == "limits":
            continue  # the limits file step covers them
        why = s.rationale if s.value in ("", "n/a", "none") else "not applied by this plan"
        if wal_shared and (s.group in ("block_wal", "raid_wal") or "_WAL" in s.key):
            why = "WAL shares the data volume"
        out.append(Step(kind="queue" if s.apply == "sysfs" else "mkfs", target=s.name,
                        value=s.value, keys=[s.key], rationale=s.rationale, status=SKIPPED,
                        note=why))
    return out


def _persistent_steps(steps: list[Step], settings: list[Setting]) -> list[Step]:
    """The files that make the live changes last across reboots (pgdyno's own files)."""
    out = []
    sysctls = [s for s in steps if s.kind in ("sysctl", "hugepages") and s.status != SKIPPED]
    if sysctls:
        body = ["# pgdyno provision: kernel settings (revert: pgdyno provision revert)"]
        body += [f"{s.target} = {s.value}" for s in sysctls]
        out.append(_file("sysctl.d", SYSCTL_FILE, body, sysctls, "sysctl --system at boot"))
    queues = [s for s in steps if s.kind == "queue" and s.status != SKIPPED]
    if queues:
        body = ["# pgdyno provision: block queue settings"]
        body += [f'ACTION=="add|change", KERNEL=="{Path(s.params["device"]).name}", '
                 f'ATTR{{queue/{s.params["attr"]}}}="{s.value}"' for s in queues]
        out.append(_file("udev", UDEV_FILE, body, queues, "udev applies it when the device "
                         "appears"))
    thp = [s for s in steps if s.kind == "thp"]
    if thp:
        body = ["# pgdyno provision: transparent huge pages",
                f"w /sys/kernel/mm/transparent_hugepage/enabled - - - - {thp[0].value}"]
        out.append(_file("tmpfiles", TMPFILES_FILE, body, thp, "systemd-tmpfiles at boot"))
    limits = [s for s in settings if s.apply == "limits" and s.value]
    if limits:
        body = ["# pgdyno provision: per-process limits of the PostgreSQL users"]
        body += [f"{user} {kind} {s.name} {s.value}" for user in LIMIT_USERS
                 for s in limits for kind in ("soft", "hard")]
        step = Step(kind="limits", target=LIMITS_FILE, value="\n".join(body) + "\n",
                    keys=[s.key for s in limits], reversibility=PERSISTENT,
                    rationale="; ".join(s.rationale for s in limits),
                    note="new sessions (pam_limits); systemd units set LimitNOFILE= themselves")
        out.append(step)
    for mnt in (s for s in steps if s.kind == "mount" and s.status != SKIPPED):
        mkfs = next(s for s in steps if s.kind == "mkfs" and s.target == mnt.target)
        line = (f"UUID={mkfs.params['uuid']} {mnt.params['mountpoint']} xfs "
                f"{mnt.params['options']},nofail 0 0")
        out.append(Step(kind="fstab", target="/etc/fstab", value=line, keys=list(mnt.keys),
                        reversibility=PERSISTENT, rationale="mounted again at boot (nofail: a "
                        "missing volume does not stop the boot)"))
    return out


def _file(kind: str, path: str, body: list[str], steps: list[Step], note: str) -> Step:
    return Step(kind=kind, target=path, value="\n".join(body) + "\n",
                keys=[k for s in steps for k in s.keys], reversibility=PERSISTENT,
                rationale=f"keeps {len(steps)} live setting(s) across reboots", note=note)


def adopt_live_uuid(plan: ProvisionPlan) -> None:
    """A file system already at target keeps its UUID: the fstab line names that one."""
    from pgdyno.provision.system import probe

    for step in plan.steps:
        if step.kind == "mkfs" and step.status == AT_TARGET:
            live = probe(step.target).get("UUID")
            if live and live != step.params["uuid"]:
                old = step.params["uuid"]
                step.params["uuid"] = live
                for f in plan.steps:
                    if f.kind == "fstab" and f"UUID={old} " in f.value:
                        f.value = f.value.replace(f"UUID={old} ", f"UUID={live} ")
                        _read_live(_reset(f))


def _reset(step: Step) -> Step:
    step.status = CHANGE
    return step
