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
from pgdyno.search.space import SPECIAL

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


def build_search_report(record, study, selection, conf, opts, hardware, install,
                        notes: list[str]) -> SearchReportData:
    from pgdyno.workloads import registry
    from pgdyno.workloads.base import headline_metric

    spec = headline_metric(registry.get(record.workload).metrics)
    direction = spec.direction or 1
    rows = study_mod.rows(study)
    lines, best = [], None
    for r in rows:
        if r.value is not None and (best is None or direction * (r.value - best) > 0):
            best = r.value
        lines.append(TrialLine(r.number, r.label, r.status, r.value, best, r.seconds,
                               r.reason, r.run_dir))
    baselines = {r.label: r.value for r in rows if r.kind == "baseline" and r.value is not None}
    importance, note = setting_importance(study, rows)
    winner_settings = {}
    if selection is not None and selection.winner:
        won = next((r for r in rows if str(r.number) == selection.winner), None)
        winner_settings = won.settings if won is not None else {}
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
        settings=settings_rows(record, winner_settings, opts, install, hardware),
        space=[[k.name, k.kind, k.describe(), "yes" if k.restart else ""]
               for k in record.space.knobs],
        verdicts=[v.sentence() for v in conf.verdicts] if conf is not None else [],
        recommendation=conf.recommendation if conf is not None else "",
        notes=[*notes, *record.space.notes])


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


def settings_rows(record, winner: dict[str, str], opts, install, hardware) -> list[list[str]]:
    """setting | winner | pgtune | tuned | stock | why (tuned's rationale, else pgtune's):
    values in natural units, "(stock)" after the stock value, which a config that leaves the
    setting alone runs ("128 MB (stock)")."""
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
    for key in keys:
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
    conv.tables.append(Table(
        ["Trial", "Config", "Status", f"{data.metric_label} ({unit})", "Best so far",
         "Seconds", "Reason", "Run"],
        [[str(t.number), t.label, t.status, figure(t.value), figure(t.best),
          f"{t.seconds:.0f}", t.reason or "", t.run_dir] for t in data.trials]))
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
    return Document(title=data.title,
                    sections=[summary, conv, importance, select, settings, space])


def write_search_report(data: SearchReportData, search_dir: Path) -> Path:
    from pgdyno.reports import html

    images = {}
    if convergence_plot(data, search_dir / "plots" / "convergence.png") is not None:
        images["convergence"] = "plots/convergence.png"
    return html.write_document(build_document(data, images), search_dir, "report")
