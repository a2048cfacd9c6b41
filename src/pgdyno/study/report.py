"""The study report: words and layout for a ``StudyRecord``, nothing computed here.

Order: the question (with hardware and date), the executive summary, a one-glance table,
the absolute charts, one section per workload, the settings that differ, the conclusions,
the threats to validity, and the runs. Every sentence is worded from a ``Finding``; every
figure in it is the finding's own value (recomputable from the runs, see model.py).
"""

from __future__ import annotations

import math
from pathlib import Path

from pgdyno.compare.alternate import ALTERNATING
from pgdyno.compare.model import DesignSummary, MetricComparison
from pgdyno.compare.render import interval, io_table, metrics_table, verdict_text
from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SLOWER
from pgdyno.config.units import human_bytes
from pgdyno.errors import PgdynoError
from pgdyno.provision.model import AT_TARGET, SKIPPED
from pgdyno.reports import html
from pgdyno.reports.document import (
    BulletList,
    Code,
    Document,
    Inline,
    Link,
    Section,
    Strong,
    Table,
    Text,
    plain,
)
from pgdyno.study.conclusions import headline_comparison, projection
from pgdyno.study.model import DAMAGED, Finding, Side, StudyRecord, Threat, WorkloadResult
from pgdyno.study.plots import study_plots
from pgdyno.study.versions_report import (
    build_line,
    side_name,
    stock_section,
    version_plots,
    version_sections,
)
from pgdyno.units import figure, signed_pct

REPORT_STEM = "study"
SECTION_TITLES = {"summary": "Executive summary", "glance": "At a glance",
                  "charts": "Charts", "settings": "Settings: baseline and candidate",
                  "context": "The context: configuration, sizing, journal, limits",
                  "conclusions": "Conclusions", "threats": "Threats to validity"}


