"""The version report's words and layout: the builds, the relative-throughput matrix with
its heat map, the server's CPU per transaction and p99 per build, the stock settings that
differ and the conclusions. Nothing is computed here but the order of things; every
figure is a ``VersionReport`` field (``study.versions``).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SAME, SLOWER  # noqa: E402
from pgdyno.reports.document import BulletList, Section, Table, Text  # noqa: E402
from pgdyno.reports.plots import save_figure  # noqa: E402
from pgdyno.study.versions_model import (  # noqa: E402
    MatrixCell,
    ServerBuild,
    VersionFinding,
    VersionReport,
)
from pgdyno.units import figure  # noqa: E402

ANCHOR = "versions"
HEAT_MAP = "versions_heat_map"
MARKS = {FASTER: "▲", HIGHER: "▲", SLOWER: "▼", LOWER: "▼", SAME: "="}
"""A cell's verdict at a glance in text (the heat map colours it): faster, slower, no
significant difference; anything else (undetermined) is "?"."""
COLOURS = {FASTER: "#2ca02c", HIGHER: "#2ca02c", SLOWER: "#d62728", LOWER: "#d62728",
           SAME: "#c7c7c7"}
UNDETERMINED_COLOUR = "#ffffff"


def side_name(report: VersionReport | None, label: str) -> str:
    """"pg15 (PostgreSQL 15.18)": a config's label with the build it ran, for headers."""
    server = report.server(label) if report is not None else None
    return f"{label} ({server.short})" if server is not None and server.version else label


def build_line(server: ServerBuild) -> str:
    """One sentence naming a config's build: version, programs and where they came from."""
    return (f"{server.label}: PostgreSQL {server.version or '(unknown version)'}, programs "
            f"in {server.bin_dir or '?'}, from {server.source}")


def ratio_text(cell: MatrixCell | None) -> str:
    """"▲ 1.12× [1.05, 1.19]": the mark, the ratio and its interval."""
    if cell is None or cell.ratio is None:
        return "—"
    text = f"{MARKS.get(cell.verdict, '?')} {cell.ratio:.2f}×"
    if cell.ratio_low is not None and cell.ratio_high is not None:
        text += f" [{_bound(cell.ratio_low)}, {_bound(cell.ratio_high)}]"
    return text


def _bound(ratio: float) -> str:
    """An interval's end as a ratio: a change below -100% is a ratio of 0 (no throughput
    is the floor), and one above 99× is shown as such (an interval that wide says only
    that too few pairs were measured)."""
    if ratio >= 99.995:
        return ">99"
    return f"{max(ratio, 0.0):.2f}"


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}" if abs(value) >= 100 or digits else figure(value)


def version_sections(report: VersionReport, images: dict[str, str]) -> list[Section]:
    """The version report, as sections of the study's document (level 2, then 3)."""
    top = Section("PostgreSQL versions and builds", anchor=ANCHOR, paragraphs=[
        f"Each config ran its own server build on its own cluster, each building its own "
        f"dataset. Base: {side_name(report, report.base)}; every other build's throughput "
        "is shown relative to it."])
    top.tables.append(Table(["Config", "PostgreSQL", "Programs", "From"],
                            [[s.label, s.version or "—", s.bin_dir or "—", s.source]
                             for s in report.servers]))
    # The stock settings that differ are in the settings section (``stock_section``).
    return [top, _matrix(report, images), _per_build(report, "cpu"),
            _per_build(report, "p99"), _conclusions(report)]


def _matrix(report: VersionReport, images: dict[str, str]) -> Section:
    others = report.labels[1:]
    rows = []
    for workload in report.workloads:
        base = report.figure(workload, report.base)
        rows.append([workload, _num(base.headline_mean if base else None),
                     *[ratio_text(report.cell(workload, label)) for label in others]])
    section = Section("Throughput relative to the base", level=3,
                      anchor="versions-matrix", paragraphs=[
                          "Each cell: the build's headline (TPS) over the base's, as the "
                          "comparison estimates it (the median pair's ratio when the sides "
                          "ran in pairs of blocks), with its 95% interval; ▲ faster, ▼ "
                          "slower, = no significant difference, ? undetermined (the "
                          "interval could not be computed)."])
    section.tables.append(Table(["Workload", f"{side_name(report, report.base)} TPS",
                                 *[side_name(report, label) for label in others]], rows,
                                caption="Throughput relative to the base, by workload"))
    if HEAT_MAP in images:
        section.images.append(("Relative throughput, coloured by verdict (green faster, red "
                               "slower, grey no significant difference, white undetermined)",
                               images[HEAT_MAP]))
    return section


def _per_build(report: VersionReport, what: str) -> Section:
    title, unit, anchor = {
        "cpu": ("Server CPU per transaction", "µs", "versions-cpu"),
        "p99": ("p99 latency per build", "ms", "versions-p99")}[what]
    rows = []
    for workload in report.workloads:
        cells = []
        for label in report.labels:
            f = report.figure(workload, label)
            value = None if f is None else (
                f.server_cpu_us_per_tx if what == "cpu" else f.latency_p99_ms)
            cells.append(_num(value, 1 if what == "cpu" else 2))
        rows.append([workload, *cells])
    words = ("CPU time of the server's processes over the measured window, per transaction "
             "(µs): what one transaction costs the server, whatever the machine's speed at "
             "the time." if what == "cpu" else
             "Each iteration's 99th percentile of transaction latency (ms), averaged.")
    return Section(title, level=3, anchor=anchor, paragraphs=[words], tables=[Table(
        ["Workload", *[f"{side_name(report, label)} ({unit})" for label in report.labels]],
        rows)])


