"""Studies: every example study at its quick size, its report's sections, its
conclusions recomputed from the runs' own summaries, and a failed and a contaminated cell.
An interrupted study resumed into a whole report: tests/test_campaign_resume.py, whose
interrupted campaign is a study."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from pgdyno.campaign.spec import load_spec
from pgdyno.errors import UsageError
from pgdyno.study.model import StudyRecord
from pgdyno.study.report import SECTION_TITLES
from pgdyno.study.spec import study_of
from tests.chromium import assert_fits
from tests.conftest import make_shared_dir, run_cli, run_cli_here
from tests.test_compare_design import _by_hand, _hl_by_hand

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STUDIES = ["drive-qualification", "storage-pgbench", "instance-report", "wal-archiving",
           "small-instance"]


def _record(results: Path, name: str, size: str | None = "quick") -> tuple[StudyRecord, Path]:
    folder = results / "campaigns" / (name if size is None else f"{name}--{size}") / "study"
    return StudyRecord.load(folder), folder


# ----- the file --------------------------------------------------------------------------------

def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


BASE = """
[campaign]
name = "s"
workloads = ["tpcb", "cpu"]
[bench]
duration = 2
[bench.cpu]
clients = 1
[[config]]
label = "a"
[[config]]
label = "b"
set = ["work_mem=8MB"]
"""


def test_a_workload_without_a_server_runs_once_per_repetition(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, BASE))
    keys = [c.key for c in spec.cells()]
    assert keys == ["r1:tpcb:a", "r1:tpcb:b", "r1:cpu:a"]
    assert spec.options_for(spec.cells()[2]).clients == (1,)  # [bench.cpu] clients
    assert spec.options_for(spec.cells()[0]).clients == (8,)


@pytest.mark.parametrize(("extra", "words"), [
    ('[study]\nquestion = "q"\nbaseline = "zz"', "baseline = 'zz' is not a [[config]] label"),
    ('[study]\nquestion = ""', "question"),
    ('[study]\nquestion = "q"\nsections = ["nope"]', "sections"),
    ('[study]\nquestion = "q"\ncolour = 1', "colour unknown"),
    ('[study]\nquestion = "q"\ncandidate = "a"', "is the baseline"),
])
def test_bad_study_tables_are_one_line(tmp_path: Path, extra: str, words: str) -> None:
    spec = load_spec(_write(tmp_path, BASE + extra))
    with pytest.raises(UsageError, match=words.replace("[", r"\[").replace("]", r"\]")) as exc:
        study_of(spec)
    assert "\n" not in str(exc.value)


def test_an_unknown_size_names_the_ones_there(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no \\[size.huge\\] table; accepted: quick"):
        load_spec(_write(tmp_path, BASE + "[size.quick]\nrepeat = 1\n"), size="huge")
    spec = load_spec(_write(tmp_path, BASE + "[size.quick]\nrepeat = 3\n[size.quick.bench]\n"
                                             "duration = 1\n"), size="quick")
    assert spec.repeat == 3 and spec.bench["duration"] == 1
    assert spec.journal_dir.name == "s--quick"


@pytest.mark.parametrize("name", STUDIES)
def test_every_example_parses_at_both_sizes(name: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGDYNO_WORKDIR", str(tmp_path))  # fio makes a missing workdir
    for size in (None, "quick"):
        spec = load_spec(EXAMPLES / f"{name}.toml", Path("results"), size)
        study = study_of(spec)
        assert study is not None and study.question.endswith("?")


def test_the_layout_cli_option_reaches_the_cli(tmp_path: Path) -> None:
    out = run_cli_here(["campaign", "--help"], tmp_path, env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "--size" in out.stdout


# ----- the examples at their quick size ---------------------------------------------------

class _QuickStudies(dict):
    """Each example run once at --size quick, on first use: (results directory, wall
    seconds). Lazy, so that ``-k instance`` runs only the study it needs."""

    def __missing__(self, name: str) -> tuple[Path, float]:
        root = make_shared_dir(f"pgdyno-study-{name}-")
        # wal-archiving's archive directories are made by the server user: a shared root.
        workdir = make_shared_dir("pgdyno-study-") if name == "wal-archiving" else root / "wd"
        workdir.mkdir(exist_ok=True)
        workdir.chmod(0o755)
        started = time.monotonic()
        proc = run_cli(["campaign", str(EXAMPLES / f"{name}.toml"), "--size", "quick",
                        "--results-dir", str(root / "results"), "--no-progress"], workdir,
                       timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "study: " in proc.stdout
        self[name] = (root / "results", time.monotonic() - started)
        return self[name]


@pytest.fixture(scope="module")
def quick_studies() -> dict[str, tuple[Path, float]]:
    return _QuickStudies()


@pytest.mark.server
@pytest.mark.parametrize("name", STUDIES)
def test_example_study_report_has_every_section(quick_studies, name: str) -> None:
    results, seconds = quick_studies[name]
    assert seconds < 180, f"{name} took {seconds:.0f} s at --size quick"
    record, folder = _record(results, name)
    text = (folder / "study.md").read_text()
    html = (folder / "study.html").read_text()
    assert text.startswith(f"# pgdyno study: {record.title}")
    assert f"**{record.question}**" in text
    # the host of the runs (a sweep cell's: of its steps' runs), not "no run finished"
    assert f"Hardware: {os.cpu_count()} vCPU (" in text
    positions = [text.index(f"## {SECTION_TITLES[s]}") for s in record.sections
                 if s in SECTION_TITLES]
    assert positions == sorted(positions)
    assert {"summary", "glance", "charts", "workloads", "settings", "conclusions",
            "threats"} <= set(record.sections)
    if "context" in record.sections:  # the context: matrix, sizing math, journal and limits
        for title in ("Configuration matrix", "Sizing math", "Benchmark journal",
                      "Hardware limits"):
            assert re.search(rf"^### .+: \d+\. {title}$", text, re.MULTILINE), title
    for result in record.workloads:
        if result.steps:  # a sweep: the verdict at every size both sides measured
            assert len(result.steps) >= 2 and result.sweep_compare_dir
            assert (folder / result.sweep_compare_dir / "compare.md").is_file()
    for result in record.workloads:
        assert f'<a id="{result.anchor}"></a>' in text and f'id="{result.anchor}"' in html
    assert (folder / "plots" / "headline_bars.png").stat().st_size > 0
    assert 'src="data:image/png;base64,' in html  # self-contained
    summary = text.split("## Executive summary")[1].split("\n## ")[0]
    sentences = [line for line in summary.splitlines() if line.startswith("- ")]
    assert 1 <= len(sentences) <= 7
    assert all("](#" in line for line in sentences)  # each links to its section
    assert all(c.status == "ok" for c in record.cells), record.cells
    _check_designs(record, text, name)
    if name in ("drive-qualification", "instance-report"):  # the widest: fio, context
        assert_fits(folder / "study.html")  # headless Chromium: no table over 1280 px


BLOCK_STUDIES = {"drive-qualification": 3, "wal-archiving": 3}
"""The examples whose two sides run as block comparisons at the quick size: their pairs."""


def _check_designs(record: StudyRecord, text: str, name: str) -> None:
    """Each compared workload (each sweep step) says how it was measured: in blocks with
    both servers up for the examples that ask for it, with as many blocks a side as pairs
    (one run a side); else in whole runs with the reason the journal gave."""
    compared = [r for r in record.workloads if r.comparison is not None]
    assert compared or len({c.key.split(":")[2] for c in record.cells}) == 1
    for result in compared:
        cmps = [result.comparison] + [step.comparison for step in result.steps]
        for cmp in cmps:
            design = cmp.design
            if name not in BLOCK_STUDIES:
                assert design is None or design.blocks is None
                continue
            assert design is not None and design.design == "interleaved", design
            assert design.pairs == BLOCK_STUDIES[name] and design.blocks.stop == "pairs done"
            assert len(cmp.baseline_runs) == len(cmp.candidate_runs) == 1
            for run in (*cmp.baseline_runs, *cmp.candidate_runs):
                summary = json.loads((Path(run) / "summary.json").read_text())
                assert len(summary["iterations"]) == design.pairs
        if name in BLOCK_STUDIES:
            assert "Measured with both servers up at once" in text
    if name == "instance-report":  # a cold cache: whole runs, and the reason why
        assert "Measured in whole runs, one side after the other (auto: --cache cold" in text


def _iteration_values(run_dirs: list[str], metric: str, clients: int) -> list[float]:
    """Per-iteration values of ``metric`` read straight from the runs' summary.json."""
    values = []
    for run in run_dirs:
        summary = json.loads((Path(run) / "summary.json").read_text())
        values += [it["metrics"][metric] for it in summary["iterations"]
                   if it["status"] == "ok" and it["clients"] == clients
                   and metric in it["metrics"]]
    return values


