"""A campaign interrupted by SIGINT midway, then restarted: finished runs are not redone, and
its study report is whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgdyno.campaign.runner import finished_cells, read_journal
from pgdyno.campaign.spec import load_spec
from pgdyno.errors import UsageError
from pgdyno.study.model import StudyRecord
from tests.conftest import interruptible, make_shared_dir, postgres_processes

CAMPAIGN = """
[campaign]
name = "resume"
context = "camp--simple-update"
workloads = ["simple-update"]
clients = [2]
repeat = 2

[bench]
scale = 1
duration = 2
warmup = 0              # what is checked is the journal and the runs kept, not their TPS
iterations = 1
telemetry = false

[[config]]
label = "stock"

[[config]]
label = "async"
set = ["synchronous_commit=off"]

[study]
question = "Does a campaign interrupted midway resume into a whole study?"
design = "sequential"   # cell by cell: what the resume is checked on
"""


def _campaign(spec: Path, results: Path, workdir: Path) -> subprocess.Popen:
    env = dict(os.environ, PGDYNO_WORKDIR=str(workdir), COLUMNS="120")
    return subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "campaign", str(spec),
         "--results-dir", str(results), "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=interruptible)


def _events(journal: Path) -> list[dict]:
    return read_journal(journal)


def test_cells_interleave_configs(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(CAMPAIGN.replace("repeat = 2", "repeat = 3"))
    spec = load_spec(spec_file, tmp_path)
    assert [c.key for c in spec.cells()] == [
        "r1:simple-update:stock", "r1:simple-update:async",
        "r2:simple-update:async", "r2:simple-update:stock",
        "r3:simple-update:stock", "r3:simple-update:async"]
    opts = spec.options_for(spec.cells()[1])
    assert opts.sets == ("synchronous_commit=off",) and opts.duration_s == 2


@pytest.mark.parametrize(("text", "message"), [
    ("[campaign]\nrepeat = 0\n", "repeat"),
    ("[bench]\nclients = 4\n", "clients"),
    ("[[config]]\nlabel = 'a'\n[[config]]\nlabel = 'a'\n", "unique"),
    ("[campagne]\n", "unknown table"),
    ("[bench]\nduration = -1\n", "--duration"),
])
def test_bad_campaign_files_are_one_line_errors(tmp_path: Path, text: str,
                                                message: str) -> None:
    spec_file = tmp_path / "bad.toml"
    spec_file.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_spec(spec_file, tmp_path)


@pytest.mark.server
def test_interrupted_campaign_resumes_without_redoing_runs(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-campaign-")
    spec = results / "resume.toml"
    spec.write_text(CAMPAIGN)
    journal = results / "campaigns" / "resume" / "journal.jsonl"
    proc = _campaign(spec, results, workdir)
    # interrupt while the second run's pgbench is running
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        events = _events(journal)
        ends = [e for e in events if e["event"] == "run-end"]
        logs = [p for p in (results / "camp--simple-update").glob("*/raw/pgbench/c2-i1/tx.*")
                if ends and not str(p).startswith(str(results / ends[0]["run_dir"]))
                and p.stat().st_size]
        if len(ends) == 1 and logs:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    else:
        proc.kill()
        raise AssertionError("the second run never started")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = _events(journal)
    ends = [e for e in first if e["event"] == "run-end"]
    assert [(e["cell"], e["status"]) for e in ends] == [
        ("r1:simple-update:stock", "ok"), ("r1:simple-update:async", "interrupted")]
    interrupted_dir = results / ends[1]["run_dir"]
    assert json.loads((interrupted_dir / "manifest.json").read_text())["status"] == "interrupted"
    assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []

    proc = _campaign(spec, results, workdir)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "ran 3, skipped 1 already done" in out
    events = _events(journal)
    second = events[len(first):]
    assert second[0]["event"] == "campaign-start"
    assert second[0]["skipped"] == ["r1:simple-update:stock"]
    started = [e["cell"] for e in second if e["event"] == "run-start"]
    assert started == ["r1:simple-update:async", "r2:simple-update:async",
                       "r2:simple-update:stock"]
    done = finished_cells(events, results, retry_failed=False)
    assert sorted(done) == sorted(c.key for c in load_spec(spec, results).cells())
    assert all(e["status"] == "ok" for e in done.values())
    # 4 finished runs plus the interrupted one, kept and marked
    dirs = sorted((results / "camp--simple-update").iterdir())
    statuses = sorted(json.loads((d / "manifest.json").read_text())["status"] for d in dirs)
    assert statuses == ["interrupted", "ok", "ok", "ok", "ok"]
    assert done["r1:simple-update:stock"]["run_dir"] == ends[0]["run_dir"]
    roles = [json.loads((d / "manifest.json").read_text())["role"] for d in dirs]
    assert sorted(r["label"] for r in roles) == ["async", "async", "async", "stock", "stock"]
    assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []
    # The study's report is whole: every cell ok, conclusions drawn from both sides.
    study = results / "campaigns" / "resume" / "study"
    assert [c.status for c in StudyRecord.load(study).cells] == ["ok"] * 4
    assert "## Conclusions" in (study / "study.md").read_text()

    # a third start has nothing left to do
    proc = _campaign(spec, results, workdir)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "ran 0, skipped 4" in out
