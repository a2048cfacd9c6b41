"""A comparison as a report Document, and the files of a comparison directory."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from pgdyno import serde
from pgdyno.compare.alternate import ALTERNATING, lead_seconds
from pgdyno.compare.io_profile import IoFigure, IoProfile
from pgdyno.compare.model import Comparison, DesignSummary, MetricComparison, shown_unit
from pgdyno.compare.paired import PAIRED_DIFF, PAIRED_HL
from pgdyno.compare.plots import comparison_plots
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import diff_block
from pgdyno.compare.stats import TOO_SMALL, UNDETERMINED, WELCH_DIFF
from pgdyno.reports import html
from pgdyno.reports.document import (
    CHANGE_SIGN,
    BulletList,
    Code,
    Document,
    Image,
    Paragraph,
    Section,
    Strong,
    Table,
    Text,
)
from pgdyno.results.rundir import safe_name, write_json_atomic
from pgdyno.runner.longstep import minutes_words
from pgdyno.units import UNITS_NOTE, mean_sd, rounded, signed_pct


def interval(m: MetricComparison) -> str:
    if math.isnan(m.ci_low_pct):
        return "–"
    return f"[{signed_pct(m.ci_low_pct)}, {signed_pct(m.ci_high_pct)}]"


def verdict_text(m: MetricComparison) -> str:
    if m.verdict in (UNDETERMINED, TOO_SMALL):
        return f"{m.verdict} ({m.reason})" if m.reason else m.verdict
    notes = [f"noise ±{m.noise_pct:.1f}%"] if not math.isnan(m.noise_pct) else []
    if m.method in (WELCH_DIFF, PAIRED_DIFF):
        notes.append("difference of means")
    return f"{m.verdict} ({'; '.join(notes)})" if notes else m.verdict


def headline(cmp: Comparison) -> list[Text]:
    """One line per client count for the workload's headline figure: NOPM for TPROC-C
    (measured by the database), TPS for pgbench workloads, events/s for cpu."""
    lines = []
    name = cmp.headline_metric
    for m in cmp.metrics:
        if m.metric != name:
            continue
        lines.append(Text.of(f"{m.clients} clients: {m.label or name.upper()} "
                             f"{rounded(m.baseline_mean, 1)} → "
                             f"{rounded(m.candidate_mean, 1)}, change {signed_pct(m.change_pct)} "
                             f"{100 * cmp.confidence:.0f}% interval {interval(m)}: ",
                             Strong(verdict_text(m))))
    return lines


def metrics_table(cmp: Comparison, clients: int) -> Table:
    rows = []
    for m in cmp.metrics:
        if m.clients != clients:
            continue
        _unit, divisor = m.shown_unit()
        rows.append([m.title, _side(m.baseline_mean, m.baseline_stddev, m.baseline_n, divisor),
                     _side(m.candidate_mean, m.candidate_stddev, m.candidate_n, divisor),
                     signed_pct(m.change_pct), interval(m), verdict_text(m)])
    label = f"{clients} clients" if clients else "Whole runs (one value per run)"
    return Table(["Metric", "A: mean ± sd (n)", "B: mean ± sd (n)", "Change (B/A − 1)",
                  f"{100 * cmp.confidence:.0f}% interval", "Verdict"], rows, caption=label)


def _side(mean: float, sd: float, n: int, divisor: float = 1.0) -> str:
    """'mean ± sd (n)', in the row's shown unit (``divisor`` from its saved unit), the
    deviation at the mean's precision."""
    return f"{mean_sd(mean / divisor, sd / divisor)} ({n})"


def change_chart_section(cmp: Comparison, images: dict[str, str]) -> Section:
    """The change chart, and under it the rows it leaves out (no interval of a ratio)."""
    clients = cmp.chart_clients()
    rows = [m for m in cmp.metrics if m.clients in (clients, 0)]
    left_out = [f"{m.title}{_at(m, clients)}: {_why_not_charted(m)}"
                for m in rows if not m.has_ratio_interval]
    section = Section("Change per metric", level=3)
    if "change_bars" in images:
        section.body.append(Image("Change per metric with its interval", images["change_bars"]))
    else:
        section.body.append(Paragraph("No metric has an interval of a ratio B/A: there is no "
                                      "chart."))
    if left_out:
        section.body += [Paragraph("Not in the chart (no interval of a ratio B/A):"),
                         BulletList(left_out)]
    return section