@pytest.mark.server
@pytest.mark.parametrize("name", ["drive-qualification", "instance-report"])
def test_conclusions_recomputed_from_the_runs(quick_studies, name: str) -> None:
    """Each compared headline: its means are the runs' own per-iteration values, its change
    is their ratio of geometric means, and its words agree with its interval."""
    results, _ = quick_studies[name]
    record, folder = _record(results, name)
    text = (folder / "study.md").read_text()
    checked = 0
    for f in record.findings:
        if f.kind not in ("change", "no_difference", "undetermined"):
            continue
        result = record.workload(f.workload)
        a, b = result.sides
        metric, clients = result.headline, int(f.values["clients"])
        xs = _iteration_values(a.runs, metric, clients)
        ys = _iteration_values(b.runs, metric, clients)
        assert f.values["baseline"] == pytest.approx(statistics.fmean(xs), rel=1e-9)
        assert f.values["candidate"] == pytest.approx(statistics.fmean(ys), rel=1e-9)
        design = result.comparison.design if result.comparison else None
        if "ci_low_pct" in f.values and design is not None and design.blocks is not None:
            # Pairs of blocks: iteration i of each side's run is pair i, compared as a
            # paired difference of logs (signed-rank, or the marked fallback).
            row = next(m for m in result.comparison.metrics if m.metric == metric
                       and m.clients == clients)
            by_hand = _hl_by_hand if row.method == "paired-hl" else _by_hand
            change, low, high = by_hand(xs, ys, design.level)
            assert f.values["change_pct"] == pytest.approx(change, abs=1e-6)
            assert (f.values["ci_low_pct"], f.values["ci_high_pct"]) == pytest.approx(
                (low, high), abs=1e-6)
        elif "ci_low_pct" in f.values:
            geo = math.exp(statistics.fmean(map(math.log, ys))
                           - statistics.fmean(map(math.log, xs)))
            assert f.values["change_pct"] == pytest.approx(100 * (geo - 1), abs=1e-6)
        if "ci_low_pct" in f.values:
            low, high = f.values["ci_low_pct"], f.values["ci_high_pct"]
            assert low <= f.values["change_pct"] <= high
            if low > 0 or high < 0:
                assert f.kind == "change"
            else:
                assert f.kind == "no_difference"
        else:
            assert f.kind == "undetermined"
        assert f"{f.values['baseline']:,.0f}" in text or f"{f.values['baseline']:.3g}" in text
        checked += 1
    assert checked >= 1


