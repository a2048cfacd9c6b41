"""Reverting an apply from its state file: every live value and file put back, mounts
undone, newest change first; data destroyed by mkfs or mdadm is named, never pretended back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.provision.apply import NeedsRoot
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
    for applied in reversed(state.done()):
        step = applied.step
        try:
            cannot = handler(step).restore(step, applied.previous)
        except (StepFailed, OSError) as exc:
            report.failed.append(f"{step.kind} {step.target}: {exc}")
            continue
        applied.done = False
        if cannot:
            report.cannot.append(cannot)
        else:
            restored = _restored(step, applied.previous)
            report.restored.append(f"{step.kind} {step.target}: {restored}")
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
