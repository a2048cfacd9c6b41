"""The history of a series of runs, and where its level changed.

A series is what one kind of run measured over time: the runs of one host, context,
workload, config label, dataset and client counts, read from the index of runs (the SQLite
index or the shared PostgreSQL database, ``results.store``), oldest first, for one metric:
the workload's headline figure (TPS, NOPM, events/s) or its p99 latency.

Change points come from Apache Otava (``otava.analysis.compute_change_points``): the
e-divisive method of Matteson and James, in the sliding-window split and merge of Hunter
(Fleming et al., ICPE 2023), each candidate kept only when Student's t-test between the
segments on either side gives a p-value at most ``max_pvalue``. Otava has no minimum
segment length, and one run far off its neighbours at the end of a series is, to it, a
level of one run. Here a level must hold for ``min_segment`` runs: a change point that
leaves a shorter segment is dropped (the weaker of its segment's two bounds first), the
others' statistics recomputed, and Otava's merge step run again, which drops any that are
no longer significant without it. A single outlier is therefore never a change point, and a
shift in the newest runs is one once it has held for ``min_segment`` runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.results.index import RunRow
from pgdyno.results.store import RunStore

HISTORY_SCHEMA_VERSION = 1
METRICS = ("headline", "p99")
"""``headline``: the workload's headline figure at its best client count (its direction is
the workload's); ``p99``: the p99 latency there, in ms, lower is better."""
MAX_RUNS = 1_000_000
"""Every run of the store is read (the index has no cap of its own to honour)."""


@dataclass(frozen=True)
class SeriesKey:
    """What makes runs comparable over time: every field the same."""

    host: str | None
    context: str
    workload: str
    config: str | None
    """The config label (None: a workload that needs no server, such as cpu)."""
    dataset: str | None
    clients: str
    """The client counts as the index keeps them: ``"1"``, ``"1,4,8"``."""
    metric: str = "headline"

    def name(self) -> str:
        """"box--tpcb / tpcb / default / scale 1 / 1 client(s) / headline"."""
        parts = [self.context, self.workload, self.config or "no config",
                 self.dataset or "no dataset", f"clients {self.clients}", self.metric]
        return " / ".join(parts)


@dataclass(frozen=True)
class Selection:
    """Which series ``pgdyno history`` watches: a field left None matches any."""

    context: str | None = None
    workload: str | None = None
    config: str | None = None
    dataset: str | None = None
    clients: str | None = None
    host: str | None = None
    metric: str | None = None

    def matches(self, key: SeriesKey) -> bool:
        return all(wanted is None or wanted == have for wanted, have in (
            (self.context, key.context), (self.workload, key.workload),
            (self.config, key.config), (self.dataset, key.dataset),
            (self.clients, key.clients), (self.host, key.host), (self.metric, key.metric)))


@dataclass
class DetectionSettings:
    max_pvalue: float = 0.001
    """The t-test's p-value a change point must reach (Otava's default)."""
    min_segment: int = 3
    """The fewest runs a level must hold for: a shorter segment is an outlier, not a
    level."""
    window: int = 20
    """Otava's sliding window, in runs: short enough to hold at most one or two changes (a
    change followed by one back past its old level, in one window, can hide both)."""


@dataclass
class SeriesPoint:
    run_id: str
    started_at: str
    value: float


@dataclass
class Segment:
    """Runs between two change points, at one level."""

    first: int
    """Index of its first run in the series."""
    last: int
    """Index of its last run (inclusive)."""
    mean: float
    stddev: float

    @property
    def runs(self) -> int:
        return self.last - self.first + 1


@dataclass
class ChangePoint:
    """Where the level changed: the first run of the new level."""

    index: int
    run_id: str
    started_at: str
    before: float
    """Mean of the segment before."""
    after: float
    """Mean of the segment from this run on."""
    change_pct: float
    """after / before − 1, in %, whatever the direction."""
    p_value: float
    """Student's t-test between the two segments (Otava's significance test)."""
    worse_pct: float | None
    """How much worse the new level is, in % of the old (negative: better); None when the
    metric has no better direction."""


@dataclass
class SeriesHistory:
    key: SeriesKey
    label: str
    """The metric's name as the runs give it: "TPS", "NOPM", "p99 latency"."""
    unit: str
    direction: str | None
    """``higher`` or ``lower`` is better (None: neither)."""
    points: list[SeriesPoint]
    segments: list[Segment]
    change_points: list[ChangePoint]

    @property
    def newest_change(self) -> ChangePoint | None:
        """The change into the newest segment (the one a CI gate asks about)."""
        return self.change_points[-1] if self.change_points else None

    def regression(self, threshold_pct: float) -> ChangePoint | None:
        """The newest change when it made the series worse by more than
        ``threshold_pct`` %."""
        change = self.newest_change
        if change is None or change.worse_pct is None or change.worse_pct <= threshold_pct:
            return None
        return change


