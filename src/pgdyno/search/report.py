"""The search's report: computed here as data (``SearchReportData``), then rendered.

Convergence (each trial, the best so far, the three baselines as horizontal lines),
setting importance (Optuna's PED-ANOVA over the searched trials: how differently each
setting is distributed among the best trials than among all of them), the leading
candidates' repeated measurements, the winner's settings against pgtune's and tuned's with
their rationale, and the final comparison's verdicts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.config.units import shown_value, side_text, stock_text
from pgdyno.reports.document import Document, Section, Table, figure
from pgdyno.search import study as study_mod
from pgdyno.search.noise import (
    CONFIDENCE,
    PAIRING_PAYS_ABOVE,
    POWER,
    TRIAL_SD_FOR_LEAD_PCT,
    Noise,
    SearchNoise,
    search_noise,
)
from pgdyno.search.space import SPECIAL
from pgdyno.units import format_bytes

IMPORTANCE_METHOD = ("PED-ANOVA (Optuna's PedAnovaImportanceEvaluator, Watanabe et al. 2023: "
                     "how much each setting's values among the best trials differ from its "
                     "values among all searched trials, normalised to shares)")
"""PED-ANOVA rather than fANOVA: fANOVA fits a random forest with scikit-learn, a large
dependency for one table, and PED-ANOVA is meant for the few trials a search has."""
IMPORTANCE_TOP_TRIALS = 2
"""The best trials PED-ANOVA compares with all of them: at least two (its quantile is set
from the number of searched trials)."""
MIN_IMPORTANCE_TRIALS = 5


@dataclass
class TrialLine:
    number: int
    label: str
    status: str
    value: float | None
    best: float | None
    seconds: float
    reason: str
    run_dir: str
    raw: float | None = None
    """The run's headline before the debt penalty (``value`` is after it)."""
    penalty_pct: float | None = None
    dead_tuples_end: int | None = None
    dead_growth_per_min: float | None = None
    backlog: int | None = None
    wal_since_checkpoint_bytes: float | None = None
    os_values: str = ""
    """The trial's OS knobs (``--allow-os-changes``): applied, or the host's for a baseline."""


@dataclass
class SearchReportData:
    title: str
    unsafe: bool
    workload: str
    metric_label: str
    unit: str
    direction: int
    trials: list[TrialLine]
    baselines: dict[str, float]
    importance: list[tuple[str, float]]
    importance_note: str
    candidates: list[dict[str, Any]]
    settings: list[list[str]]
    space: list[list[str]]
    verdicts: list[str]
    recommendation: str
    notes: list[str] = field(default_factory=list)
    validation: Any = None
    """The long-window validation (``validate_long.LongValidation``), when it ran."""
    os_knobs: bool = False
    """OS knobs were searched (--allow-os-changes)."""
    noise: SearchNoise | None = None
    """The run-to-run noise of the comparison and the validation, and what it implies."""


def build_search_report(record, study, selection, conf, opts, hardware, install,
                        notes: list[str], search_dir: Path | None = None) -> SearchReportData:
    from pgdyno.workloads import registry
    from pgdyno.workloads.base import headline_metric

    spec = headline_metric(registry.get(record.workload).metrics)
    direction = spec.direction or 1
    rows = study_mod.rows(study)
    os_of = trial_os_values(study)
    lines, best = [], None
    for r in rows:
        if r.value is not None and (best is None or direction * (r.value - best) > 0):
            best = r.value
        line = TrialLine(r.number, r.label, r.status, r.value, best, r.seconds, r.reason,
                         r.run_dir, os_values=os_text(os_of.get(r.number, {})))
        lines.append(_with_debt(line, direction))
    baselines = {r.label: r.value for r in rows if r.kind == "baseline" and r.value is not None}
    importance, note = setting_importance(study, rows)
    winner_settings = {}
    if selection is not None and selection.winner:
        won = next((r for r in rows if str(r.number) == selection.winner), None)
        winner_settings = won.settings if won is not None else {}
        if won is not None:  # its OS knobs beside its PostgreSQL settings
            winner_settings = {**winner_settings, **os_of.get(won.number, {})}
    validation = None
    if search_dir is not None:
        from pgdyno.search.validate_long import VALIDATE_FILE, load_validation

        validation = load_validation(search_dir / VALIDATE_FILE)
        validation = validation if validation is not None and validation.results else None
    title = f"pgdyno tune --search {record.workload}: {spec.label} ({record.name})"
    if record.allow_unsafe:
        title = ("UNSAFE: made with --allow-unsafe, durability settings (fsync, "
                 "synchronous_commit, full_page_writes, wal_level) were searched; a crash "
                 "may lose committed data with the winner. " + title)
    return SearchReportData(
        title=title, unsafe=record.allow_unsafe, workload=record.workload,
        metric_label=spec.label, unit=spec.unit, direction=direction, trials=lines,
        baselines=baselines, importance=importance, importance_note=note,
        candidates=_candidates(selection),
        settings=settings_rows(record, winner_settings, opts, install, hardware,
                               host_os=next((os_of[r.number] for r in rows
                                             if r.kind == "baseline" and r.number in os_of),
                                            {})),
        space=[[k.name, k.kind, k.describe(), "yes" if k.restart else ""]
               for k in record.space.knobs],
        verdicts=[v.sentence() for v in conf.verdicts] if conf is not None else [],
        recommendation=(validation.recommendation if validation is not None else
                        conf.recommendation if conf is not None else ""),
        notes=[*notes, *record.space.notes], validation=validation,
        os_knobs=bool(record.space.os_knobs),
        noise=search_noise(conf.noise if conf is not None else None,
                           validation.noise if validation is not None else None))


