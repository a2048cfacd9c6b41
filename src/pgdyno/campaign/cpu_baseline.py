"""The host's per-core CPU speed (``pgdyno bench cpu``), and how much faster another
machine's cores are: what prices and projections scale TPS per vCPU by."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pgdyno.compare.runs import RunData
from pgdyno.workloads import registry

BASELINE_PRIME = 20000
"""The --cpu-max-prime of the per-core figures in hardware profiles (bench cpu's default)."""


@dataclass
class CpuBaseline:
    """The host's per-core CPU speed measured by a CPU baseline run in the context."""

    events_per_s_per_core: float
    """Mean over the run's iterations at its most threads (threads = cores by default)."""
    threads: int
    max_prime: int
    run: str


def cpu_baseline(runs: list[RunData]) -> CpuBaseline | None:
    """The latest finished run that measured the host's per-core speed, if any."""
    for run in reversed(runs):
        metric = (registry.get(run.workload).cpu_baseline_metric
                  if run.workload in registry.names() else None)
        its = [it for it in (run.summary.iterations if run.summary else [])
               if it.status == "ok" and metric in it.metrics]
        if run.status != "ok" or not its:
            continue
        threads = max(it.clients for it in its)
        options = (run.manifest.get("options") or {}).get("workload_options") or {}
        return CpuBaseline(
            events_per_s_per_core=statistics.fmean(it.metrics[metric]
                                                   for it in its if it.clients == threads),
            threads=threads, max_prime=int(options.get("max_prime", BASELINE_PRIME)),
            run=str(run.path))
    return None


def cpu_speed_ratio(here: CpuBaseline | None, there_per_core: float | None) -> float | None:
    """How much faster a core of another machine is than this host's (its sysbench cpu
    events/s per core over ours), when both were measured with the same work per event."""
    if here is None or not there_per_core or here.max_prime != BASELINE_PRIME \
            or here.events_per_s_per_core <= 0:
        return None
    return there_per_core / here.events_per_s_per_core
