"""No traceback, ever: hostile input ends in one line on stderr with a known exit code.

Each class of input pgdyno once answered with a traceback, run through the command line as
a user would: damaged result files (a string or Infinity where a number belongs, a journal
line that is no event), names and paths the file system refuses, output to a full device,
broken workload plugins (no ``run_iteration``, an option that takes a built-in option's
name, ``sys.exit()`` or an error at import), a Ctrl-C in the first half second, and an
error nobody foresaw (exit 70, its traceback saved to a file). Each asserts the exit code,
the one line, no "Traceback" anywhere, and that nothing was created beyond what the command
may create. None needs a PostgreSQL server.

What needs a process of its own runs as ``python -m pgdyno`` in a subprocess: a signal, a
device as standard output. The rest runs through the CLI's entry point in this process
(``run_cli_here``), with the same working, work and temporary directories and, for a
plugin, its package first on the path, as PYTHONPATH puts it for a process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli_here

USAGE, UNEXPECTED, INTERRUPTED = 2, 70, 130
QUICK_CPU = ["--clients", "1", "--duration", "1", "--warmup", "0", "--iterations", "1",
             "--no-progress", "--no-telemetry"]


# ----- running pgdyno ------------------------------------------------------------------

def _env(tmp_path: Path, site: Path | None = None) -> dict[str, str]:
    """A subprocess's environment: its workdir and temporary directory inside ``tmp_path``,
    no .pyc files written beside a plugin (they would count as created), ``site`` (a
    plugin's install) ahead of whatever PYTHONPATH already holds."""
    paths = [str(site)] if site is not None else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths),
            "PGDYNO_WORKDIR": str(tmp_path / "wd"), "TMPDIR": str(tmp_path / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "120"}


def pgdyno(args: list[str], tmp_path: Path, site: Path | None = None,
           stdout: object = subprocess.PIPE, timeout: float = 120
           ) -> subprocess.CompletedProcess:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "pgdyno", *args], cwd=cwd,
                          env=_env(tmp_path, site), stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def here(args: list[str], tmp_path: Path, site: Path | None = None
         ) -> subprocess.CompletedProcess:
    """``pgdyno ARGS`` through the CLI's entry point in this process, from the same working
    directory and with the same workdir, temporary directory and plugin (``site``) as
    ``pgdyno``, so that a file the command leaves in any of them is seen by the tests'
    snapshots."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp)  # read once per process: $TMPDIR alone would not move it
    try:
        return run_cli_here(args, tmp_path / "wd", cwd=cwd, env={"TMPDIR": str(tmp)},
                            site=site)
    finally:
        tempfile.tempdir = saved


def one_line(out: subprocess.CompletedProcess, code: int) -> str:
    """The single ``pgdyno: error:`` line of a command that ended with ``code``."""
    assert out.returncode == code, (out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr and "Traceback" not in (out.stdout or "")
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("pgdyno: error: "), lines[0]
    return lines[0]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ----- workload plugins ----------------------------------------------------------------

HOOKS = ("    def run_iteration(self, ctx, step, record, progress):\n        pass\n"
         "    def summarise(self, *args, **kwargs):\n        pass\n")


def plugin_site(root: Path, module: str) -> Path:
    """A package ``pgdyno-bad 0.1`` whose ``pgdyno.workloads`` entry point ``bad`` names
    ``bad_plugin:Bad``, with ``module`` as bad_plugin.py: installed as pip would, a
    dist-info directory beside the module on the path (tests/test_toy_workload.py)."""
    site = root / "site"
    info = site / "pgdyno_bad-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pgdyno-bad\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pgdyno.workloads]\nbad = bad_plugin:Bad\n")
    (site / "bad_plugin.py").write_text(module)
    return site


def _options_plugin(field: str) -> str:
    return ("from dataclasses import dataclass\n"
            "from pgdyno.workloads.base import Workload, option\n\n"
            "@dataclass(frozen=True)\nclass Options:\n"
            f"    {field}\n\n"
            "class Bad(Workload):\n    name = 'bad'\n    options_type = Options\n" + HOOKS)


BROKEN_PLUGINS = {
    "no run_iteration": (
        "from pgdyno.workloads.base import Workload\n\n"
        "class Bad(Workload):\n    name = 'bad'\n    needs_server = False\n",
        "has no run_iteration and no summarise"),
    "an option named like a built-in one": (
        _options_plugin("duration: int = option(5, 'seconds of its own')"),
        "option --duration (field duration) takes the name of pgdyno's own option "
        "--duration"),
    "a flag of a built-in option": (
        _options_plugin("span: int = option(5, 'a span', flag='--clients')"),
        "option --clients (field span) takes the name of pgdyno's own option --clients"),
    "a boolean flag whose --no- form is built in": (
        _options_plugin("quiet: bool = option(False, 'quiet', flag='--no-progress')"),
        "takes the name of pgdyno's own option --progress/--no-progress"),
    "an option whose flag is not a flag": (
        _options_plugin("rows: int = option(5, 'rows', flag='rows')"),
        "option rows (field rows): not a usable flag"),
    "sys.exit() with a message at import": (
        "import sys\nsys.exit('this plugin cannot run here')\n",
        "failed to load: it called sys.exit('this plugin cannot run here') while being "
        "imported"),
    "sys.exit(3) at import": ("import sys\nsys.exit(3)\n",
                              "failed to load: it called sys.exit(3) while being imported"),
    "an error at import": ("raise RuntimeError('no GPU\\nfound')\n",
                           "failed to load: RuntimeError: no GPU found"),
}


@pytest.mark.parametrize("case", list(BROKEN_PLUGINS))
def test_a_broken_plugin_is_one_line_naming_its_package(tmp_path: Path, case: str) -> None:
    """Every command refuses it (--help too) in one line naming the package, exit 2,
    before anything starts: not the plugin's own message alone, not a traceback."""
    module, words = BROKEN_PLUGINS[case]
    site = plugin_site(tmp_path, module)
    before = tree(tmp_path)
    results = tmp_path / "results"
    for args in (["bench", "--help"], ["runs", "--results-dir", str(results)],
                 ["bench", "bad", *QUICK_CPU, "--results-dir", str(results)]):
        line = one_line(here(args, tmp_path, site), USAGE)
        assert line.startswith("pgdyno: error: workload plugin bad (bad_plugin:Bad from "
                               "pgdyno-bad 0.1)"), line
        assert words in line, line
    assert tree(tmp_path) - before <= {"cwd", "tmp"}  # no results, no workdir, no server


