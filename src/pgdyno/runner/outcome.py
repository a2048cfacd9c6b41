"""What a run answers: the few lines the terminal prints when it ends, and the run report's
first section, from one computed ``RunOutcome``.

"What does this machine give?": the peak of the headline metric with its 95% interval
across iterations, the client count where it stops growing (or, when the peak is at the
most clients tried, how much it was still rising and what to try next), p99 at the peak,
the verdict there, what the dataset exercised (shared_buffers, the page cache or the
disk) and how much of it the server's memory held, and how the dataset was loaded. All of
it is computed once from the run's summary and manifest
(``pgdyno.runner.report.build_reports``); the terminal (``terminal_lines``) and the report
(``answer_rows``, a table) only lay the same statements out, so ``pgdyno report`` writes
what ``pgdyno bench`` printed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.analysis.summary import IterationSummary, RunSummary
from pgdyno.analysis.tdist import mean_interval
from pgdyno.config.units import human_bytes
from pgdyno.reports.document import ClientHeadline, clients_words
from pgdyno.results.load import LoadRecord, load_lines, record_of
from pgdyno.units import figure
from pgdyno.workloads.base import LOWER, Headline

SATURATION = 0.95
"""A client count within 5% of the peak already gives what more clients give."""


@dataclass
class CachedShare:
    """How much of the dataset the server's memory could hold while it ran, and how much of
    what the server read it found in shared_buffers at the peak."""

    size_bytes: int
    shared_buffers_bytes: int
    in_shared_buffers: float
    """0 to 1: shared_buffers over the database's size, at most 1."""
    in_memory: float | None
    """0 to 1: shared_buffers and the host's available memory (the page cache's room) over
    the size, at most 1; None when the host's memory is unknown (a --dsn server)."""
    hit_ratio_pct: float | None = None
    """Measured: blocks found in shared_buffers over blocks read, mean of the peak's
    iterations (pg_stat_database; None without telemetry)."""


@dataclass(frozen=True)
class Rising:
    """The peak is at the most clients tried and above the count before it: the sweep did
    not reach the point where more clients stop adding throughput."""

    from_clients: int
    to_clients: int
    from_value: float
    """The mean at ``from_clients`` (the largest count below the peak's that measured)."""
    to_value: float
    """The peak."""
    from_at: str
    """``from_clients`` in the workload's words ("4 clients")."""
    to_at: str
    next_clients: int
    """Where to look next: twice the most clients tried."""
    next_at: str

    @property
    def growth_pct(self) -> float:
        return 100 * (self.to_value / self.from_value - 1)

    @property
    def levelling(self) -> bool:
        """The count before was already within the SATURATION margin of the peak: the last
        step added little, so more clients would mostly confirm the plateau."""
        return self.from_value >= SATURATION * self.to_value


@dataclass(frozen=True)
class PastPeak:
    """How latency grew past the peak: p99 at the most clients tried against p99 at the
    peak (each the mean of its iterations' p99)."""

    clients: int
    at: str
    """``clients`` in the workload's words ("1000 clients")."""
    p99_ms: float
    peak_p99_ms: float

    @property
    def growth(self) -> float:
        return self.p99_ms / self.peak_p99_ms


@dataclass
class RunOutcome:
    headline: Headline
    interval: tuple[float, float] | None
    """95% t interval of the per-iteration means at the peak client count."""
    iterations: int
    saturation_clients: int | None
    """The fewest clients reaching SATURATION × the peak (None: one client count, a metric
    where lower is better, which has no saturation, or a peak still rising by more than
    that at the most clients tried, which is no saturation either)."""
    verdict: str | None
    dataset: str
    """Where the dataset lived (``describe_fit``); empty when unknown."""
    direction: int = 1
    """The headline's direction: 1 higher is better (a peak), -1 lower (the best)."""
    peak_at: str = ""
    """What ran at the peak's client count, in the workload's words ("8 clients")."""
    saturation_at: str = ""
    cached: CachedShare | None = None
    load: LoadRecord | None = None
    """The dataset's load (``results.load``); None when the workload builds none."""
    rising: Rising | None = None
    """Set when the peak is at the most clients tried and still above the count before."""
    past_peak: PastPeak | None = None
    """Set when more clients than the peak's were tried and p99 is known at both."""
    by_clients: list[ClientHeadline] = field(default_factory=list)
    """The headline at every client count that measured it, in ascending order."""


