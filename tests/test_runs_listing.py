"""`pgdyno runs` fits a terminal: short run names, cells on one line, and
whole columns left out by priority, named in one note, when there is no room.

Two real 2-second pgbench runs; the listing is read as a user would (a subprocess, piped,
at COLUMNS=80, 100 and 200) and every kept column's header and value is checked against the
run's own manifest.json and summary.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgdyno.results.index import RunRow
from pgdyno.results.listing import COLUMNS, build_listing, cut, headline_text, short_names
from tests.conftest import make_shared_dir, run_cli_here

HEADERS = [c.header for c in COLUMNS]
NOTE = "note: left out to fit {width} columns: "


# ----- quick checks (no server) -------------------------------------------------------------

def test_short_names_are_directory_names_unless_two_share_one() -> None:
    ids = ["a--tpcb/tpcb-20261125T130844Z", "b--tpcb/tpcb-20261125T130844Z",
           "a--cpu/cpu-20261125T130900Z"]
    assert short_names(ids) == {ids[0]: ids[0], ids[1]: ids[1],
                                ids[2]: "cpu-20261125T130900Z"}


def test_cut_keeps_one_line_and_marks_the_cut() -> None:
    assert cut("scale 1", 24) == "scale 1"
    assert cut("fio on target /tmp/x: 32MiB", 10) == "fio on ta…"
    assert len(cut("x" * 50, 10)) == 10


def _row(run_id: str, **kw: object) -> RunRow:
    fields = {"context": run_id.split("/")[0], "workload": "tpcb", "status": "ok",
              "started_at": "2026-11-25T13:08:44Z", "ended_at": None, "config": "default",
              "clients": "2", "headline": 3061.2, "p99_ms": 9.49, "pg_version": "18.1",
              "headline_metric": "TPS", "headline_unit": "tx/s", "dataset": "scale 1"} | kw
    return RunRow(run_id=run_id, **fields)  # type: ignore[arg-type]


def test_headline_shows_a_short_metric_name_or_the_unit() -> None:
    assert headline_text(_row("c/r")) == "3,061 TPS"
    assert headline_text(_row("c/r", headline=1.184, headline_unit="s",
                              headline_metric="Geometric mean of query times")) == "1.18 s"
    assert headline_text(_row("c/r", headline=None)) == "–"


def test_a_long_text_cell_is_cut_to_its_cap_not_the_column_dropped() -> None:
    long = "fio on target /tmp/pgdyno-capacity-ukd5ffzv/mnt: 32MiB test file"
    listing = build_listing([_row("c--fio/fio-20261125T145611Z", dataset=long)], 200)
    assert listing.dropped == []
    cell = listing.rows[0][[c.header for c in listing.columns].index("dataset")]
    assert cell == long[:23] + "…"
    wide = build_listing([_row("c--fio/fio-20261125T145611Z", dataset=long)], None)
    assert long in wide.rows[0] and "c--fio/fio-20261125T145611Z" in wide.rows[0]


# ----- real runs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def results(workdir: Path) -> Path:
    """Two short pgbench runs in two contexts, 1 and 2 clients."""
    results = make_shared_dir("pgdyno-listing-")
    for clients, context in (("1", "listing-a--tpcb"), ("2", "listing-bb--tpcb")):
        out = run_cli_here(["bench", "tpcb", "--scale", "1", "--clients", clients,
                            "--duration", "2", "--warmup", "0", "--iterations", "1",
                            "--no-progress", "--no-telemetry", "--context", context,
                            "--results-dir", str(results)], workdir)
        assert out.returncode == 0, out.stderr
    return results


def _expected(results: Path) -> dict[str, dict[str, str]]:
    """Each run's cells, from its own manifest.json and summary.json (one iteration)."""
    runs = {}
    for manifest_path in sorted(results.glob("*/*/manifest.json")):
        run = manifest_path.parent
        manifest = json.loads(manifest_path.read_text())
        (it,) = json.loads((run / "summary.json").read_text())["iterations"]
        runs[run.name] = {
            "run": run.name, "context": run.parent.name, "status": manifest["status"],
            "config": manifest["config"]["name"], "dataset": "scale 1",
            "clients": str(it["clients"]), "headline": f"{it['metrics']['tps']:,.0f} TPS",
            "p99 ms": f"{it['metrics']['latency_p99_ms']:,.2f}",
            "PostgreSQL": manifest["server"]["version"]}
    assert len(runs) == 2
    return runs


@pytest.mark.server
@pytest.mark.parametrize("width", [80, 100, 200])
def test_runs_fits_the_width_and_names_what_it_left_out(results: Path, workdir: Path,
                                                        width: int) -> None:
    out = run_cli_here(["runs", "--results-dir", str(results)], workdir,
                       env={"COLUMNS": str(width)})  # stdout is not a terminal
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= width for line in lines), lines
    header, *body = lines
    kept = header.split()
    kept = [h for h in HEADERS if h in kept or (h == "p99 ms" and "p99" in kept)]
    assert kept[0] == "run" and len(body) == 2
    notes = [x for x in out.stderr.splitlines() if x.startswith(NOTE.format(width=width))]
    dropped = [h for h in HEADERS if h not in kept]
    if dropped:
        assert len(notes) == 1, out.stderr
        assert notes[0][len(NOTE.format(width=width)):].split("; ")[0] == ", ".join(dropped)
    else:
        assert notes == [], out.stderr
    expected = _expected(results)
    for line in body:
        cells = expected[line.split()[0]]
        for header in kept:
            assert cells[header] in line, (header, line)
    if width == 80:  # the run, its status and its headline come first
        assert {"run", "status", "headline"} <= set(kept) and dropped
    if width == 200:
        assert dropped == []


@pytest.mark.server
def test_wide_and_a_pipe_without_columns_show_full_ids_and_every_column(
        results: Path, workdir: Path) -> None:
    wide = run_cli_here(["runs", "--wide", "--results-dir", str(results)], workdir,
                        env={"COLUMNS": "80"})
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PGDYNO_WORKDIR"] = str(workdir)
    piped = subprocess.run([sys.executable, "-m", "pgdyno", "runs", "--results-dir",
                            str(results)], capture_output=True, text=True, env=env,
                           timeout=120)
    assert wide.returncode == piped.returncode == 0, wide.stderr + piped.stderr
    assert wide.stdout == piped.stdout and "note:" not in wide.stderr + piped.stderr
    expected = _expected(results)
    body = wide.stdout.splitlines()[1:]
    for line in body:
        run_id = line.split()[0]
        context, name = run_id.split("/")
        cells = expected[name]
        assert context == cells["context"]
        for header in HEADERS[2:]:
            assert cells[header] in line, (header, line)
    # A short name is what `pgdyno runs RUN` (and report, compare, note) take.
    name = next(iter(expected))
    one = run_cli_here(["runs", name, "--results-dir", str(results)], workdir)
    assert one.returncode == 0 and f"{expected[name]['context']}/{name}" in one.stdout
