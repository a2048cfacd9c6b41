"""The search's report rendered: the convergence and validation plots, and the document
(Markdown and HTML) laid out from ``search.report_data.SearchReportData``; nothing is
computed here but the words.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.reports.document import Document, Section, Strong, Table, Text
from pgdyno.search.noise import (
    CONFIDENCE,
    PAIRING_PAYS_ABOVE,
    POWER,
    TRIAL_SD_FOR_LEAD_PCT,
    Noise,
    SearchNoise,
)
from pgdyno.search.report_data import CandidateLine, SearchReportData
from pgdyno.units import MISSING, alike, count, figure, format_bytes, percent, signed_pct


def interval_text(low: float | None, high: float | None) -> str:
    """A change's interval (``undetermined`` without one: too few pairs)."""
    if MISSING in (signed_pct(low), signed_pct(high)):
        return "undetermined"
    return f"{signed_pct(low)} to {signed_pct(high)}"


def convergence_plot(data: SearchReportData, path: Path) -> Path | None:
    ok = [t for t in data.trials if t.value is not None]
    if not ok:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pgdyno.reports.plots import save_figure

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.scatter([t.number for t in ok], [t.value for t in ok], s=18, color="#4c72b0",
               label="trial", zorder=3)
    failed = [t.number for t in data.trials if t.value is None]
    if failed:
        low = min(t.value for t in ok)
        ax.scatter(failed, [low] * len(failed), marker="x", color="#c44e52",
                   label="failed trial (no value)", zorder=3)
    ax.step([t.number for t in data.trials if t.best is not None],
            [t.best for t in data.trials if t.best is not None], where="post",
            color="#55a868", label="best so far")
    styles = {"default": ":", "pgtune": "--", "tuned": "-."}
    for name, value in data.baselines.items():
        ax.axhline(value, linestyle=styles.get(name, ":"), color="#8172b2", alpha=0.8,
                   label=f"{name} ({figure(value)} {data.unit})")
    ax.set_xlabel("trial number (baselines first)")
    ax.set_ylabel(f"{data.metric_label} ({data.unit})")
    better = "higher" if data.direction > 0 else "lower"
    ax.set_title(f"Search convergence: {data.metric_label}, {better} is better")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def build_document(data: SearchReportData, images: dict[str, str]) -> Document:
    unit = data.unit
    summary = Section("Summary", paragraphs=[
        f"Workload {data.workload}; headline {data.metric_label} ({unit}), "
        f"{'higher' if data.direction > 0 else 'lower'} is better. "
        f"{len(data.trials)} trials, {sum(t.status != 'ok' for t in data.trials)} failed. "
        "Optimiser: Optuna TPE; the baselines default, pgtune and tuned ran first.",
        *([Text.of(Strong("Recommendation"), ": " + data.recommendation)]
          if data.recommendation else []),
        *data.verdicts, *[f"Note: {n}" for n in data.notes]])
    conv = Section("Convergence", images=[("Each trial, the best so far and the baselines",
                                           images["convergence"])] if images else [])
    conv.paragraphs.append(PENALTY_RULE)
    conv.tables.append(Table(
        ["Trial", "Config", "Status", f"Raw {data.metric_label} ({unit})", "Debt penalty",
         f"Penalised ({unit})", "Best so far", "Dead tuples at end", "Dead tuples/min",
         "Autovacuum backlog", "WAL since checkpoint", "Seconds", "Reason", "Run"],
        [[str(t.number), t.label, t.status, figure(t.raw), percent(t.penalty_pct),
          figure(t.value), figure(t.best), count(t.dead_tuples_end),
          figure(t.dead_growth_per_min), count(t.backlog),
          format_bytes(t.wal_since_checkpoint_bytes), f"{t.seconds:.0f}", t.reason or "",
          t.run_dir] for t in data.trials]))
    blocks = [t for t in data.trials if t.against]
    if blocks:
        conv.paragraphs.append(
            "Trials measured in blocks: each against the best config measured before it, "
            "both servers up at once, the load alternating between them; its figure is the "
            "reference's times the pairs' geometric mean ratio (the interval is the pairs' "
            "95% interval of the change, as `pgdyno compare` gives it).")
        conv.tables.append(Table(
            ["Trial", "Config", "Measured against", "Change", "95% interval", "Pairs",
             "Blocks"],
            [[str(t.number), t.label, f"trial {t.against['trial']} ({t.against['label']})",
              signed_pct(t.against.get("change_pct")),
              interval_text(t.against.get("low_pct"), t.against.get("high_pct")),
              str(t.against.get("pairs", "")), str(t.against.get("blocks", ""))]
             for t in blocks]))
    if data.os_knobs:
        conv.tables.append(Table(["Trial", "Config", "OS values"], [
            [str(t.number), t.label, t.os_values or "–"] for t in data.trials]))
        conv.paragraphs.append(OS_RULE)
    importance = Section("Setting importance", paragraphs=[data.importance_note])
    if data.importance:
        importance.tables.append(Table(["Setting", "Importance (share)"],
                                       [[k, f"{100 * v:.1f}%"] for k, v in data.importance]))
    select = Section("Leading candidates, measured again", paragraphs=[
        "The winner is the candidate with the best mean over its trial and its re-runs "
        "(a single trial's value is biased upwards by selection); a candidate whose re-run "
        "failed cannot win."])
    select.tables.append(Table(
        ["Candidate", "Trial value", "Re-runs", "Mean", "SD", "n", "Winner"],
        [_candidate_row(c) for c in data.candidates]))
    settings = Section("Winner's settings against pgtune and tuned", tables=[Table(
        ["Setting", "Winner", "pgtune", "tuned", "Stock", "Rationale (tuned, else pgtune)"],
        data.settings)])
    space = Section("Search space", paragraphs=[
        "Memory knobs are bounded so the worst corner fits the budget (shared_buffers + "
        "wal_buffers + max_connections × work_mem × 1.5 + autovacuum workers × "
        "maintenance_work_mem + one maintenance_work_mem ≤ 90% of RAM). Settings needing a "
        "restart are applied together at the trial's one server start."],
        tables=[Table(["Setting", "Type", "Values", "Restart"], data.space)])
    sections = [summary, conv, importance, select]
    if data.validation is not None:
        sections.append(validation_section(data, images.get("validation")))
    if data.noise is not None:
        sections.append(noise_section(data.noise))
    return Document(title=data.title, sections=[*sections, settings, space])


