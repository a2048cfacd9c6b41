"""`pgdyno tune --search` against the embedded PostgreSQL: a 4-trial search on pgbench
scale 1 with 1 s runs, interrupted by SIGINT and resumed; a config that does not start."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import optuna
import pytest

from pgdyno.results.index import RunIndex
from pgdyno.runner.options import build_options
from pgdyno.search.run import SearchOptions, run_search
from pgdyno.search.study import rows
from tests.answer import markdown_table
from tests.conftest import interruptible, make_shared_dir, postgres_processes, run_cli_here
from tests.settings_text import recorded, stock

# 1 s windows without a warm-up: every check below is on values the runs recorded, none on
# their size, and the search makes about a dozen runs.
SHORT = ["--scale", "1", "--duration", "1", "--warmup", "0", "--clients", "2",
         "--no-telemetry"]


def _search(results: Path, workdir: Path) -> subprocess.Popen:
    env = dict(os.environ, PGDYNO_WORKDIR=str(workdir), COLUMNS="120")
    return subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "tune", "--search", "tpcb", *SHORT, "--budget", "4",
         "--top", "2", "--reruns", "1", "--compare-pairs", "2", "--compare-max-pairs", "2",
         "--compare-design", "sequential", "--trial-design", "runs",
         "--search-name", "t", "--validate", "0",
         "--results-dir", str(results), "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=interruptible)


def _rows(search_dir: Path):
    # Opening RDBStorage creates Optuna's tables when they are missing: while pgdyno is
    # still creating them, the two collide (IntegrityError). Read only once they are there.
    import sqlite3

    with contextlib.closing(sqlite3.connect(search_dir / "study.db")) as db:
        made = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                          "name IN ('trials', 'alembic_version')").fetchone()[0] == 2
        # Optuna stamps its schema version last: opened before that, RDBStorage would
        # stamp it too, and the two inserts collide (UNIQUE alembic_version.version_num).
        made = made and db.execute("SELECT count(*) FROM alembic_version").fetchone()[0] > 0
    if not made:
        return []
    storage = optuna.storages.RDBStorage(f"sqlite:///{search_dir / 'study.db'}")
    try:
        return rows(optuna.load_study(study_name="search", storage=storage))
    except KeyError:  # the file exists a moment before the study is created in it
        return []


def _describe(pid: int) -> str:
    """A leftover process as a failure message shows it: its command line and parent."""
    import psutil

    try:
        p = psutil.Process(pid)
        return f"{pid} {' '.join(p.cmdline())} (parent {p.ppid()}, status {p.status()})"
    except psutil.Error as exc:
        return f"{pid}: {exc}"


def _tps(run_dir: str) -> list[float]:
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    return [it["metrics"]["tps"] for it in summary["iterations"] if it["status"] == "ok"]


def test_search_resumes_after_sigint_and_ends_with_a_comparison(workdir: Path,
                                                                 server) -> None:
    results = make_shared_dir("pgdyno-search-")
    search_dir = results / "searches" / "t"
    # The session's shared server may be running in the same workdir: only postmasters
    # that were not there before count as left behind.
    before_start = set(postgres_processes(str(workdir / "instances")))
    proc = _search(results, workdir)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # stop it once two trials have finished
        if (search_dir / "study.db").exists() and len(_rows(search_dir)) >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("two trials never finished")
    time.sleep(1.0)  # inside the third trial's run
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    before = {r.number: r.run_dir for r in _rows(search_dir)}
    assert len(before) in (2, 3)
    left = set(postgres_processes(str(workdir / "instances"))) - before_start
    assert left == set(), [_describe(pid) for pid in left]

    proc = _search(results, workdir)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    after = _rows(search_dir)
    # 4 trials, none run twice: the baselines once each, finished trials kept as they were
    assert len(after) == 4
    assert sorted(r.label for r in after if r.kind == "baseline") == ["default", "pgtune",
                                                                       "tuned"]
    assert {r.number: r.run_dir for r in after if r.number in before} == before
    for r in after:  # each trial's value is its run's TPS, read back from the run
        assert r.status == "ok" and math.isclose(r.value, statistics.fmean(_tps(r.run_dir)))
    # every trial is a normal run, in the index
    index = RunIndex(results)
    for r in after:
        row = index.get(index.run_id_for(Path(r.run_dir)))
        assert row is not None and row.status == "ok"

    # the selection re-ran the two leaders once each and chose on the mean
    select = json.loads((search_dir / "select.json").read_text())
    assert select["done"] == 2 and len(select["candidates"]) == 2
    means = {c["key"]: statistics.fmean(c["values"]) for c in select["candidates"]}
    assert select["winner"] == max(means, key=means.get)

    # the final comparison went through the compare engine: values recomputed from runs
    conf = json.loads((search_dir / "confirm.json").read_text())
    winner = next(iter(conf["sides"]))
    sides = list(conf["sides"])
    assert conf["order"][:2 * len(sides)] == sides + sides[::-1]  # ABBA
    other = "tuned" if "tuned" in sides[1:] else "pgtune"
    cmp_json = json.loads((search_dir / f"compare-vs-{other}" / "compare.json").read_text())
    base_label = cmp_json["baseline_label"]
    head = next(m for m in cmp_json["metrics"] if m["metric"] == "tps")
    a = [v for p in conf["runs"][base_label] for v in _tps(p)]
    b = [v for p in conf["runs"][winner] for v in _tps(p)]
    assert sorted(head["baseline_values"]) == pytest.approx(sorted(a))
    assert sorted(head["candidate_values"]) == pytest.approx(sorted(b))
    ratio = math.exp(statistics.fmean(map(math.log, b)) - statistics.fmean(map(math.log, a)))
    assert head["change_pct"] == pytest.approx(100 * (ratio - 1), abs=1e-6)
    assert head["verdict"] in out and "ecommend" in out
    _noise_recomputed(conf["noise"], conf["runs"], window_s=1)
    assert f"noise: comparison runs of 1 s varied by ±{conf['noise']['sd_pct']:.1f}%" in out

    # the winner file works with --config FILE and tune --format
    winner_file = search_dir / "winner.toml"
    conf_text = run_cli_here(["tune", "--config", str(winner_file), "--format", "conf",
                              "--workload", "tpcb"], workdir)
    assert conf_text.returncode == 0, conf_text.stderr
    report = (search_dir / "report.md").read_text()
    assert report.startswith("# pgdyno tune --search tpcb")
    _winner_settings_in_natural_units(report, after, select["winner"],
                                      server.admin_connection().conninfo())
    assert (search_dir / "plots" / "convergence.png").stat().st_size > 0
    assert "## Noise and resolution" in report
    noise_rows = markdown_table(report, "| Step | Window (s) |")[2:]
    assert [r[0] for r in noise_rows] == ["Short comparison"]
    assert noise_rows[0][3] == f"±{conf['noise']['sd_pct']:.1f}%"


def _noise_recomputed(noise: dict, runs: dict[str, list[str]], window_s: float) -> None:
    """The comparison's noise as the runs' own TPS give it: the pooled SD of ln(TPS) over
    each config's runs, its degrees of freedom, and the window."""
    logs = {label: [math.log(statistics.fmean(_tps(p))) for p in paths]
            for label, paths in runs.items()}
    df = sum(len(xs) for xs in logs.values()) - len(logs)
    pooled = sum((x - statistics.fmean(xs)) ** 2 for xs in logs.values() for x in xs) / df
    assert noise["df"] == df and noise["runs"] == df + len(logs)
    assert noise["sd_pct"] == pytest.approx(100 * math.sqrt(pooled))
    assert noise["runs_per_config"] == min(len(xs) for xs in logs.values())
    assert noise["window_s"] == window_s


