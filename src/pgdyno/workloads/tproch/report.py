"""TPROC-H's report sections and its part of ``pgdyno compare``.

The run report: the tests' times and the non-audited power/throughput figures, each
stream's geometric mean, every query's seconds and rows per stream, each query's plan shape
in one line, and three plots (query times by stream on a log scale, when each query ran
per stream, CPU and I/O over the run with the query boundaries).

The comparison: per query, the speedup (A's time over B's) sorted, beside its change
(B/A − 1 of the time, the one sign convention of every comparison: ``CHANGE_SIGN``) and the
one-line change of its plan when the plan shape differs between the two sides; per stream
(the power stream and each throughput stream), each side's geometric mean, charted A
against B.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pgdyno.analysis.summary import IterationSummary, RunSummary
from pgdyno.reports.document import CHANGE_SIGN, Section, Strong, Table, Text, change_text
from pgdyno.reports.plots import plt, save_figure
from pgdyno.results.rundir import RunDirectory, RunPlan
from pgdyno.units import count, rounded
from pgdyno.workloads.tproch import queries, refresh, streams
from pgdyno.workloads.tproch.metrics import geomean, iteration_figures, streams_words
from pgdyno.workloads.tproch.plans import PlanShape, describe_change, most_common, shape_of

NON_AUDITED = ("Power@SF, throughput@SF and QphH@SF follow the specification's formulas "
               "but are not audited TPC-H results: the data generator, run rules and "
               "disclosure differ. Compare them only between pgdyno runs.")


# ----- the run report -------------------------------------------------------------------

def tproch_sections(summary: RunSummary, run_dir: RunDirectory, plan: RunPlan) -> list[Section]:
    if not summary.iterations:
        return [Section("TPROC-H", paragraphs=["No iteration ran a query."])]
    p = plan.parameters
    sf = float(p.get("scale_factor", 1.0))
    selected = tuple(p.get("queries") or range(1, 23))
    intro = (f"SF {sf:g}, {len(selected)} queries, parameters from seed {p.get('seed')}; "
             f"tests: {', '.join(p.get('tests', []))}; refresh functions "
             f"{'on' if p.get('refresh', True) else 'off'}"
             + (f"; statement_timeout {p['query_timeout_ms']:,} ms"
                if p.get("query_timeout_ms") else "") + ".")
    ran = tuple(p.get("tests") or ("power", "throughput"))
    paragraphs = [intro, NON_AUDITED]
    if p.get("refresh", True):  # where RF1/RF2's rows come from (pgdyno's generator)
        paragraphs.append(refresh.ROWS_SOURCE)
    tests = Section("TPROC-H: tests", paragraphs=paragraphs, tables=[
        _tests_table(summary, ran)])
    out = [tests]
    for it in summary.iterations:
        it_dir = _it_dir(run_dir, it)
        timings = streams.read_queries(it_dir)
        figures = iteration_figures(timings, streams.read_refresh(it_dir),
                                    streams.read_tests(it_dir), sf, selected)
        label = f"c{it.clients}-i{it.iteration}"
        section = Section(f"TPROC-H: iteration {it.iteration}, "
                          f"{streams_words(ran, it.clients)}", level=3)
        if figures.missing:
            section.paragraphs.append(Text.of(
                Strong(f"{len(figures.missing)} queries missing"), " from the geometric means: "
                + ", ".join(figures.missing) + "."))
        section.tables += [_streams_table(figures), _queries_table(timings),
                           _refresh_table(streams.read_refresh(it_dir)),
                           _plans_table(it_dir, timings)]
        images = [
            ("Query times by stream (log scale)", _times_plot(timings, run_dir.plots / label
                                                              / "tproch_query_times.png")),
            ("When each query ran, per stream", _timeline_plot(timings, run_dir.plots / label
                                                               / "tproch_timeline.png")),
            ("CPU and disk I/O over the iteration, power-stream query boundaries",
             _resources_plot(it, timings, run_dir.plots / label / "tproch_resources.png")),
        ]
        section.images += [(caption, str(path.relative_to(run_dir.path)))
                           for caption, path in images if path is not None]
        out.append(section)
    return out


def _it_dir(run_dir: RunDirectory, it: IterationSummary) -> Path:
    return run_dir.raw / "tproch" / f"c{it.clients}-i{it.iteration}"


def _tests_table(summary: RunSummary, ran: tuple[str, ...]) -> Table:
    rows = []
    for it in summary.iterations:
        m = it.metrics
        rows.append([_streams_cell(ran, it.clients), str(it.iteration),
                     rounded(m.get("geomean_s"), 3),
                     rounded(m.get("power_test_s"), 1), rounded(m.get("throughput_test_s"), 1),
                     rounded(m.get("power_at_sf"), 1), rounded(m.get("throughput_at_sf"), 1),
                     rounded(m.get("qphh_at_sf"), 1), rounded(m.get("rf1_s"), 3),
                     rounded(m.get("rf2_s"), 3),
                     count(m.get("queries_missing", 0))])
    return Table(["Streams run", "Iteration", "Geomean (s)", "Power test (s)",
                  "Throughput test (s)", "Power@SF", "Throughput@SF", "QphH@SF",
                  "RF1 (s)", "RF2 (s)", "Missing"], rows,
                 caption="Geomean: over every query that finished in the iteration, all "
                         "streams; @SF figures non-audited")


def _streams_cell(ran: tuple[str, ...], clients: int) -> str:
    """What ran, short: "power only", "power + 2 throughput", "2 throughput"."""
    if "throughput" not in ran:
        return "power only"
    through = f"{clients} throughput"
    return f"power + {through}" if "power" in ran else through


def _streams_table(figures) -> Table:
    return Table(["Test", "Stream", "Queries", "Missing", "Geomean (s)", "Total (s)"],
                 [[s.test, str(s.stream), str(s.queries_ok),
                   ", ".join(f"Q{q}" for q in s.missing) or "–", rounded(s.geomean_s, 3),
                   rounded(s.total_s, 2)] for s in figures.streams])


def _queries_table(timings: list[streams.QueryTiming]) -> Table:
    keys = sorted({(t.test, t.stream) for t in timings}, key=lambda k: (k[0] != "power", k[1]))
    by = {(t.test, t.stream, t.query): t for t in timings}
    rows = []
    for q in sorted({t.query for t in timings}):
        cells = []
        for test, stream in keys:
            t = by.get((test, stream, q))
            cells.append("–" if t is None else rounded(t.seconds, 3) if t.status == streams.OK
                         else t.status)
        power = by.get(("power", 0, q)) or next((t for t in timings if t.query == q), None)
        rows.append([f"Q{q}", queries.QUERY_NAMES[q], *cells,
                     count(power.rows) if power and power.status == streams.OK else "–"])
    headers = ["Query", "Name", *[("power" if test == "power" else f"stream {s}") + " (s)"
                                  for test, s in keys], "Rows"]
    return Table(headers, rows, caption="Seconds per query per stream; rows returned by the "
                                        "power stream (or the first stream that ran it)")


def _refresh_table(refreshes: list[streams.RefreshTiming]) -> Table:
    return Table(["Test", "Pair", "Function", "Seconds", "Rows", "Status"],
                 [[r.test, str(r.pair), r.function, rounded(r.seconds, 3), count(r.rows), r.status]
                  for r in refreshes], caption="Refresh functions, each one transaction")


def shapes_of(it_dir: Path, stream: int | None = None) -> dict[int, list[PlanShape]]:
    """Per query, the plan shapes kept for it (one per stream, or one stream's)."""
    out: dict[int, list[PlanShape]] = {}
    for path in sorted((it_dir / "plans").glob("s*-q*.json")):
        if path.name.endswith(".analyze.json"):
            continue
        s, q = path.stem.split("-")
        if stream is not None and int(s[1:]) != stream:
            continue
        try:
            out.setdefault(int(q[1:]), []).append(shape_of(json.loads(path.read_text())))
        except (ValueError, KeyError, IndexError):
            continue
    return out


def _plans_table(it_dir: Path, timings: list[streams.QueryTiming]) -> Table:
    first = min((t.stream for t in timings), default=0)
    shapes = shapes_of(it_dir)
    rows = []
    for q in sorted(shapes):
        usual = most_common(shapes[q])
        if usual is None:
            continue
        variants = len(set(shapes[q]))
        rows.append([f"Q{q}", usual.line(), str(variants)])
    return Table(["Query", "Plan shape (joins, scans, parallel workers)", "Shapes seen"],
                 rows, caption=f"EXPLAIN before each run, the usual shape over streams "
                               f"(stream {first} onwards); files: plans/s<stream>-q<NN>.json")


def _times_plot(timings: list[streams.QueryTiming], path: Path) -> Path | None:
    ok = [t for t in timings if t.status == streams.OK and t.seconds > 0]
    if not ok:
        return None
    keys = sorted({(t.test, t.stream) for t in ok}, key=lambda k: (k[0] != "power", k[1]))
    qs = sorted({t.query for t in ok})
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(8, len(qs) * 0.5), 4))
    for i, (test, stream) in enumerate(keys):
        by = {t.query: t.seconds for t in ok if (t.test, t.stream) == (test, stream)}
        xs = [n + i * width for n, q in enumerate(qs) if q in by]
        ax.bar(xs, [by[q] for q in qs if q in by], width=width,
               label="power" if test == "power" else f"stream {stream}")
    ax.set_xticks([n + 0.4 - width / 2 for n in range(len(qs))], [f"Q{q}" for q in qs])
    ax.set_yscale("log")
    ax.set(ylabel="seconds (log scale)", title="Query times by stream")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, ncol=4)
    return save_figure(fig, path)