def _at(m: MetricComparison, clients: int | None) -> str:
    return " (whole runs)" if m.clients == 0 and clients else ""


def _why_not_charted(m: MetricComparison) -> str:
    if m.method in (WELCH_DIFF, PAIRED_DIFF):
        return (f"difference of means (a side has a value of 0 or less), change "
                f"{signed_pct(m.change_pct)}, "
                f"interval {interval(m)}, {m.verdict}")
    return verdict_text(m)


def io_profile_section(cmp: Comparison, images: dict[str, str]) -> Section | None:
    """The I/O profile: one table per client count and device, then the overlay."""
    if not cmp.io_profiles:
        return None
    section = Section("I/O profile", paragraphs=[
        "What the disks did on each side over the measured windows (averages weighted by "
        "window length; CV: σ/μ of the 1 s samples). A description of the runs: whether a "
        "difference is more than noise is the metrics table's verdict."])
    for profile in cmp.io_profiles:
        section.tables.append(io_table(profile, cmp))
    if "write_iops_overlay" in images:
        section.images.append(("Write IOPS over time, both sides", images["write_iops_overlay"]))
    return section


def io_table(profile: IoProfile, cmp: Comparison) -> Table:
    a, b = profile.baseline, profile.candidate
    rows = []
    for f in profile.figures:
        unit, divisor = shown_unit(f.unit, [f.baseline, f.candidate])
        label = f.label if f.unit in ("%", "IOPS") else f"{f.label} ({unit})"
        rows.append([label, _io_value(f, f.baseline, f.baseline_missing, divisor),
                     _io_value(f, f.candidate, f.candidate_missing, divisor), _io_change(f)])
    caption = (f"{profile.group}, {profile.clients} clients: A {a.iterations} iteration(s), "
               f"{a.seconds:.0f} s; B {b.iterations} iteration(s), {b.seconds:.0f} s")
    return Table(["Metric", f"A: {cmp.baseline_label}", f"B: {cmp.candidate_label}", "Change"],
                 rows, caption=caption)


def _io_value(f: IoFigure, value: float | None, missing: str, divisor: float = 1.0) -> str:
    if value is None:
        return missing or "–"
    if f.unit == "IOPS":
        return f"{value:,.0f}"
    return f"{value / divisor:,.1f}" + ("%" if f.unit == "%" else "")


def _io_change(f: IoFigure) -> str:
    if f.change is None:
        return f.change_note or "–"
    if f.change_unit == "pts":
        return f"{f.change:+.1f} pts"
    return signed_pct(f.change)


