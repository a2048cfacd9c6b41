"""``pgdyno fleet run``: one campaign on every host of an Ansible inventory, in parallel.

ansible-playbook (ansible-core) runs the shipped playbook (``playbooks/campaign.yml``): the
wheels of this pgdyno and its dependencies are copied to each host (no internet there), a
virtualenv is made, the host's campaign runs with the inventory name as its hardware name
(contexts ``<host>--<workload>``), and its results are packed and fetched, even when the
campaign failed. Here they are merged into one results tree and indexed. A failing host is
reported (Ansible's recap and its first error) and the others finish; the host keeps its
results directory, so a rerun resumes each host's campaign from its journal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from pgdyno import serde
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.fleet.bundle import build_bundle

SCHEMA_VERSION = 1
DEFAULT_REMOTE_DIR = "~/.pgdyno-fleet"
_RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")
_FATAL = re.compile(r"^fatal: \[([^\]]+)\]: (\w+)! => (.*)$")
_OUTCOME = re.compile(r'"msg": "pgdyno: (.*)"')


@dataclass
class HostOutcome:
    host: str
    status: str = "unknown"
    """``ok``, ``failed`` or ``unreachable`` (Ansible's recap)."""
    error: str = ""
    """The first failing task's message."""
    campaign: str = ""
    """The host's `pgdyno campaign` summary line (ran / skipped / failed)."""
    runs: int = 0
    """Run directories of this host in the merged results tree."""


@dataclass
class FleetOutcome:
    schema_version: int = SCHEMA_VERSION
    campaign: str = ""
    inventory: str = ""
    started_at: float = 0.0
    seconds: float = 0.0
    returncode: int = 0
    hosts: list[HostOutcome] = field(default_factory=list)
    log: str = ""

    @property
    def failed(self) -> list[HostOutcome]:
        return [h for h in self.hosts if h.status != "ok"]


@dataclass(frozen=True)
class FleetOptions:
    campaign: Path
    inventory: Path
    results_dir: Path
    group: str = "all"
    limit: str | None = None
    forks: int | None = None
    remote_dir: str = DEFAULT_REMOTE_DIR


def ansible_playbook() -> str:
    """ansible-playbook beside this Python (a venv) or on PATH; one line when missing."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.exists():
        return str(beside)
    found = shutil.which("ansible-playbook")
    if found is None:
        raise UsageError("pgdyno fleet needs ansible-playbook: pip install ansible-core")
    return found


def check_options(opts: FleetOptions) -> None:
    from pgdyno.campaign.spec import load_spec

    if not opts.inventory.is_file():
        raise UsageError(f"--inventory {opts.inventory}: no such file")
    check_hosts(opts)
    spec = load_spec(opts.campaign, opts.results_dir)  # a bad campaign fails here, once
    if spec.context is not None:
        raise UsageError(f"campaign {opts.campaign}: [campaign] context = {spec.context!r}: a "
                         "fleet names each host's contexts <host>--<workload>; drop it")


def check_hosts(opts: Hosts) -> None:
    """--group, --limit and --forks of ``fleet run`` and ``fleet search``. An empty --limit
    (an unset shell variable) would run on every host of the group, not on a subset."""
    if opts.forks is not None and opts.forks < 1:
        raise UsageError(f"--forks {opts.forks}: accepted: 1 or more")
    if not opts.group.strip():
        raise UsageError(f"--group {opts.group!r}: an empty value; accepted: an inventory "
                         "group or pattern (leave --group out for all)")
    if opts.limit is not None and not all(p.strip() for p in opts.limit.split(",")):
        what = "an empty item" if opts.limit.strip(" ,") else "nothing named"
        raise UsageError(f"--limit {opts.limit!r}: {what}; accepted: hosts or groups "
                         "separated by commas, as ansible-playbook --limit (leave --limit "
                         "out for the whole group)")


def run_fleet(opts: FleetOptions, echo: Callable[[str], None] = print) -> FleetOutcome:
    check_options(opts)
    return run_play(opts, Play(label=str(opts.campaign), what="fleet", stem="",
                               playbook=playbook_path(),
                               variables={"pgdyno_campaign": str(opts.campaign.absolute())}),
                    echo)


class Hosts(Protocol):
    """Where a fleet play runs and what it merges into: ``fleet run``'s and ``fleet
    search``'s options alike."""

    inventory: Path
    results_dir: Path
    group: str
    limit: str | None
    forks: int | None
    remote_dir: str


@dataclass(frozen=True)
class Play:
    """One ansible-playbook run over the hosts: its playbook, its own variables, and the
    names of its files (``ansible-<stem><stamp>.log``, ``fleet-<stem><stamp>.json``)."""

    label: str
    """The outcome's ``campaign``: the campaign file, or ``search NAME``."""
    what: str
    """The command, as errors name it."""
    stem: str
    playbook: Path
    variables: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of ansible-playbook (read by the playbook's env lookups, so a
    secret stays off every command line)."""


def run_play(opts: Hosts, play: Play, echo: Callable[[str], None]) -> FleetOutcome:
    """Ship this pgdyno's wheels, run ``play`` on every host, fetch and merge each host's
    results (also a failed host's), index them and keep the outcome beside them."""
    program = ansible_playbook()
    bundle = build_bundle(echo)
    fleet_dir = opts.results_dir / "fleet"
    fleet_dir.mkdir(parents=True, exist_ok=True)
    outcome = FleetOutcome(campaign=play.label, inventory=str(opts.inventory),
                           started_at=time.time())
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log_path = fleet_dir / f"ansible-{play.stem}{stamp}.log"
    outcome.log = str(log_path)
    with tempfile.TemporaryDirectory(prefix="pgdyno-fleet-") as tmp:
        fetch_dir = Path(tmp) / "fetched"
        fetch_dir.mkdir()
        extra = {"pgdyno_group": opts.group, "pgdyno_bundle": str(bundle.archive),
                 "pgdyno_bundle_sha256": bundle.archive_sha256,
                 "pgdyno_wheel": bundle.wheel.name, "pgdyno_fetch_dir": str(fetch_dir),
                 "pgdyno_remote_dir": opts.remote_dir, **play.variables}
        (Path(tmp) / "vars.json").write_text(json.dumps(extra))
        cmd = [program, "-i", str(opts.inventory), str(play.playbook),
               "-e", f"@{Path(tmp) / 'vars.json'}"]
        if opts.limit:
            cmd += ["--limit", opts.limit]
        if opts.forks:
            cmd += ["--forks", str(opts.forks)]
        lines, outcome.returncode = _run_streaming(cmd, log_path, echo, play.env)
        outcome.hosts = parse_play(lines)
        for host in outcome.hosts:
            archive = fetch_dir / f"{host.host}.tgz"
            if archive.exists():
                host.runs = merge_host_results(archive, host.host, opts.results_dir)
    outcome.seconds = time.time() - outcome.started_at
    if not outcome.hosts:
        raise PgdynoError(f"{play.what}: ansible-playbook matched no host (exit "
                          f"{outcome.returncode}); see {log_path}")
    _reindex(opts.results_dir)
    (fleet_dir / f"fleet-{play.stem}{stamp}.json").write_text(
        json.dumps(serde.to_dict(outcome), indent=2))
    return outcome


def outcome_lines(what: str, outcome: FleetOutcome, results_dir: Path) -> list[str]:
    """The closing lines of ``fleet run`` and ``fleet search``: the whole, then a line a
    host (its status, runs merged, and its summary or first error)."""
    lines = [f"{what}: {len(outcome.hosts)} hosts in {outcome.seconds:.0f} s; results merged "
             f"into {results_dir}; ansible log {outcome.log}"]
    width = max(len(h.host) for h in outcome.hosts)
    for h in outcome.hosts:
        detail = h.campaign if h.status == "ok" else h.error
        lines.append(f"  {h.host:<{width}}  {h.status:<11} {h.runs:>3} runs  {detail}")
    return lines


def playbook_path() -> Path:
    return Path(str(resources.files("pgdyno.fleet") / "playbooks" / "campaign.yml"))


def _run_streaming(cmd: list[str], log_path: Path, echo: Callable[[str], None],
                   extra_env: dict[str, str] | None = None) -> tuple[list[str], int]:
    """Ansible's own output, shown as it comes and kept in the fleet log."""
    env = {**os.environ, "ANSIBLE_RETRY_FILES_ENABLED": "False",
           "ANSIBLE_NOCOLOR": "1", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    lines: list[str] = []
    with log_path.open("w") as log, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            log.write(line + "\n")
            if line.strip():
                echo(line)
        code = proc.wait()
    return lines, code


def parse_play(lines: list[str]) -> list[HostOutcome]:
    """Each host's outcome from ansible-playbook's default output: the PLAY RECAP line, the
    first ``fatal:`` message, and the campaign summary the playbook prints."""
    hosts: dict[str, HostOutcome] = {}
    errors: dict[str, str] = {}
    campaign: dict[str, str] = {}
    current_host = None
    for line in lines:
        if (m := _FATAL.match(line)) and m.group(1) not in errors:
            errors[m.group(1)] = _message(m.group(3))
        if line.startswith("ok: [") and "=>" in line:
            current_host = line[5:line.index("]")]
        if current_host and (m := _OUTCOME.search(line)):
            campaign[current_host] = m.group(1).split(" | ")[0]
        if m := _RECAP.match(line.strip()):
            name, unreachable, failed = m.group(1), int(m.group(4)), int(m.group(5))
            status = "unreachable" if unreachable else "failed" if failed else "ok"
            hosts[name] = HostOutcome(name, status)
    for name, host in hosts.items():
        host.error = errors.get(name, "")
        host.campaign = campaign.get(name, "")
    return list(hosts.values())


def _message(payload: str) -> str:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError:
        return payload[:300]
    for key in ("msg", "stderr", "module_stderr"):
        text = str(data.get(key) or "").strip()
        if text:
            last = [line for line in text.splitlines() if line.strip()]
            return (last[-1] if key != "msg" else text.splitlines()[0])[:300]
    return payload[:300]


def merge_host_results(archive: Path, host: str, results_dir: Path) -> int:
    """Unpack a host's results into the merged tree: its contexts beside every other host's
    (they are named after the host), its campaign journals and everything else under
    ``fleet/hosts/<host>/`` (two hosts' journals of one campaign must not collide). Returns
    the number of run directories the host has."""
    with tempfile.TemporaryDirectory(prefix="pgdyno-merge-") as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")  # no absolute paths, no links out
        root = Path(tmp)
        runs = 0
        for entry in sorted(root.iterdir()):
            if entry.name in ("index.sqlite", "index.sqlite-journal", "index.sqlite-wal"):
                continue
            contexts = entry.is_dir() and any(entry.glob("*/manifest.json"))
            dest = results_dir / entry.name if contexts else \
                results_dir / "fleet" / "hosts" / host / entry.name
            if contexts:
                runs += sum(1 for _ in entry.glob("*/manifest.json"))
            if entry.is_dir():
                shutil.copytree(entry, dest, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(entry, dest)
    return runs


def _reindex(results_dir: Path) -> None:
    from pgdyno.runner.report import reindex

    reindex(results_dir)
