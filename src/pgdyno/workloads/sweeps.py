"""Any workload's sweep over its dataset size: the report and the sweep-against-sweep
comparison that ``Workload`` gives every plugin with ``sweep_steps``.

Both show the workload's headline metric (its ``MetricSpec``: label, unit, direction) per
dataset size and client count, read from the runs' own summaries, so they can always be
rebuilt (``pgdyno report SWEEP_DIR``) and nothing is measured here. A workload with more to
say overrides them (TPROC-C puts real against ideal NOPM and finds its saturation point).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis.summary import load_summary
from pgdyno.errors import UsageError
from pgdyno.reports import html
from pgdyno.reports.document import Code, Document, Section, Table, Text
from pgdyno.results.rundir import write_json_atomic
from pgdyno.results.sweepdir import SweepRecord
from pgdyno.units import rounded
from pgdyno.workloads.metrics import MetricSpec, headline_metric

SCHEMA_VERSION = 1


@dataclass
class SweepPoint:
    """One size and client count of a sweep: its headline over the run's iterations."""

    size: int
    clients: int
    run: str | None
    status: str
    iterations: int = 0
    mean: float | None = None
    stddev: float | None = None


@dataclass
class SweepHeadlines:
    """``sweep_summary.json`` of a sweep whose workload has no sweep report of its own."""

    schema_version: int
    workload: str
    context: str
    status: str
    size_unit: str
    metric: str
    label: str
    unit: str
    direction: int
    points: list[SweepPoint]

    def best(self) -> SweepPoint | None:
        measured = [p for p in self.points if p.mean is not None]
        if not measured:
            return None
        return max(measured, key=lambda p: (self.direction or 1) * (p.mean or 0.0))


def summarise(sweep_dir: Path, record: SweepRecord,
              metrics: tuple[MetricSpec, ...]) -> SweepHeadlines:
    spec = headline_metric(metrics)
    points: list[SweepPoint] = []
    for step in record.steps:
        run_dir = sweep_dir.parent / step.run if step.run else None
        if run_dir is None or not (run_dir / "summary.json").is_file():
            points += [SweepPoint(step.size, c, step.run, step.status) for c in step.clients]
            continue
        summary = load_summary(run_dir / "summary.json")
        for clients in summary.client_counts:
            values = [v for it in summary.iterations
                      if it.clients == clients and it.status == "ok"
                      and (v := it.metrics.get(spec.name)) is not None and not math.isnan(v)]
            points.append(SweepPoint(
                step.size, clients, step.run, step.status, iterations=len(values),
                mean=statistics.fmean(values) if values else None,
                stddev=statistics.stdev(values) if len(values) > 1 else None))
    return SweepHeadlines(
        schema_version=SCHEMA_VERSION, workload=record.workload, context=record.context,
        status=record.status, size_unit=record.size_unit, metric=spec.name, label=spec.label,
        unit=spec.unit, direction=spec.direction, points=points)


# ----- the sweep report ------------------------------------------------------------------

def build_sweep_report(sweep_dir: Path, metrics: tuple[MetricSpec, ...]) -> SweepHeadlines:
    """sweep_summary.json, report.md, report.html and plots/ in the sweep directory."""
    record = SweepRecord.load(sweep_dir)
    summary = summarise(sweep_dir, record, metrics)
    write_json_atomic(sweep_dir / "sweep_summary.json", serde.to_dict(summary))
    images = {}
    plot = _plot(summary, sweep_dir / "plots" / "sweep_headline.png")
    if plot is not None:
        images["headline"] = str(plot.relative_to(sweep_dir))
    html.write_document(sweep_document(summary, record, images), sweep_dir)
    return summary


def sweep_document(summary: SweepHeadlines, record: SweepRecord,
                   images: dict[str, str]) -> Document:
    spec = _spec(summary)
    best = summary.best()
    result = Section("Result", paragraphs=[
        f"Best {summary.label} {spec.cell(best.mean)} at {best.size} {summary.size_unit} "
        f"and {_clients(best.clients)}." if best is not None
        else "No size finished; see the runs' reports."])
    rows = [[str(p.size), str(p.clients), spec.cell(p.mean), rounded(p.stddev),
             str(p.iterations), p.status, f"../{p.run}/report.md" if p.run else "–"]
            for p in summary.points]
    table = Section(f"{summary.label} by {summary.size_unit}", tables=[Table(
        [summary.size_unit.capitalize(), "Clients", summary.label, "± sd", "Iterations",
         "Status", "Run"], rows)], paragraphs=[
        f"{summary.label} is the mean over each run's finished iterations, as in the runs' "
        "reports."])
    if "headline" in images:
        table.images.append((f"{summary.label} by {summary.size_unit}", images["headline"]))
    about = Section("Sweep", tables=[Table(["Key", "Value"], [
        ["Workload", record.workload], ["Context", record.context],
        ["Status", record.status], ["Started", record.started_at],
        ["Ended", record.ended_at or "–"], ["Config", record.config]])])
    sizes = ", ".join(str(s.size) for s in record.steps)
    return Document(title=f"pgdyno {record.workload} sweep: {sizes} {summary.size_unit}",
                    sections=[result, table, about])


def _spec(summary: SweepHeadlines) -> MetricSpec:
    return MetricSpec(summary.metric, summary.label, summary.unit, summary.direction)


def _plot(summary: SweepHeadlines, path: Path) -> Path | None:
    from pgdyno.reports.plots import plt

    measured = [p for p in summary.points if p.mean is not None]
    if not measured:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for clients in sorted({p.clients for p in measured}):
        points = sorted((p for p in measured if p.clients == clients), key=lambda p: p.size)
        ax.errorbar([p.size for p in points], [p.mean for p in points],
                    yerr=[p.stddev or 0.0 for p in points], marker="o", capsize=3,
                    label=_clients(clients))
    return _save_by_size(fig, ax, summary.size_unit, summary.label, summary.unit, path)


