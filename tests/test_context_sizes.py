"""The scaling projection from measured sizes: the same workload measured on two "machines"
(contexts named as `pgdyno fleet` names them, one run pinned to one CPU with taskset so that
it is a 1-vCPU host to pgdyno and its server), fitted against vCPUs, and used for the
instances that were not measured, instead of a guess linear in vCPUs."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from pgdyno.campaign.context import build_context
from pgdyno.campaign.context_report import write_context_report
from tests.conftest import run_cli

pytestmark = [pytest.mark.server, pytest.mark.skipif(
    shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs taskset and two CPUs")]


def _run(results: Path, workdir: Path, machine: str, cpus: str | None) -> Path:
    args = ["bench", "select-only", "--scale", "1", "--clients", "2", "--duration", "3",
            "--warmup", "1", "--iterations", "1", "--no-telemetry", "--results-dir",
            str(results), "--no-progress"]
    env = {"PGDYNO_HARDWARE_NAME": machine}
    if cpus is None:
        proc = run_cli(args, workdir, env=env)
    else:  # the whole process tree on those CPUs: pgdyno, pgbench and the server it starts
        import subprocess
        import sys

        proc = subprocess.run(["taskset", "-c", cpus, sys.executable, "-m", "pgdyno", *args],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PGDYNO_WORKDIR": str(workdir), **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = (results / f"{machine}--select-only").glob("select-only-*")
    return run


def _tps(run: Path) -> float:
    summary = json.loads((run / "summary.json").read_text())
    (row,) = summary["per_clients"]
    return row["tps_mean"]


def test_projection_fits_the_sizes_measured(tmp_path: Path, workdir: Path) -> None:
    results = tmp_path / "results"
    small = _run(results, workdir, "small", "0")
    big = _run(results, workdir, "big", None)
    assert json.loads((small / "manifest.json").read_text())["host"]["cpu_count"] == 1

    rep = build_context(results, "big--select-only")
    sizes = rep.size_scaling
    assert sizes is not None
    assert {(m.hardware, m.vcpus) for m in sizes.points} == {("big", 2), ("small", 1)}
    assert sorted(sizes.fitted) == ["big--select-only", "small--select-only"]
    # Two points: the fit is exact, recomputed from the runs' own summaries.
    exponent = math.log(_tps(big) / _tps(small)) / math.log(2)
    assert sizes.exponent == pytest.approx(exponent, rel=1e-9)
    assert sizes.tps_at(1) == pytest.approx(_tps(small), rel=1e-9)
    assert sizes.tps_at(2) == pytest.approx(_tps(big), rel=1e-9)
    # Beyond them: from the nearest size measured, never faster than linear.
    assert sizes.tps_at(8) == pytest.approx(_tps(big) * 4 ** min(exponent, 1.0), rel=1e-9)
    assert sizes.extrapolated(8) and not sizes.extrapolated(2)

    # Instances not measured are projected from the fit (same CPU model as these runs only:
    # the catalogue's Graviton profiles are not, so they keep the per-vCPU projection).
    for row in rep.prices[1:]:
        if "from measured sizes" in row.tps_basis:
            assert row.tps == pytest.approx(sizes.tps_at(row.vcpus), rel=1e-9)
    md = write_context_report(rep, tmp_path / "report").read_text()
    assert "TPS ∝ vCPU^" in md and "small--select-only" in md
    stored = json.loads((tmp_path / "report" / "context-report.json").read_text())
    assert stored["size_scaling"]["exponent"] == pytest.approx(exponent, rel=1e-9)

    # The differences against the other instance size: one host's context against
    # the other's, the machine's vCPUs among the differences.
    md = write_context_report(build_context(results, "big--select-only",
                                            against="small--select-only"),
                              tmp_path / "against").read_text()
    section = md.split("Differences against another context")[1].split("\n## ")[0]
    assert "| host | cpu_count | 1 | 2 |" in section.replace("  ", " ")