def test_a_plugin_sharing_a_built_in_workloads_option_still_loads(tmp_path: Path) -> None:
    """The check is about clashes, not sharing: --scale as tpcb declares it is one option
    of both (the other way round, another flag for the same field, is refused)."""
    site = plugin_site(tmp_path, _options_plugin("scale: int = option(1, 'its scale')"))
    out = here(["bench", "--help"], tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert "bad:" in out.stdout and out.stderr == ""
    site = plugin_site(tmp_path / "b", _options_plugin(
        "scale: int = option(1, 'its scale', flag='--size-of')"))
    line = one_line(here(["bench", "--help"], tmp_path, site), USAGE)
    assert "option --size-of (field scale) takes the name of option --scale" in line


# ----- the unexpected: a bug ------------------------------------------------------------

BUGGY = ("from pgdyno.workloads.base import Workload\n\n"
         "class Bad(Workload):\n    name = 'bad'\n    needs_server = False\n"
         "    def options_from_cli(self, raw, opts):\n"
         "        return {}['not there']\n" + HOOKS)


def test_an_unexpected_error_is_one_line_and_a_saved_traceback(tmp_path: Path) -> None:
    """A bug (here a plugin's) ends with exit 70, one line saying what failed, where,
    in which package, and the file in the temporary directory holding the traceback,
    which carries no password of the command line."""
    site = plugin_site(tmp_path, BUGGY)
    results = tmp_path / "results"
    before = tree(tmp_path)
    out = here(["bench", "bad", *QUICK_CPU, "--results-dir", str(results),
                "--results-db", "postgresql://me:s3cret@db.example/results"], tmp_path, site)
    line = one_line(out, UNEXPECTED)
    assert line.startswith("pgdyno: error: pgdyno bench failed on an unexpected error, a bug "
                           "in pgdyno-bad 0.1: KeyError: 'not there', in bad_plugin "
                           "(options_from_cli, line 7); the full traceback is saved in "), line
    assert line.endswith(" (a file in the temporary directory); please report it")
    saved = [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("pgdyno-traceback-")]
    assert len(saved) == 1 and str(saved[0]) in line
    text = saved[0].read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'not there'" in text
    assert "command: pgdyno bench bad" in text and "s3cret" not in text
    assert tree(tmp_path) - before == {"cwd", "tmp", f"tmp/{saved[0].name}"}
    assert not results.exists()


FAILING_RUN = ("from pgdyno.workloads.base import Workload\n\n"
               "class Bad(Workload):\n    name = 'bad'\n    needs_server = False\n"
               "    def run_iteration(self, ctx, step, record, progress):\n"
               "        raise ValueError('a bug in the middle of a run')\n"
               "    def summarise(self, *args, **kwargs):\n        pass\n")


def test_a_bug_during_a_run_leaves_it_failed_not_running(tmp_path: Path) -> None:
    site = plugin_site(tmp_path, FAILING_RUN)
    results = tmp_path / "results"
    line = one_line(here(["bench", "bad", *QUICK_CPU, "--results-dir", str(results)],
                         tmp_path, site), UNEXPECTED)
    assert "ValueError: a bug in the middle of a run, in bad_plugin (run_iteration" in line
    manifest = json.loads(next(results.glob("*/bad-*/manifest.json")).read_text())
    assert manifest["status"] == "failed"
    assert manifest["reason"] == "unexpected error: ValueError: a bug in the middle of a run"


def test_where_no_traceback_can_be_saved_the_line_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary directory that takes no file (full, read-only) still gives one line."""
    import tempfile

    from pgdyno.cli import main

    def refuse(**_kw: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    try:
        {}["not there"]
    except KeyError as exc:
        line = main._unexpected(exc)
    assert "KeyError: 'not there'" in line and "\n" not in line
    assert "its traceback could not be saved (No space left on device)" in line


# ----- damaged result files --------------------------------------------------------------

@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real `pgdyno bench cpu` runs (no server, a second each), under results/."""
    root = tmp_path_factory.mktemp("runs")
    for _ in range(2):
        out = here(["bench", "cpu", *QUICK_CPU, "--results-dir", str(root / "results")],
                   root)
        assert out.returncode == 0, out.stderr
    return root / "results"


def _edit(path: Path, change) -> None:  # noqa: ANN001 - a function of the parsed JSON
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))  # json writes float("inf") as Infinity