def _timeline_plot(timings: list[streams.QueryTiming], path: Path) -> Path | None:
    if not timings:
        return None
    origin = min(t.start for t in timings)
    keys = sorted({(t.test, t.stream) for t in timings}, key=lambda k: (k[0] != "power", k[1]))
    fig, ax = plt.subplots(figsize=(10, 1 + 0.5 * len(keys)))
    for row, key in enumerate(keys):
        for t in (t for t in timings if (t.test, t.stream) == key):
            color = "tab:blue" if t.status == streams.OK else "tab:red"
            ax.barh(row, max(t.end - t.start, 1e-3), left=t.start - origin, height=0.6,
                    color=color, edgecolor="white", lw=0.5)
            if t.end - t.start > 0:
                ax.text(t.start - origin + (t.end - t.start) / 2, row, str(t.query),
                        ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(keys)), ["power" if k[0] == "power" else f"stream {k[1]}"
                                     for k in keys])
    ax.invert_yaxis()
    ax.set(xlabel="seconds since the iteration's first query", title="Queries over time "
           "(numbers: query; red: timed out or failed)")
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, path)


def _resources_plot(it: IterationSummary, timings: list[streams.QueryTiming],
                    path: Path) -> Path | None:
    tel = it.telemetry
    if tel is None or not tel.series.host_t:
        return None
    s = tel.series
    origin = min((t.start for t in timings), default=s.host_t[0])
    t = [x - origin for x in s.host_t]
    fig, (cpu, io) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    busy = [a + b + c for a, b, c in zip(s.cpu_usr, s.cpu_sys, s.cpu_iowait, strict=False)]
    cpu.plot(t, s.cpu_usr, label="user")
    cpu.plot(t, busy, label="user+system+iowait")
    cpu.set(ylabel="CPU %", ylim=(0, 100), title="CPU and disk I/O (lines: power-stream "
                                                 "query starts)")
    for dev, values in s.disk_r_s.items():
        io.plot(t, [r + w for r, w in zip(values, s.disk_w_s.get(dev, []), strict=False)],
                label=f"{dev} IOPS (r+w)")
    io.set(xlabel="seconds since the iteration's first query", ylabel="IOPS")
    for ax in (cpu, io):
        for q in (q for q in timings if q.test == "power"):
            ax.axvline(q.start - origin, color="grey", lw=0.5, ls=":")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


