"""TPROC-C figures from a run's raw files, and their report section (seed 000 §4 style).

NOPM and TPM come from the database snapshots taken at the start and the end of each
measured window (``window.json``), not from the driver's counts; per-transaction-type
throughput and latency come from pgbench's per-script log data (the "Per script" table).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from pgdyno.analysis.summary import RunSummary
from pgdyno.reports.document import Section, Table, fmt
from pgdyno.results.rundir import RunPlan


def window_metrics(plan: RunPlan, it_dir: Path) -> dict[str, float]:
    """nopm, tpm, efficiency (and real/ideal in compliant mode) of one iteration."""
    from pgdyno.workloads import tprocc

    path = it_dir / "window.json"
    if plan.workload != "tprocc" or not path.exists():
        return {}
    points = json.loads(path.read_text())
    if "start" not in points or "end" not in points:
        return {}
    start = tprocc.Snapshot.from_dict(points["start"]["snapshot"])
    end = tprocc.Snapshot.from_dict(points["end"]["snapshot"])
    warehouses = int(plan.parameters["warehouses"])
    metrics = tprocc.throughput(start, end, warehouses)
    out = {"nopm": metrics.nopm, "tpm": metrics.tpm, "efficiency": metrics.efficiency,
           "new_orders": float(metrics.new_orders), "window_s": metrics.duration_s}
    if plan.parameters.get("keying_thinking"):
        mix = plan.parameters.get("mix")
        ideal = tprocc.against_ideal(metrics, tprocc.Mix.parse(mix) if mix else None,
                                     float(plan.parameters.get("time_scale", 1.0)))
        out["ideal_nopm"], out["real_vs_ideal"] = ideal.ideal_nopm, ideal.ratio
    return out


def pooled_extras(summary: RunSummary) -> dict[str, float]:
    """Mean NOPM and TPM per VU count, as the headline figures of the run."""
    out: dict[str, float] = {}
    for clients in summary.client_counts:
        runs = [it.extras for it in summary.iterations if it.clients == clients and it.extras]
        for key in ("nopm", "tpm"):
            if runs:
                out[f"{key}_{clients}vu"] = statistics.fmean(r[key] for r in runs)
    return out


def tprocc_sections(summary: RunSummary, plan: RunPlan, run_dir: Path) -> list[Section]:
    if plan.workload != "tprocc":
        return []
    w = plan.parameters.get("warehouses")
    rows = []
    for it in summary.iterations:
        e = it.extras
        rows.append([str(it.clients), str(it.iteration), fmt(e.get("nopm"), 0),
                     fmt(e.get("tpm"), 0), fmt(100 * e["efficiency"] if e else None, 1),
                     fmt(e.get("real_vs_ideal"), 3), fmt(e.get("window_s"), 1)])
    pooled = []
    for clients in summary.client_counts:
        nopms = [it.extras["nopm"] for it in summary.iterations
                 if it.clients == clients and "nopm" in it.extras]
        if nopms:
            sd = statistics.stdev(nopms) if len(nopms) > 1 else math.nan
            pooled.append([str(clients), fmt(statistics.fmean(nopms), 0), fmt(sd, 0),
                           str(len(nopms))])
    section = Section(
        f"TPROC-C: {w} warehouses", paragraphs=[
            "NOPM = new orders per minute from Δsum(d_next_o_id); TPM = Δ(xact_commit + "
            "xact_rollback) per minute; both over the measured window, read from the database. "
            "Efficiency = NOPM ÷ (12.86 × warehouses), the most a compliant run can reach. "
            f"Mix {plan.parameters.get('mix')}, {_mode(plan)}."],
        tables=[Table(["VUs", "Iteration", "NOPM", "TPM", "Efficiency %", "Real/ideal",
                       "Window (s)"], rows),
                Table(["VUs", "NOPM mean", "NOPM stddev", "Iterations"], pooled)])
    consistency = run_dir / "raw" / "consistency.json"
    if consistency.exists():
        data = json.loads(consistency.read_text())
        section.tables.append(Table(
            ["Condition", "Description", "Result", "Checked", "Violations"],
            [[str(c["number"]), c["description"], "pass" if c["passed"] else "FAIL",
              str(c["checked"]), str(c["violations"])] for c in data["conditions"]],
            caption="TPC-C consistency conditions (clause 3.3.2) after the run"))
    return [section]


def _mode(plan: RunPlan) -> str:
    keying = ("keying and think times on" if plan.parameters.get("keying_thinking")
              else "no keying or think times")
    spread = ("each transaction on any warehouse" if plan.parameters.get("all_warehouses")
              else "home warehouse per user")
    return f"{keying}, {spread}"
