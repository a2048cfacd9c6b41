"""examples/upgrade.toml at its quick size: PostgreSQL 15 (Debian's postgresql-15) against the
embedded 18, each on its own cluster with its own dataset, and the version report.

The study runs as a user runs it (``pgdyno campaign FILE --size quick``), with the example's
configs, study and quick size as they are and two of its microbenchmarks (the whole battery
takes minutes at any size: the suite's budget allows two). The test checks every section of
the report, that each side is named by the PostgreSQL its programs are (``postgres
--version`` run here), and recomputes from the runs' summary.json files the relative
matrix (each workload's TPS under 18 over 15's), the server's CPU per transaction and the
p99 of each build, and checks the conclusions' words against their intervals.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_shared_dir, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "upgrade.toml"
PG15 = Path("/usr/lib/postgresql/15/bin")
WORKLOADS = ["oltp-point-select", "oltp-write-only"]

pytestmark = pytest.mark.server


def _version(bin_dir: Path) -> str:
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"\(PostgreSQL\) (\d+\.\d+)", out).group(1)


@pytest.fixture(scope="module")
def study() -> dict:
    if not (PG15 / "postgres").is_file():
        pytest.skip("PostgreSQL 15 is not installed (setup.sh installs postgresql-15)")
    root = make_shared_dir("pgdyno-upgrade-")
    text = re.sub(r"workloads = \[.*?\]", f"workloads = {json.dumps(WORKLOADS)}",
                  EXAMPLE.read_text(), count=1, flags=re.DOTALL)
    (root / "upgrade.toml").write_text(text)
    out = run_cli(["campaign", str(root / "upgrade.toml"), "--size", "quick", "--results-dir",
                   str(root / "results"), "--no-progress"], root / "work", timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    folder = root / "results" / "campaigns" / "upgrade--quick"
    from pgdyno.targets.binaries import embedded_install

    yield {"folder": folder, "md": (folder / "study" / "study.md").read_text(),
           "html": (folder / "study" / "study.html").read_text(),
           "record": json.loads((folder / "study" / "study.json").read_text()),
           "v15": _version(PG15), "v18": _version(embedded_install().bin_dir)}
    shutil.rmtree(root, ignore_errors=True)


def _sections(md: str) -> dict[str, str]:
    """Heading -> its text, for every ## and ### heading."""
    parts = re.split(r"^#{2,3} (.+)$", md, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _runs(folder: Path) -> dict[tuple[str, str], list[Path]]:
    """(workload, config) -> its cells' run directories, from the journal."""
    out: dict[tuple[str, str], list[Path]] = {}
    for line in (folder / "journal.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "run-end" and event.get("status") == "ok":
            _, workload, label = event["cell"].split(":")
            path = folder.parents[1] / event["run_dir"]
            out.setdefault((workload, label), [])
            if path not in out[(workload, label)]:
                out[(workload, label)].append(path)
    return out


def _iterations(paths: list[Path], left_out: set[int] = frozenset()) -> list[dict]:
    return [it for p in paths for it in json.loads((p / "summary.json").read_text())[
        "iterations"] if it["status"] == "ok" and it["iteration"] not in left_out]


def _left_out(folder: Path, workload: str) -> set[int]:
    """A block comparison's pilot and check pairs (blocks.json): not in its rows."""
    path = folder / f"blocks-{workload}" / "blocks.json"
    if not path.is_file():
        return set()
    return {b["iteration"] for b in json.loads(path.read_text())["blocks"]
            if b.get("check") or b.get("pilot")}


def _ratio(a: list[dict], b: list[dict], method: str) -> float:
    """The change's estimate, recomputed: paired designs pair iteration i of each side
    (Hodges-Lehmann: the median of the Walsh averages of the log ratios; its fallback the
    mean log ratio), whole runs compare the means."""
    if not method.startswith("paired"):
        return statistics.fmean(it["metrics"]["tps"] for it in b) / statistics.fmean(
            it["metrics"]["tps"] for it in a)
    by_a = {it["iteration"]: it["metrics"]["tps"] for it in a}
    d = [math.log(it["metrics"]["tps"] / by_a[it["iteration"]]) for it in b]
    if method == "paired-hl":
        walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
        return math.exp(statistics.median(walsh))
    return math.exp(statistics.fmean(d))


def test_every_section_is_there(study: dict) -> None:
    headings = list(_sections(study["md"]))
    for title in ("Question", "Executive summary", "At a glance",
                  "PostgreSQL versions and builds", "Throughput relative to the base",
                  "Server CPU per transaction", "p99 latency per build",
                  "Conclusions by build", "Charts", "Settings: baseline and candidate",
                  "Stock settings that differ between the builds", "Conclusions",
                  "Threats to validity", "Runs"):
        assert title in headings, title
    for workload in WORKLOADS:
        assert any(h.startswith(f"{workload}:") for h in headings), workload
    # The builds' order: versions right after the glance table.
    assert headings.index("PostgreSQL versions and builds") == \
        headings.index("At a glance") + 1
    # The heat map is drawn and embedded in the page.
    assert (study["folder"] / "study" / "plots" / "versions_heat_map.png").is_file()
    assert "Relative throughput, coloured by verdict" in study["html"]
    assert re.search(r'<img[^>]+src="data:image/png;base64,', study["html"])


def test_each_side_is_named_by_the_postgresql_it_ran(study: dict) -> None:
    sections = _sections(study["md"])
    pg15, pg18 = f"pg15 (PostgreSQL {study['v15']})", f"pg18 (PostgreSQL {study['v18']})"
    question = sections["Question"]
    assert f"Baseline: {pg15}; candidate: {pg18}." in question
    assert f"programs in {PG15}" in question and "package postgresql-15" in question
    assert "the embedded PostgreSQL" in question
    glance_header = sections["At a glance"].splitlines()[2]
    assert f"| {pg15} | {pg18} |" in glance_header
    settings = sections["Settings: baseline and candidate"]
    assert f"| {pg15} | {pg18} |" in settings and f"programs in {PG15}" in settings
    servers = {s["label"]: s for s in study["record"]["versions"]["servers"]}
    assert servers["pg15"]["version"].startswith(study["v15"])
    assert servers["pg18"]["version"].startswith(study["v18"])


def test_each_build_ran_its_own_cluster_and_dataset(study: dict) -> None:
    runs = _runs(study["folder"])
    for workload in WORKLOADS:
        manifests = {label: json.loads((runs[(workload, label)][0] / "manifest.json")
                                       .read_text()) for label in ("pg15", "pg18")}
        assert manifests["pg15"]["server"]["version_num"] // 10000 == 15
        assert manifests["pg18"]["server"]["version_num"] // 10000 == 18
        assert (manifests["pg15"]["server"]["data_directory"]
                != manifests["pg18"]["server"]["data_directory"])
        assert manifests["pg15"]["target"]["pg_bin"] == str(PG15)
        for m in manifests.values():
            assert m["dataset"]["tables"] == 1 and m["dataset"]["table_size"] == 1000


def test_stock_settings_are_each_builds_own(study: dict) -> None:
    """Settings 17 and 18 brought in are listed as absent from 15, and one whose default
    changed shows both defaults, as each server recorded them."""
    stock = _sections(study["md"])["Stock settings that differ between the builds"]
    assert re.search(r"^\| allow_alter_system \| — \| on \|$", stock, re.MULTILINE)
    runs = _runs(study["folder"])
    defaults = {label: json.loads((runs[(WORKLOADS[0], label)][0] / "manifest.json")
                                  .read_text())["server"]["defaults"]
                for label in ("pg15", "pg18")}
    eic = (defaults["pg15"]["effective_io_concurrency"],
           defaults["pg18"]["effective_io_concurrency"])
    assert eic[0] != eic[1]
    assert f"| effective_io_concurrency | {eic[0]} | {eic[1]} |" in stock


def test_the_matrix_recomputed_from_the_runs_summaries(study: dict) -> None:
    runs = _runs(study["folder"])
    versions = study["record"]["versions"]
    cells = {c["workload"]: c for c in versions["cells"] if c["label"] == "pg18"}
    figures = {(f["workload"], f["label"]): f for f in versions["figures"]}
    matrix = _sections(study["md"])["Throughput relative to the base"]
    cpu_table = _sections(study["md"])["Server CPU per transaction"]
    for workload in WORKLOADS:
        left_out = _left_out(study["folder"], workload)
        its = {label: _iterations(runs[(workload, label)], left_out)
               for label in ("pg15", "pg18")}
        cell = cells[workload]
        ratio = _ratio(its["pg15"], its["pg18"], cell["method"])
        assert cell["ratio"] == pytest.approx(ratio, rel=1e-9)
        base = statistics.fmean(it["metrics"]["tps"] for it in its["pg15"])
        # Shown whole from 100 TPS, with the decimals a smaller figure earns below (a
        # loaded host brings oltp-write-only under 100).
        shown = f"{base:,.0f}" if base >= 100 else f"{base:.1f}" if base >= 10 else \
            f"{base:.2f}"
        assert re.search(rf"^\| {workload} \| {shown} \| . {ratio:.2f}× ", matrix,
                         re.MULTILINE), (workload, shown, matrix)
        for label in ("pg15", "pg18"):
            its_ = its[label]
            cpu = [1e6 * it["telemetry"]["contamination"]["server_cores"] / it["tps_mean"]
                   for it in its_ if it["telemetry"]["contamination"]["server_cores"]]
            assert cpu, f"{workload} {label}: no CPU was attributed to the server"
            fig = figures[(workload, label)]
            assert fig["server_cpu_us_per_tx"] == pytest.approx(statistics.fmean(cpu))
            assert fig["latency_p99_ms"] == pytest.approx(statistics.fmean(
                it["metrics"]["latency_p99_ms"] for it in its_))
        row = next(line for line in cpu_table.splitlines() if line.startswith(f"| {workload} "))
        assert f"{figures[(workload, 'pg15')]['server_cpu_us_per_tx']:,.1f}" in row


def test_the_conclusions_follow_the_intervals(study: dict) -> None:
    versions = study["record"]["versions"]
    lines = _sections(study["md"])["Conclusions by build"]
    for cell in versions["cells"]:
        low, high = cell["ratio_low"], cell["ratio_high"]
        assert low <= high
        expected = ("faster" if low > 1 else "slower" if high < 1
                    else "no significant difference")
        assert cell["verdict"] == expected
        if expected == "no significant difference":
            assert f"{cell['workload']}: no significant difference between pg18" in lines
        else:
            assert f"is {expected} than pg15 (PostgreSQL {study['v15']}) on " \
                   f"{cell['workload']} by {100 * (cell['ratio'] - 1):+.1f}%" in lines