# ----- compare ------------------------------------------------------------------------

def compare_detail(baseline: list[Path], candidate: list[Path]) -> dict[str, Any]:
    """Per query: each side's time (geometric mean over every stream and iteration that
    ran it), the speedup A/B and the change B/A − 1, each side's usual plan shape and the
    change between them; per stream (the power stream and each throughput stream, at each
    stream count): each side's geometric mean over the queries it ran."""
    a_times, a_shapes, a_streams = _side(baseline)
    b_times, b_shapes, b_streams = _side(candidate)
    rows = []
    for q in sorted(set(a_times) & set(b_times)):
        a, b = geomean(a_times[q]), geomean(b_times[q])
        sa, sb = most_common(a_shapes.get(q, [])), most_common(b_shapes.get(q, []))
        change = describe_change(sa, sb) if sa is not None and sb is not None else ""
        rows.append({"query": q, "name": queries.QUERY_NAMES[q], "baseline_s": a,
                     "candidate_s": b, "speedup": a / b if b > 0 else math.nan,
                     "change_pct": _change_pct(a, b),
                     "baseline_n": len(a_times[q]), "candidate_n": len(b_times[q]),
                     "baseline_plan": sa.line() if sa else "",
                     "candidate_plan": sb.line() if sb else "", "plan_change": change})
    if not rows:
        return {}
    speedups = [r["speedup"] for r in rows if r["speedup"] > 0]
    per_stream = []
    for key in sorted(set(a_streams) & set(b_streams), key=_stream_order):
        clients, test, stream = key
        a, b = geomean(a_streams[key]), geomean(b_streams[key])
        per_stream.append({"clients": clients, "test": test, "stream": stream,
                           "baseline_s": a, "candidate_s": b, "change_pct": _change_pct(a, b),
                           "baseline_n": len(a_streams[key]),
                           "candidate_n": len(b_streams[key])})
    overall = geomean(speedups) if speedups else math.nan
    return {"workload": "tproch", "queries": rows, "geomean_speedup": overall,
            "geomean_change_pct": 100.0 * (1.0 / overall - 1.0) if overall > 0 else math.nan,
            "streams": per_stream}


