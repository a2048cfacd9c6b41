"""Sweep against sweep: two TPROC-C ``--warehouses`` sweeps side by side.

``pgdyno compare SWEEP_A SWEEP_B`` puts both sweeps' real and ideal NOPM on one plot, both
real/ideal ratios and New-Order p90s per warehouse count in one table, each sweep's
saturation point (where real/ideal drops below the threshold), and the memory chart of
both at one warehouse count (``--at-step``, also ``--at-warehouses``; default the largest
both measured). Every figure comes from the sweeps' own summaries (``sweep_report``) and
from their runs' telemetry summaries, so nothing is measured here. The plugin's
``compare_sweeps`` hands it to ``pgdyno.compare.sweeps``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis.archive import MemorySeries
from pgdyno.analysis.summary import load_summary
from pgdyno.errors import UsageError
from pgdyno.reports import html
from pgdyno.reports.document import Document, Section, Table
from pgdyno.results.manifest import load_manifest
from pgdyno.results.rundir import write_json_atomic
from pgdyno.results.sweepdir import SweepRecord
from pgdyno.units import format_ms, format_ratio_pct, rounded
from pgdyno.workloads.tprocc.sweep_report import SweepRow, SweepSummary, summarise_sweep

SCHEMA_VERSION = 1


@dataclass
class SideRow:
    nopm: float | None = None
    ideal_nopm: float | None = None
    real_vs_ideal: float | None = None
    p90_new_order_ms: float | None = None


@dataclass
class SweepSide:
    label: str
    path: str
    archive: str
    """The runs' --archive (off, buffered, direct, or a command)."""
    saturation_warehouses: int | None
    rows: dict[int, SideRow] = field(default_factory=dict)
    """Warehouses -> that step's figures."""
    memory: MemorySeries | None = None
    """The memory series of the run at ``at_warehouses`` (its median iteration)."""
    memory_origin: float | None = None


@dataclass
class SweepComparison:
    schema_version: int
    threshold: float
    at_warehouses: int | None
    a: SweepSide
    b: SweepSide

    @property
    def warehouses(self) -> list[int]:
        return sorted(set(self.a.rows) | set(self.b.rows))

    def write(self, out_dir: Path) -> Path:
        return write_sweep_comparison(self, out_dir)

    def summary_lines(self) -> list[str]:
        return [f"{side.label}: saturation at "
                f"{side.saturation_warehouses or 'no warehouse count in the sweep'}"
                for side in (self.a, self.b)]


def compare_sweeps(a_dir: Path, b_dir: Path, at_warehouses: int | None = None
                   ) -> SweepComparison:
    sides = []
    summaries = []
    for path in (Path(a_dir), Path(b_dir)):
        record = SweepRecord.load(path)
        summary = summarise_sweep(path, record)
        summaries.append(summary)
        sides.append(_side(path, record, summary))
    a, b = sides
    common = sorted(set(a.rows) & set(b.rows))
    if at_warehouses is None and common:
        at_warehouses = common[-1]
    elif at_warehouses is not None and at_warehouses not in common:
        raise UsageError(f"--at-step {at_warehouses}: accepted: a warehouse count both sweeps "
                         f"measured ({', '.join(map(str, common)) or 'none in common'})")
    for side, path, summary in zip(sides, (a_dir, b_dir), summaries, strict=True):
        if at_warehouses is not None:
            _memory_at(side, Path(path), summary, at_warehouses)
    return SweepComparison(SCHEMA_VERSION, summaries[0].threshold, at_warehouses, a, b)


def _side(path: Path, record: SweepRecord, summary: SweepSummary) -> SweepSide:
    rows: dict[int, SideRow] = {}
    for r in summary.rows:
        if r.warehouses in rows:  # several VU counts: the first (compliant sweeps have one)
            continue
        rows[r.warehouses] = SideRow(r.nopm_mean, r.ideal_nopm, r.real_vs_ideal,
                                     r.p90_ms.get("new_order"))
    return SweepSide(label=f"{record.context}/{path.name}", path=str(path),
                     archive=_archive_of(path, summary.rows),
                     saturation_warehouses=summary.saturation_warehouses, rows=rows)


def _archive_of(path: Path, rows: list[SweepRow]) -> str:
    for r in rows:
        if r.run:
            try:
                return load_manifest(path.parent / r.run).options.target.archive
            except (UsageError, AttributeError):
                continue
    return "–"


