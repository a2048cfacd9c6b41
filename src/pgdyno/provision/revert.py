"""Reverting an apply from its state file: every live value and file put back, mounts
undone, newest change first; data destroyed by mkfs or mdadm is named, never pretended back.

What is reverted is every step the state file shows may have changed the machine: those done,
and one started but not recorded done (an apply killed between a write and its record),
which is restored whenever reading it back shows a change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.provision.apply import NeedsRoot, to_undo
from pgdyno.provision.kinds import handler
from pgdyno.provision.model import FILE_KINDS, ProvisionState, RevertReport, Step
from pgdyno.provision.state import load_state, write_state
from pgdyno.provision.system import StepFailed, is_root


def revert_state(state: ProvisionState | Path) -> RevertReport:
    """Restore what the state file saved; the state file is marked reverted."""
    if not isinstance(state, ProvisionState):
        state = load_state(Path(state))
    if state.status == "reverted":
        raise UsageError(f"provision revert {state.path}: already reverted at "
                         f"{state.reverted_at}")
    if state.status == "rolled back":
        raise UsageError(f"provision revert {state.path}: that apply failed and was rolled "
                         "back already; nothing to revert")
    if not is_root():
        raise NeedsRoot("provision revert needs root: it writes kernel settings and files")
    report = RevertReport(state_file=Path(state.path))
    undo = to_undo(state)
    for applied in state.touched():
        if all(applied is not a for a in undo):  # cut short before its write took effect
            applied.started = False
    for applied in reversed(undo):
        step = applied.step
        cut_short = applied.in_doubt
        try:
            cannot = handler(step).restore(step, applied.previous)
        except (StepFailed, OSError) as exc:
            report.failed.append(f"{step.kind} {step.target}: {exc}")
            continue
        applied.done = applied.started = False
        if cannot:
            report.cannot.append(cannot)
        else:
            restored = _restored(step, applied.previous)
            report.restored.append(f"{step.kind} {step.target}: {restored}" + (
                " (the apply stopped between its write and its record)" if cut_short
                else ""))
    state.status = "reverted" if not report.failed else "revert incomplete"
    state.reverted_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if report.failed:
        state.error = "; ".join(report.failed)
    write_state(state)
    return report


def _restored(step: Step, previous: dict[str, str]) -> str:
    """What the step is back to, in words (files by what happened to them)."""
    if step.kind == "fstab":
        return "pgdyno's line removed"
    if step.kind in FILE_KINDS:
        return "removed (pgdyno made it)" if previous.get("existed") == "no" else \
            "previous content restored"
    if step.kind == "mount":
        return "unmounted"
    return previous.get("value", "")