StreamKey = tuple[int, str, int]
"""(stream count of the iteration, test, stream number): one stream of a side."""


def _side(runs: list[Path]) -> tuple[dict[int, list[float]], dict[int, list[PlanShape]],
                                     dict[StreamKey, list[float]]]:
    times: dict[int, list[float]] = {}
    shapes: dict[int, list[PlanShape]] = {}
    by_stream: dict[StreamKey, list[float]] = {}
    for run in runs:
        for it_dir in sorted((run / "raw" / "tproch").glob("c*-i*")):
            clients = int(it_dir.name[1:].split("-")[0])
            for t in streams.read_queries(it_dir):
                if t.status == streams.OK:
                    times.setdefault(t.query, []).append(t.seconds)
                    by_stream.setdefault((clients, t.test, t.stream), []).append(t.seconds)
            for q, found in shapes_of(it_dir).items():
                shapes.setdefault(q, []).extend(found)
    return times, shapes, by_stream


def _stream_order(key: StreamKey) -> tuple[int, bool, int]:
    clients, test, stream = key
    return clients, test != streams.POWER, stream


def _change_pct(a: float, b: float) -> float:
    """B/A − 1 in % (CHANGE_SIGN): + when B's time is longer."""
    return 100.0 * (b / a - 1.0) if a > 0 and b == b else math.nan


def stream_label(row: dict[str, Any], several_counts: bool) -> str:
    """"power", "stream 2"; with several stream counts compared, "4 streams: stream 2"."""
    name = "power" if row["test"] == streams.POWER else f"stream {row['stream']}"
    return f"{row['clients']} streams: {name}" if several_counts else name


