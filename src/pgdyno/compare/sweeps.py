"""Sweep against sweep: two sweep directories of one workload side by side.

``pgdyno compare SWEEP_A SWEEP_B`` asks the sweeps' workload for the comparison
(``Workload.compare_sweeps``): by default its headline metric per dataset size, TPROC-C's
real against ideal NOPM, saturation points and memory charts. ``--at-step``
(``--at-warehouses`` too) names the size to look at closely. Every figure comes from the
sweeps' runs, so nothing is measured here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.results.sweepdir import SWEEP_FILE, SweepRecord
from pgdyno.workloads import registry
from pgdyno.workloads.base import SweepComparison


def is_sweep_dir(path: str | Path) -> bool:
    return (Path(path) / SWEEP_FILE).is_file()


def compare_sweeps(a_dir: Path, b_dir: Path, at_step: int | None = None) -> SweepComparison:
    """The two sweeps compared by their workload's plugin; sweeps of two workloads are
    refused in one line."""
    a_dir, b_dir = Path(a_dir), Path(b_dir)
    workloads = [SweepRecord.load(path).workload for path in (a_dir, b_dir)]
    if workloads[0] != workloads[1]:
        raise UsageError(f"{b_dir}: a {workloads[1]} sweep against {a_dir}, a {workloads[0]} "
                         "sweep; compare takes two sweeps of one workload")
    return registry.get(workloads[0]).compare_sweeps(a_dir, b_dir, at_step)


def sweep_out_dir(results_dir: Path, a_dir: Path, b_dir: Path) -> Path:
    """Where a comparison of two sweeps goes by default: under ``results_dir/comparisons``,
    named after both and the time."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return results_dir / "comparisons" / f"{a_dir.name}--vs--{b_dir.name}-{stamp}"


def write_sweep_comparison(cmp: SweepComparison, out_dir: Path) -> Path:
    """compare.json, compare.md, compare.html and plots in ``out_dir``; returns the .md."""
    return cmp.write(out_dir)
