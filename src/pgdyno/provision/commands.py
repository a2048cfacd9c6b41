"""`pgdyno provision plan|apply|verify|revert`, one call each: the plan, the apply (a dry run
unless asked to apply, the state file, the context's journal), the verify and the revert,
each with its journal event. The CLI builds the options, calls one of these and renders
the outcome; nothing here prints.

A journal that cannot be written is a warning (``warn``), never the reason an apply, verify
or revert reports failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.provision.apply import ApplyFailed, ApplyOptions, NeedsRoot, apply_plan, check
from pgdyno.provision.journal import record_event
from pgdyno.provision.model import Drift, ProvisionPlan, ProvisionState, RevertReport
from pgdyno.provision.plan import PlanOptions, plan_for_config
from pgdyno.provision.render import commands
from pgdyno.provision.revert import revert_state
from pgdyno.provision.state import latest_state, load_state
from pgdyno.provision.system import is_root
from pgdyno.provision.verify import drift, drifted
from pgdyno.results.names import dir_name_problem

Warn = Callable[[str], None]


DEVICES_ACCEPTED = "block device paths such as /dev/nvme1n1 or /dev/loop3, comma-separated"
ONLY_ACCEPTED = ("keys of `pgdyno tune --format env` (VM_SWAPPINESS) or native names "
                 "(vm.swappiness), comma-separated (leave --only out for every setting)")


def device_list(items: list[str] | tuple[str, ...], option: str) -> tuple[str, ...]:
    """Devices named on the command line (repeatable, comma-separated), each a block device
    path named once; else one line naming ``option`` and what it accepts."""
    out = split_list(items, option, f"{DEVICES_ACCEPTED} (leave {option} out for none)")
    for dev in out:
        if not dev.startswith("/dev/") or any(c.isspace() for c in dev):
            raise UsageError(f"{option} {dev}: accepted: {DEVICES_ACCEPTED}")
    if len(set(out)) != len(out):
        raise UsageError(f"{option} {','.join(out)}: a device is named twice")
    return out


def split_list(items: list[str] | tuple[str, ...], option: str,
               accepted: str) -> tuple[str, ...]:
    """A repeatable, comma-separated option's values. An empty value or item is refused:
    ``--only "$KEYS"`` with the variable unset must not select every setting, nor
    ``--data-devices "$DEV"`` plan without the device."""
    out = []
    for item in items:
        parts = [p.strip() for p in item.split(",")]
        if not all(parts):
            what = "an empty item" if any(parts) else "nothing named"
            raise UsageError(f"{option} {item!r}: {what}; accepted: {accepted}")
        out += parts
    return tuple(out)


def default_context(plan: ProvisionPlan, workload: str) -> str:
    """The journal context of a plan's machine and workload, as `pgdyno bench` names it."""
    return f"{plan.machine}--{workload}"


# ----- apply ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApplyRequest:
    """What `pgdyno provision apply` was asked for."""

    plan: PlanOptions
    apply: ApplyOptions = ApplyOptions()
    yes: bool = False
    """Apply; without it a dry run (every check made, nothing changed)."""
    workdir: Path | None = None
    """Where state files go (None: pgdyno's workdir)."""
    results_dir: Path = Path("results")
    context: str | None = None
    """The journal's context (None: ``default_context``)."""


@dataclass
class ApplyOutcome:
    commands: list[str]
    """What the apply runs (ran), in its order."""
    state: ProvisionState | None = None
    """The state of the changes made; None when nothing changed."""
    summary: str = ""
    refused: PgdynoError | None = None
    """Asked to apply without root: the refusal, raised once the commands are shown."""


