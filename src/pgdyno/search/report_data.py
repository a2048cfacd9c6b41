"""The search's report as data (``SearchReportData``), computed from the study, the
selection, the final comparison and the long validation; ``search.report`` renders it.

The trials (each with its raw figure and debt penalty, the best so far), setting importance
(Optuna's PED-ANOVA over the searched trials: how differently each setting is distributed
among the best trials than among all of them), the leading candidates' repeated
measurements, the winner's settings against pgtune's and tuned's with their rationale, and
the final comparison's verdicts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.config.units import shown_value, side_text, stock_text
from pgdyno.search import study as study_mod
from pgdyno.search.noise import SearchNoise, search_noise
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
    raw: float | None = None
    """The run's headline before the debt penalty (``value`` is after it)."""
    penalty_pct: float | None = None
    dead_tuples_end: int | None = None
    dead_growth_per_min: float | None = None
    backlog: int | None = None
    wal_since_checkpoint_bytes: float | None = None
    os_values: str = ""
    """The trial's OS knobs (``--allow-os-changes``): applied, or the host's for a baseline."""
    against: dict[str, Any] | None = None
    """Measured in blocks against another trial (``search.trial_blocks.against_record``):
    its number and label, the change with its 95% interval, the pairs, the blocks' file."""


@dataclass
class CandidateLine:
    """A leading candidate measured again: its trial's figure, its re-runs and their mean."""

    label: str
    first: float | None
    """The figure of the trial that made it a candidate."""
    reruns: list[float]
    mean: float
    sd: float
    """Over the trial and its re-runs; NaN with one value."""
    n: int
    failures: int
    """Re-runs that failed: a candidate with one cannot win."""
    winner: bool


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
    candidates: list[CandidateLine]
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
                         r.run_dir, os_values=os_text(os_of.get(r.number, {})),
                         against=r.against)
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


def _candidates(selection) -> list[CandidateLine]:
    if selection is None:
        return []
    out = []
    for c in selection.candidates:
        sd = statistics.stdev(c.values) if len(c.values) > 1 else math.nan
        out.append(CandidateLine(label=c.label, first=c.values[0] if c.values else None,
                                 reruns=c.values[1:], mean=c.mean, sd=sd, n=len(c.values),
                                 failures=c.failures, winner=c.key == selection.winner))
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
