"""``pgdyno history`` rendered: each series as a table (terminal, Markdown, HTML from one
``Table``), a PNG with its levels and change points marked, and the page of every watched
series; ``history.json`` holds what ``analysis.history`` computed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis.history import ChangePoint, HistoryReport, SeriesHistory
from pgdyno.reports.document import (
    BulletList,
    Code,
    Document,
    Image,
    Inline,
    Link,
    Section,
    Strong,
    Table,
    Text,
    plain,
)
from pgdyno.results.listing import short_names
from pgdyno.results.rundir import write_text_atomic
from pgdyno.units import MISSING, figure

GAP = "  "
HISTORY_STEM = "history"
"""history.md, history.html and history.json in the output directory."""
PLOTS_DIR = "plots"


def started(when: str) -> str:
    """"2026-11-27 15:19:43" from the index's "2026-11-27T15:19:43Z"."""
    return when.replace("T", " ").removesuffix("Z")


def p_text(p_value: float) -> str:
    """A p-value in two significant digits: 0.00031, 6.5e-19."""
    return f"{p_value:.2g}"


def judgement(change: ChangePoint, series: SeriesHistory) -> str:
    """"worse" or "better" by the metric's direction; "higher"/"lower" without one."""
    if change.worse_pct is None:
        return "higher" if change.change_pct > 0 else "lower"
    return "worse" if change.worse_pct > 0 else "better"


def value_header(series: SeriesHistory) -> str:
    return f"{series.label} ({series.unit})" if series.unit else series.label


def series_table(series: SeriesHistory) -> Table:
    """One row a run, oldest first: its value, its segment's level, and at the first run of
    each new level the change, whether it is worse, and the t-test's p-value."""
    names = short_names([p.run_id for p in series.points])
    level = {}
    for number, segment in enumerate(series.segments, start=1):
        for index in range(segment.first, segment.last + 1):
            level[index] = (number, segment.mean)
    changes = {c.index: c for c in series.change_points}
    rows: list[list[Inline]] = []
    for index, point in enumerate(series.points):
        segment, mean = level[index]
        change = changes.get(index)
        rows.append([str(index + 1), names[point.run_id], started(point.started_at),
                     figure(point.value), str(segment), figure(mean),
                     f"{change.change_pct:+.1f}%" if change else MISSING,
                     judgement(change, series) if change else MISSING,
                     p_text(change.p_value) if change else MISSING])
    return Table(["#", "Run", "Started (UTC)", value_header(series), "Segment", "Level",
                  "Change", "Judgement", "p-value"], rows)


def change_sentence(change: ChangePoint, series: SeriesHistory) -> Text:
    """"At run tpcb-…Z (2026-11-27 15:19:43): from 3,694 to 46.0 TPS, -98.8% (worse),
    p-value 6.5e-19."""
    run = short_names([p.run_id for p in series.points])[change.run_id]
    return Text.of("At run ", Code(run), f" ({started(change.started_at)}): from "
                   f"{figure(change.before)} to {figure(change.after)} {series.unit}, ",
                   Strong(f"{change.change_pct:+.1f}% ({judgement(change, series)})"),
                   f", t-test p-value {p_text(change.p_value)}.")


def summary_lines(series: SeriesHistory) -> list[Inline]:
    """What the series' history says, in words."""
    runs = len(series.points)
    if not series.change_points:
        return [f"{runs} run(s), no change point: one level, {figure(series.segments[0].mean)} "
                f"{series.unit}." if series.segments else f"{runs} run(s)."]
    return [change_sentence(c, series) for c in series.change_points]


def terminal_lines(table: Table) -> list[str]:
    """``table`` for the terminal: numbers right-aligned, text left, as the Markdown and HTML
    renderers align it (``Table.numeric_columns``)."""
    numeric = table.numeric_columns()
    cells = [table.headers, *[[plain(c) for c in row] for row in table.rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.headers))]
    return [GAP.join(cell.rjust(w) if right else cell.ljust(w)
                     for cell, w, right in zip(row, widths, numeric, strict=True)).rstrip()
            for row in cells]


def terminal_report(report: HistoryReport) -> list[str]:
    """Each series for the terminal: its name, its table, its change points in words."""
    lines = []
    for series in report.series:
        lines.append(f"== {series.key.name()}")
        lines += terminal_lines(series_table(series))
        lines += [plain(line) for line in summary_lines(series)]
        lines.append("")
    return lines


def regression_line(series: SeriesHistory, change: ChangePoint, threshold_pct: float) -> str:
    """The line ``--fail-on-regression`` prints for a series it fails on."""
    return (f"regression: {series.key.name()}: {change.worse_pct:.1f}% worse from run "
            f"{change.run_id} on ({figure(change.before)} to {figure(change.after)} "
            f"{series.unit}, p-value {p_text(change.p_value)}), more than "
            f"{threshold_pct:g}%")