def write_study_report(record: StudyRecord, out_dir: Path) -> Path:
    """study.md, study.html (self-contained) and plots/ in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    images = study_plots(record, out_dir / "plots")
    if record.versions is not None:
        images |= version_plots(record.versions, out_dir / "plots")
    return html.write_document(build_document(record, images, out_dir), out_dir, REPORT_STEM)


def build_document(record: StudyRecord, images: dict[str, str], out_dir: Path) -> Document:
    parts = {"summary": _summary, "glance": _glance, "charts": _charts,
             "workloads": _workloads, "settings": _settings, "context": _context,
             "conclusions": _conclusions,
             "threats": _threats}
    sections = [_question(record)]
    for name in record.sections:
        sections += parts[name](record, images, out_dir)
        if name == "glance" and record.versions is not None:
            # Builds side by side: the matrix right after the headline table.
            sections += version_sections(record.versions, images)
    sections.append(_runs(record))
    return Document(title=f"pgdyno study: {record.title}", sections=sections)


# ----- sentences ---------------------------------------------------------------------------------

def sentence(f: Finding, record: StudyRecord) -> Text | None:
    """One finding in words, with its figure, its interval where one exists, and a link
    to the section it comes from; None for a finding the report does not word."""
    text = _WORDS[f.kind](f, record) if f.kind in _WORDS else ""
    if not plain(text):
        return None
    return Text.of(text, " (", Link(_where(f, record), f"#{f.section}"), ")")


def _what(f: Finding, record: StudyRecord) -> str:
    result = record.workload(f.workload)
    return result.workload if result else f.workload


def _where(f: Finding, record: StudyRecord) -> str:
    return f.workload if f.workload else SECTION_TITLES.get(f.section, f.section)


def _num(value: float, unit: str = "") -> str:
    text = f"{value:,.0f}" if abs(value) >= 100 else figure(value)
    return f"{text} {unit}".strip()


def _interval(f: Finding) -> str:
    v = f.values
    if "ci_low_pct" not in v:
        return "no interval (too few samples)"
    level = f"{100 * v.get('confidence', 0.95):.0f}%"
    return f"{level} interval {signed_pct(v['ci_low_pct'])} to {signed_pct(v['ci_high_pct'])}"


def _change(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    where = f" at {w['size_unit']} {v['size']:.0f}" if "size" in v else ""
    moved = {FASTER: "improved", SLOWER: "worsened", HIGHER: "raised", LOWER: "lowered"}
    verb = moved.get(w["verdict"], "changed")
    return (f"{_what(f, record)}{where}: {w['candidate']} {verb} {w['metric']} from "
            f"{_num(v['baseline'], w['unit'])} ({w['baseline']}) to "
            f"{_num(v['candidate'], w['unit'])}, {signed_pct(v['change_pct'])} "
            f"({_interval(f)}): {w['verdict']}.")


def _no_difference(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    where = f" at {w['size_unit']} {v['size']:.0f}" if "size" in v else ""
    return (f"{_what(f, record)}{where}: {w['metric']} {_num(v['baseline'], w['unit'])} "
            f"({w['baseline']}) against {_num(v['candidate'], w['unit'])} ({w['candidate']}), "
            f"{signed_pct(v.get('change_pct', math.nan))} ({_interval(f)}): no significant "
            "difference.")


def _undetermined(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    where = f" at {w['size_unit']} {v['size']:.0f}" if "size" in v else ""
    why = f" ({w['reason']})" if w.get("reason") else ""
    return (f"{_what(f, record)}{where}: {w['metric']} {_num(v['baseline'], w['unit'])} "
            f"({w['baseline']}) against {_num(v['candidate'], w['unit'])} ({w['candidate']}): "
            f"{w['verdict']}{why}.")


def _measured(f: Finding, record: StudyRecord) -> str:
    w = f.words
    figures = "; ".join(f"{w[f'label:{name}']} {_num(value, w[f'unit:{name}'])}"
                        for name, value in f.values.items())
    return f"{_what(f, record)} measured ({w['config']}): {figures}."


def _peak(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    return (f"{_what(f, record)} ({w['config']}): {w['metric']} peaked at "
            f"{_num(v['peak'], w['unit'])} with {v['clients']:.0f} clients "
            f"({_num(v['at_lowest'], w['unit'])} at {v['lowest_clients']:.0f}).")


def _latency_range(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    return (f"{_what(f, record)} ({w['config']}, {v['clients']:.0f} clients): latency from "
            f"{_num(v['low'], 'ms')} ({w['low']}) to {_num(v['high'], 'ms')} ({w['high']}).")


def _bottleneck(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    return (f"{_what(f, record)} ({w['config']}): the bottleneck verdict was "
            f"{w['bottleneck']} in {v['votes']:.0f} of {v['iterations']:.0f} iterations.")


def _common(f: Finding, record: StudyRecord) -> str:
    w = f.words
    return (f"Every workload with a verdict ({w['workloads']}) had the same bottleneck: "
            f"{w['bottleneck']}.")


def _write_cv(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    figures = (f"{_what(f, record)}: write IOPS on {w['device']} varied with a coefficient "
               f"of variation of {v['baseline_pct']:.1f}% ({w['baseline']}) and "
               f"{v['candidate_pct']:.1f}% ({w['candidate']}), a change of "
               f"{v['change_pct']:+.1f}% (interval {v['low_pct']:+.1f}% to "
               f"{v['high_pct']:+.1f}%)")
    if not w.get("trend"):
        return (f"{figures}: no significant difference in how bursty the writes were.")
    return (f"{figures}: {w['candidate']}'s writes were {w['trend']} (checkpoint flushing "
            "spread over time lowers it).")


def _smart(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    parts = [f"temperature {v['temperature_c_before']:.0f} °C → "
             f"{v['temperature_c_after']:.0f} °C"]
    if "written_bytes" in v:
        parts.append(f"{human_bytes(v['written_bytes'])} written, "
                     f"{human_bytes(v.get('read_bytes', 0))} read")
    if "throttle_events" in v:
        parts.append(f"{v['throttle_events']:.0f} thermal throttle events")
    if "media_errors_after" in v:
        parts.append(f"{v['media_errors_after']:.0f} media errors")
    return f"SMART during {_what(f, record)} ({w['config']}): {', '.join(parts)}."


def _validation(f: Finding, record: StudyRecord) -> Text:
    v, w = f.values, f.words
    return Text.of(
        "Status: ", Strong(w["status"]), f": {_what(f, record)} ({w['side']}) measured "
        f"{_num(v['measured'])} {w['metric']}, {100 * v['ratio']:.0f}% of the sizing "
        f"math's target of {_num(v['target'])} ({v['vcpus']:.0f} vCPUs × "
        f"{_num(v['per_core'])} per core, from {w['source']}); the band is "
        f"{100 * v['band_low']:.0f}–{100 * v['band_high']:.0f}%.")


def _adopt(f: Finding, record: StudyRecord) -> str:
    w = f.words
    return (f"Recommendation: adopt {w['candidate']}: it beat {w['baseline']} beyond the "
            f"noise on all {f.values['workloads']:.0f} compared workloads.")


def _keep(f: Finding, record: StudyRecord) -> str:
    w = f.words
    return (f"Recommendation: keep {w['baseline']}: {w['candidate']} beat it beyond the noise "
            f"on none of the {f.values['workloads']:.0f} compared workloads (measure longer or "
            "with more repetitions before changing).")


def _avoid(f: Finding, record: StudyRecord) -> str:
    w = f.words
    return (f"Recommendation: not {w['candidate']} for {_what(f, record)}: {w['metric']} "
            f"{signed_pct(f.values['change_pct'])} ({_interval(f)}).")


def _headroom(f: Finding, record: StudyRecord) -> str:
    v, w = f.values, f.words
    return (f"Headroom ({_what(f, record)}, {w['config']}): plan sustained load under "
            f"{_num(v['limit'], w['unit'])}, {100 * v['share']:.0f}% of the measured peak of "
            f"{_num(v['peak'], w['unit'])}; above it, move up a size.")


def _endurance(f: Finding, record: StudyRecord) -> str:
    return f"Endurance ({_what(f, record)}, {f.words['config']}): {f.words['endurance']}."


_WORDS = {"change": _change, "no_difference": _no_difference, "undetermined": _undetermined,
          "step_change": _change, "step_no_difference": _no_difference,
          "step_undetermined": _undetermined, "measured": _measured, "peak": _peak,
          "bottleneck": _bottleneck, "common_bottleneck": _common, "write_cv": _write_cv,
          "smart": _smart, "endurance": _endurance, "validation": _validation,
          "adopt": _adopt, "keep": _keep, "avoid": _avoid, "headroom": _headroom,
          "latency_range": _latency_range}


def threat_sentence(t: Threat) -> str:
    v = t.values
    where = f"{t.workload}: " if t.workload else ""
    texts = {
        "failed_cell": f"cell {t.detail} failed; its runs are not in the comparisons.",
        "interrupted_cell": f"cell {t.detail} was interrupted; run the study again to finish it.",
        "pending_cell": f"cell {t.detail} has not run yet; run the study again to finish it.",
        "missing_cell": f"cell {t.detail}.",
        "left_out_run": f"{where}the run {t.detail} (cell {t.words.get('cell', '?')}) is left "
                        "out of the figures and comparisons: "
                        f"{t.words.get('reason', 'it could not be read')}.",
        "contaminated": f"{where}other load on the host during {t.detail}.",
        "noise": f"{where}{t.detail} varied by ±{v.get('noise_pct', math.nan):.1f}% between "
                 "iterations: a smaller change cannot be told from noise.",
        "single_sample": f"{where}{t.detail} has {v.get('baseline_n', 0):.0f} and "
                         f"{v.get('candidate_n', 0):.0f} samples: no interval is possible "
                         "below two per side (repeat the cells).",
        "short_window": f"{where}{t.detail}'s measured windows were {v.get('window_s', 0):.0f} s "
                        "long: no checkpoint cycle or autovacuum fits in them, so the figures "
                        "describe a burst, not a steady state.",
        "dataset_fit": f"{where}the dataset "
                       + (f"({human_bytes(v['dataset_bytes'])}) " if "dataset_bytes" in v
                          else "") + f"lived in {t.detail}: reads did not reach the storage.",
    }
    return texts.get(t.kind, f"{where}{t.kind}: {t.detail}")


def _design_line(design: DesignSummary) -> str:
    """How the two sides were measured, in one sentence (the comparison's own page has
    the whole account)."""
    if design.blocks is None:
        return (f"Measured in whole runs, one side after the other ({design.why}): the "
                "interval also holds the machine's changes of speed between runs.")
    rec = design.blocks
    if design.design == ALTERNATING:
        blocks = len({t.block for t in rec.turns})
        return (f"Measured with both servers up at once, the two loads taking turns of one "
                f"second ({design.design}; {design.why}): {design.pairs} pairs of "
                f"neighbouring seconds in {blocks} blocks of {rec.block_s} s, stopped: "
                f"{rec.stop}; each pair's difference compared at "
                f"{100 * design.level:.2f}% ({design.method}). Only the headline is "
                "compared: each side's latencies hold the pauses, and its telemetry saw both "
                "loads.")
    how = ("both sides loaded at once in each block" if design.design == "duet" else
           "the two sides' blocks back to back in each pair, in random order")
    return (f"Measured with both servers up at once, {how} ({design.design}; "
            f"{design.why}): {design.pairs} pairs of {rec.block_s} s blocks, stopped: "
            f"{rec.stop}; each pair's difference compared at "
            f"{100 * design.level:.2f}% ({design.method}).")


# ----- sections ----------------------------------------------------------------------------------

def _question(record: StudyRecord) -> Section:
    cells = len(record.cells)
    ok = sum(c.status == "ok" for c in record.cells)
    wall = (f"; the runs took {record.wall_seconds / 60:.1f} min"
            if record.wall_seconds else "")
    status = [s for f in record.findings if f.kind == "validation"
              and (s := sentence(f, record)) is not None]
    return Section("Question", anchor="question", paragraphs=[
        Strong(record.question), *status,
        f"Hardware: {record.hardware}.",
        f"Campaign {record.campaign} at size {record.size}, {record.started_at[:19]} to "
        f"{record.ended_at[:19]} UTC: {ok} of {cells} cells ok{wall}. Baseline: "
        f"{_side(record, record.baseline)}" + (
            f"; candidate: {_side(record, record.candidate)}." if record.candidate else "."),
        *_builds(record)])


def _side(record: StudyRecord, label: str) -> str:
    """A config's label, with the PostgreSQL it ran when the configs ran different builds."""
    return side_name(record.versions, label)