def apply_command(req: ApplyRequest, warn: Warn) -> ApplyOutcome:
    """Plan, check and, with ``yes`` and root, apply; the apply (or its failure, rolled back:
    ApplyFailed is raised after its journal event) goes into the context's journal."""
    plan = plan_for_config(req.plan)
    todo = commands(plan)
    if not todo:
        return ApplyOutcome(todo, summary="nothing to change: every planned setting is at "
                                          "target")
    if not req.yes:
        check(plan, req.apply, need_root=False)
        note = "" if is_root() else " (and root)"
        return ApplyOutcome(todo, summary=f"dry run: {len(todo)} step(s), nothing changed "
                                          f"(--yes{note} to apply)")
    workdir = _workdir(req.workdir)
    if not is_root():
        try:
            apply_plan(plan, workdir, req.apply)
        except NeedsRoot as exc:
            return ApplyOutcome(todo, refused=exc)
    ctx = req.context or default_context(plan, req.plan.workload)
    try:
        state = apply_plan(plan, workdir, req.apply, context=ctx)
    except ApplyFailed as exc:
        _journal(req.results_dir, ctx, "apply", exc.exit_code, str(exc), exc.state.path, 0,
                 plan, warn)
        raise
    assert state is not None
    summary = f"applied {len(state.steps)} change(s); revert: pgdyno provision revert {state.path}"
    _journal(req.results_dir, ctx, "apply", 0, summary, state.path, len(state.steps), plan, warn)
    return ApplyOutcome(todo, state=state, summary=summary)


# ----- verify -----------------------------------------------------------------------------

@dataclass
class VerifyOutcome:
    rows: list[Drift]
    drifted: list[Drift] = field(default_factory=list)
    summary: str = ""

    @property
    def exit_code(self) -> int:
        return 1 if self.drifted else 0


def verify_command(opts: PlanOptions, results_dir: Path, context: str | None,
                   warn: Warn) -> VerifyOutcome:
    """Live values against the plan, with a journal event."""
    plan = plan_for_config(opts)
    rows = drift(plan)
    bad = drifted(rows)
    summary = (f"all {len(rows)} planned settings match" if not bad
               else f"{len(bad)} of {len(rows)} planned settings drifted")
    out = VerifyOutcome(rows, bad, summary)
    _journal(results_dir, context or default_context(plan, opts.workload), "verify",
             out.exit_code, summary, "", 0, plan, warn, drifted=len(bad))
    return out


# ----- revert -----------------------------------------------------------------------------

@dataclass
class RevertOutcome:
    report: RevertReport
    path: Path
    summary: str

    @property
    def exit_code(self) -> int:
        return 1 if self.report.failed else 0


def revert_command(state_file: Path | None, workdir: Path | None, results_dir: Path,
                   context: str | None, warn: Warn) -> RevertOutcome:
    """Undo an apply (``state_file``, else the latest), with a journal event."""
    path = state_file or latest_state(_workdir(workdir))
    state = load_state(path)
    report = revert_state(state)
    summary = (f"reverted {len(report.restored)} change(s) from {path}"
               + (f"; {len(report.cannot)} cannot be brought back" if report.cannot else "")
               + (f"; {len(report.failed)} FAILED" if report.failed else ""))
    out = RevertOutcome(report, Path(path), summary)
    ctx = context or state.context or f"{state.hardware}--provision"
    _journal(results_dir, ctx, "revert", out.exit_code, summary, str(path),
             len(report.restored), state, warn)
    return out


# ----- helpers ----------------------------------------------------------------------------

def _workdir(workdir: Path | None) -> Path:
    from pgdyno.options import default_workdir

    return workdir or default_workdir()


def _journal(results_dir: Path, context: str, action: str, code: int, summary: str,
             state_file: str, changed: int, source: ProvisionPlan | ProvisionState, warn: Warn,
             drifted: int = 0) -> None:
    """One event in the context's journal (``source``: the plan or state, for config and
    hardware)."""
    problem = dir_name_problem(context)
    if problem is not None:  # a context made from a profile's or a state file's name
        warn(f"warning: journal not written: context {context!r}: {problem}")
        return
    try:
        record_event(results_dir, context, action, exit_status=code, summary=summary,
                     state_file=state_file, changed=changed, drifted=drifted,
                     config=source.config, hardware=source.hardware)
    except OSError as exc:
        warn(f"warning: journal {results_dir}: {exc.strerror or exc}")
