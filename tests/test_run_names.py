"""Every command that takes a run accepts what `pgdyno runs` prints."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli_here as run_cli


def test_report_and_note_take_the_id_runs_prints(tmp_path: Path) -> None:
    results = tmp_path / "results"
    out = run_cli(["bench", "cpu", "--clients", "1", "--duration", "1", "--warmup", "0",
                   "--iterations", "1", "--no-telemetry", "--results-dir", str(results),
                   "--no-progress"], tmp_path)
    assert out.returncode == 0, out.stderr
    run_dir = next(results.glob("*--cpu/cpu-*"))
    listing = run_cli(["runs", "--results-dir", str(results)], tmp_path, env={"COLUMNS": "80"})
    assert listing.returncode == 0, listing.stderr
    run_id = f"{run_dir.parent.name}/{run_dir.name}"
    # The short name, whole (the directory's name: a suffix of the id; --wide prints the id).
    assert re.search(rf"^{re.escape(run_dir.name)}\b", listing.stdout, re.M), listing.stdout
    (run_dir / "report.md").unlink()
    for ref in (run_id, run_dir.name):  # the id, and the short name (its suffix)
        rebuilt = run_cli(["report", ref, "--results-dir", str(results)], tmp_path)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert (run_dir / "report.md").is_file()
    noted = run_cli(["note", run_id, "after reboot", "--results-dir", str(results)], tmp_path)
    assert noted.returncode == 0, noted.stderr
    missing = run_cli(["report", "no-such-run", "--results-dir", str(results)], tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"pgdyno: error: run no-such-run: neither a run directory nor a run in {results}; "
        "list runs with `pgdyno runs`"]


def test_a_run_whose_report_cannot_be_built_fails_and_can_be_rebuilt(
        tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The load ran and its raw files are whole, but the summary could not be built (here
    a full disk while writing it, injected): the command says so in one line and exits 1
    instead of printing a report path that does not exist; `pgdyno report` builds it."""
    import json

    from pgdyno.runner import bench

    def full_disk(run_dir: Path):  # noqa: ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench, "build_reports", full_disk)
    results = tmp_path / "results"
    out = run_cli(["bench", "cpu", "--clients", "1", "--duration", "1", "--warmup", "0",
                   "--iterations", "1", "--no-telemetry", "--results-dir", str(results),
                   "--no-progress"], tmp_path)
    run_dir = next(results.glob("*--cpu/cpu-*"))
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"pgdyno: error: {run_dir}: the summary and report were not built ([Errno 28] No "
        f"space left on device); the raw files are kept: `pgdyno report {run_dir}` builds "
        "them")
    assert not (run_dir / "report.md").exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert "report not built: [Errno 28] No space left on device" in manifest["notes"]
    monkeypatch.undo()
    rebuilt = run_cli(["report", str(run_dir)], tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (run_dir / "report.md").is_file() and (run_dir / "summary.json").is_file()
