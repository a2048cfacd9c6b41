"""`pgdyno fleet run` and `pgdyno fleet search`: options from the arguments, one call to
pgdyno.fleet (run_fleet, run_fleet_search), and the outcome printed (a line per host; exit 1
when a host failed)."""

from __future__ import annotations

from pathlib import Path

import typer

fleet_app = typer.Typer(help="Campaigns and searches on many hosts at once, through Ansible.",
                        no_args_is_help=True)


# The options `fleet run` and `fleet search` share: where the play runs, what it merges into.
INVENTORY = typer.Option(..., "--inventory", "-i", help="Ansible inventory")
GROUP = typer.Option("all", help="inventory group (or pattern) to run on")
LIMIT = typer.Option(None, help="ansible-playbook --limit: a subset")
FORKS = typer.Option(None, help="ansible-playbook --forks: hosts at once")
RESULTS = typer.Option(Path("results"), help="the merged results tree")
REMOTE_DIR = typer.Option("~/.pgdyno-fleet", help="directory on each host (venv, workdir, "
                          "results; kept so a rerun resumes)")


def register(app: typer.Typer) -> None:
    app.add_typer(fleet_app, name="fleet")


@fleet_app.command("run")
def run(
    campaign: Path = typer.Argument(..., help="campaign TOML file (as `pgdyno campaign`)"),
    inventory: Path = INVENTORY,
    group: str = GROUP, limit: str | None = LIMIT, forks: int | None = FORKS,
    results_dir: Path = RESULTS, remote_dir: str = REMOTE_DIR,
) -> None:
    """Run CAMPAIGN on every host of the inventory group in parallel; results merged."""
    from pgdyno.fleet.run import FleetOptions, outcome_lines, run_fleet

    outcome = run_fleet(FleetOptions(campaign=campaign, inventory=inventory,
                                     results_dir=results_dir, group=group, limit=limit,
                                     forks=forks, remote_dir=remote_dir), typer.echo)
    for line in outcome_lines("fleet", outcome, results_dir):
        typer.echo(line)
    if outcome.failed:
        raise typer.Exit(1)


@fleet_app.command("search", context_settings={"allow_extra_args": True,
                                               "ignore_unknown_options": True})
def search(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="the workload searched (as `tune --search`)"),
    inventory: Path = INVENTORY,
    storage: str = typer.Option(..., help="the shared study's PostgreSQL database, "
                                "postgresql://user@host/db, reachable from every host (the "
                                "password in the hosts' ~/.pgpass, not here)"),
    search_name: str = typer.Option(..., help="the search's and study's name on every host"),
    group: str = GROUP, limit: str | None = LIMIT, forks: int | None = FORKS,
    results_dir: Path = RESULTS, remote_dir: str = REMOTE_DIR,
) -> None:
    """One `tune --search WORKLOAD` over the inventory's hosts: a worker on each, trials
    shared through --storage; the first host selects, compares and reports. Further
    arguments (--budget 20, --knobs ..., bench options) go to `tune --search` as given."""
    from pgdyno.fleet.run import outcome_lines
    from pgdyno.fleet.search import FleetSearchOptions, report_path, run_fleet_search

    opts = FleetSearchOptions(workload=workload, inventory=inventory, storage=storage,
                              name=search_name, results_dir=results_dir,
                              tune_args=tuple(ctx.args), group=group, limit=limit,
                              forks=forks, remote_dir=remote_dir)
    outcome = run_fleet_search(opts, typer.echo)
    for line in outcome_lines("fleet search", outcome, results_dir):
        typer.echo(line)
    report = report_path(opts, outcome)
    if report is not None:
        typer.echo(f"report: {report}")
    if outcome.failed:
        raise typer.Exit(1)