def _builds(record: StudyRecord) -> list[str]:
    """Which PostgreSQL each config ran, where they differ: version, programs, origin."""
    if record.versions is None:
        return []
    return ["Servers: " + "; ".join(build_line(s) for s in record.versions.servers) + "."]


def _summary(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    lines: list[Inline] = [s for f in record.findings if f.summary
                           and (s := sentence(f, record)) is not None]
    threats = Link(SECTION_TITLES["threats"], "#threats")
    failed = [c for c in record.cells if c.status not in ("ok", DAMAGED)]
    if failed:
        lines.append(Text.of(f"{len(failed)} of {len(record.cells)} cells did not finish ok "
                             f"({', '.join(c.key for c in failed)}): see ", threats, "."))
    damaged = [c for c in record.cells if c.status == DAMAGED]
    if damaged:
        lines.append(Text.of(
            f"{len(damaged)} of {len(record.cells)} cells finished, but a file of their run "
            f"cannot be read ({', '.join(c.key for c in damaged)}): left out of the figures "
            "and comparisons, see ", threats, "."))
    lines = lines or ["No comparison or figure could be made from the runs so far."]
    return [Section(SECTION_TITLES["summary"], anchor="summary", body=[BulletList(lines)])]


def _glance(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    a = _side(record, record.baseline)
    b = _side(record, record.candidate) if record.candidate else "—"
    rows = []
    for result in record.workloads:
        rows.append(_glance_row(result, record))
    table = Table(["Workload", "Metric", a, b, "Change", "Interval", "Verdict",
                   "Bottleneck"], rows)
    return [Section(SECTION_TITLES["glance"], anchor="glance", tables=[table])]


def _glance_row(result: WorkloadResult, record: StudyRecord) -> list[Inline]:
    m = headline_comparison(result)
    bottlenecks = " → ".join(s.bottleneck or "—" for s in result.sides)
    # The workload's name leads to its own section below (a link in both formats).
    name = Link(result.workload, f"#{result.anchor}")
    if m is not None:
        return [name, m.title,
                _num(m.baseline_mean), _num(m.candidate_mean), signed_pct(m.change_pct),
                interval(m), verdict_text(m), bottlenecks]
    side = result.sides[0] if result.sides else None
    fig = side.figure(result.headline) if side else None
    if fig is None:
        return [name, result.headline, "—", "—", "—",
                "—", "not measured", bottlenecks]
    value = f"{_num(fig.mean)} ({side.label})"
    return [name, f"{fig.label} ({fig.unit})", value,
            "—", "—", "—", "one config", bottlenecks]


def _charts(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    section = Section(SECTION_TITLES["charts"], anchor="charts")
    captions = {"headline_bars": "Headline figure of each workload, side by side "
                                 "(absolute values; bars: mean, whiskers: ± one standard "
                                 "deviation over iterations)",
                "change_bars": "Change of each workload's headline figure, candidate "
                               "against baseline, with its interval",
                "scaling_all": "Headline by client count, every workload on one axis"}
    for name, caption in captions.items():
        if name in images:
            section.images.append((caption, images[name]))
    if not section.images:
        section.paragraphs.append("No figure was measured.")
    return [section]


def _workloads(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    out = [s for result in record.workloads for s in _workload(result, images, out_dir)]
    return [*out, _smart_phases(record)]


def _smart_phases(record: StudyRecord) -> Section:
    """The drive health table: the device's SMART log before the study and after each
    workload, side by side; or why the device gave none."""
    section = Section("Drive health across the study (SMART)", anchor="smart")
    phases = record.smart_phases
    if not phases:
        section.paragraphs.append(f"SMART: not available ({record.smart_note}).")
        return section

    def row(name: str, cell) -> list[str]:  # noqa: ANN001 - SmartPhase -> text
        return [name, *[cell(p) for p in phases]]

    def num(value: float | None, unit: str = "") -> str:
        return "—" if value is None else f"{value:,.0f}{unit}"

    def size(value: float | None) -> str:
        return "—" if value is None else human_bytes(value)

    section.tables.append(Table(
        ["SMART", *[p.label for p in phases]],
        [row("Temperature", lambda p: num(p.temperature_c, " °C")),
         row("Peak temperature so far", lambda p: num(p.peak_temperature_c, " °C")),
         row("Percentage used", lambda p: num(p.percent_used, "%")),
         row("Media errors", lambda p: num(p.media_errors)),
         row("Host writes in the study", lambda p: size(p.written_bytes)),
         row("Host reads in the study", lambda p: size(p.read_bytes)),
         row("Thermal throttle events", lambda p: num(p.throttle_events))],
        caption=f"{phases[0].device}: absolute values at each reading; traffic and "
                "throttling counted from the study's first reading"))
    return section


def _workload(result: WorkloadResult, images: dict[str, str], out_dir: Path) -> list[Section]:
    section = Section(f"{result.workload}: {result.description}", anchor=result.anchor)
    cmp = result.comparison
    for side in result.sides:
        section.paragraphs += _side_lines(side)
    if cmp is not None:
        clients = result.sides[0].clients
        if cmp.design is not None:
            section.paragraphs.append(_design_line(cmp.design))
        section.tables.append(metrics_table(cmp, clients if clients is not None else
                                            cmp.metrics[0].clients))
        for profile in cmp.io_profiles:
            section.tables.append(io_table(profile, cmp))
            section.tables.append(_consistency_table(profile, cmp))
    elif result.sides:
        section.tables.append(_figures_table(result.sides[0]))
    if any(len(s.by_clients) > 1 for s in result.sides):
        section.tables.append(_scaling_table(result))
    if result.steps:
        section.tables.append(_steps_table(result))
    if result.sweep_compare_dir:
        page = f"{result.sweep_compare_dir}/compare.md"
        section.paragraphs.append(Text.of("The sweeps side by side: ", Link(page, page), "."))
        for png in sorted((out_dir / result.sweep_compare_dir / "plots").glob("*.png")):
            caption = png.stem.replace("_", " ").replace("-", " ")
            section.images.append((f"{result.workload} sweeps: {caption}",
                                   str(png.relative_to(out_dir))))
    sections = [section]
    if result.compare_dir:
        page = f"{result.compare_dir}/compare.md"
        section.paragraphs.append(Text.of("The whole comparison: ", Link(page, page), "."))
        own = _workload_sections(result, out_dir)
        shown = {path for s in own for _, path in s.images}
        for png in sorted((out_dir / result.compare_dir / "plots").glob("*.png")):
            path = str(png.relative_to(out_dir))
            if path not in shown:
                caption = png.stem.replace("_", " ").replace("-", " ")
                section.images.append((f"{result.workload}: {caption}", path))
        sections += own
    if f"scaling_{result.workload}" in images:
        section.images.append((f"{result.workload}: headline by clients",
                               images[f"scaling_{result.workload}"]))
    smart = _smart_table(result)
    if smart is not None:
        section.tables.append(smart)
    return sections


def _workload_sections(result: WorkloadResult, out_dir: Path) -> list[Section]:
    """The workload's own comparison sections (TPROC-H: per-query speedup and plan
    changes), as its plugin lays them out, one level down, images re-rooted here."""
    from pgdyno.workloads import registry

    cmp = result.comparison
    if cmp is None or not cmp.workload_detail or not result.compare_dir:
        return []
    folder = out_dir / result.compare_dir
    own = registry.get(result.workload).compare_sections(cmp.workload_detail, folder)
    for s in own:
        s.level = 3
        s.images = [(caption, f"{result.compare_dir}/{path}") for caption, path in s.images]
    return own


def _smart_table(result: WorkloadResult) -> Table | None:
    """SMART of this phase (workload) per side: a drive report's table, or why there is none."""
    rows = []
    for side in result.sides:
        v = side.smart
        if v:
            rows.append([side.label,
                         f"{v.get('temperature_c_before', math.nan):.0f} → "
                         f"{v.get('temperature_c_after', math.nan):.0f} °C",
                         human_bytes(v["written_bytes"]) if "written_bytes" in v else "—",
                         human_bytes(v["read_bytes"]) if "read_bytes" in v else "—",
                         f"{v.get('percent_used_before', math.nan):.0f}% → "
                         f"{v.get('percent_used_after', math.nan):.0f}%",
                         f"{v['media_errors_after']:.0f}" if "media_errors_after" in v else "—",
                         f"{v['throttle_events']:.0f}" if "throttle_events" in v else "—"])
        elif side.smart_note:
            rows.append([side.label, f"not available: {side.smart_note}", "", "", "", "", ""])
    if not rows:
        return None
    return Table(["Phase", "Temperature", "Host writes", "Host reads", "Percentage used",
                  "Media errors", "Throttle events"], rows,
                 caption=f"SMART during {result.workload} (first reading before, last after)")


def _consistency_table(profile, cmp) -> Table:  # noqa: ANN001 - compare's IoProfile
    """I/O consistency: write IOPS mean, standard deviation and CV per side (a
    CV near 100% is checkpoint storms: idle, then a flush)."""
    def row(label: str, a: float | None, b: float | None, fmt_: str) -> list[str]:
        return [label, *[fmt_.format(v) if v is not None else "—" for v in (a, b)]]

    a, b = profile.baseline, profile.candidate
    sd = [s.write_iops * s.write_iops_cv if s.write_iops is not None
          and s.write_iops_cv is not None else None for s in (a, b)]
    return Table(["Metric", cmp.baseline_label, cmp.candidate_label], [
        row("Write IOPS mean", a.write_iops, b.write_iops, "{:,.0f}"),
        row("Write IOPS std dev", sd[0], sd[1], "{:,.0f}"),
        row("Write IOPS CV", *[s.write_iops_cv * 100 if s.write_iops_cv is not None
                               else None for s in (a, b)], "{:.1f}%"),
        row("Read IOPS CV", *[s.read_iops_cv * 100 if s.read_iops_cv is not None
                              else None for s in (a, b)], "{:.1f}%")],
        caption=f"I/O consistency on {profile.group}, {profile.clients} clients "
                "(1 s samples over the measured windows)")


def _side_lines(side: Side) -> list[str]:
    lines = [f"{side.label}: {len(side.runs)} run(s)"
             + (f" at {side.clients} clients" if side.clients is not None else "")
             + (f"; bottleneck verdict {side.bottleneck} "
                f"({', '.join(f'{k} {v}' for k, v in side.bottleneck_votes.items())})"
                if side.bottleneck else "")
             + (f"; dataset in {side.dataset_fit}"
                + (f" ({human_bytes(side.dataset_bytes)})" if side.dataset_bytes else "")
                if side.dataset_fit else "")
             + ("; its load took turns of one second with the other side's, so its figure "
                "is the headline of its turns (its latency and telemetry, which hold the "
                "pauses and saw the other load, are left out)" if side.took_turns else "")
             + "."]
    return lines


def _figures_table(side: Side) -> Table:
    return Table(["Metric", "Unit", "Mean", "Std dev", "CV", "n"],
                 [[f.label, f.unit, _num(f.mean), _num(f.stddev),
                   f"{100 * f.stddev / f.mean:.1f}%" if f.mean else "—", str(f.n)]
                  for f in side.figures], caption=f"{side.label}")


def _scaling_table(result: WorkloadResult) -> Table:
    counts = sorted({int(c) for s in result.sides for c in s.by_clients})
    return Table(["Clients", *[s.label for s in result.sides]],
                 [[str(c), *[_num(s.by_clients[str(c)]) if str(c) in s.by_clients else "—"
                             for s in result.sides]] for c in counts],
                 caption=f"{result.headline} by client count")


def _steps_table(result: WorkloadResult) -> Table:
    rows = []
    for step in result.steps:
        m: MetricComparison | None = step.comparison.metric(result.headline)
        if m is None:
            continue
        rows.append([str(step.size), _num(m.baseline_mean), _num(m.candidate_mean),
                     signed_pct(m.change_pct), interval(m), verdict_text(m)])
    a = result.sides[0].label if result.sides else "A"
    b = result.sides[1].label if len(result.sides) > 1 else "B"
    return Table([result.size_unit.capitalize() or "Size", a, b, "Change", "Interval",
                  "Verdict"], rows, caption=f"{result.headline} at each step of the sweep")


def _settings(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    section = Section(SECTION_TITLES["settings"], anchor="settings")
    if record.settings:
        section.tables.append(Table(["Layer", "Parameter", _side(record, record.baseline),
                                     _side(record, record.candidate or ""), "Rationale"],
                                    [[s["layer"], s["name"], s["before"], s["after"],
                                      s["rationale"]] for s in record.settings]))
    else:
        section.paragraphs.append("The configs compared set the same values.")
    if record.versions is None:
        return [section]
    section.paragraphs += _builds(record)
    return [section, stock_section(record.versions)]


def _context(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    """Each context's own report (pgdyno report --context), written beside the study and
    laid out here one level down: the configuration matrix with its rationale, the sizing
    math, the run journal, cold/warm validation, price/performance and the hardware's
    limits, as that report computes them."""
    from pgdyno.campaign.context import build_context
    from pgdyno.campaign.context_report import context_document, write_context_report

    out = [Section(SECTION_TITLES["context"], anchor="context"), *_provision(record)]
    for context, results_dir in _contexts(record):
        folder = out_dir / f"context-{context}"
        try:
            rep = build_context(results_dir, context)
            write_context_report(rep, folder)
            doc = context_document(rep)
        except (PgdynoError, OSError, ValueError) as exc:
            out[0].paragraphs.append(f"{context}: no context report ({exc}).")
            continue
        page = f"{folder.name}/context-report.md"
        out[0].paragraphs.append(Text.of(f"{context}: ", Link(page, page), "."))
        for section in doc.sections:
            section.level = 3
            section.title = f"{context}: {section.title}"
            section.images = [(c, f"{folder.name}/{p}") for c, p in section.images]
            out.append(section)
    return out


def _provision(record: StudyRecord) -> list[Section]:
    """The provisioning plan: per config, the OS and storage steps `pgdyno provision
    apply` would take on the measured host (read before the first cell, never applied)."""
    out = []
    for rec in record.provision:
        section = Section(f"Provisioning plan: config {rec.config} ({rec.label})",
                          anchor=f"provision-{rec.label.split(',')[0]}", level=3)
        plan = rec.plan
        if plan is None:
            section.paragraphs.append(f"No plan: {rec.note}")
        elif not plan.steps:
            section.paragraphs.append(f"Config {rec.config} changes no OS or storage "
                                      "setting: the host stays as it is.")
        else:
            todo = [s for s in plan.steps if s.actionable]
            section.paragraphs.append(Text.of(
                f"On {plan.host} (hardware {plan.hardware}), read {plan.created}: "
                f"{len(todo)} to change, "
                f"{sum(1 for s in plan.steps if s.status == AT_TARGET)} already at target, "
                f"{sum(1 for s in plan.steps if s.status == SKIPPED)} not planned here (no "
                "device named, or not this host's to change). ",
                Code(f"pgdyno provision apply --config {rec.config} --yes"),
                " applies it with a state file; ", Code("pgdyno provision revert"),
                " undoes it."))
            section.tables.append(Table(
                ["Setting", "Kind", "Now", "Planned", "Status", "Rationale"],
                [[s.target or ",".join(s.keys), s.kind, (s.current or "–").splitlines()[0],
                  s.shown_value, s.status, s.rationale] for s in plan.ordered()
                 + [s for s in plan.steps if not s.actionable]],
                caption=Text.of("What ", Code(f"pgdyno provision plan --config {rec.config}"),
                                " would change")))
            section.paragraphs += [f"Warning: {w}" for w in plan.warnings]
        out.append(section)
    return out


def _contexts(record: StudyRecord) -> list[tuple[str, Path]]:
    """The contexts the study's runs belong to, with their results directory."""
    seen: dict[str, Path] = {}
    for result in record.workloads:
        for side in result.sides:
            for run in side.runs:
                path = Path(run)
                seen.setdefault(path.parent.name, path.parent.parent)
    return list(seen.items())


RECOMMENDING = ("adopt", "keep", "avoid", "headroom")


def _conclusions(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    lines = [s for f in record.findings if f.kind not in RECOMMENDING
             and (s := sentence(f, record)) is not None]
    section = Section(SECTION_TITLES["conclusions"], anchor="conclusions")
    if lines:
        section.body.append(BulletList(lines))
    else:
        section.paragraphs.append("No conclusion: nothing was measured.")
    recs = [s for f in record.findings if f.kind in RECOMMENDING
            and (s := sentence(f, record)) is not None]
    out = [section]
    if recs:
        out.append(Section("Recommendations", level=3, anchor="recommendations",
                           body=[BulletList(recs)]))
    table = _projection_table(record)
    if table is not None:
        out.append(Section("Scaling projection", level=3, anchor="projection", paragraphs=[
            Text.of("Each workload's peak per vCPU on this machine, times other sizes: a "
                    "linear upper bound (locks, WAL and memory bandwidth do not grow with "
                    "cores; ", Code("pgdyno report --context"), " fits the real curve once "
                    "other sizes are measured).")], tables=[table]))
    return out


def _projection_table(record: StudyRecord) -> Table | None:
    vcpus = record.vcpus
    projected = projection(record, vcpus or 0)
    if not projected:
        return None
    sizes = sorted({n for p in projected.values() for n in p})
    return Table(["vCPUs", *projected], [[str(n), *[_num(projected[w][n]) for w in projected]]
                                         for n in sizes],
                 caption=f"headline projected from {vcpus} vCPUs (upper bound)")



def _threats(record: StudyRecord, images: dict[str, str], out_dir: Path) -> list[Section]:
    lines = [threat_sentence(t) for t in record.threats]
    section = Section(SECTION_TITLES["threats"], anchor="threats")
    if lines:
        section.body.append(BulletList(lines))
    else:
        section.paragraphs.append("None found: every cell finished, no iteration was "
                                  "contaminated, the intervals are narrow and the windows long.")
    return [section]


def _runs(record: StudyRecord) -> Section:
    return Section("Runs", anchor="runs", tables=[Table(
        ["Cell", "Status", "Run"],
        [[c.key, c.status, c.run_dir or c.reason or "—"] for c in record.cells])])