def outcome_of(summary: RunSummary, head: Headline, dataset: str, *,
               dataset_record: dict[str, Any] | None = None, direction: int = 1,
               describe_clients: Callable[[int], str] = clients_words) -> RunOutcome:
    """The run's outcome from its summary. ``dataset_record``: the manifest's dataset record
    (the cached share and the load); ``describe_clients``: the workload's words for a
    client count (``Workload.describe_clients``)."""
    at_peak = _iterations(summary, head.clients, head.metric)
    values = [it.metrics[head.metric] for it in at_peak]
    saturation = rising = past = None
    if direction != LOWER and len(summary.client_counts) >= 2:
        past = _past_peak(summary, head, describe_clients)
        means = _means(summary, head.metric)
        saturation = _saturation(means, head)
        rising = _rising(means, max(summary.client_counts), head, describe_clients)
        if rising is not None and saturation == rising.to_clients:
            saturation = None  # still climbing by more than the margin: not a saturation
    return RunOutcome(headline=head, interval=mean_interval(values), iterations=len(values),
                      saturation_clients=saturation,
                      verdict=_median_verdict(at_peak, head.metric), dataset=dataset,
                      direction=direction, peak_at=describe_clients(head.clients),
                      saturation_at=describe_clients(saturation) if saturation else "",
                      cached=cached_share(dataset_record or {}, at_peak),
                      load=record_of(dataset_record), rising=rising, past_peak=past,
                      by_clients=by_clients(summary, head.metric, describe_clients))


def by_clients(summary: RunSummary, metric: str,
               describe_clients: Callable[[int], str] = clients_words) -> list[ClientHeadline]:
    """``metric`` at each client count: the mean of its measured iterations, the 95% t
    interval of that mean, and the mean of their p99."""
    out = []
    for clients in sorted(summary.client_counts):
        its = _iterations(summary, clients, metric)
        if not its:
            continue
        values = [it.metrics[metric] for it in its]
        p99 = [v for it in its
               if (v := it.metrics.get("latency_p99_ms")) is not None and not math.isnan(v)]
        out.append(ClientHeadline(clients=clients, at=describe_clients(clients),
                                  mean=statistics.fmean(values), interval=mean_interval(values),
                                  iterations=len(values),
                                  p99_ms=statistics.fmean(p99) if p99 else None))
    return out


def _iterations(summary: RunSummary, clients: int, metric: str) -> list[IterationSummary]:
    return [it for it in summary.iterations
            if it.clients == clients and it.status == "ok" and metric in it.metrics]


def _means(summary: RunSummary, metric: str) -> dict[int, float]:
    """Client count -> the mean of its measured iterations, in ascending client order."""
    means = {}
    for clients in sorted(summary.client_counts):
        its = _iterations(summary, clients, metric)
        if its:
            means[clients] = statistics.fmean(it.metrics[metric] for it in its)
    return means


def _saturation(means: dict[int, float], head: Headline) -> int | None:
    reach = [c for c, v in means.items() if v >= SATURATION * head.value]
    return min(reach) if reach else None


def _rising(means: dict[int, float], most: int, head: Headline,
            describe_clients: Callable[[int], str]) -> Rising | None:
    """How much the peak rose over the count before it, when it is at ``most``, the most
    clients tried (None: the peak is below that, or nothing measured before it)."""
    below = [c for c in means if c < head.clients]
    if head.clients != most or not below or means[below[-1]] <= 0:
        return None
    before = below[-1]
    if head.value <= means[before]:
        return None
    return Rising(from_clients=before, to_clients=most, from_value=means[before],
                  to_value=head.value, from_at=describe_clients(before),
                  to_at=describe_clients(most), next_clients=2 * most,
                  next_at=describe_clients(2 * most))


