"""`pgdyno provision plan|apply|verify|revert`: thin wiring around pgdyno.provision.

Arguments become PlanOptions/ApplyOptions, one core function runs, its result is printed,
the context's journal gets one event, and the outcome becomes the exit code.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from pgdyno.errors import UsageError

provision_app = typer.Typer(help="Plan, apply, verify and revert OS and storage settings.",
                            no_args_is_help=True)

PLAN_FORMATS = ("table", "md", "json", "commands")
VERIFY_FORMATS = ("table", "json")


def register(app: typer.Typer) -> None:
    app.add_typer(provision_app, name="provision")


# Options shared by plan, apply and verify (typer has no option groups: module constants).
_CONFIG = typer.Option("tuned", "--config", help="default, pgtune, tuned or a .toml/.env file.")
_HARDWARE = typer.Option("detect", "--hardware", help="Catalogue name, profile file or detect.")
_WORKLOAD = typer.Option("oltp", "--workload", help="Tuning class or benchmark workload.")
_DATA = typer.Option([], "--data-devices", help="Data device(s), comma-separated; several: RAID.")
_WAL = typer.Option([], "--wal-devices", help="WAL device(s), comma-separated; several: RAID.")
_SET = typer.Option([], "--set", help="KEY=value, e.g. VM_SWAPPINESS=10 (repeatable).")
_ONLY = typer.Option([], "--only", help="Only these keys or names, comma-separated.")
_LIVE = typer.Option(False, "--live-only", help="No persistent files (sysctl.d, udev, fstab...).")
_PGV = typer.Option(None, "--pg-version", min=15, max=18, help="Tune for this major version.")
_DATADIR = typer.Option(None, "--data-dir",
                        help="A stopped cluster: PostgreSQL reports the huge pages it needs.")
_WORKDIR = typer.Option(None, "--workdir", help="Where state files go (default: pgdyno's).")
_RESULTS = typer.Option(Path("results"), "--results-dir", help="Root of the journals.")
_CONTEXT = typer.Option(None, "--context", help="Journal context (default <machine>--<workload>).")


@provision_app.command("plan")
def plan_cmd(config: str = _CONFIG, hardware: str = _HARDWARE, workload: str = _WORKLOAD,
             data_devices: list[str] = _DATA, wal_devices: list[str] = _WAL,
             overrides: list[str] = _SET, only: list[str] = _ONLY, live_only: bool = _LIVE,
             pg_version: int = _PGV, data_dir: Path = _DATADIR,
             fmt: str = typer.Option("table", "--format", help="table, md, json or commands.")
             ) -> None:
    """Every OS and storage setting: live value, target, command, how it is undone, why."""
    from pgdyno.provision.render import commands, plan_markdown, plan_table

    _choice("--format", fmt, PLAN_FORMATS)
    plan = _plan(config, hardware, workload, data_devices, wal_devices, overrides, only,
                 live_only, pg_version, data_dir)
    if fmt == "json":
        typer.echo(json.dumps(plan.to_dict(), indent=2))
    elif fmt == "md":
        typer.echo(plan_markdown(plan), nl=False)
    elif fmt == "commands":
        typer.echo("\n".join(commands(plan)))
    else:
        _console().print(plan_table(plan))
        for warning in plan.warnings:
            typer.echo(f"warning: {warning}")


@provision_app.command("apply")
def apply_cmd(config: str = _CONFIG, hardware: str = _HARDWARE, workload: str = _WORKLOAD,
              data_devices: list[str] = _DATA, wal_devices: list[str] = _WAL,
              overrides: list[str] = _SET, only: list[str] = _ONLY, live_only: bool = _LIVE,
              pg_version: int = _PGV, data_dir: Path = _DATADIR,
              yes: bool = typer.Option(False, "--yes", help="Apply (else a dry run)."),
              destroy_data: list[str] = typer.Option(
                  [], "--destroy-data", help="Device whose data mkfs/mdadm may destroy."),
              force_device: list[str] = typer.Option(
                  [], "--force-device", help="Overwrite the file system/partition table on it."),
              workdir: Path = _WORKDIR, results_dir: Path = _RESULTS,
              context: str = _CONTEXT) -> None:
    """Apply the plan: a dry run unless --yes; state saved first; rolled back on failure."""
    from pgdyno.provision import ApplyFailed, ApplyOptions, apply_plan
    from pgdyno.provision.apply import check
    from pgdyno.provision.render import commands
    from pgdyno.provision.system import is_root

    plan = _plan(config, hardware, workload, data_devices, wal_devices, overrides, only,
                 live_only, pg_version, data_dir)
    opts = ApplyOptions(destroy_data=_devices(destroy_data), force_devices=_devices(force_device))
    todo = commands(plan)
    if not todo:
        typer.echo("nothing to change: every planned setting is at target")
        return
    if not yes:
        check(plan, opts, need_root=False)
        typer.echo("\n".join(todo))
        note = "" if is_root() else " (and root)"
        typer.echo(f"dry run: {len(todo)} step(s), nothing changed (--yes{note} to apply)")
        return
    if not is_root():
        typer.echo("\n".join(todo))
        apply_plan(plan, _workdir(workdir), opts)  # raises NeedsRoot: one line, exit 1
    ctx = context or f"{plan.machine}--{workload}"
    try:
        state = apply_plan(plan, _workdir(workdir), opts, context=ctx)
    except ApplyFailed as exc:
        _journal(results_dir, ctx, "apply", exc.exit_code, str(exc), exc.state.path, 0, plan)
        raise
    assert state is not None
    for applied in state.steps:
        typer.echo(f"applied {applied.step.kind} {applied.step.target}: "
                   f"{applied.previous.get('value', '-')[:60]!s} -> {applied.step.shown_value}")
    summary = f"applied {len(state.steps)} change(s); revert: pgdyno provision revert {state.path}"
    _journal(results_dir, ctx, "apply", 0, summary, state.path, len(state.steps), plan)
    typer.echo(summary)


@provision_app.command("verify")
def verify_cmd(config: str = _CONFIG, hardware: str = _HARDWARE, workload: str = _WORKLOAD,
               data_devices: list[str] = _DATA, wal_devices: list[str] = _WAL,
               overrides: list[str] = _SET, only: list[str] = _ONLY, live_only: bool = _LIVE,
               pg_version: int = _PGV, data_dir: Path = _DATADIR,
               fmt: str = typer.Option("table", "--format", help="table or json."),
               results_dir: Path = _RESULTS, context: str = _CONTEXT) -> None:
    """Live values against the plan: exit 0 when all match, 1 with the drift otherwise."""
    from pgdyno.provision import drift, drifted
    from pgdyno.provision.render import drift_table

    _choice("--format", fmt, VERIFY_FORMATS)
    plan = _plan(config, hardware, workload, data_devices, wal_devices, overrides, only,
                 live_only, pg_version, data_dir)
    rows = drift(plan)
    bad = drifted(rows)
    summary = (f"all {len(rows)} planned settings match" if not bad
               else f"{len(bad)} of {len(rows)} planned settings drifted")
    if fmt == "json":
        typer.echo(json.dumps({"summary": summary, "rows": [r.__dict__ for r in rows]}, indent=2))
    elif bad:
        _console().print(drift_table(bad, f"provision verify: {summary}"))
    else:
        typer.echo(f"provision verify: {summary}")
    code = 1 if bad else 0
    _journal(results_dir, context or f"{plan.machine}--{workload}", "verify", code, summary,
             "", 0, plan, drifted=len(bad))
    if code:
        raise typer.Exit(code)


@provision_app.command("revert")
def revert_cmd(state_file: Path = typer.Argument(None, metavar="[STATE]",
                                                 help="A state file (default: the latest)."),
               workdir: Path = _WORKDIR, results_dir: Path = _RESULTS,
               context: str = _CONTEXT) -> None:
    """Restore what an apply changed (live values and files); destroyed data is named."""
    from pgdyno.provision import revert_state
    from pgdyno.provision.render import revert_lines
    from pgdyno.provision.state import latest_state, load_state

    path = state_file or latest_state(_workdir(workdir))
    state = load_state(path)
    report = revert_state(state)
    for line in revert_lines(report):
        typer.echo(line)
    code = 1 if report.failed else 0
    summary = (f"reverted {len(report.restored)} change(s) from {path}"
               + (f"; {len(report.cannot)} cannot be brought back" if report.cannot else "")
               + (f"; {len(report.failed)} FAILED" if report.failed else ""))
    ctx = context or state.context or f"{state.hardware}--provision"
    _journal(results_dir, ctx, "revert", code, summary, str(path), len(report.restored),
             state)
    typer.echo(summary)
    if code:
        raise typer.Exit(code)


# ----- wiring helpers ---------------------------------------------------------------------------

def _plan(config, hardware, workload, data_devices, wal_devices, overrides, only, live_only,
          pg_version, data_dir):
    from pgdyno.provision import PlanOptions, plan_for_config

    opts = PlanOptions(config=config, hardware=hardware, workload=workload,
                       data_devices=_devices(data_devices, "--data-devices"),
                       wal_devices=_devices(wal_devices, "--wal-devices"),
                       overrides=tuple(overrides), only=_split(only), live_only=live_only,
                       pg_version=pg_version, data_dir=data_dir, tuning=_tuning_of(workload))
    return plan_for_config(opts)


def _tuning_of(workload: str) -> tuple[str, bool] | None:
    from pgdyno.workloads import registry

    plugin = registry.WORKLOADS.get(workload)
    return plugin.tuning if plugin is not None else None


def _split(items: list[str]) -> tuple[str, ...]:
    return tuple(p.strip() for item in items for p in item.split(",") if p.strip())


def _devices(items: list[str], option: str = "--destroy-data") -> tuple[str, ...]:
    out = _split(items)
    for dev in out:
        if not dev.startswith("/dev/") or any(c.isspace() for c in dev):
            raise UsageError(f"{option} {dev}: accepted: block device paths such as /dev/nvme1n1 "
                             "or /dev/loop3, comma-separated")
    if len(set(out)) != len(out):
        raise UsageError(f"{option} {','.join(out)}: a device is named twice")
    return out


def _workdir(workdir: Path | None) -> Path:
    from pgdyno.targets import default_workdir

    return workdir or default_workdir()


def _journal(results_dir: Path, context: str, action: str, code: int, summary: str,
             state_file: str, changed: int, source, drifted: int = 0) -> None:
    """One event in the context's journal (``source``: the plan or state, for config and
    hardware); a journal that cannot be written is a warning, never the reason an apply or
    revert reports failure."""
    from pgdyno.provision import record_event

    try:
        record_event(results_dir, context, action, exit_status=code, summary=summary,
                     state_file=state_file, changed=changed, drifted=drifted,
                     config=source.config, hardware=source.hardware)
    except OSError as exc:
        typer.echo(f"warning: journal {results_dir}: {exc.strerror or exc}", err=True)


def _console() -> Console:
    return Console(width=200)


def _choice(option: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise UsageError(f"{option} {value}: accepted: {', '.join(accepted)}")

