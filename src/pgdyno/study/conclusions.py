"""Conclusions and threats to validity, derived by rule from a study's measured figures.

Each rule reads figures already in the record (a comparison's change and interval, a side's
bottleneck votes, a SMART delta) and makes a ``Finding`` only when its figures exist: a
sentence whose figure was not measured is never made. The words are chosen later, by the
report, from the finding's kind and the comparison's own verdict (which agrees with its
interval by construction: compare.stats.verdict_for).
"""

from __future__ import annotations

import math

from pgdyno.campaign.recommendations import HEADROOM  # the context report's share too
from pgdyno.compare.model import Comparison, MetricComparison
from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SAME, SLOWER
from pgdyno.study.model import DAMAGED, Finding, Side, StudyRecord, Threat, WorkloadResult
from pgdyno.workloads import registry

MEASURED_FIGURES = 6
"""How many of an uncompared workload's metrics its "measured" finding cites."""
NOISY_PCT = 10.0
"""A comparison whose noise (the interval's half-width) exceeds this many % is a threat:
a change smaller than that cannot be told from run-to-run variation."""
SHORT_WINDOW_S = 60.0
"""A measured window shorter than this misses checkpoints (checkpoint_timeout is minutes)
and autovacuum: the figures describe a burst, not a steady state."""
CHANGED = (FASTER, SLOWER, HIGHER, LOWER)
PROJECTED_VCPUS = (2, 4, 8, 16, 32)
"""The sizes the per-core projection is written for."""


def findings(record: StudyRecord) -> list[Finding]:
    out: list[Finding] = []
    for result in record.workloads:
        out += _headline_findings(result)
        out += _step_findings(result)
        if result.comparison is None:
            out += _measured(result)
        out += _scaling(result)
        out += _latency_range(result)
        out += _bottlenecks(result)
        out += _write_cv(result)
        out += _smart(result)
    out += _common_bottleneck(record)
    out += _validation(record)
    out += recommendations(record, out)
    _pick_summary(out)
    return out


def threats(record: StudyRecord) -> list[Threat]:
    # A damaged cell's threat is its run's, below: that names the file and the run.
    out = [Threat(kind=f"{cell.status}_cell", detail=f"{cell.key}"
                  + (f": {cell.reason}" if cell.reason else ""))
           for cell in record.cells if cell.status not in ("ok", DAMAGED)]
    out += [Threat("left_out_run", run.run_dir, run.workload,
                   words={"cell": run.cell, "reason": run.reason}) for run in record.left_out]
    for result in record.workloads:
        for side in result.sides:
            out += [Threat("contaminated", line, result.workload) for line in side.contaminated]
            if side.window_s is not None and side.window_s < SHORT_WINDOW_S:
                out.append(Threat("short_window", side.label, result.workload,
                                  {"window_s": side.window_s}))
            if side.dataset_fit in ("shared_buffers", "page cache"):
                out.append(Threat("dataset_fit", side.dataset_fit, result.workload,
                                  _fit_values(side)))
        out += _noise(result)
    return _unique(out)


# ----- findings -----------------------------------------------------------------------------------

def headline_comparison(result: WorkloadResult) -> MetricComparison | None:
    """The comparison's row of the workload's headline metric at the sides' client count."""
    cmp = result.comparison
    if cmp is None:
        return None
    clients = result.sides[0].clients if result.sides else None
    return cmp.metric(result.headline, clients) or cmp.metric(result.headline)


def change_finding(m: MetricComparison, workload: str, section: str, cmp: Comparison,
                   kind_prefix: str = "") -> Finding:
    kind = ("change" if m.verdict in CHANGED else "no_difference" if m.verdict == SAME
            else "undetermined")
    values = {"baseline": m.baseline_mean, "candidate": m.candidate_mean,
              "clients": float(m.clients), "baseline_n": float(m.baseline_n),
              "candidate_n": float(m.candidate_n), "confidence": cmp.confidence}
    if not math.isnan(m.change_pct):
        values["change_pct"] = m.change_pct
    if math.isfinite(m.ci_low_pct) and math.isfinite(m.ci_high_pct):
        values |= {"ci_low_pct": m.ci_low_pct, "ci_high_pct": m.ci_high_pct}
    return Finding(kind=kind_prefix + kind, workload=workload, section=section, values=values,
                   words={"metric": m.label or m.metric, "unit": m.unit, "verdict": m.verdict,
                          "reason": m.reason, "baseline": cmp.baseline_label,
                          "candidate": cmp.candidate_label})


def _headline_findings(result: WorkloadResult) -> list[Finding]:
    m = headline_comparison(result)
    if m is None or result.comparison is None:
        return []
    return [change_finding(m, result.workload, result.anchor, result.comparison)]


def _step_findings(result: WorkloadResult) -> list[Finding]:
    out = []
    for step in result.steps:
        m = step.comparison.metric(result.headline)
        if m is not None:
            f = change_finding(m, result.workload, result.anchor, step.comparison, "step_")
            f.values["size"] = float(step.size)
            f.words["size_unit"] = result.size_unit
            out.append(f)
    return out