def _past_peak(summary: RunSummary, head: Headline,
               describe_clients: Callable[[int], str]) -> PastPeak | None:
    most = max(summary.client_counts)
    if head.clients >= most or not head.p99_ms:
        return None
    p99 = [it.metrics["latency_p99_ms"] for it in _iterations(summary, most, "latency_p99_ms")]
    if not p99:
        return None
    return PastPeak(clients=most, at=describe_clients(most), p99_ms=statistics.fmean(p99),
                    peak_p99_ms=head.p99_ms)


def _median_verdict(its: list[IterationSummary], metric: str) -> str | None:
    ranked = sorted(its, key=lambda it: it.metrics[metric])
    if not ranked:
        return None
    verdict = ranked[(len(ranked) - 1) // 2].verdict
    return verdict.label if verdict else None


def cached_share(dataset: dict[str, Any], at_peak: list[IterationSummary]) -> CachedShare | None:
    """The dataset record's size against shared_buffers and the available memory, with the
    hit ratio the peak's iterations measured (None without a measured size)."""
    size, shared = dataset.get("size_bytes"), dataset.get("shared_buffers_bytes")
    if not size or shared is None:
        return None
    available = dataset.get("available_bytes")
    hits = [it.telemetry.database.cache_hit_pct for it in at_peak
            if it.telemetry is not None and it.telemetry.database.cache_hit_pct is not None]
    return CachedShare(
        size_bytes=int(size), shared_buffers_bytes=int(shared),
        in_shared_buffers=min(1.0, shared / size),
        in_memory=min(1.0, (shared + available) / size) if available is not None else None,
        hit_ratio_pct=statistics.fmean(hits) if hits else None)


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
    "shared_buffers": "every read is a shared-buffer hit, so the run measures CPU, locks "
                      "and WAL rather than storage",
    "page cache": "reads that miss shared_buffers hit the OS page cache, not the disk",
    "disk": "reads reach the storage",
    "beyond shared_buffers": "the server's memory is unknown, so reads that miss "
                             "shared_buffers may hit its page cache or its disk",
}


def describe_fit(dataset: dict) -> str:
    """One sentence for the report and the terminal from the manifest's dataset record:
    "157.0 MiB, larger than shared_buffers (128.0 MiB) but within memory (22.6 GiB
    available): reads that miss shared_buffers hit the OS page cache, not the disk"."""
    fit = dataset.get("fits")
    if not fit:
        return ""
    size, sb = human_bytes(dataset["size_bytes"]), human_bytes(dataset["shared_buffers_bytes"])
    available = dataset.get("available_bytes")
    memory = f"memory ({human_bytes(available)} available)" if available is not None else ""
    where = {"shared_buffers": f"within shared_buffers ({sb})",
             "page cache": f"larger than shared_buffers ({sb}) but within {memory}",
             "disk": f"larger than shared_buffers ({sb}) and {memory}",
             "beyond shared_buffers": f"larger than shared_buffers ({sb})"}[fit]
    joint = "; " if fit == "beyond shared_buffers" else ": "
    return f"{size}, {where}{joint}{FIT_MEANING[fit]}"


def _number(value: float) -> str:
    """One decimal for throughput figures; small ones (a TPROC-H geometric mean in
    seconds) with the decimals they need."""
    return f"{value:,.1f}" if abs(value) >= 10 else figure(value)