def _winner_settings_in_natural_units(report: str, trials: list, winner: str,
                                      conninfo: str) -> None:
    """Settings in natural units: the winner's settings as its server reported them in
    pg_settings, the stock column as a live server's boot_val, both read by the test's own
    converter; every value in natural units ('1234 MB', never '1234MB' or '157952 8kB')."""
    rows = markdown_table(report, "| Setting | Winner |")[2:]
    won = next(r for r in trials if str(r.number) == winner)
    ran = json.loads((Path(won.run_dir) / "manifest.json").read_text())["server"][
        "non_default_settings"]
    assert rows
    for name, winner_cell, pgtune, tuned, stock_cell, _ in rows:
        stock_value = stock(conninfo, name)
        assert stock_cell == stock_value, name
        if winner_cell != "–":
            # A setting given its stock value (wal_buffers = -1: sized by the server) is
            # reported with source default or override, which the manifest leaves out.
            value = recorded(ran[name]) if name in ran else stock_value
            assert winner_cell == (f"{value} (stock)" if value == stock_value else value)
        for cell in (winner_cell, pgtune, tuned):
            assert not re.search(r"\d(kB|MB|GB|TB|8kB|ms|s|min|h|d)\b", cell), (name, cell)
            assert "(default)" not in cell
            if cell.endswith("(stock)"):
                assert cell == f"{stock_value} (stock)", (name, cell)


def test_config_that_does_not_start_is_a_failed_trial(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-search-fail-")
    bench = build_options("tpcb", scale=1, duration=1, warmup=0, iterations=1, clients="2",
                          telemetry=False, results_dir=results, workdir=workdir,
                          progress=False)
    outcome = run_search(SearchOptions(
        bench=bench, budget=3, baselines=("default",), compare_pairs=0, name="f",
        trial_design="runs",
        fixes=("shared_preload_libraries=no_such_lib",), show_progress=False))
    found = _rows(outcome.search_dir)
    assert [r.status for r in found] == ["ok", "failed", "failed"]
    for r in found[1:]:
        assert "no_such_lib" in r.reason
        manifest = json.loads((Path(r.run_dir) / "manifest.json").read_text())
        assert manifest["status"] == "failed" and manifest["role"]["trial"] == r.number
    assert outcome.failed == 2 and outcome.winner_label == "default"
    assert "no_such_lib" in (outcome.search_dir / "report.md").read_text()


def test_time_limit_counts_wall_time_not_the_trials_sum() -> None:
    """`--time` is wall time: two workers' trials that overlap count once, and the hour a
    stopped search waited before it was resumed counts not at all. The trials' times are
    Optuna's own record (datetime_start, datetime_complete), read back from a study."""
    from datetime import datetime, timedelta

    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    from pgdyno.search.study import wall_seconds

    t0 = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)
    spans = [(0, 60), (30, 90), (90, 120),  # two hosts at once, then one
             (3720, 3780)]  # resumed an hour later
    study = optuna.create_study(direction="maximize")
    for start, end in spans:
        trial = create_trial(value=1.0, params={"x": 0.5},
                             distributions={"x": FloatDistribution(0, 1)},
                             user_attrs={"seconds": end - start}, state=TrialState.COMPLETE)
        trial.datetime_start = t0 + timedelta(seconds=start)
        trial.datetime_complete = t0 + timedelta(seconds=end)
        study.add_trial(trial)
    got = rows(study)
    assert sum(r.seconds for r in got) == 60 + 60 + 30 + 60
    assert wall_seconds(got) == pytest.approx(120 + 60)
