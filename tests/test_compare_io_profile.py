"""`compare` of two real runs with telemetry: the I/O profile and the write-IOPS overlay,
one row for a device that holds data and WAL, and stock settings that are not changes.

Every expected figure is recomputed here from the runs' raw files (host_raw.jsonl's
/proc/diskstats snapshots, meta.json's device map, summary.json's measured window), with
plain parsing and none of pgdyno's analysis code.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pgdyno.compare.core import compare_runs
from pgdyno.compare.io_profile import IoFigure, IoProfile, IoSide, io_figures
from pgdyno.compare.model import Comparison
from pgdyno.compare.plots import write_iops_overlay
from pgdyno.compare.render import io_table
from pgdyno.compare.runs import load_run
from pgdyno.runner.bench import run_bench
from pgdyno.runner.options import build_options
from tests.conftest import make_shared_dir

CLIENTS = 2
SECTOR = 512


@pytest.fixture(scope="module")
def pair(workdir: Path) -> tuple[Path, Path, Path]:
    """Two 3 s tpcb runs with telemetry: A stock, B with synchronous_commit=off and
    autovacuum=on (PostgreSQL's own default, written explicitly)."""
    results = make_shared_dir("pgdyno-cmp-io-")

    def one(label: str, sets: tuple[str, ...]) -> Path:
        opts = build_options("tpcb", clients=str(CLIENTS), iterations=1, duration=3, warmup=1,
                             scale=1, results_dir=results, progress=False, telemetry=True,
                             context="cmpio--tpcb", workdir=workdir, set_=list(sets))
        return run_bench(opts, Console(quiet=True), role={"label": label}).run_dir

    return results, one("stock", ()), one("async", ("synchronous_commit=off",
                                                    "autovacuum=on"))


@pytest.fixture(scope="module")
def cmp(pair) -> Comparison:
    _, a, b = pair
    return compare_runs([load_run(a)], [load_run(b)])


# ----- the oracle: /proc/diskstats read by hand ------------------------------------------

@dataclass
class RawDisk:
    device: str
    read_iops: float
    write_iops: float
    read_mb_s: float
    write_mb_s: float
    util_pct: float
    seconds: list[float]
    """End of each 1 s sample, in seconds since the measured window's start."""
    w_s: list[float]
    r_s: list[float]


def _counters(diskstats: str, device: str) -> list[int]:
    for line in diskstats.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[2] == device:
            return [int(v) for v in fields[3:]]
    raise AssertionError(f"{device} not in diskstats")


def raw_devices(run: Path) -> tuple[dict[str, str], dict[str, RawDisk]]:
    """(role -> device from meta.json, device -> figures over the measured window)."""
    summary = json.loads((run / "summary.json").read_text())
    it = next(i for i in summary["iterations"] if i["clients"] == CLIENTS)
    tdir = next(run.glob(f"raw/*/c{CLIENTS}-i1/telemetry"))
    meta = json.loads((tdir / "meta.json").read_text())
    roles = {role: info["top"] for role, info in meta["devices"].items()}
    slack = float(meta["config"]["interval_s"]) / 2
    start = float(it["window_start_epoch"])
    end = start + float(it["duration_s"])
    ticks = [json.loads(line) for line in (tdir / "host_raw.jsonl").read_text().splitlines()
             if line.strip()]
    ticks = [t for t in ticks if start - slack <= t["t"] <= end + slack]
    kept: list[dict] = []  # a tick under half an interval after the last is a partial one
    for t in ticks:
        if not kept or float(t["mono"]) - float(kept[-1]["mono"]) >= slack:
            kept.append(t)
    ticks = kept
    out = {}
    for device in set(roles.values()):
        # after the name: reads, merged, sectors read, ms, writes, merged, sectors written,
        # ms, in flight, ms doing I/O, ...
        c = [_counters(t["diskstats"], device) for t in ticks]
        mono = [float(t["mono"]) for t in ticks]
        wall = mono[-1] - mono[0]
        steps = range(len(ticks) - 1)
        out[device] = RawDisk(
            device=device, read_iops=(c[-1][0] - c[0][0]) / wall,
            write_iops=(c[-1][4] - c[0][4]) / wall,
            read_mb_s=(c[-1][2] - c[0][2]) * SECTOR / 2**20 / wall,
            write_mb_s=(c[-1][6] - c[0][6]) * SECTOR / 2**20 / wall,
            util_pct=min(100.0, 100.0 * (c[-1][9] - c[0][9]) / (1000.0 * wall)),
            seconds=[ticks[i + 1]["t"] - start for i in steps],
            w_s=[(c[i + 1][4] - c[i][4]) / (mono[i + 1] - mono[i]) for i in steps],
            r_s=[(c[i + 1][0] - c[i][0]) / (mono[i + 1] - mono[i]) for i in steps])
    return roles, out


def cv_pct(samples: list[float]) -> float | None:
    """σ/μ in %, None below 10 IOPS on average (the floor the report applies)."""
    mean = statistics.fmean(samples)
    return 100.0 * statistics.pstdev(samples) / mean if mean >= 10 else None


def _data_profile(cmp: Comparison, device: str) -> IoProfile:
    found = [p for p in cmp.io_profiles if p.clients == CLIENTS and "data" in p.roles]
    assert len(found) == 1, cmp.io_profiles
    assert found[0].baseline.devices == [device]
    return found[0]


def _number(cell: str) -> float:
    match = re.fullmatch(r"\s*([+-]?[\d,]+(?:\.\d+)?)\s*(%|pts)?\s*", cell.replace(" pts", ""))
    assert match, cell
    return float(match.group(1).replace(",", ""))


# ----- the tests ---------------------------------------------------------------------------

@pytest.mark.server
def test_io_profile_matches_the_raw_samples(pair, cmp: Comparison) -> None:
    _, a, b = pair
    roles_a, disks_a = raw_devices(a)
    _, disks_b = raw_devices(b)
    device = roles_a["data"]
    ra, rb = disks_a[device], disks_b[device]
    profile = _data_profile(cmp, device)
    expected = {
        "Read IOPS": (ra.read_iops, rb.read_iops, 10.0),
        "Read bandwidth": (ra.read_mb_s, rb.read_mb_s, 1.0),
        "Write IOPS": (ra.write_iops, rb.write_iops, 10.0),
        "Write bandwidth": (ra.write_mb_s, rb.write_mb_s, 1.0),
        "Device utilisation (%)": (ra.util_pct, rb.util_pct, None),
        "Write IOPS CV (%)": (cv_pct(ra.w_s), cv_pct(rb.w_s), None),
        "Read IOPS CV (%)": (cv_pct(ra.r_s), cv_pct(rb.r_s), None),
    }
    figures: dict[str, IoFigure] = {f.label: f for f in profile.figures}
    assert list(figures) == list(expected)
    table = io_table(profile, cmp)
    cells = {label: row[1:] for label, row in zip(figures, table.rows, strict=True)}
    for label, (va, vb, floor) in expected.items():
        f = figures[label]
        per_unit = 1.0  # MiB/s in one unit of the row, for the bandwidth rows
        if label.endswith("bandwidth"):
            # One binary prefix for both sides: the larger's, below 1024 of it.
            top, power = max(va, vb) * 2**20, 0
            while top >= 1024 ** (power + 1):
                power += 1
            shown = ["B/s", "KiB/s", "MiB/s", "GiB/s"][power]
            assert table.rows[list(figures).index(label)][0] == f"{label} ({shown})"
            per_unit = 1024**power / 2**20
        for got, want, cell in ((f.baseline, va, cells[label][0]),
                                (f.candidate, vb, cells[label][1])):
            if want is None:  # a CV under 10 IOPS
                assert got is None and cell == "too little activity", (label, cell)
                continue
            assert got == pytest.approx(want, rel=1e-6, abs=1e-9), label
            digits = 0 if label.endswith("IOPS") else 1
            assert abs(_number(cell) - want / per_unit) <= 0.5 * 10**-digits + 1e-6, \
                (label, cell)
        change = cells[label][2]
        if va is None or vb is None:
            assert change in ("too little activity", "–"), (label, change)
        elif floor is not None and va < floor:
            assert change == "too small to compare", (label, change)
        elif floor is not None:
            assert abs(_number(change) - 100.0 * (vb / va - 1)) <= 0.05 + 1e-6, (label, change)
        else:
            assert change.endswith(" pts") and abs(_number(change) - (vb - va)) <= 0.05 + 1e-6


@pytest.mark.server
def test_write_iops_overlay_draws_both_runs_from_the_window_start(pair, cmp) -> None:
    _, a, b = pair
    roles, disks_a = raw_devices(a)
    _, disks_b = raw_devices(b)
    device = roles["data"]
    fig = write_iops_overlay(cmp, CLIENTS)
    ax = next(ax for ax in fig.axes if "data" in ax.get_title())
    lines = ax.get_lines()
    assert [line.get_label().split(":")[0] for line in lines] == ["A (stock)", "B (async)"]
    for line, raw in zip(lines, (disks_a[device], disks_b[device]), strict=True):
        assert list(line.get_xdata()) == pytest.approx(raw.seconds, abs=1e-6)
        assert list(line.get_ydata()) == pytest.approx(raw.w_s, rel=1e-6)
    assert "(s)" in ax.get_xlabel() and "window" in ax.get_xlabel()
    assert "IOPS" in ax.get_ylabel() and "/s" in ax.get_ylabel()


@pytest.mark.server
def test_compare_cli_shows_the_io_profile(pair) -> None:
    import typer

    from pgdyno.cli import compare_cmds

    results, a, b = pair
    roles, disks_a = raw_devices(a)
    app = typer.Typer()
    compare_cmds.register(app)
    out = results / "io-out"
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--results-dir", str(results),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    md = (out / "compare.md").read_text()
    io = md[md.index("## I/O profile"):md.index("## Method")]
    write = next(line for line in io.splitlines() if line.startswith("| Write IOPS |"))
    assert abs(_number(write.split("|")[2]) - disks_a[roles["data"]].write_iops) <= 0.5 + 1e-6
    assert "(plots/write_iops_overlay.png)" in io
    assert (out / "plots" / "write_iops_overlay.png").read_bytes()[:4] == b"\x89PNG"
    assert "I/O profile" in (out / "compare.html").read_text()


@pytest.mark.server
def test_a_shared_data_and_wal_device_is_one_row(pair, cmp: Comparison) -> None:
    _, a, _ = pair
    roles, disks = raw_devices(a)
    names = [m.metric for m in cmp.metrics if m.clients == CLIENTS]
    if roles["data"] == roles["wal"]:
        device = roles["data"]
        assert "data_wal_write_iops" in names
        assert not {"data_write_iops", "wal_write_iops", "data_read_iops"} & set(names)
        row = cmp.metric("data_wal_write_iops", CLIENTS)
        assert row.title == f"Data + WAL ({device}) write IOPS"
        assert row.baseline_values == pytest.approx([disks[device].write_iops], rel=1e-6)
        assert [p.group for p in cmp.io_profiles] == [f"data + WAL ({device})"]
    else:  # separate devices: one row each, named by role
        assert {"data_write_iops", "wal_write_iops"} <= set(names)
        assert "data_wal_write_iops" not in names


@pytest.mark.server
def test_a_stock_value_written_explicitly_is_not_a_change(pair, cmp: Comparison) -> None:
    _, a, b = pair
    written = json.loads((b / "manifest.json").read_text())["server"]["non_default_settings"]
    assert written.get("autovacuum") == "on"  # B wrote it; A left it at the stock value
    absent = json.loads((a / "manifest.json").read_text())["server"]["non_default_settings"]
    assert "autovacuum" not in absent
    changed = {c.name: (c.before, c.after) for c in cmp.changes if c.layer == "postgresql"}
    assert changed == {"synchronous_commit": ("on (stock)", "off")}


def test_low_activity_says_so_instead_of_a_number() -> None:
    """3 read IOPS: no CV ("too little activity") and no % change ("too small to compare");
    written by hand so that both cases are checked whatever the real disks did."""
    a = IoSide(iterations=1, seconds=3.0, devices=["vda"], samples=3, read_iops=3.0,
               write_iops=400.0, read_mb_s=0.02, write_mb_s=5.0, util_pct=20.0,
               read_iops_cv=None, write_iops_cv=0.5)
    b = IoSide(iterations=1, seconds=3.0, devices=["vda"], samples=3, read_iops=30.0,
               write_iops=200.0, read_mb_s=0.3, write_mb_s=2.5, util_pct=12.5,
               read_iops_cv=1.25, write_iops_cv=0.25)
    profile = IoProfile(clients=2, group="data + WAL (vda)", roles=["data", "wal"],
                        baseline=a, candidate=b, figures=io_figures(a, b))
    cmp = Comparison(schema_version=2, baseline_label="stock", candidate_label="tuned",
                     baseline_runs=[], candidate_runs=[], confidence=0.95, changes=[],
                     metrics=[], method_note="")
    rows = {r[0]: r[1:] for r in io_table(profile, cmp).rows}
    assert rows["Read IOPS"] == ["3", "30", "too small to compare"]
    # 0.02 and 0.3 MiB/s: 20.5 and 307.2 KiB/s, one prefix for the row.
    assert rows["Read bandwidth (KiB/s)"] == ["20.5", "307.2", "too small to compare"]
    assert rows["Write IOPS"] == ["400", "200", "-50.0%"]
    assert rows["Write bandwidth (MiB/s)"] == ["5.0", "2.5", "-50.0%"]
    assert rows["Device utilisation (%)"] == ["20.0%", "12.5%", "-7.5 pts"]
    assert rows["Write IOPS CV (%)"] == ["50.0%", "25.0%", "-25.0 pts"]
    assert rows["Read IOPS CV (%)"] == ["too little activity", "125.0%", "too little activity"]
