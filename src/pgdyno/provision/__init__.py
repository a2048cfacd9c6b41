"""Provisioning: the one way pgdyno changes a machine's OS and storage layers.

plan (plan.py: what to change, read from the live system) -> apply (apply.py: checks, a
state file, the safe order, rollback) -> verify (verify.py) -> revert (revert.py). Each kind
of change has one handler (kinds.py). The campaign runner calls ``apply_settings`` before a
cell with ``[config.os]`` settings and ``revert`` after it; `pgdyno provision` calls the same
functions through commands.py (each command in one call, with its journal event), and
`pgdyno tune` resolves a config for a machine through tune.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.provision.apply import ApplyFailed, ApplyOptions, CannotHere, NeedsRoot, apply_plan
from pgdyno.provision.journal import ProvisionEvent, read_events, record_event
from pgdyno.provision.model import SKIPPED, ProvisionPlan, ProvisionState, RevertReport
from pgdyno.provision.plan import PlanOptions, os_setting, plan_for_config, plan_from_settings
from pgdyno.provision.revert import revert_state
from pgdyno.provision.system import ABSENT
from pgdyno.provision.verify import drift, drifted

__all__ = ["ApplyFailed", "ApplyOptions", "CannotHere", "NeedsRoot", "PlanOptions",
           "ProvisionEvent", "ProvisionPlan", "ProvisionState", "RevertReport", "apply_plan",
           "apply_settings", "check_settings", "drift", "drifted", "plan_for_config",
           "plan_from_settings", "plan_settings", "read_events", "record_event", "revert",
           "revert_state"]

CAMPAIGN_KINDS = frozenset({"sysctl", "hugepages", "thp", "queue", "governor"})
"""What a campaign cell may change: live, reversible values only (no files, no devices)."""


def plan_settings(settings: dict[str, str], *, data_devices: tuple[str, ...] = (),
                  wal_devices: tuple[str, ...] = (), persist: bool = False,
                  origin: str = "[config.os]", sysfs_root: Path = Path("/")) -> ProvisionPlan:
    """A plan of named settings: keys as `pgdyno tune --format env` writes them
    (VM_SWAPPINESS, DATA_READ_AHEAD_KB, TRANSPARENT_HUGEPAGE), native names
    (vm.swappiness, transparent_hugepage) or CPU_GOVERNOR. Unknown keys: UsageError naming
    them. ``sysfs_root``: where the governor's files are (/ on a live host)."""
    parsed = []
    for key, value in settings.items():
        setting = os_setting(str(key), str(value), origin, sysfs_root)
        if setting is None:
            raise UsageError(f"{origin} {key}: not an OS setting; accepted: keys of `pgdyno tune "
                             "--format env` (VM_SWAPPINESS, DATA_READ_AHEAD_KB, "
                             "TRANSPARENT_HUGEPAGE), sysctl names (vm.swappiness) or "
                             "CPU_GOVERNOR")
        parsed.append(setting)
    return plan_from_settings(parsed, config=origin, hardware="this host",
                              data_devices=data_devices, wal_devices=wal_devices,
                              live_only=not persist, sysfs_root=sysfs_root)


def apply_settings(settings: dict[str, str], workdir: Path, *,
                   data_devices: tuple[str, ...] = (), wal_devices: tuple[str, ...] = (),
                   persist: bool = False, origin: str = "[config.os]", context: str = "",
                   on_start: Callable[[ProvisionState], None] | None = None
                   ) -> ProvisionState | None:
    """Apply a campaign cell's OS settings, live only unless ``persist``; returns the state
    to hand to ``revert`` after the cell (None: everything was already at target).
    ``on_start`` gets the state once its file is on disk, before the first change.

    Refuses (UsageError) storage layout keys (mkfs, mount, RAID): a cell may only change
    values that one write restores. Raises NeedsRoot, ApplyFailed (rolled back) as apply."""
    plan = check_settings(settings, data_devices=data_devices, wal_devices=wal_devices,
                          persist=persist, origin=origin)
    return apply_plan(plan, workdir, context=context, on_start=on_start)


def check_settings(settings: dict[str, str], *, data_devices: tuple[str, ...] = (),
                   wal_devices: tuple[str, ...] = (), persist: bool = False,
                   origin: str = "[config.os]") -> ProvisionPlan:
    """The plan of a campaign cell's OS settings, refused (UsageError) for unknown keys, values
    outside the matrix's type and range, sysctls this kernel lacks and storage layout
    (mkfs, mount, RAID): a cell may only change values that one write restores. Reads the
    live values; changes nothing."""
    plan = plan_settings(settings, data_devices=data_devices, wal_devices=wal_devices,
                         persist=persist, origin=origin)
    layout = [s for s in plan.steps if s.kind not in CAMPAIGN_KINDS and not persist]
    if layout:
        keys = ", ".join(k for s in layout for k in s.keys)
        raise UsageError(f"{origin} {keys}: storage layout is not a per-cell setting; "
                         "accepted: sysctls, transparent huge pages, block queue settings "
                         "(use pgdyno provision apply for the layout)")
    unset = [s for s in plan.steps if s.kind == "governor" and s.status == SKIPPED]
    if unset:  # a cell would run as its neighbours do: no comparison to make
        raise UsageError(f"{origin} {unset[0].keys[0]}: {unset[0].note}; accepted: sysctls, "
                         "transparent huge pages, block queue settings")
    absent = [s for s in plan.steps if s.kind in ("sysctl", "hugepages") and s.current == ABSENT]
    if absent:
        raise UsageError(f"{origin} {', '.join(s.target for s in absent)}: no such sysctl on "
                         "this kernel; accepted: a sysctl this kernel has (sysctl -a)")
    return plan


def revert(state: ProvisionState | Path | str) -> RevertReport:
    """Undo an apply (a state from ``apply_settings`` or a state file path)."""
    return revert_state(state if isinstance(state, ProvisionState) else Path(state))
