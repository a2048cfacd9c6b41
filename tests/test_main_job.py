"""The main job: `pgdyno bench tpcb` with its defaults answers "what does this machine give?"
A client sweep from the cores, the dataset's fit stated, a terminal summary whose figures
are recomputed here from summary.json, and an overall bar that counts iterations."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path

import pytest

from pgdyno.config.units import human_bytes
from pgdyno.runner.options import build_options, defaults
from pgdyno.runner.outcome import fit_of
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

T_975 = {1: 12.7062, 2: 4.3027}  # Student's t, two-sided 95%, from the published table
CORES = len(os.sched_getaffinity(0))


def test_default_clients_are_a_sweep_from_the_cores() -> None:
    for workload in ("tpcb", "select-only", "oltp-read-write"):
        assert build_options(workload).clients == (CORES, 2 * CORES, 4 * CORES)
    assert build_options("cpu").clients == (CORES,)


def test_default_run_lasts_a_few_minutes() -> None:
    d = defaults()
    seconds = 3 * d["iterations"] * (d["duration"] + d["warmup"])
    assert 120 <= seconds <= 300, seconds


@pytest.mark.parametrize(("size", "shared", "available", "fit"), [
    (100, 128, 10_000, "shared_buffers"), (128, 128, 0, "shared_buffers"),
    (200, 128, 100, "page cache"), (300, 128, 100, "disk"),
    (200, 128, None, "beyond shared_buffers")])
def test_dataset_fit(size: int, shared: int, available: int | None, fit: str) -> None:
    assert fit_of(size, shared, available) == fit


@pytest.mark.server
def test_default_sweep_terminal_summary_and_progress(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-mainjob-")
    # 1 s windows, no warm-up: every figure checked is recomputed from what the run recorded.
    out = run_cli(["bench", "tpcb", "--scale", "1", "--duration", "1", "--warmup", "0",
                   "--iterations", "2", "--results-dir", str(results)], workdir)
    assert out.returncode == 0, out.stderr
    run = next(results.glob("*--tpcb/tpcb-*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["client_counts"] == [CORES, 2 * CORES, 4 * CORES]

    means = {c: statistics.fmean(it["metrics"]["tps"] for it in summary["iterations"]
                                 if it["clients"] == c) for c in summary["client_counts"]}
    peak_clients = max(means, key=means.get)
    values = [it["metrics"]["tps"] for it in summary["iterations"]
              if it["clients"] == peak_clients]
    half = T_975[len(values) - 1] * statistics.stdev(values) / math.sqrt(len(values))
    lines = out.stdout.splitlines()
    # The figures are recomputed from summary.json's per-iteration TPS, which is rounded
    # there: a shown figure may sit one step of its last digit from the recomputed one.
    number = r"(-?[\d,]+\.\d)"
    shown = re.fullmatch(rf"peak TPS: {number} tx/s at {peak_clients} clients \(95% interval "
                         rf"{number} to {number} over 2 iterations\)", lines[0])
    assert shown, lines[0]
    figures = [float(g.replace(",", "")) for g in shown.groups()]
    expected = [means[peak_clients], means[peak_clients] - half, means[peak_clients] + half]
    assert figures == pytest.approx(expected, abs=0.11), (lines[0], expected)
    # Which of the closing lines about the peak a sweep prints (saturates, levelling off,
    # still rising) depends on the TPS it measured; the rule that picks them is tested with
    # set figures in test_run_answer. Here, whichever this run printed states its figures.
    edges = [line for line in lines
             if line.startswith(("saturates", "levelling off", "still rising"))]
    assert edges, lines  # a sweep of three counts always says where its peak stands
    for line in edges:
        _check_edge_line(line, means, peak_clients)
    p99 = statistics.fmean(it["metrics"]["latency_p99_ms"] for it in summary["iterations"]
                           if it["clients"] == peak_clients)
    assert f"p99 at the peak: {p99:,.2f} ms" in lines
    assert any(line.startswith("verdict at the peak: ") for line in lines)

    manifest = json.loads((run / "manifest.json").read_text())
    ds = manifest["dataset"]
    # pgbench scale 1: 100,000 accounts (~13 MB with its index) in a ~20 MB database.
    assert 10 * 2**20 < ds["size_bytes"] < 60 * 2**20
    assert ds["shared_buffers_bytes"] == 128 * 2**20 and ds["fits"] == "shared_buffers"
    shared = human_bytes(ds["shared_buffers_bytes"])  # its rounding: config.units' own
    assert f"dataset: {human_bytes(ds['size_bytes'])}, within shared_buffers ({shared}): " \
        "every read is a shared-buffer hit, so the run measures CPU, locks and WAL rather " \
        "than storage" in lines
    assert f"within shared_buffers ({shared})" in (run / "report.md").read_text()
    assert lines[-2] == f"report: {run / 'report.md'}"
    # The overall bar counts iterations (its last state is printed when it closes).
    assert re.search(r"iteration 6/6 .* 100%", out.stderr), out.stderr[-2000:]


SATURATES = re.compile(r"saturates at (\d+) clients \(within 5% of the peak\)")
RISING = re.compile(r"(levelling off|still rising): TPS grew (?:only )?(-?[\d.]+)% from "
                    r"(\d+) clients to (\d+) clients \(([\d,.]+) to ([\d,.]+) tx/s\), the "
                    r"most tried; try up to (\d+) clients \(--clients (\d+),(\d+)\) to "
                    r"(confirm the plateau|find the peak)")


def _check_edge_line(line: str, means: dict[int, float], peak: int) -> None:
    """A closing line about the peak against the means recomputed from summary.json (each
    figure within a step of its last digit: the per-iteration TPS there are rounded)."""
    if (shown := SATURATES.fullmatch(line)) is not None:
        at = int(shown[1])  # the fewest clients within 5% of the peak
        assert means[at] >= 0.95 * means[peak] - 0.1, (line, means)
        assert all(means[c] < 0.95 * means[peak] + 0.1 for c in means if c < at), (line, means)
        return
    shown = RISING.fullmatch(line)
    assert shown, line
    before, most = int(shown[3]), int(shown[4])
    assert most == peak == max(means) and before == max(c for c in means if c < most)
    growth = 100 * (means[most] / means[before] - 1)
    assert float(shown[2]) == pytest.approx(growth, abs=0.11), (line, means)
    assert [float(shown[i].replace(",", "")) for i in (5, 6)] == pytest.approx(
        [means[before], means[most]], abs=0.11)
    assert [int(shown[i]) for i in (7, 8, 9)] == [2 * most, most, 2 * most]
    assert (shown[1] == "levelling off") == (shown[10] == "confirm the plateau")