@pytest.mark.server
def test_report_rebuilt_from_files_alone(quick_studies) -> None:
    results, _ = quick_studies["storage-pgbench"]
    record, folder = _record(results, "storage-pgbench")
    before = (folder / "study.md").read_text()
    (folder / "study.md").unlink()
    (folder / "study.json").unlink()
    proc = run_cli(["report", "--campaign", "storage-pgbench", "--size", "quick",
                    "--results-dir", str(results)], make_shared_dir("pgdyno-wd-"))
    assert proc.returncode == 0, proc.stderr
    assert (folder / "study.md").read_text() == before
    again = StudyRecord.load(folder)
    assert [f.values for f in again.findings] == [f.values for f in record.findings]
    assert any(f.kind == "peak" for f in record.findings)  # scaling over client counts


# ----- failure cases ------------------------------------------------------------------------------

FAILING = """
[campaign]
name = "failing"
workloads = ["tpcb"]
clients = [1]
repeat = 1              # one cell a config: one fails, one is contaminated
[bench]
scale = 1
duration = 2
warmup = 0
iterations = 2
[[config]]
label = "stock"
[[config]]
label = "broken"
set = ["shared_buffers=64GB"]
[study]
question = "What happens to a study with a failed and a contaminated cell?"
design = "sequential"   # cell by cell: a block comparison fails both sides with one
"""


