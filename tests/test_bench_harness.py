"""The harness the bench/ scripts share: its result file (schema version, environment,
the versioned loader's refusals), its orders, its line fits and pair-ratio intervals, its
CPU counters and directories; and every bench script imports, answers --help and keeps
its default paths out of the current directory. No server: quick tier."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import resource
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pgdyno.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))
if str(BENCH) not in sys.path:  # the scripts import it as they do when run as programs
    sys.path.insert(0, str(BENCH))

import harness  # noqa: E402


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


# -- the result file ------------------------------------------------------------------


def test_result_file_records_the_environment_and_a_schema_version(tmp_path):
    out = tmp_path / "figures.json"
    args = argparse.Namespace(output=out, workdir=Path("/var/tmp/w"), pairs=3, only=None)
    argv = ["bench/example.py", "--pairs", "3"]
    before = datetime.now(UTC).replace(microsecond=0)
    writer = harness.ResultWriter("example", args, argv)
    assert writer.write({"rows": [{"tps": 1.5}]}) == out
    data = json.loads(out.read_text())

    assert data["schema_version"] == 1 == harness.RESULT_SCHEMA_VERSION
    assert data["bench"] == "example"
    # The options as parsed, paths as text, the output file itself left out.
    assert data["options"] == {"workdir": "/var/tmp/w", "pairs": 3, "only": None}
    assert data["figures"] == {"rows": [{"tps": 1.5}]}
    env = data["environment"]
    assert env["host"] == socket.gethostname()
    assert env["kernel"] == os.uname().release
    assert env["cpus"] == len(os.sched_getaffinity(0))
    models = [line.split(":", 1)[1].strip() for line in
              Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
    if models:
        assert env["cpu_model"] == models[0]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert env["pgdyno_commit"] == head and len(head) == 40
    assert isinstance(env["pgdyno_tree_dirty"], bool)
    when = datetime.fromisoformat(env["date_utc"])
    assert before <= when <= datetime.now(UTC)
    assert env["command_line"] == argv

    loaded = harness.load_result(out)
    assert loaded.figures == {"rows": [{"tps": 1.5}]}
    assert loaded.environment.pgdyno_commit == head


def test_default_result_file_is_under_bench_results_and_ignored_by_git():
    writer = harness.ResultWriter("example", argparse.Namespace(output=None), ["x"])
    assert writer.path.parent == BENCH / "results"
    stamp = datetime.fromisoformat(writer.env.date_utc).strftime("%Y%m%dT%H%M%SZ")
    assert writer.path.name == f"example-{stamp}.json"
    assert not writer.path.exists()  # nothing written until asked
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q",
                              str(writer.path.relative_to(ROOT))])
    assert ignored.returncode == 0


@pytest.mark.parametrize("content, said", [
    ({"schema_version": 2, "bench": "x", "environment": {}}, "schema_version 2 is not supported"),
    ({"bench": "x"}, "no schema_version"),
    ([1, 2], "holds an array"),
])
def test_loader_refuses_unknown_versions_in_one_line(tmp_path, content, said):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(content))
    with pytest.raises(UsageError) as refused:
        harness.load_result(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and said in message and "\n" not in message


def test_refused_result_file_ends_a_script_in_one_line(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": 99}))
    done = subprocess.run([sys.executable, str(BENCH / "compare_designs.py"), "--also",
                           str(path), "--repeats", "0"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"compare_designs.py: {path}: bench result schema_version "
                                   "99 is not supported (a newer pgdyno wrote it; this "
                                   "pgdyno reads 1)")
    assert list(tmp_path.iterdir()) == [path]


# -- orders ---------------------------------------------------------------------------


def test_orders():
    assert harness.abba(3) == ["A", "B", "B", "A", "A", "B"]
    assert [harness.alternate("XYZ", r) for r in range(3)] == [
        list("XYZ"), list("ZYX"), list("XYZ")]
    square = [harness.rotate("ABCD", r) for r in range(4)]
    for position in range(4):  # a Latin square: each item once in each place
        assert sorted(row[position] for row in square) == list("ABCD")
    assert harness.round_orders("AB", 4) == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]


def test_random_orders_are_permutations_drawn_from_their_seed():
    items = list(range(8))
    drawn = harness.round_orders(items, 50, "random", seed=7)
    assert all(sorted(order) == items for order in drawn)
    assert drawn == harness.random_orders(items, 50, seed=7)
    assert drawn != harness.random_orders(items, 50, seed=8)
    # Every item leads some round (a fixed order would always lead with the same one).
    assert {order[0] for order in drawn} == set(items)
    with pytest.raises(ValueError, match="expected one of alternate, random"):
        harness.round_orders(items, 2, "sorted")


# -- fits -----------------------------------------------------------------------------


def test_line_fit_against_the_normal_equations():
    xs, ys = [1, 5, 10, 20], [21.2, 89.0, 213.7, 401.0]
    n = len(xs)
    fx, fy = [Fraction(x) for x in xs], [Fraction(str(y)) for y in ys]
    sx, sy = sum(fx), sum(fy)
    sxx, sxy = sum(x * x for x in fx), sum(x * y for x, y in zip(fx, fy, strict=True))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    mean = sy / n
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(fx, fy, strict=True))
    r2 = 1 - residual / sum((y - mean) ** 2 for y in fy)

    fit = harness.line_fit(xs, ys)
    assert fit.slope == pytest.approx(float(slope), rel=1e-12)
    assert fit.intercept == pytest.approx(float(intercept), rel=1e-9)
    assert fit.r2 == pytest.approx(float(r2), rel=1e-12)
    assert fit.points == 4
    assert fit.at(100) == pytest.approx(float(intercept + 100 * slope), rel=1e-12)


def test_line_fit_edges():
    assert harness.line_fit([3, 3], [1.0, 2.0]) is None  # one size: no line
    exact = harness.line_fit([0, 1, 2], [5.0, 5.0, 5.0])
    assert (exact.slope, exact.intercept, exact.r2) == (pytest.approx(0.0, abs=1e-12),
                                                        pytest.approx(5.0), 1.0)
    with pytest.raises(ValueError, match="3 x values against 2 y values"):
        harness.line_fit([1, 2, 3], [1.0, 2.0])


def test_ratio_interval_is_a_t_interval_on_the_logs():
    ratios = [1.066, 0.990, 0.970, 1.012, 1.022, 0.952, 0.943, 0.971]
    logs = np.log(ratios)
    t_975_7 = 2.364624  # a published t table: t(0.975, 7 degrees of freedom)
    half = t_975_7 * logs.std(ddof=1) / math.sqrt(len(logs))
    mean, low, high = harness.ratio_interval(ratios)
    assert mean == pytest.approx(math.exp(logs.mean()), rel=1e-12)
    assert low == pytest.approx(math.exp(logs.mean() - half), rel=1e-5)
    assert high == pytest.approx(math.exp(logs.mean() + half), rel=1e-5)
    # The same ratios inverted (the other side over this one): the interval inverts exactly.
    inverse = harness.ratio_interval([1 / r for r in ratios])
    assert inverse == pytest.approx((1 / mean, 1 / high, 1 / low), rel=1e-9)
    assert harness.ratio_interval([1.25]) == (pytest.approx(1.25), None, None)


# -- clocks, CPU and directories ------------------------------------------------------


def test_process_tree_cpu_counts_live_and_reaped_children():
    """A process tree's CPU: a child burning CPU alive, then the same once reaped; the
    kernel's own count of reaped children (getrusage) is the oracle."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    me = os.getpid()
    start = harness.process_tree_cpu_s(me)
    child = subprocess.Popen([sys.executable, "-c", burn + "\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while harness.process_tree_cpu_s(me) - start < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert harness.process_tree_cpu_s(me) - start >= 0.4  # alive: from its /proc entry
    finally:
        child.kill()
        child.wait()
    reaped_before = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])
    counted_before = harness.children_cpu_s()
    before = harness.process_tree_cpu_s(me)
    with harness.Stopwatch() as watch:
        subprocess.run([sys.executable, "-c", burn], check=True)
    reaped = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]) - reaped_before
    assert reaped >= 0.4 and watch.seconds >= 0.4
    assert harness.children_cpu_s() - counted_before == pytest.approx(reaped, abs=1e-6)
    # Ours, the parent's, grew too meanwhile: the tree's growth is the reaped child's
    # CPU plus at most what this process spent waiting for it.
    assert harness.process_tree_cpu_s(me) - before == pytest.approx(reaped, abs=0.1)