def trial_os_values(study) -> dict[int, dict[str, str]]:
    """Each trial's OS knob values as recorded on it (a baseline's: the host's)."""
    return {t.number: dict(t.user_attrs["os"]) for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get("os")}


def os_text(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _with_debt(line: TrialLine, direction: int) -> TrialLine:
    """The trial's raw headline and its debt penalty, recomputed from its run's files by
    the rule the optimiser used (``objective.debt_penalty``)."""
    from pgdyno.search.objective import debt_penalty, run_debt

    if line.value is None or not line.run_dir:
        return line
    debt = run_debt(line.run_dir)
    share = debt_penalty(debt).share
    line.penalty_pct = 100 * share
    line.raw = line.value / (1 - share) if direction > 0 else line.value * (1 - share)
    if debt is not None:
        line.dead_tuples_end, line.dead_growth_per_min = (debt.dead_tuples_end,
                                                          debt.dead_tuples_growth_per_min)
        line.backlog = debt.autovacuum_backlog
        line.wal_since_checkpoint_bytes = debt.wal_since_checkpoint_bytes
    return line


def setting_importance(study, rows) -> tuple[list[tuple[str, float]], str]:
    """Each knob's share (its range and special choice together), over searched trials."""
    import optuna
    from optuna.trial import TrialState

    searched = [t for t in study.get_trials(deepcopy=False)
                if t.state == TrialState.COMPLETE and t.params]
    if len(searched) < MIN_IMPORTANCE_TRIALS:
        return [], (f"not computed: {len(searched)} finished searched trial(s), it needs "
                    f"at least {MIN_IMPORTANCE_TRIALS}")
    tmp = optuna.create_study(direction=study.direction)
    tmp.add_trials(searched)
    quantile = max(0.1, IMPORTANCE_TOP_TRIALS / len(searched))
    try:
        raw = optuna.importance.get_param_importances(
            tmp, evaluator=optuna.importance.PedAnovaImportanceEvaluator(
                target_quantile=min(quantile, 0.5)))
    except (ValueError, RuntimeError, ImportError) as exc:  # never the end of a search
        return [], f"not computed: {exc}"
    merged: dict[str, float] = {}
    for name, share in raw.items():
        key = name.removesuffix(SPECIAL)
        merged[key] = merged.get(key, 0.0) + float(share)
    ranked = sorted(merged.items(), key=lambda kv: -kv[1])
    return ranked, IMPORTANCE_METHOD + f", over {len(searched)} searched trials"


def _candidates(selection) -> list[dict[str, Any]]:
    if selection is None:
        return []
    out = []
    for c in selection.candidates:
        sd = statistics.stdev(c.values) if len(c.values) > 1 else math.nan
        out.append({"label": c.label, "first": c.values[0] if c.values else None,
                    "reruns": c.values[1:], "mean": c.mean, "sd": sd, "n": len(c.values),
                    "failures": c.failures, "winner": c.key == selection.winner})
    return out


def settings_rows(record, winner: dict[str, str], opts, install, hardware,
                  host_os: dict[str, str] | None = None) -> list[list[str]]:
    """setting | winner | pgtune | tuned | stock | why (tuned's rationale, else pgtune's):
    values in natural units, "(stock)" after the stock value, which a config that leaves the
    setting alone runs ("128 MB (stock)"). An OS knob: the winner's value and, for pgtune
    and tuned, the host's (``host_os``), which they ran with."""
    from pgdyno.config.resolve import resolve_config
    from pgdyno.errors import UsageError
    from pgdyno.workloads import registry

    workload = registry.get(record.workload)
    bench = opts.bench
    named: dict[str, Any] = {}
    for name in ("pgtune", "tuned"):
        try:
            named[name] = resolve_config(name, [], install=install, workload=record.workload,
                                         hardware=hardware, connections=max(bench.clients),
                                         dataset_bytes=workload.dataset_bytes(bench) or 0,
                                         tuning=workload.tuning)
        except UsageError:
            named[name] = None
    specs = record.space.specs
    keys = list(dict.fromkeys([*(k.name for k in record.space.knobs), *winner]))
    out = []
    os_units = {k.name: k.unit for k in record.space.os_knobs}
    for key in keys:
        if key in os_units and key != "huge_pages":
            host = (host_os or {}).get(key)
            host_cell = f"{host}{os_units[key]} (host)" if host else "–"
            win = winner.get(key)
            out.append([key, f"{win}{os_units[key]}" if win and win[-1].isdigit() else
                        win or "–", host_cell, host_cell, "–",
                        "OS knob: applied through pgdyno provision around the winner's runs"])
            continue
        spec = specs.spec(key)
        unit, stock = (spec.unit, spec.boot_val) if spec is not None else (None, None)
        cells = [key, _cell(winner.get(key), stock, unit, "–")]
        why = ""
        for name in ("pgtune", "tuned"):
            res = named.get(name)
            cells.append(_cell(res.pg_settings.get(key), stock, unit, stock_text(stock, unit))
                         if res else "–")
            if res and key in res.sources and not why:
                why = res.sources[key] if name == "tuned" else ""
        if not why and named.get("pgtune") and key in named["pgtune"].sources:
            why = named["pgtune"].sources[key]
        cells += ["–" if stock is None else shown_value(stock, unit), why]
        out.append(cells)
    return out


def _cell(value: str | None, stock: str | None, unit: str | None, unset: str) -> str:
    """A config's value of a setting in natural units ("(stock)" after the stock value);
    ``unset`` when the config leaves it."""
    from pgdyno.config.setting_specs import unquote

    return unset if value is None else side_text(unquote(value), stock, unit)


# ----- rendering -------------------------------------------------------------------------

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
        *(["**Recommendation**: " + data.recommendation] if data.recommendation else []),
        *data.verdicts, *[f"Note: {n}" for n in data.notes]])
    conv = Section("Convergence", images=[("Each trial, the best so far and the baselines",
                                           images["convergence"])] if images else [])
    conv.paragraphs.append(PENALTY_RULE)
    conv.tables.append(Table(
        ["Trial", "Config", "Status", f"Raw {data.metric_label} ({unit})", "Debt penalty",
         f"Penalised ({unit})", "Best so far", "Dead tuples at end", "Dead tuples/min",
         "Autovacuum backlog", "WAL since checkpoint", "Seconds", "Reason", "Run"],
        [[str(t.number), t.label, t.status, figure(t.raw), _pct(t.penalty_pct),
          figure(t.value), figure(t.best), _count(t.dead_tuples_end),
          figure(t.dead_growth_per_min), _count(t.backlog),
          format_bytes(t.wal_since_checkpoint_bytes), f"{t.seconds:.0f}", t.reason or "",
          t.run_dir] for t in data.trials]))
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
        [[c["label"], figure(c["first"]), ", ".join(figure(v) for v in c["reruns"]) or "–",
          figure(c["mean"]), figure(c["sd"]), str(c["n"]),
          "yes" if c["winner"] else ("failed re-run" if c["failures"] else "")]
         for c in data.candidates]))
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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def validation_section(data: SearchReportData, image: str | None) -> Section:
    """The long window: its length and why, each config's figures and debt, the verdicts,
    and whether the winner holds."""
    val = data.validation
    rule = val.rule
    paras = [f"Each config ran {len(val.order) // max(1, len(val.sides))} interleaved runs "
             f"of {rule.window_s} s (--validate {rule.asked_s:,.0f} s per config)."
             + (f" Note: {rule.note}." if rule.note else ""),
             *[v.sentence() for v in val.verdicts],
             ("The winner holds. " if val.holds else "The winner does not hold. ")
             + val.recommendation, *val.failed]
    rows = []
    for r in val.results:
        d = r.debt
        rows.append([r.label, str(r.runs), figure(r.mean), figure(r.p99_ms),
                     _count(d.dead_tuples_end if d else None),
                     figure(d.dead_tuples_growth_per_min if d else None),
                     _count(d.autovacuum_backlog if d else None),
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