def design_section(cmp: Comparison) -> Section | None:
    """How the sides were measured, the paired interval's method, and the checks."""
    d = cmp.design
    if d is None:
        return None
    section = Section("How this was measured")
    if d.blocks is None:
        section.paragraphs.append(Text.of(
            f"Design: {d.design} ({d.why}). Each side ran whole runs in A B B A order, one "
            "after the other; the interval treats the runs as independent samples, so a "
            "machine whose speed changes between runs widens it. Where both servers fit on "
            "the machine at once, ", Code("--design interleaved"),
            " pairs neighbouring blocks instead."))
        return section
    rec = d.blocks
    order = " ".join(rec.orders)
    if d.design == ALTERNATING:
        section.paragraphs.append(_turns_words(d))
    else:
        section.paragraphs.append(
            f"Design: {d.design} ({d.why}). Both servers were up for the whole comparison, each "
            f"with its own cluster and dataset; each block was one iteration of its side's run: "
            f"a CHECKPOINT, {rec.warmup_s} s of warm-up, {rec.block_s} s measured. "
            + ("Each pair ran A and B at the same time, except that one pair in four was a "
               "check pair, each side alone, back to back (left out of the figures: see the "
               "check below)."
               if d.design == "duet" else
               "Each pair ran one block of each side back to back, in an order drawn at random "
               f"in balanced quads (seed {rec.seed}): {order}."))
    if rec.common_seed is not None:
        section.paragraphs.append(
            f"Both sides' pgbench drew from one seed a block ({rec.common_seed} in the first, "
            "one more in each next), so the two loads of a pair drew the same keys, "
            "transactions and think times: what the workload draws is not in the pair's "
            "ratio (common random numbers).")
    section.paragraphs.append(
        f"{d.pairs} pairs in {rec.measuring_s:.0f} s of measuring ({rec.setup_s:.0f} s to "
        f"start both servers and build the datasets); a pair took {_secs(d.pair_seconds)}. "
        f"Stopped: {rec.stop}"
        + (f" (asked: ±{rec.precision_pct:g}%" if rec.precision_pct is not None else "")
        + (f", budget {rec.budget_s:.0f} s)" if rec.budget_s is not None and
           rec.precision_pct is not None else
           (")" if rec.precision_pct is not None else
            (f" (budget {rec.budget_s:.0f} s)" if rec.budget_s is not None else "")))
        + ".")
    section.paragraphs.append(_interval_words(d, cmp.confidence, len(rec.looks)))
    if rec.looks:
        section.tables.append(Table(
            ["Look", "Pairs", "Elapsed (s)", "α spent", "Change", "Interval"],
            [[str(i), str(look.pairs), f"{look.elapsed_s:,.0f}", f"{100 * look.alpha:.2f}%",
              signed_pct(look.change_pct, 2),
              f"[{signed_pct(look.low_pct, 2)}, {signed_pct(look.high_pct, 2)}]"]
             for i, look in enumerate(rec.looks, start=1)],
            caption=f"Looks at the {rec.headline_metric} interval"))
    checks = []
    if d.order is not None:
        checks.append(f"Order inside a pair: {d.order.words}.")
    if d.duet is not None:
        checks.append(f"Duet against the sides alone: {d.duet.words}.")
    checks += [f"Shared {line}." for line in d.shared]
    if not math.isnan(d.noise_pct):
        checks.append(f"Noise: one pair's log ratio spreads ±{d.noise_pct:.1f}%; a ±1% "
                      f"interval would take about {_duration(d.seconds_for_1pct)} of "
                      "measuring on this machine in this design (the half-width shrinks "
                      "as 1/√time).")
    section.paragraphs += checks
    return section


def _turns_words(d: DesignSummary) -> str:
    """The alternating design in words: the turns, their order, how exact the switches."""
    rec = d.blocks
    assert rec is not None
    late = max(rec.switch_late_ms, default=math.nan)
    return (f"Design: alternating ({d.why}). Both servers were up for the whole comparison, "
            "each with its own cluster and dataset, and both loads ran at once in blocks "
            f"of {rec.warmup_s + rec.block_s} s (one iteration of each side's run, after its "
            "CHECKPOINT, both started at the same moment); every second one side's load "
            "generator was stopped and the other's continued, so that a pair is two "
            "neighbouring seconds, one of each side, in an order drawn at random in "
            f"balanced quads (seed {rec.seed}). The first {lead_seconds(rec.warmup_s)} s of "
            f"each block took turns unmeasured. {len(rec.orders)} block(s); the switches came "
            f"at most {_num_ms(late)} after their second began"
            + (f"; {rec.missed_switches} could not be made, their pairs left out"
               if rec.missed_switches else "") + ".")


def _num_ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} ms"


def _interval_words(d: DesignSummary, confidence: float, looks: int) -> str:
    rho = f"the pairs' lag-1 autocorrelation was {_num(d.autocorrelation)}"
    if d.method == PAIRED_HL:
        how = ("Interval: Hodges and Lehmann's estimate of ln(B/A) (the median of the pairs' "
               "Walsh averages) with the exact signed-rank interval: it needs only that a "
               "pair's difference is symmetric about the change, which the randomized order "
               "gives, and a pair that a jump of the machine's speed fell into weighs no "
               f"more than any other ({rho})")
    else:
        how = ("Interval: the mean over the pairs of ln(B/A), with the variance of that mean "
               f"from Newey and West's estimate ({d.lags} lag(s); {rho}), never below the "
               "independent-pairs variance, and Student's t with n − 1 degrees of freedom "
               "(used instead of the signed-rank interval when the pairs correlate beyond "
               "chance or are too few for the level)")
    return (f"{how}. The comparison looked at its interval {looks} time(s); the error rate "
            f"of {100 * (1 - confidence):.0f}% was spent in steps (α·t² at the fraction t of "
            f"the budget, the rest at the last look), so the interval reported, at "
            f"{100 * d.level:.2f}%, holds at {100 * confidence:.0f}% however early it "
            "stopped.")


