"""The result of a comparison, as data (saved as compare.json, rendered elsewhere)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgdyno.compare.blocks import BlockRecord
from pgdyno.compare.io_profile import IoProfile
from pgdyno.compare.paired import PAIRED_HL, PAIRED_LOG, DuetCheck, OrderCheck
from pgdyno.compare.settings_diff import SettingChange
from pgdyno.compare.stats import WELCH_LOG
from pgdyno.units import common_scale, is_rate, unit_factor

SCHEMA_VERSION = 4
"""2: metrics carry a label, device metrics of a shared data + WAL device are one row
(``data_wal_*``), ``too small to compare`` verdicts, and the I/O profile. 3: the design the
sides were measured in (``design``), paired intervals (``paired-log``, ``paired-diff``).
4: a duet's check against the sides alone (``design.duet``, ``design.check_pairs``)."""


@dataclass
class MetricComparison:
    clients: int
    metric: str
    """tps, latency_avg_ms, latency_p99_ms, NOPM, cpu_busy_pct, ..."""
    unit: str
    direction: int
    """+1 higher is better, -1 lower is better, 0 neither."""
    sample: str
    """What one value is: ``iteration`` (one pgbench run), ``stream`` (one TPROC-H query
    stream) or ``run`` (a whole run)."""
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
    label: str = ""
    """Words for readers: "TPS", "Latency p99", "Data + WAL (vda) write IOPS"."""

    @property
    def title(self) -> str:
        """The label with its unit, as tables and charts show it: "Latency p99 (ms)"."""
        return metric_title(self.label or self.metric, self.shown_unit()[0])

    def shown_unit(self) -> tuple[str, float]:
        """The unit the row is shown in, and the divisor from its saved unit: a byte size or
        rate moves to the binary prefix its means read best in (pgdyno.units), so 2,048
        MiB/s shows as 2.00 GiB/s."""
        return shown_unit(self.unit, [self.baseline_mean, self.candidate_mean])

    @property
    def has_ratio_interval(self) -> bool:
        """Whether the row has an interval of the ratio B/A (what the change chart draws)."""
        return (self.method in (WELCH_LOG, PAIRED_LOG, PAIRED_HL) and math.isfinite(self.ci_low_pct)
                and math.isfinite(self.ci_high_pct))


def shown_unit(unit: str, values: list[float | None]) -> tuple[str, float]:
    """(unit to show, divisor from ``unit``) for ``values`` saved in ``unit``: one binary
    prefix for them all when ``unit`` is a byte unit, else ``unit`` itself."""
    saved = unit_factor(unit)
    if saved is None:
        return unit, 1.0
    scale = common_scale(None if v is None else v * saved for v in values)
    return (scale.rate_unit if is_rate(unit) else scale.unit), scale.factor / saved


def metric_title(label: str, unit: str) -> str:
    """``label (unit)``, unless the label already ends with its unit ("Seq read MiB/s")."""
    if not unit or label.endswith(unit):
        return label
    return f"{label} ({unit})"


@dataclass
class DesignSummary:
    """How the two sides were measured, and the checks of the design's assumptions."""

    design: str
    """``sequential`` (whole runs in A B B A order), ``interleaved`` or ``duet`` (blocks),
    or ``runs`` (existing runs, compared as given)."""
    why: str
    level: float
    """The confidence level of the rows' intervals (below the overall level when the
    comparison looked more than once: see ``paired``)."""
    method: str = ""
    """The headline's interval: ``paired-hl`` or its fallback ``paired-log``."""
    pairs: int = 0
    stop: str = ""
    pair_seconds: float = math.nan
    """Median wall time of one pair of blocks, warm-ups and checkpoints included."""
    autocorrelation: float = math.nan
    """Lag-1 autocorrelation of the pairs' differences in the headline."""
    lags: int = 0
    """Newey-West lags the interval allowed for."""
    noise_pct: float = math.nan
    """The headline's spread of one pair's log ratio, in % (robust: 1.4826 MAD under
    ``paired-hl``)."""
    seconds_for_1pct: float = math.nan
    """About how long this design would take here for a ±1% interval on the headline: the
    measuring time scaled by the square of the half-width reached."""
    order: OrderCheck | None = None
    duet: DuetCheck | None = None
    """A duet's pairs against its check pairs (the sides alone)."""
    check_pairs: list[int] = field(default_factory=list)
    """A duet's check pairs (their iterations on both sides), left out of the rows."""
    shared: list[str] = field(default_factory=list)
    """What the two sides shared that could favour one (memory, devices), in words."""
    blocks: BlockRecord | None = None
    pilot_pairs: int = 0
    """The first pairs (iterations 1 to this on both sides), run to choose the design and
    left out of the rows."""


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
    io_profiles: list[IoProfile] = field(default_factory=list)
    """The I/O profile per client count and device (empty without telemetry)."""
    headline_metric: str = "tps"
    """The workload's headline figure (tps, nopm, events_per_s): the verdict lines."""
    contaminated: list[str] = field(default_factory=list)
    """Iterations measured while other load took a material share of the host, with the
    figure ("A run/…, 4 clients #2: other processes used 0.9 of 2 cores (45% of busy CPU)")."""
    workload_detail: dict[str, Any] = field(default_factory=dict)
    """What the runs' workload compares beyond its metrics (TPROC-H: per-query speedup and
    plan changes), from its ``compare_detail``; rendered by its ``compare_sections``."""
    design: DesignSummary | None = None
    """How the sides were measured (None: a comparison saved before designs existed)."""

    def chart_clients(self) -> int | None:
        """The client count the plots show: the highest with a headline figure."""
        counts = [m.clients for m in self.metrics if m.metric == self.headline_metric]
        return max(counts) if counts else None

    def metric(self, name: str, clients: int | None = None) -> MetricComparison | None:
        for m in self.metrics:
            if m.metric == name and (clients is None or m.clients == clients):
                return m
        return None
