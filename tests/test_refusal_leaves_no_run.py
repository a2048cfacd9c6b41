"""A check that fails before any work starts leaves no run.

Refused before the run directory (pre-flight) or only once the run has started but before
its first iteration (a workdir the server user cannot reach, a user's tables in the cluster
pgdyno runs), the refusal is one line, exit 2, and leaves no run directory and no index
row; a directory pgdyno did not make in this invocation, or one holding more than a run's
start writes, is never removed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.results.rundir import RunDirectory, RunPlan, write_json_atomic
from pgdyno.targets.osuser import running_as_root
from tests.conftest import run_cli_here

QUICK = ["bench", "tpcb", "--scale", "1", "--clients", "1", "--duration", "1",
         "--no-progress"]

needs_root = pytest.mark.skipif(
    not running_as_root(), reason="the server runs as this user: every directory it may "
    "write it reaches")


def _listed_runs(results: Path, work: Path) -> list[dict]:
    out = run_cli_here(["runs", "--results-dir", str(results), "--format", "json"], work)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


def _refused_leaving_nothing(out, results: Path, before: set[str], *words: str) -> None:
    """One line naming ``words``, exit 2, and ``results`` as it was (its index aside), with
    no run listed."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("pgdyno: error: ") and "run directory" not in line, line
    for word in words:
        assert word in line, (word, line)
    after = {str(p.relative_to(results)) for p in results.rglob("*")}
    assert after - {"index.sqlite"} == before, sorted(after - before)
    assert not list(results.rglob("manifest.json"))


def _results_with_a_context(tmp_path: Path) -> tuple[Path, set[str]]:
    """A results directory whose context ``mine`` exists already, with a file of the
    user's in it: both must outlive the refusal."""
    results = tmp_path / "results"
    (results / "mine").mkdir(parents=True)
    (results / "mine" / "notes.txt").write_text("the user's\n")
    return results, {"mine", "mine/notes.txt"}


@needs_root
def test_an_archive_dir_out_of_the_server_users_reach_leaves_no_run(tmp_path: Path) -> None:
    """The issue's example: refused by the pre-flight, before the run directory."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    results, before = _results_with_a_context(tmp_path)
    out = run_cli_here([*QUICK, "--archive", "buffered", "--archive-dir",
                        str(private / "archive"), "--context", "mine", "--results-dir",
                        str(results)], tmp_path / "work")
    _refused_leaving_nothing(out, results, before, f"--archive-dir {private / 'archive'}",
                             "cannot traverse", str(private))
    assert list(private.iterdir()) == []
    assert _listed_runs(results, tmp_path / "work") == []


@needs_root
def test_a_workdir_out_of_the_server_users_reach_leaves_no_run(tmp_path: Path) -> None:
    """Seen only once the run has started (the target makes its directories): before, a
    `failed` run was left with the line; now its directory and index row are removed, and
    the context directory it made for it too, while the one that was there stays."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    results, before = _results_with_a_context(tmp_path)
    for context in ("mine", "new-context"):
        out = run_cli_here([*QUICK, "--context", context, "--results-dir", str(results)],
                           private / "work")
        _refused_leaving_nothing(out, results, before, f"--workdir {private / 'work'}",
                                 "cannot traverse", str(private))
    assert _listed_runs(results, tmp_path / "work") == []
    reindex = run_cli_here(["runs", "--reindex", "--results-dir", str(results)],
                           tmp_path / "work")
    assert reindex.returncode == 0, reindex.stderr
    assert _listed_runs(results, tmp_path / "work") == []


# ----- RunDirectory.discard: only what this invocation made, only when it holds nothing else

def _started(results: Path, context: str = "ctx") -> RunDirectory:
    run_dir = RunDirectory.create(results, context, "tpcb")
    run_dir.save_plan(RunPlan(schema_version=1, workload="tpcb", context=context))
    write_json_atomic(run_dir.path / "manifest.json", {"status": "failed"})
    return run_dir


def test_discard_removes_a_started_run_and_the_directories_made_for_it(tmp_path: Path) -> None:
    results = tmp_path / "a" / "results"
    run_dir = _started(results)
    (run_dir.raw / "pgbench").mkdir()  # made empty by a workload's start: nothing in it
    assert run_dir.made == (results / "ctx", results, tmp_path / "a")
    assert run_dir.discard()
    assert list(tmp_path.iterdir()) == []


def test_discard_keeps_directories_it_did_not_make(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "ctx").mkdir(parents=True)
    first = _started(results)
    second = _started(results)  # the same second: "-2"
    assert second.made == () and second.path.name.endswith("-2")
    assert second.discard()
    assert sorted(p.name for p in (results / "ctx").iterdir()) == [first.path.name]
    assert first.discard()
    assert (results / "ctx").is_dir()  # there before: kept, empty


@pytest.mark.parametrize("extra", ["raw/scripts/mine.sql", "report.md", "raw/pgbench/x",
                                   ".manifest.json.abc.tmp"])
def test_discard_keeps_a_run_directory_holding_anything_else(tmp_path: Path,
                                                             extra: str) -> None:
    run_dir = _started(tmp_path / "results")
    (run_dir.path / extra).parent.mkdir(parents=True, exist_ok=True)
    (run_dir.path / extra).write_text("x")
    held = sorted(str(p.relative_to(run_dir.path)) for p in run_dir.path.rglob("*"))
    assert not run_dir.discard()
    assert sorted(str(p.relative_to(run_dir.path)) for p in run_dir.path.rglob("*")) == held