@pytest.mark.server
def test_failed_and_contaminated_cells_are_threats(tmp_path: Path) -> None:
    root = make_shared_dir("pgdyno-study-fail-")
    campaign = root / "failing.toml"
    campaign.write_text(FAILING)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(2)]
    try:
        proc = run_cli(["campaign", str(campaign), "--results-dir", str(root / "results"),
                        "--no-progress"], root, timeout=300)
    finally:
        for b in burners:
            b.kill()
    assert proc.returncode == 0, proc.stderr
    record, folder = _record(root / "results", "failing", None)
    failed = [c.key for c in record.cells if c.status == "failed"]
    assert failed and all(":broken" in key for key in failed)
    kinds = {t.kind for t in record.threats}
    assert "failed_cell" in kinds and "contaminated" in kinds
    text = (folder / "study.md").read_text()
    summary = text.split("## Executive summary")[1].split("\n## ")[0]
    assert "did not finish ok" in summary
    threats = text.split("## Threats to validity")[1].split("\n## ")[0]
    assert "failed" in threats and "other load on the host" in threats


@pytest.mark.server
def test_the_status_line_is_measured_against_the_sizing_target(quick_studies) -> None:
    """The status line: warm TPS over vCPUs × the file's TPS per core, VALIDATED in the band."""
    results, _ = quick_studies["instance-report"]
    record, folder = _record(results, "instance-report")
    v = record.validation
    assert v is not None and v.per_core == 1200 and (v.band_low, v.band_high) == (0.7, 1.1)
    side = record.workload("tpcb").side("tuned-warm")
    measured = statistics.fmean(_iteration_values(side.runs, "tps", side.clients))
    vcpus = json.loads((Path(side.runs[0]) / "manifest.json").read_text())["host"]["cpu_count"]
    ratio = measured / (vcpus * 1200)
    assert v.measured == pytest.approx(measured) and v.ratio == pytest.approx(ratio)
    expected = ("VALIDATED" if 0.7 <= ratio <= 1.1 else
                "BELOW TARGET" if ratio < 0.7 else "ABOVE TARGET")
    assert v.status == expected
    question = (folder / "study.md").read_text().split("## Executive summary")[0]
    assert f"Status: **{expected}**" in question and f"{100 * ratio:.0f}% of" in question


@pytest.mark.server
def test_the_provisioning_plan_is_the_hosts_own(quick_studies) -> None:
    """The tuned config's provisioning plan, read before the first cell. Each
    sysctl step's "now" is what the kernel holds (read here from /proc/sys), its planned
    value the config engine's, and the report tables every step it would change."""
    results, _ = quick_studies["instance-report"]
    record, folder = _record(results, "instance-report")
    # Both configs are "tuned" (they differ in the cache only): one plan, both labels.
    assert [(p.label, p.config) for p in record.provision] == [("tuned-warm, tuned-cold",
                                                                "tuned")]
    plan = record.provision[0].plan
    assert plan is not None
    saved = json.loads((folder.parent / "provision" / "plan-tuned-warm.json").read_text())
    assert len(saved["plan"]["steps"]) == len(plan.steps)
    first_run = json.loads((Path(record.cells[0].run_dir) / "manifest.json").read_text())
    assert datetime.fromisoformat(plan.created) <= datetime.fromisoformat(
        first_run["started_at"])  # read before the first cell
    sysctls = [s for s in plan.steps if s.kind == "sysctl" and s.status != "skipped"]
    assert sysctls, "the tuned config plans kernel settings"
    for step in sysctls:
        live = " ".join(Path("/proc/sys", *step.target.split(".")).read_text().split())
        assert " ".join(step.current.split()) == live, step.target
        assert step.status == ("at target" if live == " ".join(step.value.split())
                               else "change"), step.target
    text = (folder / "study.md").read_text()
    section = text.split("Provisioning plan: config tuned (tuned-warm, tuned-cold)")[1]
    section = section.split("\n## ")[0]
    changes = [s for s in plan.steps if s.status == "change"]
    assert f"{len(changes)} to change" in section
    for step in changes:
        assert f"| {step.target} |" in section, step.target


@pytest.mark.server
def test_smart_phases_say_why_a_virtual_disk_has_none(quick_studies) -> None:
    """The SMART table: this VM's disk has no SMART log, so the study says why, with
    the reason the runs' own telemetry recorded, and tables no figure."""
    results, _ = quick_studies["drive-qualification"]
    record, folder = _record(results, "drive-qualification")
    reasons = set()
    for result in record.workloads:
        for side in result.sides:
            for run in side.runs:
                summary = json.loads((Path(run) / "summary.json").read_text())
                for it in summary["iterations"]:
                    for change in (it.get("telemetry") or {}).get("smart") or []:
                        assert not change["available"]
                        reasons.add(change["reason"])
    assert reasons and record.smart_phases == []
    assert record.smart_note == "; ".join(sorted(reasons))
    text = (folder / "study.md").read_text()
    assert f"SMART: not available ({record.smart_note})." in text
    assert "## Drive health across the study (SMART)" in text