def test_scratch_is_enterable_and_removed_unless_kept(tmp_path):
    with harness.scratch("t", tmp_path) as work:
        assert work.parent == tmp_path and work.name.startswith("pgdyno-bench-t-")
        assert work.stat().st_mode & 0o777 == 0o755
        (work / "f").write_text("x")
    assert not work.exists()
    with harness.scratch("t", tmp_path, keep=True) as kept:
        pass
    assert kept.is_dir()


def test_require_free_refuses_in_one_line(tmp_path):
    harness.require_free(tmp_path / "not-yet", 1, "a tiny load")
    with pytest.raises(SystemExit) as refused:
        harness.require_free(tmp_path / "not-yet", 2**62, "a huge load")
    message = str(refused.value.code)
    assert re.fullmatch(rf"a huge load needs about \S+ \w+ free in {tmp_path}/not-yet; "
                        r"\S+ \w+ is free \(choose another directory or a smaller size\)",
                        message)


# -- every script ---------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_script_imports_and_answers_help(script, capsys):
    module = load_script(script)
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: ")
    assert module.__doc__.strip().splitlines()[0] in shown
    assert "--output FILE" in shown
    # Every default path is absolute (or chosen at run time): nothing lands in the
    # directory the script is started from.
    for action in module.build_parser()._actions:
        if isinstance(action.default, Path):
            assert action.default.is_absolute(), (action.dest, action.default)
    text = script.read_text()
    assert not re.search(r"\b(issue|seed) \d+", text, re.IGNORECASE)


def test_harness_writes_its_figures_end_to_end(tmp_path):
    """A tiny real measurement (one run of each archive command on a 16 MB segment):
    the file holds what the script printed, and the directory it ran from is left empty."""
    out, here = tmp_path / "out" / "archive.json", tmp_path / "cwd"
    here.mkdir()
    done = subprocess.run([sys.executable, str(BENCH / "archive_cost.py"), "--segments", "1",
                           "--dir", str(tmp_path), "--output", str(out)],
                          capture_output=True, text=True, cwd=here, check=True)
    result = harness.load_result(out)
    assert result.bench == "archive_cost" and result.options["segments"] == 1
    assert result.environment.command_line[1:] == ["--segments", "1", "--dir", str(tmp_path),
                                                   "--output", str(out)]
    cases = result.figures["cases"]
    assert {"pgdyno buffered", "pgdyno direct"} <= set(cases)
    for name, case in cases.items():
        assert case["runs"] == 1
        printed = next(line for line in done.stdout.splitlines() if line.startswith(name))
        assert printed.split()[-2] == f"{case['median_ms']:.1f}"
    assert done.stderr.strip() == f"figures written to {out}"
    assert list(here.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "out"]  # scratch removed