def _measured(result: WorkloadResult) -> list[Finding]:
    """An uncompared workload (fio's envelope, the CPU baseline): its first figures."""
    if not result.sides or not result.sides[0].figures:
        return []
    side = result.sides[0]
    figures = side.figures[:MEASURED_FIGURES]
    return [Finding(kind="measured", workload=result.workload, section=result.anchor,
                    values={f.name: f.mean for f in figures},
                    words={"config": side.label, **{f"label:{f.name}": f.label for f in figures},
                           **{f"unit:{f.name}": f.unit for f in figures}})]


def _scaling(result: WorkloadResult) -> list[Finding]:
    """Several client counts: where the headline peaked (scaling with clients)."""
    out = []
    for side in result.sides:
        if len(side.by_clients) < 2:
            continue
        clients, peak = max(side.by_clients.items(), key=lambda kv: kv[1])
        lowest = min(side.by_clients, key=int)
        fig = side.figure(result.headline)
        out.append(Finding(kind="peak", workload=result.workload, section=result.anchor,
                           values={"peak": peak, "clients": float(clients),
                                   "lowest_clients": float(lowest),
                                   "at_lowest": side.by_clients[lowest]},
                           words={"config": side.label, "metric": fig.label if fig else
                                  result.headline, "unit": fig.unit if fig else ""}))
    return out


def _latency_range(result: WorkloadResult) -> list[Finding]:
    """The latency range: the lowest and highest latency percentile measured."""
    out = []
    for side in result.sides:
        pcts = [f for f in side.figures if f.name.startswith("latency_p") and f.unit == "ms"]
        if len(pcts) < 2:
            continue
        low, high = min(pcts, key=lambda f: f.mean), max(pcts, key=lambda f: f.mean)
        out.append(Finding(kind="latency_range", workload=result.workload,
                           section=result.anchor,
                           values={"low": low.mean, "high": high.mean,
                                   "clients": float(side.clients or 0)},
                           words={"config": side.label, "low": low.label, "high": high.label}))
    return out


def _bottlenecks(result: WorkloadResult) -> list[Finding]:
    out = []
    for side in result.sides:
        if side.bottleneck is None:
            continue
        total = sum(side.bottleneck_votes.values())
        out.append(Finding(kind="bottleneck", workload=result.workload, section=result.anchor,
                           values={"votes": float(side.bottleneck_votes[side.bottleneck]),
                                   "iterations": float(total)},
                           words={"config": side.label, "bottleneck": side.bottleneck}))
    return out


def _common_bottleneck(record: StudyRecord) -> list[Finding]:
    """The key finding: the same bottleneck on every workload that has one."""
    verdicts = {(r.workload, s.label): s.bottleneck for r in record.workloads
                for s in r.sides if s.bottleneck is not None}
    workloads = {w for w, _ in verdicts}
    if len(workloads) < 2 or len(set(verdicts.values())) != 1:
        return []
    return [Finding(kind="common_bottleneck", workload="", section="conclusions",
                    values={"workloads": float(len(workloads))},
                    words={"bottleneck": next(iter(verdicts.values())),
                           "workloads": ", ".join(sorted(workloads))})]


def _write_cv(result: WorkloadResult) -> list[Finding]:
    """Checkpoint smoothing, read from the write-IOPS coefficient of variation: one value
    per iteration (or block) on each side, compared like any metric. "Smoother" or
    "burstier" only when the interval says so; a CV below its floor (writes that are
    background noise, as in a read-only run) or without an interval makes no finding."""
    from pgdyno.compare.core import WRITE_CV_SUFFIX

    cmp = result.comparison
    if cmp is None:
        return []
    clients = cmp.chart_clients()
    rows = [m for m in cmp.metrics if m.metric.endswith(WRITE_CV_SUFFIX)
            and m.clients == clients and m.verdict in (*CHANGED, SAME)]
    if not rows:
        return []
    m = max(rows, key=lambda r: r.baseline_mean)  # the device that wrote the most burstily
    trend = {HIGHER: "burstier", LOWER: "smoother"}.get(m.verdict, "")
    return [Finding(kind="write_cv", workload=result.workload, section=result.anchor,
                    values={"baseline_pct": m.baseline_mean, "candidate_pct": m.candidate_mean,
                            "change_pct": m.change_pct, "low_pct": m.ci_low_pct,
                            "high_pct": m.ci_high_pct, "clients": float(m.clients)},
                    words={"device": m.label.removesuffix(" write IOPS CV"),
                           "baseline": cmp.baseline_label, "candidate": cmp.candidate_label,
                           "trend": trend})]


