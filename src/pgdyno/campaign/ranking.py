"""Ranking the configs of a context like with like, and each against the baseline.

Runs are ranked only against runs of the same workload parameters (``parameters_key``);
a config's figure is the mean headline of its runs (``journal.headline``: pooled TPS for
workloads with per-client rows, else the workload's declared headline metric in its
direction), and its median run stands for it. ``findings`` compares every other config
with the baseline through ``pgdyno compare``'s statistics.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from pgdyno.campaign.journal import headline
from pgdyno.compare.core import compare_runs
from pgdyno.compare.model import MetricComparison
from pgdyno.compare.runs import RunData
from pgdyno.workloads import registry


@dataclass
class Finding:
    """One config's metric against the baseline config."""

    config: str
    comparison: MetricComparison
    headline: bool = False
    """The comparison of the runs' headline metric (TPS, or the workload's declared one)."""

    @property
    def is_tps(self) -> bool:
        return self.comparison.metric == "tps"


def on_server(run: RunData) -> bool:
    """Whether the run measured a PostgreSQL config (not the host alone, as cpu and fio)."""
    return run.workload in registry.names() and registry.get(run.workload).needs_server


def parameters_key(run: RunData) -> str:
    """What must match for two runs' headlines to be comparable: the workload and its options
    (scale, warehouses, mix...), the client counts, the measured and warm-up seconds, the
    rate."""
    o = run.manifest.get("options") or {}
    return json.dumps({"workload": run.workload, "workload_options": o.get("workload_options"),
                       "clients": o.get("clients"), "duration_s": o.get("duration_s"),
                       "warmup_s": o.get("warmup_s"), "rate_tps": o.get("rate_tps")},
                      sort_keys=True)


def describe_parameters(run: RunData) -> str:
    o = run.manifest.get("options") or {}
    words = [run.workload]
    words += [f"{k} {v}" for k, v in sorted((o.get("workload_options") or {}).items())
              if isinstance(v, int | float | str) and not isinstance(v, bool) and v != ""]
    words.append(f"clients {','.join(str(c) for c in o.get('clients') or [])}")
    words.append(f"{o.get('duration_s')} s measured")
    if o.get("rate_tps"):
        words.append(f"rate {o['rate_tps']:g} tps")
    return ", ".join(words)


def like_with_like(runs: list[RunData]) -> tuple[list[RunData], str, int]:
    """The runs the configs are ranked over: those sharing one set of workload parameters,
    the set measured with the most configs (then the most runs, then the latest); with how
    it reads and how many runs were left out."""
    groups: dict[str, list[RunData]] = {}
    for r in runs:
        groups.setdefault(parameters_key(r), []).append(r)
    if not groups:
        return [], "", 0
    chosen = max(groups.values(), key=lambda g: (len({r.label for r in g}), len(g),
                                                 max(r.started_at for r in g)))
    return chosen, describe_parameters(chosen[0]), len(runs) - len(chosen)


def best_config(runs: list[RunData]) -> tuple[RunData | None, list[RunData], float | None]:
    """The config with the best mean headline over its runs (the highest TPS, the lowest
    TPROC-H geometric mean: the metric's direction), its runs and that mean, and its
    median run. ``runs`` share one workload and its parameters (``like_with_like``)."""
    heads = {id(r): h for r in runs if (h := headline(r)) is not None}
    by_label: dict[str, list[RunData]] = {}
    for r in runs:
        if id(r) in heads:
            by_label.setdefault(r.label, []).append(r)
    if not by_label:
        return None, [], None
    def mean(group: list[RunData]) -> float:
        return statistics.fmean(heads[id(r)].value for r in group)
    def score(group: list[RunData]) -> float:
        return (heads[id(group[0])].direction or 1) * mean(group)
    label = max(by_label, key=lambda k: score(by_label[k]))
    group = by_label[label]
    ranked = sorted(group, key=lambda r: heads[id(r)].value)
    return ranked[(len(ranked) - 1) // 2], group, mean(group)


def findings(runs: list[RunData]) -> tuple[str, list[Finding]]:
    """Every other config against the baseline (``default`` when present, else the first)."""
    labels = config_labels(runs)
    if len(labels) < 2:
        return (labels[0] if labels else ""), []
    base = next((lab for lab in labels if lab == "default"), labels[0])
    out: list[Finding] = []
    for label in labels:
        if label == base:
            continue
        for workload in sorted({r.workload for r in runs}):
            a = [r for r in runs if r.label == base and r.workload == workload]
            b = [r for r in runs if r.label == label and r.workload == workload]
            if not a or not b:
                continue
            cmp = compare_runs(a, b, baseline_label=base, candidate_label=label)
            head = headline(a[0])
            if head is None or head.is_tps:
                wanted: tuple[str, ...] = ("tps", "latency_avg_ms", "latency_p99_ms")
            else:
                wanted = (head.metric,)
            out += [Finding(label, m, headline=m.metric == (head.metric if head else "tps"))
                    for m in cmp.metrics if m.metric in wanted]
    return base, out


def config_labels(runs: list[RunData]) -> list[str]:
    """The configs of ``runs`` in the order they were first run (the report's row order)."""
    out: list[str] = []
    for r in runs:
        if r.label not in out:
            out.append(r.label)
    return out