def compare_sections(detail: dict[str, Any], out_dir: Path) -> list[Section]:
    rows = detail.get("queries") or []
    if not rows:
        return []
    ordered = sorted(rows, key=lambda r: -r["speedup"] if r["speedup"] == r["speedup"] else 0)
    changed = [r for r in ordered if r["plan_change"]]
    overall = detail.get("geomean_change_pct")
    section = Section("Per-query speedup and plan changes", paragraphs=[
        "Speedup = A's time / B's time (above 1: B is faster); change = B/A − 1 of the time "
        "(+: B took longer). Each side's time is the geometric mean over every stream and "
        "iteration that ran the query. Geometric mean of the speedups: "
        f"{rounded(detail.get('geomean_speedup'), 3)}×"
        + (f", a change of {change_text(overall, -1)} in the per-query times"
           if overall is not None and not math.isnan(overall) else "") + ". "
        f"{len(changed)} of {len(rows)} queries changed plan shape"
        + (": " + "; ".join(f"Q{r['query']} ({r['speedup']:.2f}×): {r['plan_change']}"
                            for r in changed) if changed else "") + ".", CHANGE_SIGN],
        tables=[Table(["Query", "Name", "A (s)", "B (s)", "Change (B/A − 1)", "Speedup",
                       "Plan change (A → B)"],
                      [[f"Q{r['query']}", r["name"], rounded(r["baseline_s"], 3),
                        rounded(r["candidate_s"], 3),
                        change_text(r.get("change_pct", _change_pct(r["baseline_s"],
                                                                    r["candidate_s"])), -1),
                        f"{r['speedup']:.3f}×", r["plan_change"] or "same shape"]
                       for r in ordered])])
    plot = _speedup_plot(ordered, out_dir / "plots" / "tproch_speedup.png")
    section.images.append(("Per-query speedup A/B, sorted (log scale; hatched: plan "
                           "changed)", str(plot.relative_to(out_dir))))
    return [section, *_streams_section(detail.get("streams") or [], out_dir)]


def _streams_section(rows: list[dict[str, Any]], out_dir: Path) -> list[Section]:
    """The per-stream chart: each stream's geometric mean, A beside B."""
    if not rows:
        return []
    several = len({r["clients"] for r in rows}) > 1
    table = Table(["Stream", "A geomean (s)", "B geomean (s)", "Change (B/A − 1)",
                   "Queries A / B"],
                  [[stream_label(r, several), rounded(r["baseline_s"], 3),
                    rounded(r["candidate_s"], 3),
                    change_text(r["change_pct"], -1), f"{r['baseline_n']} / {r['candidate_n']}"]
                   for r in rows],
                  caption="Each stream's geometric mean over every query it finished, every "
                          "iteration of the side; queries: the times it is over")
    section = Section("Per-stream geometric means", paragraphs=[
        "The power stream and each throughput stream on its own, baseline against candidate "
        "(compare's geometric mean above pools them). " + CHANGE_SIGN], tables=[table])
    plot = _streams_plot(rows, several, out_dir / "plots" / "tproch_streams.png")
    section.images.append(("Geometric mean of query times per stream, A against B",
                           str(plot.relative_to(out_dir))))
    return [section]


def _streams_plot(rows: list[dict[str, Any]], several: bool, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows) + 2), 4))
    xs = range(len(rows))
    width = 0.38
    a = ax.bar([x - width / 2 for x in xs], [r["baseline_s"] for r in rows], width,
               label="A (baseline)", color="tab:blue")
    b = ax.bar([x + width / 2 for x in xs], [r["candidate_s"] for r in rows], width,
               label="B (candidate)", color="tab:orange")
    for bars in (a, b):
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(list(xs), [stream_label(r, several) for r in rows],
                  rotation=30 if several else 0, ha="right" if several else "center")
    ax.set(ylabel="geometric mean of query times (s; lower is faster)",
           title="Per-stream geometric mean, A against B")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def _speedup_plot(rows: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.5))
    ys = range(len(rows))
    colors = ["tab:green" if r["speedup"] >= 1 else "tab:red" for r in rows]
    # Bars grow from 1 (no change) either way, so a slowdown reads as a bar to the left.
    bars = ax.barh(list(ys), [r["speedup"] - 1 for r in rows], left=1, color=colors)
    for bar, r in zip(bars, rows, strict=True):
        if r["plan_change"]:
            bar.set_hatch("//")
    ax.set_yticks(list(ys), [f"Q{r['query']}" for r in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set(xlabel="speedup A/B (×, log scale; right of 1: B faster)",
           title="Per-query speedup")
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, path)