def _share(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.01 or value == 0 else "under 1%"


@dataclass(frozen=True)
class Statement:
    """One line of the answer: ``item`` names it (the report's first column), ``text`` says
    it; the terminal prints ``item``, ``joint`` and ``text`` on one line."""

    item: str
    text: str
    joint: str = ": "

    @property
    def line(self) -> str:
        return f"{self.item}{self.joint}{self.text}"


def answer_rows(outcome: RunOutcome) -> list[Statement]:
    """The outcome's statements, in the order the terminal prints them and the report's
    first section lists them."""
    h = outcome.headline
    value = f"{_number(h.value)} {h.unit} at {outcome.peak_at or clients_words(h.clients)}"
    if outcome.interval is not None:
        low, high = outcome.interval
        value += (f" (95% interval {_number(low)} to {_number(high)} over "
                  f"{outcome.iterations} iterations)")
    else:
        value += f" ({outcome.iterations} iteration{'s' if outcome.iterations != 1 else ''}: "
        value += "no interval; --iterations 3 gives one)"
    best = "best" if outcome.direction == LOWER else "peak"
    rows = [Statement(f"{best} {h.label}", value)]
    if outcome.saturation_clients is not None:
        rows.append(Statement("saturates", f"at {outcome.saturation_at} (within "
                                           f"{100 - 100 * SATURATION:.0f}% of the peak)", " "))
    if outcome.rising is not None:
        rows.append(Statement("levelling off" if outcome.rising.levelling else "still rising",
                              rising_text(outcome.rising, h)))
    if h.p99_ms is not None:
        rows.append(Statement(f"p99 at the {best}", f"{h.p99_ms:,.2f} ms"))
    if (past := outcome.past_peak) is not None:
        rows.append(Statement("p99 past the peak", f"{past.p99_ms:,.2f} ms at {past.at}, "
                                                   f"{past.growth:,.1f}× the peak's"))
    if outcome.verdict:
        rows.append(Statement(f"verdict at the {best}", outcome.verdict))
    if outcome.dataset:
        rows.append(Statement("dataset", outcome.dataset))
    if outcome.cached is not None:
        rows.append(Statement("cached", cached_text(outcome.cached, best)))
    if outcome.load is not None:
        rows += [Statement(item, text) for item, text in load_lines(outcome.load)]
    return rows


def rising_text(r: Rising, h: Headline) -> str:
    """"TPS grew 12.1% from 4 clients to 8 clients (2,730.1 to 3,061.2 tx/s), the most
    tried; try up to 16 clients (--clients 8,16) to find the peak"; a last step within the
    saturation margin "grew only 1.7% ...; ... to confirm the plateau"."""
    grew = (f"{h.label} grew {'only ' if r.levelling else ''}{r.growth_pct:.1f}% from "
            f"{r.from_at} to {r.to_at} ({_number(r.from_value)} to {_number(r.to_value)} "
            f"{h.unit}), the most tried")
    try_next = f"try up to {r.next_at} (--clients {r.to_clients},{r.next_clients})"
    return f"{grew}; {try_next} to {'confirm the plateau' if r.levelling else 'find the peak'}"


def cached_text(c: CachedShare, best: str = "peak") -> str:
    """"38% of the dataset fits in shared_buffers, 100% with the page cache; 92.1% of block
    reads hit shared_buffers at the peak" (``best``: "peak", or "best" for a time)."""
    text = f"{_share(c.in_shared_buffers)} of the dataset fits in shared_buffers"
    if c.in_memory is not None and c.in_shared_buffers < 1:
        text += f", {_share(c.in_memory)} with the page cache"
    elif c.in_memory is None and c.in_shared_buffers < 1:
        text += " (the page cache's room on the server is unknown)"
    if c.hit_ratio_pct is not None:
        text += f"; {c.hit_ratio_pct:.1f}% of block reads hit shared_buffers at the {best}"
    return text


def terminal_lines(outcome: RunOutcome, report: Path) -> list[str]:
    return [row.line for row in answer_rows(outcome)] + [f"report: {report}"]


@dataclass
class Built:
    """What ``build_reports`` made of a run: its summary and, once it has a headline, the
    outcome the report opens with (the terminal prints the same)."""

    summary: RunSummary
    headline: Headline | None = None
    outcome: RunOutcome | None = None