# ----- the plot ---------------------------------------------------------------------------

def plot_series(series: SeriesHistory, path: Path) -> Path:
    """``history_figure`` as a PNG at ``path``."""
    from pgdyno.reports.plots import save_figure

    return save_figure(history_figure(series), path)


def history_figure(series: SeriesHistory):  # noqa: ANN201 - a matplotlib Figure
    """The series over time: each run a point, each level a horizontal line over its runs,
    each change point a dashed line labelled with its run, levels, change and p-value."""
    import matplotlib.dates as mdates

    from pgdyno.reports.plots import plt

    times = [run_time(p.started_at) for p in series.points]
    values = [p.value for p in series.points]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(times, values, marker="o", markersize=4, linewidth=0.8, color="#4c72b0",
            label="run")
    for number, segment in enumerate(series.segments, start=1):
        ax.hlines(segment.mean, times[segment.first], times[segment.last], colors="#dd8452",
                  linewidth=2.2, label="level (segment mean)" if number == 1 else None)
    names = short_names([p.run_id for p in series.points])
    for number, change in enumerate(series.change_points):
        when = times[change.index]
        colour = "#c44e52" if (change.worse_pct or 0) > 0 else "#55a868"
        ax.axvline(when, color=colour, linestyle="--", linewidth=1.2,
                   label="change point" if number == 0 else None)
        ax.annotate(f"{names[change.run_id]}\n{figure(change.before)} → "
                    f"{figure(change.after)} {series.unit}\n{change.change_pct:+.1f}% "
                    f"({judgement(change, series)}), p={p_text(change.p_value)}",
                    # Near the top, staggered: clear of the levels' lines and of each other.
                    xy=(when, 0.97 - 0.17 * (number % 3)), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", va="top", fontsize=7,
                    color=colour,
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none"})
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set(xlabel="run start (UTC)", ylabel=value_header(series),
           title=series.key.name())
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    return fig


def run_time(text: str) -> datetime:
    """The index's UTC start time as the plot's x (naive UTC, as matplotlib's dates take)."""
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).replace(
        tzinfo=None)


def plot_name(number: int) -> str:
    return f"{PLOTS_DIR}/series-{number:03d}.png"


# ----- the page -----------------------------------------------------------------------------

def history_document(report: HistoryReport, images: dict[int, str]) -> Document:
    """Every watched series: a glance table linking to each series' section (its table, its
    change points in words, its plot)."""
    settings = report.settings
    intro = [Text.of("Runs read from ", Code(report.store), ". Change points: Apache Otava's "
                     f"e-divisive, t-test p-value at most {settings.max_pvalue:g}; a level "
                     f"holds for at least {settings.min_segment} runs (a shorter one is an "
                     "outlier, not a change).")]
    glance = []
    for number, series in enumerate(report.series, start=1):
        newest = series.newest_change
        glance.append([Link(series.key.name(), f"#series-{number}"), str(len(series.points)),
                       str(len(series.change_points)),
                       f"{newest.change_pct:+.1f}%" if newest else MISSING,
                       judgement(newest, series) if newest else MISSING])
    sections = [Section("Watched series", paragraphs=intro, tables=[Table(
        ["Series", "Runs", "Change points", "Newest change", "Judgement"], glance)])]
    if not report.series:
        sections[0].paragraphs.append("No series: no finished run matches the selection.")
    for number, series in enumerate(report.series, start=1):
        section = Section(series.key.name(), anchor=f"series-{number}",
                          tables=[series_table(series)],
                          body=[BulletList(summary_lines(series))])
        if number in images:
            section.body.append(Image(f"{value_header(series)} over time, change points "
                                      "dashed", images[number]))
        sections.append(section)
    return Document(title="pgdyno: history of runs", sections=sections)


def write_history(report: HistoryReport, out_dir: Path) -> Path:
    """Each series' plot, the page (history.md and history.html) and history.json in
    ``out_dir``; returns the HTML page."""
    from pgdyno.reports.html import write_document

    out_dir.mkdir(parents=True, exist_ok=True)
    images = {}
    for number, series in enumerate(report.series, start=1):
        plot_series(series, out_dir / plot_name(number))
        images[number] = plot_name(number)
    write_document(history_document(report, images), out_dir, stem=HISTORY_STEM)
    write_text_atomic(out_dir / f"{HISTORY_STEM}.json",
                      json.dumps(serde.to_dict(report), indent=1) + "\n")
    return out_dir / f"{HISTORY_STEM}.html"
