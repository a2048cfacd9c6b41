"""TPROC-H's figures from one iteration's raw timings: geometric means, test times and the
non-audited QphH-style power and throughput.

Every figure here is recomputed from ``queries.csv``, ``refresh.csv`` and ``tests.json``:

- a stream's geometric mean is over the queries that finished (``ok``); one that timed out
  or failed is *missing* and counted, never silently dropped;
- power@SF = 3600 × SF / geometric mean of the power test's query and refresh seconds
  (the specification's formula, over what ran);
- throughput@SF = streams × queries × 3600 / throughput test seconds × SF;
- QphH@SF = √(power × throughput).

They are labelled non-audited wherever they are shown: the data, the run rules and the
hardware disclosure are not the specification's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pgdyno.workloads.tproch.streams import OK, POWER, THROUGHPUT, QueryTiming, RefreshTiming


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values (nan when there is none)."""
    positive = [v for v in values if v > 0]
    if not positive:
        return math.nan
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


@dataclass
class StreamFigures:
    test: str
    stream: int
    queries_ok: int
    missing: list[int]
    """Query numbers that timed out or failed."""
    geomean_s: float
    total_s: float


@dataclass
class IterationFigures:
    streams: list[StreamFigures] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    """"Q9 (stream 2, timeout)": every query left out of the geometric means."""


def iteration_figures(timings: list[QueryTiming], refreshes: list[RefreshTiming],
                      tests: dict[str, dict[str, float]], scale_factor: float,
                      queries: tuple[int, ...]) -> IterationFigures:
    out = IterationFigures()
    for (test, stream), rows in _by_stream(timings).items():
        ok = [t for t in rows if t.status == OK]
        out.streams.append(StreamFigures(
            test=test, stream=stream, queries_ok=len(ok),
            missing=[t.query for t in rows if t.status != OK],
            geomean_s=geomean([t.seconds for t in ok]), total_s=sum(t.seconds for t in ok)))
    out.missing = [f"Q{t.query} (stream {t.stream}, {t.status})" for t in timings
                   if t.status != OK]
    ok = [t for t in timings if t.status == OK]
    m = out.metrics
    m["geomean_s"] = geomean([t.seconds for t in ok])
    m["queries_missing"] = float(len(timings) - len(ok))
    for q in queries:
        times = [t.seconds for t in ok if t.query == q]
        if times:
            m[f"q{q:02d}_s"] = geomean(times)
    power_q = [t.seconds for t in ok if t.test == POWER]
    power_rf = [r.seconds for r in refreshes if r.test == POWER and r.status == OK]
    if power_q:
        m["power_geomean_s"] = geomean(power_q)
        m["power_at_sf"] = 3600 * scale_factor / geomean(power_q + power_rf)
    through = [t for t in timings if t.test == THROUGHPUT]
    if through:
        m["throughput_geomean_s"] = geomean([t.seconds for t in through if t.status == OK])
    for test in (POWER, THROUGHPUT):
        edges = tests.get(test, {})
        if "start" in edges and "end" in edges:
            m[f"{test}_test_s"] = edges["end"] - edges["start"]
    streams = len({t.stream for t in through})
    if streams and m.get("throughput_test_s"):
        m["throughput_at_sf"] = (streams * len(queries) * 3600 / m["throughput_test_s"]
                                 * scale_factor)
    if "power_at_sf" in m and "throughput_at_sf" in m:
        m["qphh_at_sf"] = math.sqrt(m["power_at_sf"] * m["throughput_at_sf"])
    for function in ("RF1", "RF2"):
        times = [r.seconds for r in refreshes if r.function == function and r.status == OK]
        if times:
            m[f"{function.lower()}_s"] = sum(times) / len(times)
    return out


def stream_geomeans(figures: IterationFigures) -> list[float]:
    """One geometric mean per stream that finished a query: the samples the geomean's
    interval in ``compare`` is computed over (streams × iterations)."""
    return [s.geomean_s for s in figures.streams if s.queries_ok]


def streams_words(tests: tuple[str, ...], clients: int) -> str:
    """"the power stream alone", "2 throughput streams after the power stream"."""
    plural = "s" if clients != 1 else ""
    if "throughput" not in tests:
        return "the power stream alone"
    if "power" not in tests:
        return f"{clients} throughput stream{plural} (no power test)"
    return f"{clients} throughput stream{plural} after the power stream"


def _by_stream(timings: list[QueryTiming]) -> dict[tuple[str, int], list[QueryTiming]]:
    out: dict[tuple[str, int], list[QueryTiming]] = {}
    for t in timings:
        out.setdefault((t.test, t.stream), []).append(t)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0] != POWER, kv[0][1])))