PENALTY_RULE = (
    "Debt penalty: each trial's figure is charged for the maintenance debt its window "
    "leaves (read from the run's telemetry/debt.jsonl as the load stopped): penalty = "
    "min(50%, vacuum share + WAL share), vacuum share = (dead tuples beyond each table's "
    "autovacuum threshold + one window's growth of dead tuples when tables over the "
    "threshold wait for a worker) ÷ (live + dead tuples), WAL share = (WAL since the last "
    "checkpoint's redo point − max_wal_size) ÷ max_wal_size when positive. The optimiser sees "
    "raw × (1 − penalty) (÷ for a lower-is-better figure). It is fair because it charges "
    "only work the trial left undone beyond autovacuum's and the checkpointer's own rules, "
    "in the share of rows or of the checkpoint distance it covers: a config that keeps up "
    "pays nothing, and the cap keeps the measurement itself in charge.")


OS_RULE = (
    "OS knobs (--allow-os-changes): each searched trial's OS values were applied through "
    "pgdyno provision (its state file written before the first change) before the trial's "
    "run and reverted right after it; the baselines ran with the host's values as they were "
    "(shown as recorded). A search stopped by Ctrl-C or SIGTERM reverts them before it ends; "
    "one killed outright leaves os-pending.json naming the state file, reverted when the "
    "search runs again or by pgdyno provision revert STATE.")


def _candidate_row(c: CandidateLine) -> list[str]:
    mean, sd = alike(c.mean, c.sd)  # the deviation at the mean's precision
    return [c.label, figure(c.first), ", ".join(figure(v) for v in c.reruns) or "–", mean, sd,
            str(c.n), "yes" if c.winner else ("failed re-run" if c.failures else "")]


def validation_section(data: SearchReportData, image: str | None) -> Section:
    """The long window: its length and why, each config's figures and debt, the verdicts,
    and whether the winner holds."""
    val = data.validation
    rule = val.rule
    if val.design == "sequential":
        how = (f"Each config ran {len(val.order) // max(1, len(val.sides))} interleaved runs "
               f"of {rule.window_s} s (--validate {rule.asked_s:,.0f} s per config).")
    else:
        how = (f"Each baseline met the winner in {rule.rounds} pairs of {rule.window_s} s "
               "windows, both servers up at once, the windows interleaved in balanced order "
               f"and compared pair by pair ({val.why}); the winner's windows of every "
               f"comparison count for its figures (--validate {rule.asked_s:,.0f} s per "
               "config).")
    paras = [how + (f" Note: {rule.note}." if rule.note else ""),
             *[v.sentence() for v in val.verdicts],
             ("The winner holds. " if val.holds else "The winner does not hold. ")
             + val.recommendation, *val.failed]
    rows = []
    for r in val.results:
        d = r.debt
        rows.append([r.label, str(r.runs), figure(r.mean), figure(r.p99_ms),
                     count(d.dead_tuples_end if d else None),
                     figure(d.dead_tuples_growth_per_min if d else None),
                     count(d.autovacuum_backlog if d else None),
                     format_bytes(d.wal_since_checkpoint_bytes if d else None),
                     "no: " + r.unbounded if r.unbounded else "yes"])
    section = Section("Long-window validation", paragraphs=paras, tables=[Table(
        ["Config", "Runs", f"{data.metric_label} ({data.unit})", "p99 (ms)",
         "Dead tuples at end", "Dead tuples/min", "Autovacuum backlog", "WAL since checkpoint",
         "Debt bounded"], rows)])
    if image:
        section.images.append(("Transactions per second over each config's last long run",
                               image))
    return section


