"""`pgdyno provision plan|apply|verify|revert`: the command line of pgdyno.provision.

Each command turns its arguments into PlanOptions (and an ApplyRequest), calls one function
of pgdyno.provision.commands (which also keeps the context's journal), renders the outcome
with pgdyno.provision.render, and returns the outcome's exit code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pgdyno.results.names import check_dir_name
from pgdyno.workloads.checks import check_choice

# What a command uses (rich, the runner, the reports, psycopg...) is imported inside it:
# every start builds every command, and start-up stays fast (tests/test_startup.py).

if TYPE_CHECKING:
    from rich.console import Console

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
    from pgdyno.provision import plan_for_config
    from pgdyno.provision.render import commands, plan_markdown, plan_table

    check_choice(fmt, "--format", PLAN_FORMATS)
    plan = plan_for_config(_plan_options(config, hardware, workload, data_devices, wal_devices,
                                         overrides, only, live_only, pg_version, data_dir))
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
    from pgdyno.provision import ApplyOptions
    from pgdyno.provision.commands import ApplyRequest, apply_command, device_list
    from pgdyno.provision.render import applied_lines

    _check_context(context)
    plan = _plan_options(config, hardware, workload, data_devices, wal_devices, overrides,
                         only, live_only, pg_version, data_dir)
    opts = ApplyOptions(destroy_data=device_list(destroy_data, "--destroy-data"),
                        force_devices=device_list(force_device, "--force-device"))
    done = apply_command(ApplyRequest(plan, opts, yes=yes, workdir=workdir,
                                      results_dir=results_dir, context=context), _warn)
    if done.commands and done.state is None:  # a dry run, or not root: what would run
        typer.echo("\n".join(done.commands))
    if done.refused is not None:
        raise done.refused
    for line in applied_lines(done.state) if done.state is not None else []:
        typer.echo(line)
    typer.echo(done.summary)


@provision_app.command("verify")
def verify_cmd(config: str = _CONFIG, hardware: str = _HARDWARE, workload: str = _WORKLOAD,
               data_devices: list[str] = _DATA, wal_devices: list[str] = _WAL,
               overrides: list[str] = _SET, only: list[str] = _ONLY, live_only: bool = _LIVE,
               pg_version: int = _PGV, data_dir: Path = _DATADIR,
               fmt: str = typer.Option("table", "--format", help="table or json."),
               results_dir: Path = _RESULTS, context: str = _CONTEXT) -> None:
    """Live values against the plan: exit 0 when all match, 1 with the drift otherwise."""
    from pgdyno.provision.commands import verify_command
    from pgdyno.provision.render import drift_table

    check_choice(fmt, "--format", VERIFY_FORMATS)
    _check_context(context)
    done = verify_command(_plan_options(config, hardware, workload, data_devices, wal_devices,
                                        overrides, only, live_only, pg_version, data_dir),
                          results_dir, context, _warn)
    if fmt == "json":
        typer.echo(json.dumps({"summary": done.summary,
                               "rows": [r.__dict__ for r in done.rows]}, indent=2))
    elif done.drifted:
        _console().print(drift_table(done.drifted, f"provision verify: {done.summary}"))
    else:
        typer.echo(f"provision verify: {done.summary}")
    if done.exit_code:
        raise typer.Exit(done.exit_code)


@provision_app.command("revert")
def revert_cmd(state_file: Path = typer.Argument(None, metavar="[STATE]",
                                                 help="A state file (default: the latest)."),
               workdir: Path = _WORKDIR, results_dir: Path = _RESULTS,
               context: str = _CONTEXT) -> None:
    """Restore what an apply changed (live values and files); destroyed data is named."""
    from pgdyno.provision.commands import revert_command
    from pgdyno.provision.render import revert_lines

    _check_context(context)
    done = revert_command(state_file, workdir, results_dir, context, _warn)
    for line in revert_lines(done.report):
        typer.echo(line)
    typer.echo(done.summary)
    if done.exit_code:
        raise typer.Exit(done.exit_code)


# ----- arguments to options ---------------------------------------------------------------

def _plan_options(config, hardware, workload, data_devices, wal_devices, overrides, only,
                  live_only, pg_version, data_dir):
    from pgdyno.provision import PlanOptions
    from pgdyno.provision.commands import ONLY_ACCEPTED, device_list, split_list
    from pgdyno.workloads.registry import tuning_of

    return PlanOptions(config=config, hardware=hardware, workload=workload,
                       data_devices=device_list(data_devices, "--data-devices"),
                       wal_devices=device_list(wal_devices, "--wal-devices"),
                       overrides=tuple(overrides), only=split_list(only, "--only", ONLY_ACCEPTED),
                       live_only=live_only, pg_version=pg_version, data_dir=data_dir,
                       tuning=tuning_of(workload))


def _check_context(context: str | None) -> None:
    """The journal is RESULTS/provision/CONTEXT: checked before anything is changed."""
    if context is not None:
        check_dir_name(context, "--context", "box--tpcb")


def _warn(message: str) -> None:
    typer.echo(message, err=True)


def _console() -> Console:
    from rich.console import Console

    return Console(width=200)
