"""Applying a plan: checks that refuse before anything changes, the state file, the steps in
the safe order, and a rollback of everything done when one step fails.

Nothing is touched until every check passed and the state file is on disk: a refusal (not
root, no md driver, a device not named by --destroy-data, a mounted device) changes nothing.
Each step is recorded as started, with the value it replaces, before its write (the
write-ahead record), and as done after it: whatever kills the apply, the state file names
every step that may have changed the machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.provision.kinds import handler
from pgdyno.provision.model import DESTRUCTIVE, AppliedStep, ProvisionPlan, ProvisionState
from pgdyno.provision.state import new_state, write_state
from pgdyno.provision.system import (
    ABSENT,
    StepFailed,
    in_use,
    is_block_device,
    is_root,
    md_available,
    mounts,
    probe,
)

PAUSE_AFTER_WRITE = "PGDYNO_TEST_PAUSE_AFTER_WRITE"
"""Test hook, not a setting: seconds an apply sleeps between a step's write and its record as
done, so that a test can SIGKILL it inside that window (tests/test_provision_kill.py). Unset
(the normal case), there is no pause."""


class NeedsRoot(PgdynoError):
    """apply and revert change the kernel and devices: root only (exit 1)."""


class CannotHere(PgdynoError):
    """The machine cannot do a planned step (no md driver): refused before any change."""


class ApplyFailed(PgdynoError):
    """A step failed; everything done before it was undone (the state file says so)."""

    def __init__(self, message: str, state: ProvisionState) -> None:
        super().__init__(message)
        self.state = state


@dataclass(frozen=True)
class ApplyOptions:
    destroy_data: tuple[str, ...] = ()
    """Devices whose data the destructive steps may destroy, each named."""
    force_devices: tuple[str, ...] = ()
    """Devices holding a file system or partition table that may be overwritten anyway."""


def check(plan: ProvisionPlan, opts: ApplyOptions, need_root: bool = True) -> None:
    """Every refusal, before anything changes (a dry run makes the same checks)."""
    steps = plan.ordered()
    if need_root and steps and not is_root():
        raise NeedsRoot(f"provision apply needs root (euid {os.geteuid()}): it changes kernel "
                        "settings and devices; the commands it would run are above")
    for step in steps:
        if step.kind in ("sysctl", "hugepages") and step.current == ABSENT:
            raise UsageError(f"{step.keys[0] if step.keys else step.target}: sysctl "
                             f"{step.target} does not exist on this kernel; nothing was changed")
        if step.kind == "mdadm":
            why = md_available()
            if why:
                raise CannotHere(f"provision apply: RAID {step.params['level']} of "
                                 f"{step.params['members']} cannot be made here: {why}; "
                                 "nothing was changed")
        if step.reversibility == DESTRUCTIVE:
            for device in filter(None, step.device.split(",")):
                _check_device(step.command, device, opts)
        if step.kind == "mount":
            _check_mountpoint(step.params["mountpoint"], step.target)


def _check_device(command: str, device: str, opts: ApplyOptions) -> None:
    if not is_block_device(device):
        raise UsageError(f"--data-devices/--wal-devices {device}: not a block device")
    if device not in opts.destroy_data:
        raise UsageError(f"provision apply: {command.split()[0]} destroys the data on {device}; "
                         f"accepted: --destroy-data {device} (each device named)")
    busy = in_use(device)
    if busy:
        raise UsageError(f"provision apply: {device} is {busy}; refused (unmount it first)")
    found = probe(device)
    what = (f"a {found['TYPE']} file system" if "TYPE" in found
            else f"a {found['PTTYPE']} partition table" if "PTTYPE" in found else "")
    if what and device not in opts.force_devices:
        raise UsageError(f"provision apply: {device} holds {what}; refused; accepted: "
                         f"--force-device {device} to overwrite it")


def _check_mountpoint(mountpoint: str, device: str) -> None:
    path = Path(mountpoint)
    taken = [src for src, mp, _, _ in mounts() if mp == mountpoint]
    if taken and all(os.path.realpath(s) != os.path.realpath(device) for s in taken):
        raise UsageError(f"provision apply: {mountpoint} is already the mount point of "
                         f"{taken[-1]}; accepted: another DATA_MOUNT/WAL_MOUNT (--set)")
    if path.is_dir() and not taken and any(path.iterdir()):
        raise UsageError(f"provision apply: {mountpoint} is not empty; mounting over it would "
                         "hide its files; accepted: an empty or new directory")
    if path.exists() and not path.is_dir():
        raise UsageError(f"provision apply: {mountpoint} exists and is not a directory")


def apply_plan(plan: ProvisionPlan, workdir: Path, opts: ApplyOptions | None = None, *,
               context: str = "",
               on_start: Callable[[ProvisionState], None] | None = None
               ) -> ProvisionState | None:
    """Apply every step not yet at target; None when there is nothing to change.

    The state file is written before the first change (``on_start`` is then called with it:
    a caller's own journal can name the file before anything needs reverting). Each step is
    recorded ``started`` with the value it replaces, fsynced, before its write, and ``done``
    after it. A step that fails (or Ctrl-C) stops the apply and undoes every step that
    changed something, newest first; ApplyFailed says which step failed and the state file
    records the rollback. A kill leaves the state ``applying``, for `provision revert`.
    """
    opts = opts or ApplyOptions()
    check(plan, opts)
    if not plan.ordered():
        return None
    state = new_state(plan, workdir)
    state.context = context
    write_state(state)
    if on_start is not None:
        on_start(state)
    pause_s = _test_pause_s()
    current = None
    try:
        for current in state.steps:
            step = current.step
            current.previous = handler(step).save(step)
            current.started = True
            write_state(state)  # the write-ahead record: intent and old value, on disk
            handler(step).apply(step, force=step.device in opts.force_devices)
            if pause_s:
                time.sleep(pause_s)
            current.done = True
            write_state(state)
    except (StepFailed, OSError) as exc:
        undone = rollback(state, failed=current)
        state.error = f"{_label(current.step) if current else '?'}: {exc}"
        write_state(state)
        raise ApplyFailed(f"provision apply: step failed: {state.error}; rolled back "
                          f"{undone}; state {state.path}", state) from None
    except BaseException:
        rollback(state, failed=current)
        state.error = "interrupted"
        write_state(state)
        raise
    state.status = "applied"
    write_state(state)
    return state


def _test_pause_s() -> float:
    """PGDYNO_TEST_PAUSE_AFTER_WRITE in seconds (0: unset or not a number)."""
    try:
        return max(0.0, float(os.environ.get(PAUSE_AFTER_WRITE, "0")))
    except ValueError:
        return 0.0


def to_undo(state: ProvisionState) -> list[AppliedStep]:
    """The steps a rollback or revert restores, in apply order: every step done, and a step
    started but not recorded done (the apply was cut short between its write and its
    record) unless reading it back shows it changed nothing."""
    return [a for a in state.touched() if a.done or _changed(a)]


def rollback(state: ProvisionState, failed: AppliedStep | None = None) -> str:
    """Undo the steps that changed something (the one that failed too, when it left a
    change), newest first."""
    todo = to_undo(state)
    problems = []
    for applied in reversed(todo):
        try:
            handler(applied.step).restore(applied.step, applied.previous)
            applied.done = applied.started = False
        except (StepFailed, OSError) as exc:
            problems.append(f"{_label(applied.step)}: {exc}")
    state.status = "rolled back" if not problems else "rollback incomplete"
    if problems:
        state.error = "; ".join(problems)
    count = len([a for a in todo if a is not failed])
    return f"{count} step(s)" + (f" (could not undo: {'; '.join(problems)})" if problems else "")


def _changed(applied: AppliedStep) -> bool:
    """Whether a step cut short (it failed, or the apply was killed) left something to undo:
    a sysctl written or clamped, huge pages partly reserved, a file half replaced, a device
    overwritten. A refused write changed nothing, and restoring it would fail the same way.
    Steps whose live value cannot be compared (files) count as changed: restoring them is
    safe either way."""
    try:
        live = handler(applied.step).read(applied.step)
    except (StepFailed, OSError):
        return True
    return "value" not in applied.previous or live != applied.previous["value"]


def _label(step) -> str:
    return f"{step.kind} {step.target}"