def _metric(value: object):  # noqa: ANN202
    def change(data: dict) -> None:
        metrics = data["iterations"][0]["metrics"]
        metrics[next(iter(metrics))] = value
    return change


def _iteration(key: str, value: object):  # noqa: ANN202
    def change(data: dict) -> None:
        data["iterations"][0][key] = value
    return change


SUMMARY_DAMAGE = {
    "a string where a metric belongs": (_metric("fast"), "iterations[0].metrics.",
                                        "'fast' (text) where a number belongs"),
    "Infinity where a metric belongs": (_metric(float("inf")), "iterations[0].metrics.",
                                        "Infinity where a measured number belongs"),
    "Infinity where a count belongs": (_iteration("clients", float("inf")),
                                       "iterations[0].clients",
                                       "(not a finite number) where a whole number belongs"),
    "a string where a count belongs": (_iteration("transactions", "many"),
                                       "iterations[0].transactions",
                                       "'many' (text) where a whole number belongs"),
    "an array where an object belongs": (_iteration("latency", [1, 2]),
                                         "iterations[0].latency",
                                         "[1, 2] (an array) where an object belongs"),
    "true where a number belongs": (_iteration("tps_mean", True), "iterations[0].tps_mean",
                                    "True (a boolean) where a number belongs"),
}


@pytest.mark.parametrize("case", list(SUMMARY_DAMAGE))
def test_a_damaged_summary_is_one_line_naming_the_file_and_key(
        two_runs: Path, tmp_path: Path, case: str) -> None:
    change, key, words = SUMMARY_DAMAGE[case]
    results = tmp_path / "results"
    shutil.copytree(two_runs, results)
    a, b = sorted(results.glob("*/cpu-*"))
    _edit(a / "summary.json", change)
    before = tree(tmp_path)
    line = one_line(here(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")],
                         tmp_path), USAGE)
    assert line.startswith(f"pgdyno: error: {a / 'summary.json'}: damaged run summary ({key}")
    assert words in line, line
    assert tree(tmp_path) - before <= {"cwd", "tmp"}


def _summary_of_the_study(results: Path) -> Path:
    return next(results.glob("*--cpu/cpu-*/summary.json"))


def _journal_line(text: str):  # noqa: ANN202
    def change(results: Path) -> None:
        journal = results / "campaigns" / "tiny" / "journal.jsonl"
        journal.write_text(journal.read_text() + text + "\n")
    return change


def _event_without_cell(results: Path) -> None:
    journal = results / "campaigns" / "tiny" / "journal.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    for event in events:
        event.pop("cell", None)
    journal.write_text("".join(json.dumps(e) + "\n" for e in events))


STUDY_DAMAGE = {
    "a string in a summary": (
        lambda r: _edit(_summary_of_the_study(r), _metric("fast")), "summary.json",
        "'fast' (text) where a number belongs"),
    "Infinity in a summary": (
        lambda r: _edit(_summary_of_the_study(r), _metric(float("inf"))), "summary.json",
        "Infinity where a measured number belongs"),
    "a journal line that is no object": (_journal_line("[1, 2]"), "journal.jsonl", ""),
    "a journal line that is a number": (_journal_line("42"), "journal.jsonl", ""),
    "events without their cell": (_event_without_cell, "journal.jsonl", ""),
}


