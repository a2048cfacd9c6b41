"""A study's runs as files: one that cannot be read is named, never silently dropped, and
the journal finds its runs from any working directory.

The study here is the cheapest there is (conftest's ``tiny_study``: two one-second runs of
the CPU baseline, no server, run once per session); each test damages a copy of its results
directory (which also shows that a moved results directory still reads whole)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pgdyno.study.build import RunReader
from pgdyno.study.model import DAMAGED, LeftOutRun, StudyRecord
from tests.conftest import TINY_STUDY, run_cli_here


@pytest.fixture()
def results(tiny_study: Path, tmp_path: Path) -> Path:
    """A copy of the study's results directory, elsewhere: the test's own to damage."""
    copy = tmp_path / "moved" / "results"
    shutil.copytree(tiny_study / "results", copy)
    return copy


def _ends(results: Path) -> list[dict]:
    journal = results / "campaigns" / "tiny" / "journal.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    return [e for e in events if e["event"] == "run-end"]


def _run_dirs(results: Path) -> list[Path]:
    return [results / e["run_dir"] for e in _ends(results)]


def _rebuild(results: Path, elsewhere: Path):  # noqa: ANN202 - a CompletedProcess
    """`pgdyno report --campaign tiny` from a working directory that is not the study's."""
    elsewhere.mkdir(exist_ok=True)
    return run_cli_here(["report", "--campaign", "tiny", "--results-dir", str(results)],
                        elsewhere, cwd=elsewhere)


def _study(results: Path) -> tuple[StudyRecord, str]:
    folder = results / "campaigns" / "tiny" / "study"
    return StudyRecord.load(folder), (folder / "study.md").read_text()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}")[1].split("\n## ")[0]


def test_the_journal_names_runs_from_the_results_directory(results: Path,
                                                          tmp_path: Path) -> None:
    """Recorded relative to the results directory, so a rebuild from another working
    directory, of a results directory that has moved, finds every run."""
    recorded = [e["run_dir"] for e in _ends(results)]
    assert len(recorded) == 2
    assert all(not Path(r).is_absolute() and not r.startswith("results/") for r in recorded)
    out = _rebuild(results, tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    record, text = _study(results)
    assert [c.status for c in record.cells] == ["ok", "ok"]
    assert all(Path(c.run_dir).is_dir() for c in record.cells)
    assert record.left_out == [] and "missing" not in _section(text, "Runs")


def test_an_older_journal_relative_to_the_working_directory_is_found(
        results: Path, tmp_path: Path) -> None:
    """A journal written before runs were recorded relative to the results directory
    names them as `results/<context>/<run>`: still found under --results-dir."""
    journal = results / "campaigns" / "tiny" / "journal.jsonl"
    lines = []
    for line in journal.read_text().splitlines():
        event = json.loads(line)
        if event.get("run_dir"):
            event["run_dir"] = f"results/{event['run_dir']}"
        lines.append(json.dumps(event))
    journal.write_text("\n".join(lines) + "\n")
    out = _rebuild(results, tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    record, _ = _study(results)
    assert [c.status for c in record.cells] == ["ok", "ok"]


@pytest.mark.parametrize("name", ["summary.json", "manifest.json"])
def test_a_truncated_file_is_named_in_the_report_and_its_threats(
        results: Path, tmp_path: Path, name: str) -> None:
    damaged = _run_dirs(results)[0] / name
    damaged.write_bytes(damaged.read_bytes()[:200])
    out = _rebuild(results, tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    record, text = _study(results)
    first, second = record.cells
    assert (first.status, second.status) == (DAMAGED, "ok")
    assert str(damaged) in first.reason and "truncated" in first.reason
    assert record.left_out == [LeftOutRun(cell=first.key, workload="cpu",
                                          run_dir=str(damaged.parent), reason=first.reason)]
    threats = _section(text, "Threats to validity")
    assert f"the run {damaged.parent} (cell {first.key}) is left out" in threats
    assert f"{damaged}: cannot read the run" in threats and "truncated" in threats
    assert f"| {first.key} | {DAMAGED} |" in _section(text, "Runs")
    assert "cannot be read (r1:cpu:a): left out" in _section(text, "Executive summary")
    # the figures are the other run's alone
    assert [len(side.runs) for side in record.workload("cpu").sides] == [1]
    assert record.workload("cpu").sides[0].figures[0].n == 1


def test_a_run_without_its_summary_is_left_out_and_said_so(results: Path,
                                                          tmp_path: Path) -> None:
    gone = _run_dirs(results)[1] / "summary.json"
    gone.unlink()
    out = _rebuild(results, tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    record, text = _study(results)
    assert [c.status for c in record.cells] == ["ok", DAMAGED]
    assert record.left_out[0].reason.startswith(f"{gone}: missing")
    assert "pgdyno report RUN_DIR" in _section(text, "Threats to validity")


def test_the_campaign_command_reports_a_damaged_run_too(results: Path) -> None:
    """The study at the end of `pgdyno campaign FILE` (its cells already done) is built by
    the same code: the damaged run is named there as well."""
    damaged = _run_dirs(results)[1] / "summary.json"
    damaged.write_text('{"schema_version": 1, "iterations": [')
    spec = results.parent / "tiny.toml"
    spec.write_text(TINY_STUDY)
    out = run_cli_here(["campaign", str(spec), "--results-dir", str(results),
                        "--no-progress"], results.parent, cwd=results.parent)
    assert out.returncode == 0, out.stderr
    assert "ran 0, skipped 2 already done" in out.stdout
    record, text = _study(results)
    assert record.cells[1].status == DAMAGED
    assert str(damaged) in _section(text, "Threats to validity")


def test_journal_lines_that_are_not_events_are_passed_over(results: Path,
                                                          tmp_path: Path) -> None:
    journal = results / "campaigns" / "tiny" / "journal.jsonl"
    with journal.open("a") as fh:
        fh.write('[1, 2]\n"text"\n{"event": "run-end", "status": "ok"}\n')
    out = _rebuild(results, tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    assert [c.status for c in _study(results)[0].cells] == ["ok", "ok"]


def test_a_damaged_sweep_record_is_left_out_by_name(tmp_path: Path) -> None:
    sweep = tmp_path / "ctx" / "tprocc-sweep-1"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text('{"schema_version": 1, "steps": [')
    left_out: dict[str, LeftOutRun] = {}
    assert RunReader("tprocc", left_out).steps([("r1:tprocc:a", sweep)]) == {}
    (run,) = left_out.values()
    assert run.cell == "r1:tprocc:a" and run.run_dir == str(sweep)
    assert run.reason.startswith(f"{sweep / 'sweep.json'}: ") and "\n" not in run.reason
