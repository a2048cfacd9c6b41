"""What a workload measures: its metrics' specs, their directions and its headline.

Below ``workloads.base`` so that modules the base class calls (``workloads.sweeps``) can
build on these without importing the base class back.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.reports.document import quantity
from pgdyno.units import figure

HIGHER, LOWER = 1, -1
"""Metric directions: higher is better (throughput) or lower is better (latency)."""


@dataclass(frozen=True)
class MetricSpec:
    """A figure a workload measures per iteration, as compare and reports name it."""

    name: str
    """Key in ``IterationSummary.metrics`` (snake_case, the unit in the name)."""
    label: str
    """Words for tables: "TPS", "NOPM", "Latency p99"."""
    unit: str
    direction: int
    """``HIGHER`` or ``LOWER`` is better; 0: neither (a description, not a goal)."""
    headline: bool = False
    """The run's headline figure (the index, the context report, campaign summaries)."""

    def cell(self, value: float | None) -> str:
        """A value for a table cell, with this metric's unit: right-aligned as a number
        whatever the unit's words ("5,120 new orders/min")."""
        return quantity(figure(value), self.unit)


TPS = MetricSpec("tps", "TPS", "tx/s", HIGHER, headline=True)
LATENCY_METRICS = (
    MetricSpec("latency_avg_ms", "Latency avg", "ms", LOWER),
    *[MetricSpec(f"latency_{p}_ms", f"Latency {p}", "ms", LOWER)
      for p in ("p50", "p90", "p95", "p99", "p99.9")],
)


def headline_metric(metrics: tuple[MetricSpec, ...]) -> MetricSpec:
    return next((m for m in metrics if m.headline), metrics[0])
