"""``pgdyno fleet search``: one `pgdyno tune --search` with a worker on every host of an
Ansible inventory group, the study shared through Optuna's RDB storage.

The shipped playbook (``playbooks/search.yml``) installs this pgdyno from its wheels on each
host as ``pgdyno fleet run`` does, then runs the same search on every host: the first host of
the play is the lead (after its trials it waits for the others', then re-runs the leading
candidates, compares and reports), the others run trials only (``--worker``). The storage's
URL travels in the environment (PGDYNO_SEARCH_STORAGE), never on a command line, so a
password in it stays out of Ansible's output and the fleet log. The hosts' results are
fetched and merged as ``fleet run`` merges them: the trials' runs beside each other, each
host's search directory under ``fleet/hosts/<host>/searches/<name>``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.fleet.run import DEFAULT_REMOTE_DIR, FleetOutcome, Play, check_hosts, run_play
from pgdyno.redact import redact
from pgdyno.results.names import check_dir_name

STORAGE_ENV = "PGDYNO_SEARCH_STORAGE"
_OWN = ("--storage", "--worker", "--workers", "--results-dir", "--search-name", "--workdir")
"""Options the fleet sets itself on each host."""


@dataclass(frozen=True)
class FleetSearchOptions:
    workload: str
    inventory: Path
    storage: str
    """postgresql://user@host/db reachable from every host (a password: ~/.pgpass there)."""
    name: str
    """The search's and the study's name on every host."""
    results_dir: Path
    tune_args: tuple[str, ...] = ()
    """Further `pgdyno tune --search` options (budget, knobs, bench options)."""
    group: str = "all"
    limit: str | None = None
    forks: int | None = None
    remote_dir: str = DEFAULT_REMOTE_DIR


def check_options(opts: FleetSearchOptions) -> None:
    from pgdyno.search.study import storage_url

    if not opts.inventory.is_file():
        raise UsageError(f"--inventory {opts.inventory}: no such file")
    check_hosts(opts)
    storage_url(opts.storage)
    # Each host's copy is RESULTS/fleet/hosts/HOST/searches/NAME.
    check_dir_name(opts.name, "--search-name", "tpcb-memory")
    for arg in opts.tune_args:
        if arg.split("=")[0] in _OWN:
            raise UsageError(f"fleet search: {arg.split('=')[0]} is set by the fleet on each "
                             f"host; accepted: the other tune --search options")


def search_args(opts: FleetSearchOptions) -> str:
    """The hosts' arguments after ``pgdyno tune --search``, shell-quoted (no URL)."""
    return shlex.join([opts.workload, "--search-name", opts.name, *opts.tune_args])


def run_fleet_search(opts: FleetSearchOptions,
                     echo: Callable[[str], None] = print) -> FleetOutcome:
    check_options(opts)
    return run_play(opts, Play(
        label=f"search {opts.name}", what="fleet search", stem="search-",
        playbook=playbook_path(), variables={"pgdyno_search_args": search_args(opts)},
        env={STORAGE_ENV: opts.storage}),  # read by the playbook's env lookup
        lambda line: echo(redact(line)))


def report_path(opts: FleetSearchOptions, outcome: FleetOutcome) -> Path | None:
    """The lead's report in the merged tree (the first host that wrote one)."""
    for host in outcome.hosts:
        path = (opts.results_dir / "fleet" / "hosts" / host.host / "searches" / opts.name
                / "report.md")
        if path.exists():
            return path
    return None


def playbook_path() -> Path:
    from importlib import resources

    return Path(str(resources.files("pgdyno.fleet") / "playbooks" / "search.yml"))
