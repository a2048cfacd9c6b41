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

import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno import serde
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.fleet.bundle import build_bundle
from pgdyno.fleet.run import (
    DEFAULT_REMOTE_DIR,
    FleetOutcome,
    _reindex,
    _run_streaming,
    ansible_playbook,
    merge_host_results,
    parse_play,
)
from pgdyno.redact import redact

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
    if opts.forks is not None and opts.forks < 1:
        raise UsageError(f"--forks {opts.forks}: accepted: 1 or more")
    storage_url(opts.storage)
    if not opts.name.strip() or "/" in opts.name:
        raise UsageError(f"--search-name {opts.name!r}: accepted: a name without /")
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
    program = ansible_playbook()
    bundle = build_bundle(echo)
    fleet_dir = opts.results_dir / "fleet"
    fleet_dir.mkdir(parents=True, exist_ok=True)
    outcome = FleetOutcome(campaign=f"search {opts.name}", inventory=str(opts.inventory),
                           started_at=time.time())
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log_path = fleet_dir / f"ansible-search-{stamp}.log"
    outcome.log = str(log_path)
    with tempfile.TemporaryDirectory(prefix="pgdyno-fleet-") as tmp:
        fetch_dir = Path(tmp) / "fetched"
        fetch_dir.mkdir()
        extra = {"pgdyno_group": opts.group, "pgdyno_bundle": str(bundle.directory),
                 "pgdyno_wheel": bundle.wheel.name, "pgdyno_search_args": search_args(opts),
                 "pgdyno_fetch_dir": str(fetch_dir), "pgdyno_remote_dir": opts.remote_dir}
        (Path(tmp) / "vars.json").write_text(json.dumps(extra))
        cmd = [program, "-i", str(opts.inventory), str(playbook_path()),
               "-e", f"@{Path(tmp) / 'vars.json'}"]
        if opts.limit:
            cmd += ["--limit", opts.limit]
        if opts.forks:
            cmd += ["--forks", str(opts.forks)]
        os.environ[STORAGE_ENV] = opts.storage  # read by the playbook's env lookup
        try:
            lines, outcome.returncode = _run_streaming(cmd, log_path,
                                                       lambda line: echo(redact(line)))
        finally:
            os.environ.pop(STORAGE_ENV, None)
        outcome.hosts = parse_play(lines)
        for host in outcome.hosts:
            archive = fetch_dir / f"{host.host}.tgz"
            if archive.exists():
                host.runs = merge_host_results(archive, host.host, opts.results_dir)
    outcome.seconds = time.time() - outcome.started_at
    if not outcome.hosts:
        raise PgdynoError(f"fleet search: ansible-playbook matched no host (exit "
                          f"{outcome.returncode}); see {log_path}")
    _reindex(opts.results_dir)
    (fleet_dir / f"fleet-search-{stamp}.json").write_text(
        json.dumps(serde.to_dict(outcome), indent=2))
    return outcome


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