@dataclass
class HistoryReport:
    """``history.json``: every watched series, its segments and change points."""

    store: str
    """Where the runs were read (a database's DSN redacted)."""
    settings: DetectionSettings
    series: list[SeriesHistory] = field(default_factory=list)
    schema_version: int = HISTORY_SCHEMA_VERSION

    def regressions(self, threshold_pct: float) -> list[tuple[SeriesHistory, ChangePoint]]:
        """The series whose newest level is worse than the one before by more than
        ``threshold_pct`` %, each with that change."""
        found = []
        for series in self.series:
            change = series.regression(threshold_pct)
            if change is not None:
                found.append((series, change))
        return found


def load_history(path: Path) -> HistoryReport:
    """``history.json`` read back (a newer or damaged one refused in one line)."""
    from pgdyno.results.manifest import read_versioned

    return read_versioned(HistoryReport, path, HISTORY_SCHEMA_VERSION, "history record",
                          "; run `pgdyno history` again to rewrite it")


# ----- reading the series -----------------------------------------------------------------

def check_settings(settings: DetectionSettings) -> None:
    """One line naming the option that is out of range."""
    if not 0 < settings.max_pvalue < 1:
        raise UsageError(f"--max-pvalue {settings.max_pvalue}: accepted: a p-value between "
                         "0 and 1 (exclusive), such as 0.001")
    if settings.min_segment < 2:
        raise UsageError(f"--min-segment {settings.min_segment}: accepted: 2 runs or more (a "
                         "level of one run is an outlier)")
    if settings.window < 2 * settings.min_segment:
        raise UsageError(f"--window {settings.window}: accepted: at least twice --min-segment "
                         f"({2 * settings.min_segment} runs)")


def series_values(row: RunRow, metric: str) -> float | None:
    return row.headline if metric == "headline" else row.p99_ms


def key_of(row: RunRow, metric: str) -> SeriesKey:
    return SeriesKey(host=row.host, context=row.context, workload=row.workload,
                     config=row.config, dataset=row.dataset, clients=row.clients or "",
                     metric=metric)


def watch(store: RunStore, selection: Selection, settings: DetectionSettings
          ) -> HistoryReport:
    """Every series of ``store`` the selection matches, with its change points."""
    check_settings(settings)
    rows = read_rows(store, selection)
    return HistoryReport(store=store.location, settings=settings,
                         series=build_histories(rows, selection, settings))


def read_rows(store: RunStore, selection: Selection) -> list[RunRow]:
    """The store's finished runs the selection may want, oldest first."""
    rows = store.query(workload=selection.workload, context=selection.context, status="ok",
                       limit=MAX_RUNS)
    return sorted(rows, key=lambda r: (r.started_at, r.run_id))


def build_histories(rows: Iterable[RunRow], selection: Selection,
                    settings: DetectionSettings) -> list[SeriesHistory]:
    """Every series of ``rows`` the selection matches (rows oldest first), each with its
    segments and change points; a series by its name."""
    grouped: dict[SeriesKey, list[RunRow]] = {}
    metrics = [selection.metric] if selection.metric else list(METRICS)
    for row in rows:
        for metric in metrics:
            if series_values(row, metric) is None:
                continue
            key = key_of(row, metric)
            if selection.matches(key):
                grouped.setdefault(key, []).append(row)
    histories = [history(key, runs, settings) for key, runs in grouped.items()]
    return sorted(histories, key=lambda h: h.key.name())


def history(key: SeriesKey, rows: Sequence[RunRow], settings: DetectionSettings
            ) -> SeriesHistory:
    """One series (``rows`` oldest first) with its change points."""
    points = [SeriesPoint(r.run_id, r.started_at, float(series_values(r, key.metric) or 0))
              for r in rows]
    newest = rows[-1]
    if key.metric == "p99":
        label, unit, direction = "p99 latency", "ms", "lower"
    else:
        label = newest.headline_metric or "headline"
        unit = newest.headline_unit or ""
        direction = newest.headline_direction
    values = [p.value for p in points]
    bounds = change_indexes(values, settings)
    segments = segments_of(values, bounds)
    changes = [_change(points, index, p_value, before, after, direction)
               for (index, p_value), before, after
               in zip(bounds, segments, segments[1:], strict=False)]
    return SeriesHistory(key=key, label=label, unit=unit, direction=direction, points=points,
                         segments=segments, change_points=changes)