def test_smart_phases_before_the_study_and_after_each_workload() -> None:
    """Phases from SMART changes in time order: absolute temperature, wear and
    errors at each phase's reading, traffic and throttling summed from the first reading."""
    from pgdyno.analysis.telemetry.model import SmartChange
    from pgdyno.study.build import smart_phases

    def change(t0: float, t1: float, written: float, used: float, throttle: int = 0,
               device: str = "nvme0n1") -> SmartChange:
        return SmartChange(device=device, available=True, reason="", temperature_before_c=t0,
                           temperature_after_c=t1, written_bytes=written, read_bytes=written / 2,
                           percent_used_before=used, percent_used_after=used,
                           media_errors_before=0, media_errors_after=0,
                           throttle_events=throttle)

    readings = [(1.0, "fio", change(35, 41, 100e9, 12)),
                (2.0, "fio", change(36, 37, 1e9, 12, device="sda")),  # another device
                (3.0, "tprocc", change(38, 44, 200e9, 12, throttle=1)),
                (4.0, "tproch", change(40, 39, 50e9, 13)),
                (5.0, "tprocc", change(37, 40, 300e9, 13))]
    phases, note = smart_phases(readings)
    assert note == ""
    assert [p.label for p in phases] == ["before fio", "after fio", "after tproch",
                                         "after tprocc"]
    assert {p.device for p in phases} == {"nvme0n1"}
    before, fio, tproch, tprocc = phases
    assert (before.temperature_c, before.written_bytes, before.percent_used) == (35, 0, 12)
    assert (fio.temperature_c, fio.written_bytes, fio.peak_temperature_c) == (41, 100e9, 41)
    assert (tproch.temperature_c, tproch.written_bytes, tproch.percent_used) == (39, 350e9, 13)
    assert tproch.peak_temperature_c == 44 and tproch.throttle_events == 1
    assert (tprocc.written_bytes, tprocc.read_bytes) == (650e9, 325e9)
    unavailable = SmartChange(device="vda", available=False, reason="no SMART log")
    assert smart_phases([(1.0, "fio", unavailable)]) == ([], "no SMART log")
    assert smart_phases([]) == ([], "no SMART reading was taken")


@pytest.mark.server
def test_cache_states_are_the_validation_runs_timeline(quick_studies) -> None:
    """The cache states: cold, warming, warm and after-CHECKPOINT states: one run of the baseline
    after the cells, each state's TPS recomputed here from its iterations' 1 s timeline in
    summary.json, and tabled in the study's context section."""
    results, _ = quick_studies["instance-report"]
    record, folder = _record(results, "instance-report")
    marker = json.loads((folder.parent / "cache-states.json").read_text())
    assert marker["config"] == "tuned-warm" and marker["workload"] == "tpcb"
    run = Path(marker["run_dir"])
    summary = json.loads((run / "summary.json").read_text())
    its = sorted(summary["iterations"], key=lambda it: it["iteration"])
    assert len(its) == 3
    warm_up = round(its[2]["warmup_s"])

    def tps(it: dict, first: int, last: int) -> float:
        points = [p for p in it["timeline"] if first <= p["t_s"] < last]
        return sum(p["tps"] for p in points) / len(points)

    end = [round(it["warmup_s"]) + it["duration_s"] for it in its]
    expected = {"cold": tps(its[0], 0, end[0]), "warming": tps(its[1], 0, end[1]),
                "warm": tps(its[2], warm_up, end[2]),
                "after CHECKPOINT": tps(its[2], 0, warm_up)}
    text = (folder / "study.md").read_text()
    table = text.split("5. Validation runs")[1].split("\n### ")[0]
    for state, value in expected.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {state} |"))
        cell = row.split("|")[2].strip().replace(",", "")
        decimals = len(cell.partition(".")[2])  # the table rounds: half its last digit
        assert float(cell) == pytest.approx(value, abs=0.5 * 10 ** -decimals + 1e-9)
    # Made once: a rebuild reads it, and the validation run is not a study cell.
    assert str(run) not in {c.run_dir for c in record.cells}