def _memory_at(side: SweepSide, path: Path, summary: SweepSummary, warehouses: int) -> None:
    row = next((r for r in summary.rows if r.warehouses == warehouses and r.run), None)
    if row is None or not (path.parent / row.run / "summary.json").is_file():
        return
    run = load_summary(path.parent / row.run / "summary.json")
    measured = sorted((it for it in run.iterations if it.telemetry is not None
                       and it.telemetry.archive is not None and it.status == "ok"),
                      key=lambda it: it.metrics.get("nopm", 0.0))
    if not measured:
        return
    it = measured[(len(measured) - 1) // 2]
    side.memory = it.telemetry.archive.memory
    side.memory_origin = it.window_start_epoch - it.warmup_s


# ----- rendering ------------------------------------------------------------------------

def write_sweep_comparison(cmp: SweepComparison, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "compare.json", json.loads(json.dumps(serde.to_dict(cmp))))
    images = {}
    if (p := _overlay(cmp, out_dir / "plots" / "sweeps_nopm.png")) is not None:
        images["overlay"] = str(p.relative_to(out_dir))
    if (p := _memory(cmp, out_dir / "plots" / "sweeps_memory.png")) is not None:
        images["memory"] = str(p.relative_to(out_dir))
    return html.write_document(sweep_document(cmp, images), out_dir, stem="compare")


def table_rows(cmp: SweepComparison) -> list[list[str]]:
    out = []
    for w in cmp.warehouses:
        a, b = cmp.a.rows.get(w, SideRow()), cmp.b.rows.get(w, SideRow())
        out.append([str(w), rounded(a.ideal_nopm or b.ideal_nopm, 1), rounded(a.nopm, 1),
                    rounded(b.nopm, 1), format_ratio_pct(a.real_vs_ideal),
                    format_ratio_pct(b.real_vs_ideal), format_ms(a.p90_new_order_ms),
                    format_ms(b.p90_new_order_ms)])
    return out


def _saturation(side: SweepSide, threshold: float) -> str:
    if side.saturation_warehouses is None:
        return f"real/ideal stays at or above {threshold:.0%} over the whole sweep"
    return f"real/ideal below {threshold:.0%} from {side.saturation_warehouses} warehouses"


def sweep_document(cmp: SweepComparison, images: dict[str, str]) -> Document:
    a, b = cmp.a, cmp.b
    headers = ["Warehouses", "Ideal NOPM", "NOPM A", "NOPM B", "Real/ideal A",
               "Real/ideal B", "p90 NO ms A", "p90 NO ms B"]
    result = Section("Sweeps", paragraphs=[
        f"A: {a.label} (--archive {a.archive}): {_saturation(a, cmp.threshold)}.",
        f"B: {b.label} (--archive {b.archive}): {_saturation(b, cmp.threshold)}.",
        "NOPM is each run's mean over its iterations; ideal NOPM is what 10 terminals per "
        "warehouse reach with zero response time; p90 NO is the server's New-Order response "
        "time, pooled over the measured windows (the sweeps' own reports)."],
        tables=[Table(headers, table_rows(cmp))])
    if "overlay" in images:
        result.images.append(("Real against ideal NOPM, both sweeps", images["overlay"]))
    sections = [result]
    if cmp.at_warehouses is not None:
        mem = Section(f"Memory at {cmp.at_warehouses} warehouses")
        if "memory" in images:
            mem.images.append((f"Memory use over time at {cmp.at_warehouses} warehouses",
                               images["memory"]))
        else:
            mem.paragraphs.append("No memory series: the runs were made without --archive "
                                  "(the page-cache sampler runs with it).")
        sections.append(mem)
    return Document(title=f"pgdyno sweep comparison: {a.label} vs {b.label}", sections=sections)


def _overlay(cmp: SweepComparison, path: Path) -> Path | None:
    from pgdyno.reports.plots import plt, save_figure

    if not cmp.warehouses:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for side, marker in ((cmp.a, "o"), (cmp.b, "s")):
        points = sorted((w, r.nopm) for w, r in side.rows.items() if r.nopm is not None)
        if points:
            ax.plot([w for w, _ in points], [v for _, v in points], marker=marker,
                    label=f"real NOPM: {side.label} ({side.archive})")
    ideal = sorted({(w, r.ideal_nopm) for s in (cmp.a, cmp.b) for w, r in s.rows.items()
                    if r.ideal_nopm is not None})
    if ideal:
        ax.plot([0] + [w for w, _ in ideal], [0] + [v for _, v in ideal], "k--",
                label="ideal NOPM")
    ax.set(xlabel="warehouses", ylabel="new orders per minute",
           title="Real against ideal NOPM")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def _memory(cmp: SweepComparison, path: Path) -> Path | None:
    from pgdyno.reports.archive_sections import draw_memory
    from pgdyno.reports.plots import plt, save_figure

    sides = [s for s in (cmp.a, cmp.b) if s.memory is not None and len(s.memory.t) >= 2]
    if not sides:
        return None
    fig, axes = plt.subplots(1, len(sides), figsize=(7 * len(sides), 4.5), sharey=True,
                             squeeze=False)
    for ax, side in zip(axes[0], sides, strict=True):
        assert side.memory is not None
        draw_memory(ax, side.memory, side.memory_origin or side.memory.t[0],
                    f"{side.label} (--archive {side.archive}), W={cmp.at_warehouses}")
    fig.tight_layout()
    return save_figure(fig, path)
