"""A measured check of linear CPU scaling: the same workload with the server on 1 and 2 cores.

The run loop owns the server, so the affinity is applied from outside: a thread watches the
cluster's ``postmaster.pid`` and sets the CPU affinity of the postmaster and every process
below it (os.sched_setaffinity, as ``taskset -a -p`` does). Backends fork from the
postmaster after it is pinned and inherit its mask; the thread keeps re-applying it to
catch any process that started before. pgbench itself is not pinned: with the server on one
core the client has the other to itself, so the check flatters the 1-core run if anything,
and a measured efficiency below 100% is not an artefact of the client.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from rich.console import Console

from pgdyno import serde
from pgdyno.compare.runs import load_run
from pgdyno.compare.stats import estimate_change
from pgdyno.errors import RunFailed, UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import write_json_atomic
from pgdyno.runner.bench import run_one
from pgdyno.targets import open_target, target_class

SCHEMA_VERSION = 1
"""Of the record this module writes beside its run (checked when it is read)."""

SCALING_FILE = "scaling-check.json"


@dataclass
class ScalingCheck:
    schema_version: int
    cores: list[int]
    """Server cores of each run, in run order."""
    run_dirs: list[str]
    tps: list[float]
    """Per run: summary.json per_clients[max clients].tps_mean."""
    clients: int
    efficiency: float | None
    """Geometric mean TPS at the most cores ÷ (core ratio × that at the fewest): 1.0 is linear."""
    efficiency_low: float | None = None
    efficiency_high: float | None = None
    """95% interval (Welch on log TPS) when each core count ran at least twice."""
    pinned_pids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class ServerPinner(threading.Thread):
    """Keeps the postmaster of ``data_dir`` and its children on ``cpus``."""

    def __init__(self, data_dir: Path, cpus: set[int], period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid_file = Path(data_dir) / "postmaster.pid"
        self.cpus = cpus
        self.period_s = period_s
        self.stop_event = threading.Event()
        self.pinned: set[int] = set()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop_event.wait(self.period_s):
            self.apply()

    def apply(self) -> None:
        try:
            pid = int(self.pid_file.read_text().splitlines()[0])
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.Error):
            return  # not started yet, or stopping
        for proc in procs:
            try:
                if set(os.sched_getaffinity(proc.pid)) != self.cpus:
                    os.sched_setaffinity(proc.pid, self.cpus)
                self.pinned.add(proc.pid)
            except ProcessLookupError:
                continue
            except OSError as exc:
                if len(self.errors) < 5:
                    self.errors.append(f"pid {proc.pid}: {exc.strerror}")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)


def run_scaling_check(base: BenchOptions, console: Console | None = None,
                      core_counts: tuple[int, ...] = (1, 2), pairs: int = 1) -> ScalingCheck:
    if not target_class(base.target).is_local:
        raise UsageError("scaling check: pgdyno pins the server to CPUs of this machine; not "
                         "with --dsn or --ssh")
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < max(core_counts):
        raise UsageError(f"scaling check: needs {max(core_counts)} CPUs, this process may use "
                         f"{len(allowed)}")
    data_dir = open_target(base.target).data_dir
    opts = dataclasses.replace(base, clients=(max(base.clients),))
    check = ScalingCheck(schema_version=SCHEMA_VERSION, cores=[], run_dirs=[], tps=[],
                         clients=opts.clients[0], efficiency=None)
    # counterbalanced like compare (1 2 2 1 ...) so that drift does not favour one count
    order = [c for i in range(pairs) for c in (core_counts if i % 2 == 0
                                               else tuple(reversed(core_counts)))]
    for cores in order:
        cpus = set(allowed[:cores])
        pinner = ServerPinner(data_dir, cpus)
        pinner.start()
        try:
            run_dir = run_one(opts, {"label": f"{opts.config} on {cores} core(s)",
                                     "scaling_check": True, "server_cpus": sorted(cpus)},
                              console)
        finally:
            pinner.stop()
        if run_dir is None:
            raise RunFailed(f"scaling check: the {cores}-core run failed")
        check.pinned_pids += sorted(pinner.pinned)
        check.notes += pinner.errors
        if not pinner.pinned:
            check.notes.append(f"{cores} core(s): no server process was seen to pin")
        c = load_run(run_dir).clients(opts.clients[0])
        check.cores.append(cores)
        check.run_dirs.append(str(run_dir))
        check.tps.append(c.tps_mean if c else float("nan"))
    _efficiency(check, min(core_counts), max(core_counts))
    for run_dir in check.run_dirs:
        write_json_atomic(Path(run_dir) / SCALING_FILE, serde.to_dict(check))
    return check


def _efficiency(check: ScalingCheck, few: int, many: int) -> None:
    low = [t for c, t in zip(check.cores, check.tps, strict=True) if c == few and t > 0]
    high = [t for c, t in zip(check.cores, check.tps, strict=True) if c == many and t > 0]
    if not low or not high:
        return
    ratio = many / few
    check.efficiency = math.exp(statistics.fmean(map(math.log, high))
                                - statistics.fmean(map(math.log, low))) / ratio
    est = estimate_change(low, high)
    if not math.isnan(est.low_pct):
        check.efficiency_low = (1 + est.low_pct / 100) / ratio
        check.efficiency_high = (1 + est.high_pct / 100) / ratio


def load_scaling(run_dir: Path) -> ScalingCheck | None:
    path = Path(run_dir) / SCALING_FILE
    if not path.is_file():
        return None
    return read_versioned(ScalingCheck, path, SCHEMA_VERSION, "scaling check")