NOISE_RULE = (
    "Noise: the pooled standard deviation of ln(figure) over each config's own runs "
    "(interleaved, same options), in percent. Resolves: half the width of the "
    f"{100 * CONFIDENCE:.0f}% interval of two configs' difference with the runs each had, "
    "t · noise · √(2/n): a smaller lead cannot be told from noise. Runs per config for a "
    f"lead: two-sided 5% test, {100 * POWER:.0f}% power, n = 2 ((z₀.₉₇₅ + z₀.₈₀) · noise / "
    "ln(1 + lead))². Neighbour ρ: the correlation of consecutive runs' residuals (each run "
    "less its config's mean, in start order); pairing each trial with a reference run "
    f"cancels that shared part, and pays for its second run only when ρ > "
    f"{PAIRING_PAYS_ABOVE:g}.")


def noise_section(noise: SearchNoise) -> Section:
    """How much the comparison and the validation could tell apart, and the trial window
    the short runs' noise points to."""
    steps = [(name, n) for name, n in (("Short comparison", noise.short),
                                        ("Long validation", noise.long)) if n is not None]
    rows = [[name, f"{n.window_s:,.0f}", f"{n.configs} × {n.runs_per_config}",
             f"±{n.sd_pct:.1f}%", f"±{n.resolution_pct:.1f}%",
             *[f"{runs:,}" for runs in n.runs_needed.values()], _rho(n)]
            for name, n in steps]
    leads = next(iter(steps))[1].runs_needed if steps else {}
    paras = [NOISE_RULE, *[_pairing_sentence(name, n) for name, n in steps
                           if n.neighbour_corr is not None]]
    if noise.trial_window_s is not None and noise.short is not None:
        paras.append(
            f"A run's figure is a mean over its window, so its noise falls as 1/√window: "
            f"trials of about {noise.trial_window_s:,.0f} s would have ±"
            f"{TRIAL_SD_FOR_LEAD_PCT:.1f}% noise, at which two single trials 5% apart are told "
            f"apart; this comparison's runs were {noise.short.window_s:,.0f} s.")
    if noise.long_predicted_sd_pct is not None and noise.long is not None:
        paras.append(f"The rule's check: from the short runs it predicts ±"
                     f"{noise.long_predicted_sd_pct:.1f}% for the {noise.long.window_s:,.0f} s "
                     f"runs; they measured ±{noise.long.sd_pct:.1f}%.")
    return Section("Noise and resolution", paragraphs=paras, tables=[Table(
        ["Step", "Window (s)", "Configs × runs", "Noise (sd)", "Resolves",
         *[f"Runs/config for {lead}%" for lead in leads], "Neighbour ρ"], rows)])


def noise_line(noise: SearchNoise) -> str:
    """One line for the end of a search's output: the short runs' noise, what the
    comparison resolves, and the trial window that would rank a 5% lead."""
    parts = [f"{name} runs of {n.window_s:,.0f} s varied by ±{n.sd_pct:.1f}% (resolves "
             f"±{n.resolution_pct:.1f}% with {n.runs_per_config} each)"
             for name, n in (("comparison", noise.short), ("validation", noise.long))
             if n is not None]
    line = "noise: " + "; ".join(parts)
    if noise.trial_window_s is not None:
        line += (f"; trials of about {noise.trial_window_s:,.0f} s would rank two configs 5% "
                 "apart")
    return line


def _rho(n: Noise) -> str:
    return "–" if n.neighbour_corr is None else f"{n.neighbour_corr:+.2f}"


def _pairing_sentence(name: str, n: Noise) -> str:
    verdict = ("would steady a trial's figure" if n.pairing_helps else
               "would not steady a trial's figure")
    return (f"{name}: neighbouring runs' noise correlates at ρ = {n.neighbour_corr:+.2f}, "
            f"so pairing each trial with a reference run {verdict}.")


def validation_plot(data: SearchReportData, path: Path) -> Path | None:
    val = data.validation
    if val is None or not any(r.series_value for r in val.results):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pgdyno.reports.plots import save_figure

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in val.results:
        if r.series_value:
            ax.plot(r.series_t_s, r.series_value, label=r.label, linewidth=1.2)
    ax.set_xlabel("time in the measured window (s)")
    ax.set_ylabel("transactions per second (tps)")
    ax.set_title("Long-window validation: throughput over time")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def write_search_report(data: SearchReportData, search_dir: Path) -> Path:
    from pgdyno.reports import html

    images = {}
    if convergence_plot(data, search_dir / "plots" / "convergence.png") is not None:
        images["convergence"] = "plots/convergence.png"
    if validation_plot(data, search_dir / "plots" / "validation.png") is not None:
        images["validation"] = "plots/validation.png"
    return html.write_document(build_document(data, images), search_dir, "report")