def stock_section(report: VersionReport) -> Section:
    """What each build's compiled-in defaults differ in (its settings section)."""
    section = Section("Stock settings that differ between the builds", level=3,
                      anchor="versions-stock")
    if report.stock_note:
        section.paragraphs.append(f"Not compared: {report.stock_note}.")
    elif not report.stock:
        section.paragraphs.append("The builds have the same settings with the same "
                                  "defaults.")
    else:
        section.paragraphs.append(
            "Built-in defaults (pg_settings.boot_val, with the setting's unit) as each "
            "build's runs recorded them; — : the build has no such setting. The runs' own "
            "settings (the config, pgdyno's base settings) are set over these.")
        section.tables.append(Table(
            ["Setting", *[side_name(report, label) for label in report.labels]],
            [[d.name, *[d.values.get(label) or "—" for label in report.labels]]
             for d in report.stock]))
    return section


def _conclusions(report: VersionReport) -> Section:
    lines = [s for f in report.findings if (s := sentence(f, report))]
    return Section("Conclusions by build", level=3, anchor="versions-conclusions",
                   body=[BulletList(lines or ["Nothing was measured under two builds."])])


def sentence(f: VersionFinding, report: VersionReport) -> str:
    """A finding in words: its figure, and its interval where it has one."""
    who = side_name(report, f.label)
    base = side_name(report, report.base)
    v, w = f.values, f.words
    interval = (f" (95% interval {_pct(v['ratio_low'])} to {_pct(v['ratio_high'])})"
                if "ratio_low" in v else " (no interval: too few samples)")
    if f.kind == "faster":
        return f"{who} is faster than {base} on {f.workload} by {_pct(v['ratio'])}{interval}."
    if f.kind == "slower":
        return f"{who} is slower than {base} on {f.workload} by {_pct(v['ratio'])}{interval}."
    if f.kind == "no_difference":
        return (f"{f.workload}: no significant difference between {who} and {base}: "
                f"{_pct(v['ratio'])}{interval}.")
    if f.kind == "undetermined":
        return f"{f.workload}: {who} against {base} is undetermined ({w.get('verdict')})."
    if f.kind == "summary":
        parts = [f"faster on {v['faster']:.0f} ({w['faster']})" if v["faster"] else "",
                 f"slower on {v['slower']:.0f} ({w['slower']})" if v["slower"] else "",
                 f"no significant difference on {v['no_difference']:.0f}"
                 if v["no_difference"] else "",
                 f"undetermined on {v['undetermined']:.0f}" if v["undetermined"] else ""]
        return f"{who} against {base}: " + "; ".join(p for p in parts if p) + "."
    if f.kind == "cpu":
        return (f"{who} spent {_times(v['median_ratio'])} the server CPU per transaction of "
                f"{base} (median over {v['workloads']:.0f} workloads; from "
                f"{_times(v['lowest'])} on {w['lowest']} to {_times(v['highest'])} on "
                f"{w['highest']}).")
    return ""


def _pct(ratio: float) -> str:
    """A ratio as a signed change: 1.123 -> "+12.3%"."""
    return f"{100 * (ratio - 1):+.1f}%" if math.isfinite(ratio) else "?"


def _times(ratio: float) -> str:
    return f"{ratio:.2f}×"


# ----- the heat map ---------------------------------------------------------------------------

def version_plots(report: VersionReport, plots_dir: Path) -> dict[str, str]:
    """The heat map (name -> path relative to the study directory), when a cell exists."""
    if not report.cells:
        return {}
    fig = heat_map(report)
    path = save_figure(fig, plots_dir / f"{HEAT_MAP}.png")
    return {HEAT_MAP: f"{plots_dir.name}/{path.name}"}


def heat_map(report: VersionReport):  # noqa: ANN201 - a matplotlib figure
    """Rows: workloads; columns: the builds other than the base; each cell coloured by its
    verdict, shaded by how far its ratio is from 1, with the ratio and interval written."""
    others = report.labels[1:]
    rows = report.workloads
    fig, ax = plt.subplots(figsize=(2.6 * len(others) + 2.8, 0.42 * len(rows) + 1.4))
    for y, workload in enumerate(rows):
        for x, label in enumerate(others):
            cell = report.cell(workload, label)
            colour = COLOURS.get(cell.verdict, UNDETERMINED_COLOUR) if cell else "#f0f0f0"
            alpha = 1.0
            if cell is not None and cell.ratio is not None and cell.verdict in (
                    FASTER, SLOWER, HIGHER, LOWER):
                alpha = 0.35 + min(abs(math.log(cell.ratio)) / math.log(1.5), 1.0) * 0.65
            ax.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=to_rgba(colour, alpha),
                                       edgecolor="white"))
            ax.text(x + 0.5, y + 0.5, ratio_text(cell), ha="center", va="center",
                    fontsize=8)
    ax.set_xlim(0, len(others))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([x + 0.5 for x in range(len(others))],
                  [side_name(report, label) for label in others])
    ax.set_yticks([y + 0.5 for y in range(len(rows))], rows)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"Throughput relative to {side_name(report, report.base)}", fontsize=10)
    return fig


def lines_for_header(report: VersionReport | None) -> list[Text | str]:
    """The builds in the question's header: one line per config."""
    if report is None:
        return []
    return [Text.of("PostgreSQL builds: ", "; ".join(build_line(s) for s in report.servers),
                    ".")]
