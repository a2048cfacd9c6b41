"""`pgdyno fleet run`: FleetOptions from the arguments, one call to pgdyno.fleet.run_fleet,
and its outcome printed (a line per host; exit 1 when a host failed)."""

from __future__ import annotations

from pathlib import Path

import typer

fleet_app = typer.Typer(help="Campaigns on many hosts at once, through Ansible.",
                        no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(fleet_app, name="fleet")


@fleet_app.command("run")
def run(
    campaign: Path = typer.Argument(..., help="campaign TOML file (as `pgdyno campaign`)"),
    inventory: Path = typer.Option(..., "--inventory", "-i", help="Ansible inventory"),
    group: str = typer.Option("all", help="inventory group (or pattern) to run on"),
    limit: str | None = typer.Option(None, help="ansible-playbook --limit: a subset"),
    forks: int | None = typer.Option(None, help="ansible-playbook --forks: hosts at once"),
    results_dir: Path = typer.Option(Path("results"), help="the merged results tree"),
    remote_dir: str = typer.Option("~/.pgdyno-fleet", help="directory on each host (venv, "
                                   "workdir, results; kept so a rerun resumes)"),
) -> None:
    """Run CAMPAIGN on every host of the inventory group in parallel; results merged."""
    from pgdyno.fleet.run import FleetOptions, run_fleet

    outcome = run_fleet(FleetOptions(campaign=campaign, inventory=inventory,
                                     results_dir=results_dir, group=group, limit=limit,
                                     forks=forks, remote_dir=remote_dir), typer.echo)
    typer.echo(f"fleet: {len(outcome.hosts)} hosts in {outcome.seconds:.0f} s; "
               f"results merged into {results_dir}; ansible log {outcome.log}")
    width = max(len(h.host) for h in outcome.hosts)
    for h in outcome.hosts:
        detail = h.campaign if h.status == "ok" else h.error
        typer.echo(f"  {h.host:<{width}}  {h.status:<11} {h.runs:>3} runs  {detail}")
    if outcome.failed:
        raise typer.Exit(1)