def _smart(result: WorkloadResult) -> list[Finding]:
    out = []
    for side in result.sides:
        if {"temperature_c_before", "temperature_c_after"} <= set(side.smart):
            out.append(Finding(kind="smart", workload=result.workload, section=result.anchor,
                               values=dict(side.smart), words={"config": side.label}))
        if side.endurance:
            out.append(Finding(kind="endurance", workload=result.workload,
                               section=result.anchor, values={},
                               words={"config": side.label, "endurance": side.endurance}))
    return out


def _validation(record: StudyRecord) -> list[Finding]:
    v = record.validation
    if v is None:
        return []
    result = record.workload(v.workload)
    return [Finding(kind="validation", workload=v.workload,
                    section=result.anchor if result else "question",
                    values={"measured": v.measured, "target": v.target, "ratio": v.ratio,
                            "vcpus": float(v.vcpus), "per_core": v.per_core,
                            "band_low": v.band_low, "band_high": v.band_high},
                    words={"status": v.status, "metric": v.metric, "side": v.side,
                           "source": v.source})]


def recommendations(record: StudyRecord, found: list[Finding]) -> list[Finding]:
    """What to do, by rule: adopt the candidate when it won every compared headline beyond
    the noise, keep the baseline when it won none, avoid it where it lost; and the headroom
    each workload's peak leaves."""
    heads = [f for f in found if f.kind in ("change", "no_difference", "undetermined")]
    out = []
    better = [f for f in heads if f.words["verdict"] in (FASTER, HIGHER)
              and _improves(record, f)]
    worse = [f for f in heads if f.kind == "change" and f not in better]
    if heads and record.candidate:
        if len(better) == len(heads):
            out.append(Finding("adopt", "", "conclusions", {"workloads": float(len(heads))},
                               {"candidate": record.candidate, "baseline": record.baseline}))
        elif not better:
            out.append(Finding("keep", "", "conclusions", {"workloads": float(len(heads))},
                               {"candidate": record.candidate, "baseline": record.baseline}))
        out += [Finding("avoid", f.workload, f.section, dict(f.values), dict(f.words))
                for f in worse]
    for f in found:
        if f.kind == "peak" and registry.get(f.workload).needs_server:  # a load to plan for
            out.append(Finding("headroom", f.workload, f.section,
                               {"peak": f.values["peak"], "share": HEADROOM,
                                "limit": HEADROOM * f.values["peak"],
                                "clients": f.values["clients"]}, dict(f.words)))
    return out


def _improves(record: StudyRecord, f: Finding) -> bool:
    """FASTER means better; HIGHER is better only for a metric where higher is better."""
    if f.words["verdict"] == FASTER:
        return True
    result = record.workload(f.workload)
    side = result.sides[0] if result and result.sides else None
    fig = side.figure(result.headline) if side else None
    return fig is not None and fig.direction > 0


def projection(record: StudyRecord, vcpus: int) -> dict[str, dict[int, float]]:
    """Each workload's headline per vCPU, times other sizes: a linear upper bound (real
    scaling is lower: locks, WAL and memory bandwidth do not grow with cores)."""
    out: dict[str, dict[int, float]] = {}
    for result in record.workloads:
        side = result.sides[0] if result.sides else None
        fig = side.figure(result.headline) if side else None
        if fig is None or fig.direction <= 0 or vcpus <= 0:
            continue
        peak = max(side.by_clients.values()) if side.by_clients else fig.mean
        out[result.workload] = {n: peak / vcpus * n for n in PROJECTED_VCPUS}
    return out


def _pick_summary(found: list[Finding]) -> None:
    """The executive summary: every headline verdict, then the envelope, the common
    bottleneck and the write smoothing, at most six sentences in all."""
    order = ("validation", "change", "no_difference", "undetermined", "common_bottleneck",
             "adopt", "keep", "measured",
             "write_cv", "peak", "bottleneck")
    picked = 0
    for kind in order:
        for f in found:
            if f.kind == kind and picked < 6:
                f.summary = True
                picked += 1


# ----- threats ------------------------------------------------------------------------------------

def _noise(result: WorkloadResult) -> list[Threat]:
    m = headline_comparison(result)
    if m is None:
        return []
    out = []
    if not math.isnan(m.noise_pct) and m.noise_pct > NOISY_PCT:
        out.append(Threat("noise", m.label or m.metric, result.workload,
                          {"noise_pct": m.noise_pct}))
    if min(m.baseline_n, m.candidate_n) < 2:
        out.append(Threat("single_sample", m.label or m.metric, result.workload,
                          {"baseline_n": float(m.baseline_n),
                           "candidate_n": float(m.candidate_n)}))
    return out


def _fit_values(side: Side) -> dict[str, float]:
    values = {}
    if side.dataset_bytes is not None:
        values["dataset_bytes"] = float(side.dataset_bytes)
    if side.memory_bytes is not None:
        values["memory_bytes"] = float(side.memory_bytes)
    return values


def _unique(items: list[Threat]) -> list[Threat]:
    seen, out = set(), []
    for t in items:
        key = (t.kind, t.detail, t.workload)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out