@pytest.mark.parametrize("case", list(STUDY_DAMAGE))
def test_report_campaign_over_damaged_files_never_tracebacks(
        tiny_study: Path, tmp_path: Path, case: str) -> None:
    """A rebuild that can go on says in the study which file it left out and why (exit
    0); one that cannot is one line naming the file (exit 2). Never a traceback. (The
    study, conftest's, measures the host: the test is in the server tier.)"""
    damage, file_name, words = STUDY_DAMAGE[case]
    results = tmp_path / "results"
    shutil.copytree(tiny_study / "results", results)
    damage(results)
    out = here(["report", "--campaign", "tiny", "--results-dir", str(results)], tmp_path)
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    if out.returncode == USAGE:
        line = one_line(out, USAGE)
        assert file_name in line and words in line, line
        return
    assert out.returncode == 0, out.stderr
    assert "pgdyno: error" not in out.stderr
    report = (results / "campaigns" / "tiny" / "study" / "study.md").read_text()
    assert words in report


# ----- names, paths and devices --------------------------------------------------------

LONG = "x" * 300


@pytest.mark.parametrize("args", [
    ["runs", "--results-dir", f"{LONG}/results"],
    ["runs", "--output", LONG],
    ["report", "--campaign", "s", "--results-dir", LONG],
])
def test_a_name_too_long_is_one_line_naming_it(tmp_path: Path, args: list[str]) -> None:
    before = tree(tmp_path)
    line = one_line(here(args, tmp_path), USAGE)
    assert LONG[:60] in line, line
    assert tree(tmp_path) - before <= {"cwd", "tmp"}


def _full() -> Path:
    full = Path("/dev/full")
    if not (full.exists() and stat.S_ISCHR(full.stat().st_mode)):
        pytest.skip("no /dev/full here")
    return full


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["bench", "--help"],
                                  ["runs", "--format", "json"], ["runs"]])
def test_output_to_a_full_device_is_one_line(two_runs: Path, tmp_path: Path,
                                             args: list[str]) -> None:
    with _full().open("w") as full:
        out = pgdyno([*args, *(["--results-dir", str(two_runs)] if "runs" in args else [])],
                     tmp_path, stdout=full)
    assert one_line(out, USAGE) == "pgdyno: error: standard output: No space left on device"


def test_a_run_printing_to_a_full_device_keeps_its_run(tmp_path: Path) -> None:
    """The run is measured and saved; only its closing lines could not be printed."""
    results = tmp_path / "results"
    with _full().open("w") as full:
        out = pgdyno(["bench", "cpu", *QUICK_CPU, "--results-dir", str(results)], tmp_path,
                     stdout=full)
    assert one_line(out, USAGE) == "pgdyno: error: standard output: No space left on device"
    manifest = json.loads(next(results.glob("*/cpu-*/manifest.json")).read_text())
    assert manifest["status"] == "ok"


def test_an_export_into_a_pipe_keeps_the_pipe(two_runs: Path, tmp_path: Path) -> None:
    """--output into a FIFO (or /dev/stdout, a device) is written into, never replaced by
    a regular file through a rename."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    out = here(["runs", "--results-dir", str(two_runs), "--format", "csv", "--output",
                str(fifo)], tmp_path)
    reader.join(30)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and got[0].startswith("run_id,") and got[0].count("\n") == 3


# ----- Ctrl-C before the command has loaded ----------------------------------------------

SLOW_IMPORT = "import time\ntime.sleep(2)\n" + BUGGY.replace("{}['not there']", "opts")


@pytest.mark.parametrize("args", [["runs"], ["bench", "--help"], ["campaign", "--help"]])
@pytest.mark.parametrize("delay_s", [0.1, 0.2, 0.3])
def test_an_early_ctrl_c_is_one_line(tmp_path: Path, args: list[str], delay_s: float) -> None:
    """Within the imports of typer, the commands and the plugins (most of a second): the
    signal handling is in place first, so it ends as any Ctrl-C does."""
    _interrupted_after(tmp_path, args, delay_s)


@pytest.mark.parametrize("delay_s", [0.3, 1.0])
def test_a_ctrl_c_while_a_plugin_imports_is_no_plugin_failure(tmp_path: Path,
                                                                delay_s: float) -> None:
    site = plugin_site(tmp_path, SLOW_IMPORT)
    _interrupted_after(tmp_path, ["bench", "--help"], delay_s, site)


def _interrupted_after(tmp_path: Path, args: list[str], delay_s: float,
                       site: Path | None = None) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _env(tmp_path, site)
    before = tree(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pgdyno", *args], cwd=cwd,
                            env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    out = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    assert one_line(out, INTERRUPTED) == "pgdyno: error: interrupted"
    assert tree(tmp_path) == before