# ----- sweep against sweep ---------------------------------------------------------------

@dataclass
class SweepSide:
    label: str
    path: str
    best: SweepPoint | None
    points: list[SweepPoint] = field(default_factory=list)


@dataclass
class HeadlineSweepComparison:
    """Two sweeps' headline per size and client count (``compare.json``)."""

    schema_version: int
    workload: str
    size_unit: str
    metric: str
    label: str
    unit: str
    direction: int
    at_step: int | None
    """--at-step: the one size compared (None: every size)."""
    a: SweepSide
    b: SweepSide

    def rows(self) -> list[tuple[int, int, float | None, float | None]]:
        """(size, clients, A, B) for every size and client count either side measured."""
        a = {(p.size, p.clients): p.mean for p in self.a.points}
        b = {(p.size, p.clients): p.mean for p in self.b.points}
        keys = sorted(k for k in set(a) | set(b)
                      if self.at_step is None or k[0] == self.at_step)
        return [(size, clients, a.get((size, clients)), b.get((size, clients)))
                for size, clients in keys]

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out_dir / "compare.json", json.loads(json.dumps(serde.to_dict(self))))
        images = {}
        if (p := _overlay(self, out_dir / "plots" / "sweeps_headline.png")) is not None:
            images["overlay"] = str(p.relative_to(out_dir))
        return html.write_document(comparison_document(self, images), out_dir, stem="compare")

    def summary_lines(self) -> list[str]:
        spec = MetricSpec(self.metric, self.label, self.unit, self.direction)
        return [f"{side.label}: best {self.label} {spec.cell(side.best.mean)} at "
                f"{side.best.size} {self.size_unit}, {_clients(side.best.clients)}"
                if side.best is not None else f"{side.label}: no size finished"
                for side in (self.a, self.b)]


def compare_sweeps(a_dir: Path, b_dir: Path, at_step: int | None,
                   metrics: tuple[MetricSpec, ...]) -> HeadlineSweepComparison:
    sides = []
    for path in (Path(a_dir), Path(b_dir)):
        record = SweepRecord.load(path)
        summary = summarise(path, record, metrics)
        sides.append((record, summary))
    (ra, a), (rb, b) = sides
    common = sorted({p.size for p in a.points} & {p.size for p in b.points})
    if at_step is not None and at_step not in common:
        raise UsageError(f"--at-step {at_step}: accepted: a size in {a.size_unit} both sweeps "
                         f"measured ({', '.join(map(str, common)) or 'none in common'})")
    return HeadlineSweepComparison(
        schema_version=SCHEMA_VERSION, workload=a.workload, size_unit=a.size_unit,
        metric=a.metric, label=a.label, unit=a.unit, direction=a.direction, at_step=at_step,
        a=SweepSide(f"{ra.context}/{Path(a_dir).name}", str(a_dir), a.best(), a.points),
        b=SweepSide(f"{rb.context}/{Path(b_dir).name}", str(b_dir), b.best(), b.points))


def comparison_document(cmp: HeadlineSweepComparison, images: dict[str, str]) -> Document:
    spec = MetricSpec(cmp.metric, cmp.label, cmp.unit, cmp.direction)
    rows = [[str(size), str(clients), spec.cell(a), spec.cell(b), _change(a, b)]
            for size, clients, a, b in cmp.rows()]
    section = Section("Sweeps", paragraphs=[
        f"A: {cmp.a.label}. B: {cmp.b.label}.",
        Text.of(f"{cmp.label} is each run's mean over its finished iterations "
                f"({'higher' if cmp.direction >= 0 else 'lower'} is better); B vs A is the "
                "relative change of the means (the runs' own comparison, ",
                Code("pgdyno compare RUN_A RUN_B"), ", gives intervals).")],
        tables=[Table([cmp.size_unit.capitalize(), "Clients", f"{cmp.label} A",
                       f"{cmp.label} B", "B vs A"], rows)])
    if "overlay" in images:
        section.images.append((f"{cmp.label} by {cmp.size_unit}, both sweeps",
                               images["overlay"]))
    return Document(title=f"pgdyno sweep comparison: {cmp.a.label} vs {cmp.b.label}",
                    sections=[section])


def _clients(n: int) -> str:
    return f"{n} client{'' if n == 1 else 's'}"


def _change(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return "–"
    return f"{100 * (b - a) / a:+.1f}%"


def _overlay(cmp: HeadlineSweepComparison, path: Path) -> Path | None:
    from pgdyno.reports.plots import plt

    rows = cmp.rows()
    if not any(a is not None or b is not None for *_, a, b in rows):
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for side, index, marker in ((cmp.a, 2, "o"), (cmp.b, 3, "s")):
        for clients in sorted({r[1] for r in rows}):
            points = [(r[0], r[index]) for r in rows if r[1] == clients and r[index] is not None]
            if points:
                ax.plot([s for s, _ in points], [v for _, v in points], marker=marker,
                        label=f"{side.label}, {_clients(clients)}")
    return _save_by_size(fig, ax, cmp.size_unit, cmp.label, cmp.unit, path)


def _save_by_size(fig, ax, size_unit: str, label: str, unit: str, path: Path) -> Path:  # noqa: ANN001
    """A headline-by-size chart's axes (from zero, labelled with units), saved."""
    from pgdyno.reports.plots import save_figure

    ax.set(xlabel=size_unit, ylabel=f"{label} ({unit})", title=f"{label} by {size_unit}")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