def _num(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.2f}"


def _secs(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1f} s"


def _duration(seconds: float) -> str:
    return "–" if math.isnan(seconds) else minutes_words(seconds)


def build_compare_document(cmp: Comparison, images: dict[str, str],
                           workload_sections: list[Section] | None = None) -> Document:
    changes = Section("What changed (A → B)", preformatted=[diff_block(cmp.changes)])
    if cmp.changes:
        changes.tables.append(Table(["Layer", "Setting", "A", "B", "Source of B's value"],
                                    [[c.layer, c.name, c.before, c.after, c.rationale]
                                     for c in cmp.changes]))
    verdict = Section("Verdict", paragraphs=[f"A (baseline): {cmp.baseline_label}; "
                                             f"B (candidate): {cmp.candidate_label}.",
                                             *headline(cmp)])
    if cmp.contaminated:
        verdict.paragraphs.append(Text.of(
            Strong("Contaminated"), f": {len(cmp.contaminated)} compared iteration(s) ran "
            "while other processes took a material share of the host, so a difference may be "
            "theirs, not the configs': " + "; ".join(cmp.contaminated) + "."))
    verdict.paragraphs += [f"Note: {n}" for n in cmp.notes]
    measured = design_section(cmp)
    metrics = Section("Metrics")
    for clients in sorted({m.clients for m in cmp.metrics}, key=lambda c: (c == 0, c)):
        metrics.tables.append(metrics_table(cmp, clients))
    over_time = Section("Throughput and latency, both sides", level=3)
    for name, caption in (("turns", "Each side's turns and each pair's ratio"),
                          ("tps_timelines", "TPS over time, both sides"),
                          ("percentile_curves", "Latency percentile curves")):
        if name in images:
            over_time.images.append((caption, images[name]))
    sections = [changes, verdict, *([measured] if measured else []), metrics,
                *(workload_sections or [])]
    if cmp.chart_clients() is not None:
        sections.append(change_chart_section(cmp, images))
    if over_time.images:
        sections.append(over_time)
    io = io_profile_section(cmp, images)
    if io is not None:
        sections.append(io)
    method = Section("Method", paragraphs=[cmp.method_note, CHANGE_SIGN, UNITS_NOTE])
    files = Section("Runs", tables=[Table(
        ["Side", "Run"], [["A", r] for r in cmp.baseline_runs]
        + [["B", r] for r in cmp.candidate_runs])])
    return Document(title=f"pgdyno compare: {cmp.baseline_label} vs {cmp.candidate_label}",
                    sections=[*sections, method, files])


def write_comparison(cmp: Comparison, baseline: list[RunData], candidate: list[RunData],
                     out_dir: Path) -> Path:
    """compare.json, compare.md, compare.html and plots/ in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "compare.json", serde.to_dict(cmp))
    clients = cmp.chart_clients()
    images = (comparison_plots(cmp, baseline, candidate, clients, out_dir)
              if clients is not None else {})
    doc = build_compare_document(cmp, images, _workload_sections(cmp, baseline, out_dir))
    html.write_document(doc, out_dir, "compare")
    return out_dir


def _workload_sections(cmp: Comparison, baseline: list[RunData],
                       out_dir: Path) -> list[Section]:
    if not cmp.workload_detail or not baseline:
        return []
    from pgdyno.workloads import registry

    return registry.get(baseline[0].workload).compare_sections(cmp.workload_detail, out_dir)


def default_out_dir(results_dir: Path, a: RunData, b: RunData) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = safe_name(f"{a.path.name}--vs--{b.path.name}-{stamp}")
    return results_dir / "comparisons" / name
