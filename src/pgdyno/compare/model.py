"""The result of a comparison, as data (saved as compare.json, rendered elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.compare.settings_diff import SettingChange

SCHEMA_VERSION = 1


@dataclass
class MetricComparison:
    clients: int
    metric: str
    """tps, latency_avg_ms, latency_p99_ms, NOPM, cpu_busy_pct, ..."""
    unit: str
    direction: int
    """+1 higher is better, -1 lower is better, 0 neither."""
    sample: str
    """What one value is: ``iteration`` (one pgbench run) or ``run`` (a whole run)."""
    baseline_n: int
    baseline_mean: float
    baseline_stddev: float
    candidate_n: int
    candidate_mean: float
    candidate_stddev: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    noise_pct: float
    df: float
    method: str
    verdict: str
    reason: str = ""
    baseline_values: list[float] = field(default_factory=list)
    candidate_values: list[float] = field(default_factory=list)


@dataclass
class Comparison:
    schema_version: int
    baseline_label: str
    candidate_label: str
    baseline_runs: list[str]
    """Run directories (as given)."""
    candidate_runs: list[str]
    confidence: float
    changes: list[SettingChange]
    metrics: list[MetricComparison]
    method_note: str
    notes: list[str] = field(default_factory=list)

    def metric(self, name: str, clients: int | None = None) -> MetricComparison | None:
        for m in self.metrics:
            if m.metric == name and (clients is None or m.clients == clients):
                return m
        return None