def _change(points: list[SeriesPoint], index: int, p_value: float, before: Segment,
            after: Segment, direction: str | None) -> ChangePoint:
    change_pct = (after.mean / before.mean - 1) * 100 if before.mean else float("nan")
    worse = None if direction not in ("higher", "lower") else (
        -change_pct if direction == "higher" else change_pct)
    point = points[index]
    return ChangePoint(index=index, run_id=point.run_id, started_at=point.started_at,
                       before=before.mean, after=after.mean, change_pct=change_pct,
                       p_value=p_value, worse_pct=worse)


# ----- change points: Otava's, with a minimum segment length -----------------------------

def change_indexes(values: Sequence[float], settings: DetectionSettings
                   ) -> list[tuple[int, float]]:
    """(index of the first run of each new level, its t-test p-value), in order."""
    if len(values) < 2 * settings.min_segment:
        return []  # no two levels of min_segment runs fit
    from otava.analysis import TTestSignificanceTester, compute_change_points, merge

    series = [float(v) for v in values]
    found, _weak = compute_change_points(series, window_len=settings.window,
                                         max_pvalue=settings.max_pvalue)
    tester = TTestSignificanceTester(settings.max_pvalue)
    kept = _without_short_segments(list(found), series, settings.min_segment, tester)
    kept = merge(kept, series, settings.max_pvalue, 0.0)
    return [(int(c.index), float(c.stats.pvalue)) for c in kept]


def _without_short_segments(points: list[Any], series: list[float], min_segment: int,
                            tester: Any) -> list[Any]:
    """Otava's change points less those that bound a segment shorter than ``min_segment``
    runs, the shortest segment first and the weaker (higher p-value) of its two bounds; the
    others' statistics recomputed over their new neighbours after each removal."""
    from otava.analysis import CandidateChangePoint

    while points:
        bounds = [0, *(int(p.index) for p in points), len(series)]
        lengths = [b - a for a, b in pairwise(bounds)]
        shortest = min(range(len(lengths)), key=lengths.__getitem__)
        if lengths[shortest] >= min_segment:
            break
        # Segment i lies between change points i-1 and i (either may be missing at an end).
        sides = [j for j in (shortest - 1, shortest) if 0 <= j < len(points)]
        weaker = max(sides, key=lambda j: points[j].stats.pvalue)
        # E-divisive may split a run of equal values (1601, 1601 | 1634, 80, ...): before
        # dropping the bound, try it where the short segment would hold min_segment runs.
        start, stop = bounds[shortest], bounds[shortest + 1]
        if weaker == shortest:  # the right bound moves right: runs [stop, moved) join
            moved = start + min_segment
            handed, rest = series[stop:moved], series[moved:bounds[shortest + 2]]
        else:  # the left bound moves left: runs [moved, start) join
            moved = stop - min_segment
            handed, rest = series[moved:start], series[bounds[shortest - 1]:moved]
        del points[weaker]
        if min_segment <= moved <= len(series) - min_segment and all(
                abs(moved - int(p.index)) >= min_segment for p in points) and _belong(
                handed, series[start:stop], rest):
            split = tester.change_point(CandidateChangePoint(index=moved, qhat=0.0), series,
                                        tester.get_intervals(points))
            if split.stats.pvalue <= tester.max_pvalue:
                points = sorted([*points, split], key=lambda p: int(p.index))
        intervals = tester.get_intervals(points)
        points = [tester.change_point(p.to_candidate(), series, intervals) for p in points]
    return points


def _belong(handed: list[float], joined: list[float], rest: list[float]) -> bool:
    """Whether the runs a moved bound hands over each lie nearer the runs of the segment
    they join than the rest of the one they leave: a move may regroup a split run of equal
    values, never claim old-level runs for a new level."""
    if not handed or not joined or not rest:
        return False
    near, far = sum(joined) / len(joined), sum(rest) / len(rest)
    return all(abs(v - near) < abs(v - far) for v in handed)


def segments_of(values: Sequence[float], changes: Sequence[tuple[int, float]]
                ) -> list[Segment]:
    """The runs between consecutive change points, with their mean and standard
    deviation."""
    import numpy as np

    bounds = [0, *(index for index, _ in changes), len(values)]
    segments = []
    for start, stop in pairwise(bounds):
        part = np.asarray(values[start:stop], dtype=float)
        if part.size == 0:
            continue
        segments.append(Segment(first=start, last=stop - 1, mean=float(part.mean()),
                                stddev=float(part.std(ddof=1)) if part.size > 1 else 0.0))
    return segments
