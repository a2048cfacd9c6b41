"""What a run answers, in the few lines the terminal prints when it ends.

"What does this machine give?": the peak of the headline metric with its 95% interval
across iterations, the client count where it stops growing, p99 at the peak, the verdict
there, and what the dataset exercised (shared_buffers, the page cache or the disk). All of
it is computed from the run's summary, so ``pgdyno report`` would print the same.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from pgdyno.analysis.summary import IterationSummary, RunSummary
from pgdyno.analysis.tdist import mean_interval
from pgdyno.config.units import human_bytes
from pgdyno.reports.document import figure
from pgdyno.workloads.base import Headline

SATURATION = 0.95
"""A client count within 5% of the peak already gives what more clients give."""


@dataclass
class RunOutcome:
    headline: Headline
    interval: tuple[float, float] | None
    """95% t interval of the per-iteration means at the peak client count."""
    iterations: int
    saturation_clients: int | None
    """The fewest clients reaching SATURATION × the peak (None: one client count)."""
    verdict: str | None
    dataset: str


def outcome_of(summary: RunSummary, head: Headline, dataset: str) -> RunOutcome:
    at_peak = _iterations(summary, head.clients, head.metric)
    values = [it.metrics[head.metric] for it in at_peak]
    return RunOutcome(headline=head, interval=mean_interval(values), iterations=len(values),
                      saturation_clients=_saturation(summary, head),
                      verdict=_median_verdict(at_peak, head.metric), dataset=dataset)


def _iterations(summary: RunSummary, clients: int, metric: str) -> list[IterationSummary]:
    return [it for it in summary.iterations
            if it.clients == clients and it.status == "ok" and metric in it.metrics]


def _saturation(summary: RunSummary, head: Headline) -> int | None:
    if len(summary.client_counts) < 2:
        return None
    means = {}
    for clients in sorted(summary.client_counts):
        its = _iterations(summary, clients, head.metric)
        if its:
            means[clients] = statistics.fmean(it.metrics[head.metric] for it in its)
    reach = [c for c, v in means.items() if v >= SATURATION * head.value]
    return min(reach) if reach else None


def _median_verdict(its: list[IterationSummary], metric: str) -> str | None:
    ranked = sorted(its, key=lambda it: it.metrics[metric])
    if not ranked:
        return None
    verdict = ranked[(len(ranked) - 1) // 2].verdict
    return verdict.label if verdict else None


def fit_of(size_bytes: int, shared_buffers_bytes: int, available_bytes: int | None) -> str:
    """Where a dataset of ``size_bytes`` lives while it runs: ``shared_buffers``, ``page
    cache`` or ``disk`` (``available_bytes``: the server host's available memory, None
    when pgdyno cannot see it, as on a remote server)."""
    if size_bytes <= shared_buffers_bytes:
        return "shared_buffers"
    if available_bytes is None:
        return "beyond shared_buffers"
    return "page cache" if size_bytes <= shared_buffers_bytes + available_bytes else "disk"


FIT_MEANING = {
    "shared_buffers": "every read is a shared-buffer hit: it measures CPU, locks and WAL",
    "page cache": "reads miss shared_buffers but hit the OS page cache, not the disk",
    "disk": "reads reach the storage",
    "beyond shared_buffers": "reads miss shared_buffers; the server's page cache is unknown",
}


def describe_fit(dataset: dict) -> str:
    """One line for the report and the terminal from the manifest's dataset record."""
    fit = dataset.get("fits")
    if not fit:
        return ""
    size, sb = dataset["size_bytes"], dataset["shared_buffers_bytes"]
    text = f"{human_bytes(size)} in the database, shared_buffers {human_bytes(sb)}"
    if dataset.get("available_bytes") is not None:
        text += f", {human_bytes(dataset['available_bytes'])} memory available"
    return f"in {fit} ({text}): {FIT_MEANING[fit]}"


def _number(value: float) -> str:
    """One decimal for throughput figures; small ones (a TPROC-H geometric mean in
    seconds) with the decimals they need."""
    return f"{value:,.1f}" if abs(value) >= 10 else figure(value)


def terminal_lines(outcome: RunOutcome, report: Path) -> list[str]:
    h = outcome.headline
    value = f"{h.label}: {_number(h.value)} {h.unit} at {h.clients} clients"
    if outcome.interval is not None:
        low, high = outcome.interval
        value += (f" (95% interval {_number(low)} to {_number(high)} over "
                  f"{outcome.iterations} iterations)")
    else:
        value += f" ({outcome.iterations} iteration{'s' if outcome.iterations != 1 else ''}: "
        value += "no interval; --iterations 3 gives one)"
    lines = [f"peak {value}"]
    if outcome.saturation_clients is not None:
        lines.append(f"saturates at {outcome.saturation_clients} clients "
                     f"(within {100 - 100 * SATURATION:.0f}% of the peak)")
    if h.p99_ms is not None:
        lines.append(f"p99 at the peak: {h.p99_ms:,.2f} ms")
    if outcome.verdict:
        lines.append(f"verdict at the peak: {outcome.verdict}")
    if outcome.dataset:
        lines.append(f"dataset: {outcome.dataset}")
    lines.append(f"report: {report}")
    return lines
