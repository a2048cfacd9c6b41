"""Damaged files: every command that reads a file of a results directory says,
in one line naming the file, what is wrong with it, and exits 2; never a traceback.

The corpus damages copies of two real runs (``pgdyno bench cpu``: no server needed), a sweep
record beside them and their index, in every way a file gets damaged (a crash, a full disk,
a hand edit, a newer pgdyno), and runs every command that reads that file. A run is also
rebuilt (``pgdyno report``) while Ctrl-C interrupts it: each file it writes is then the old
one or the new one, whole.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pgdyno.analysis.summary import SCHEMA_VERSION as SUMMARY_VERSION
from pgdyno.results.sweepdir import SCHEMA_VERSION, SweepRecord, SweepStep
from tests.conftest import cpu_runs, make_shared_dir, run_cli, run_cli_here

SWEEP = "cpu-sweep-20260101T000000Z"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results directory: two real runs, their index, and a sweep record beside them."""
    root = tmp_path_factory.mktemp("corpus")
    results = cpu_runs(root)
    first = _runs(results)[0]
    (first.parent / SWEEP).mkdir()
    SweepRecord(schema_version=SCHEMA_VERSION, context=first.parent.name, status="ok",
                started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:01:00Z",
                config="default", workload="cpu", size_unit="threads",
                steps=[SweepStep(size=1, clients=[1], run=first.name, status="ok")]
                ).save(first.parent / SWEEP)
    return results


def _runs(results: Path) -> list[Path]:
    runs = sorted(p.parent for p in results.glob("*/cpu-*/manifest.json"))
    assert len(runs) == 2, runs
    return runs


# ----- the damage -------------------------------------------------------------------------

def _missing(path: Path) -> None:
    path.unlink()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _wrong_type(path: Path) -> None:
    """Valid JSON of another type than the object every pgdyno file holds (in an index's
    place: JSON text, which is not a database)."""
    path.write_text(json.dumps(["a", "list", 1]))


def _garbage(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00" + random.Random(12).randbytes(4096))


def _directory(path: Path) -> None:
    path.unlink()
    (path / "x").mkdir(parents=True)


def _unknown_schema(path: Path) -> None:
    """The file as a newer pgdyno would write it."""
    if path.suffix == ".sqlite":
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA user_version = 99")
        return
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "missing": _missing, "empty": _empty, "truncated": _truncated, "wrong-type": _wrong_type,
    "garbage": _garbage, "directory": _directory, "unknown-schema": _unknown_schema}
WORDS = {  # what the line must say is wrong, besides naming the file
    "missing": "missing", "empty": "empty", "truncated": "truncated",
    "wrong-type": "not a pgdyno|not a database", "garbage": "binary data|not a database",
    "directory": "directory", "unknown-schema": "schema_version 99 is not supported"}
ALL = tuple(DAMAGE)

# (file, command) -> the damage kinds after which the command must refuse: every pair
# where the command reads the file. Left out, with the test that covers them instead:
# compare of a run whose summary.json is missing (a run never reported; compare notes it),
# runs without an index (nothing indexed yet: test_runs_without_an_index_offers_to_build_it),
# report of a run whose summary.json is damaged but a file (report rewrites it:
# test_report_rebuilds_a_damaged_summary).
READERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("manifest.json", "report"): ALL,
    ("manifest.json", "compare"): ALL,
    ("manifest.json", "note"): ALL,
    ("raw/run.json", "report"): ALL,
    ("summary.json", "compare"): tuple(k for k in ALL if k != "missing"),
    ("summary.json", "report"): ("directory",),
    ("index.sqlite", "runs"): tuple(k for k in ALL if k != "missing"),
    ("index.sqlite", "report"): ALL,
    ("index.sqlite", "compare"): ALL,
    ("index.sqlite", "note"): ALL,
    ("sweep.json", "report"): ALL,
}
CASES = [(file, command, kind) for (file, command), kinds in READERS.items() for kind in kinds]


def _command(command: str, file: str, results: Path, run_a: Path, run_b: Path) -> list[str]:
    """The command line reading the damaged file: runs by directory, or by the id `pgdyno
    runs` prints when the damaged file is the index."""
    by_id = file == "index.sqlite"
    a = f"{run_a.parent.name}/{run_a.name}" if by_id else str(run_a)
    b = run_b.name if by_id else str(run_b)  # the id's suffix is accepted too
    common = ["--results-dir", str(results)]
    if command == "report":
        return ["report", str(run_b.parent / SWEEP) if file == "sweep.json" else b, *common]
    if command == "compare":
        return ["compare", a, b, "--out", str(results.parent / "compare"), *common]
    if command == "note":
        return ["note", b, "looked at it", *common]
    return ["runs", *common]


def _damaged_file(file: str, results: Path, run_b: Path) -> Path:
    if file == "index.sqlite":
        return results / file
    if file == "sweep.json":
        return run_b.parent / SWEEP / file
    return run_b / file


@pytest.mark.parametrize("file, command, kind", CASES,
                         ids=[f"{c}-{f}-{k}" for f, c, k in CASES])
def test_damaged_file_is_one_line_naming_it(pristine: Path, tmp_path: Path, file: str,
                                            command: str, kind: str) -> None:
    results = tmp_path / "results"
    shutil.copytree(pristine, results)
    run_a, run_b = _runs(results)
    damaged = _damaged_file(file, results, run_b)
    DAMAGE[kind](damaged)
    out = run_cli_here(_command(command, file, results, run_a, run_b), tmp_path)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), out.stderr
    assert str(damaged) in lines[0], lines[0]
    assert re.search(WORDS[kind], lines[0], re.IGNORECASE), lines[0]
    if file == "index.sqlite" and kind != "missing":
        assert "pgdyno runs --reindex" in lines[0]  # the way out, offered


def test_corpus_covers_every_file_and_command() -> None:
    """Every damage kind, every file of a results directory and every command that reads
    one is in the corpus."""
    assert {k for _, _, k in CASES} == set(DAMAGE)
    assert {f for f, _, _ in CASES} == {"manifest.json", "raw/run.json", "summary.json",
                                        "index.sqlite", "sweep.json"}
    assert {c for _, c, _ in CASES} == {"report", "compare", "runs", "note"}
    assert len(CASES) == 69


@pytest.mark.parametrize("kind", ["empty", "truncated", "wrong-type", "garbage",
                                  "unknown-schema"])
def test_report_rebuilds_a_damaged_summary(pristine: Path, tmp_path: Path, kind: str) -> None:
    """summary.json is what `pgdyno report` writes: damaged, it is rebuilt from raw/, to the
    very bytes of the summary the run wrote (no telemetry: nothing else varies)."""
    results = tmp_path / "results"
    shutil.copytree(pristine, results)
    run = _runs(results)[1]
    written = (run / "summary.json").read_bytes()
    DAMAGE[kind](run / "summary.json")
    out = run_cli_here(["report", str(run)], tmp_path)
    assert out.returncode == 0, out.stderr
    assert (run / "summary.json").read_bytes() == written


def test_runs_without_an_index_offers_to_build_it(pristine: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(pristine, results)
    (results / "index.sqlite").unlink()
    out = run_cli_here(["runs", "--results-dir", str(results)], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"note: no index of runs at {results / 'index.sqlite'}; `pgdyno runs --reindex` "
        "builds it from the 2 run directories there"]


# ----- Ctrl-C while `pgdyno report` rewrites a run's files --------------------------------

@pytest.fixture(scope="module")
def telemetry_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with two client counts and host telemetry: its report draws several plots,
    so rebuilding it takes a few seconds."""
    root = tmp_path_factory.mktemp("interrupt")
    results = root / "results"
    out = run_cli_here(["bench", "cpu", "--clients", "1,2", "--duration", "1", "--warmup",
                        "0", "--iterations", "1", "--no-progress", "--results-dir",
                        str(results)], root)
    assert out.returncode == 0, out.stderr
    (run,) = (p.parent for p in results.glob("*/cpu-*/manifest.json"))
    return run


def _written(run: Path) -> list[Path]:
    """The files `pgdyno report` writes."""
    return [run / "report.md", run / "report.html", run / "summary.json",
            *sorted((run / "plots").rglob("*.png"))]


def _mark_old(run: Path, fresh: dict[Path, bytes]) -> dict[Path, bytes]:
    """Give every written file a distinct old version (the fresh one with a mark that its
    format allows), so that old and new can be told apart."""
    old = {}
    for path, data in fresh.items():
        if path.suffix == ".json":
            old[path] = json.dumps({**json.loads(data), "old": True}).encode()
        elif path.suffix == ".html":
            old[path] = data.replace(b"</html>", b"<!-- old --></html>")
        else:  # Markdown; a PNG reader ignores bytes after the IEND chunk
            old[path] = data + b"\nold\n"
        path.write_bytes(old[path])
    return old


def _signature(paths: list[Path]) -> list[tuple[int, int, int] | None]:
    return [(s.st_ino, s.st_size, s.st_mtime_ns) if (s := _stat(p)) else None for p in paths]


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def test_report_rewrites_every_file_by_rename(telemetry_run: Path) -> None:
    """A file written in place (truncated, then filled) is what an interruption leaves
    half-written; a file renamed into place leaves the old inode whole. A hard link to
    every file before the rebuild must still hold the old bytes after it."""
    run = telemetry_run
    out = run_cli_here(["report", str(run)], run.parents[2])
    assert out.returncode == 0, out.stderr
    fresh = {p: p.read_bytes() for p in _written(run)}
    assert len(fresh) >= 5  # report.md/.html, summary.json, the events plot, 2 CPU plots
    old = _mark_old(run, fresh)
    links = run.parent / "links"
    links.mkdir()
    for i, path in enumerate(old):
        os.link(path, links / str(i))
    out = run_cli_here(["report", str(run)], run.parents[2])
    assert out.returncode == 0, out.stderr
    for i, (path, data) in enumerate(old.items()):
        assert (links / str(i)).read_bytes() == data, f"{path} was rewritten in place"
        assert path.read_bytes() == fresh[path], path
        assert path.stat().st_mode & 0o777 == 0o644 & ~_umask(), path  # not mkstemp's 0600
    shutil.rmtree(links)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.server  # seconds of real work: out of the quick run
def test_ctrl_c_during_report_leaves_old_or_new_files(telemetry_run: Path) -> None:
    """`pgdyno report RUN`, interrupted at several moments once it has begun to write:
    exit 130, and each file is its old version or the complete new one, nothing left over."""
    run = telemetry_run
    out = run_cli(["report", str(run)], run.parents[2])
    assert out.returncode == 0, out.stderr
    fresh = {p: p.read_bytes() for p in _written(run)}
    interrupted = 0
    # The writing takes about half a second of the rebuild's two (plots, then the files).
    for delay in (0.0, 0.02, 0.05, 0.1, 0.15, 0.3):
        old = _mark_old(run, fresh)
        paths = list(old)
        before = _signature(paths)
        proc = subprocess.Popen([sys.executable, "-m", "pgdyno", "report", str(run)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PGDYNO_WORKDIR": str(run.parents[2])})
        deadline = time.monotonic() + 120
        # Signal once it writes (after its start-up, when pgdyno's handlers are in place).
        while (proc.poll() is None and _signature(paths) == before
               and not list(run.rglob(".*.tmp")) and time.monotonic() < deadline):
            time.sleep(0.005)
        time.sleep(delay)
        alive = proc.poll() is None
        if alive:
            proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        assert "Traceback" not in stderr, stderr
        if "report: " in stdout:  # it had finished: the signal came at its exit, or later
            assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, stderr)
        else:
            assert alive and proc.returncode == 130, (proc.returncode, stderr)
            assert stderr.strip().splitlines() == [
                f"pgdyno: error: report of {run} interrupted; each of its files is the "
                "previous one or the new one, whole: run `pgdyno report` again to finish"]
            interrupted += 1
        for path in paths:
            data = path.read_bytes()
            assert data in (old[path], fresh[path]), f"{path}: neither old nor new (delay {delay})"
        assert json.loads((run / "summary.json").read_text())["schema_version"] == \
            SUMMARY_VERSION
        assert (run / "report.html").read_text().rstrip().endswith("</html>")
        assert not list(run.rglob(".*.tmp")), "a temporary file was left behind"
    assert interrupted, "no attempt was interrupted while it was writing"


# ----- the raw files `pgdyno report` reads --------------------------------------------------

@pytest.fixture(scope="module")
def tpcb_run(workdir: Path) -> Path:
    """A real pgbench run with its per-transaction log kept (and host telemetry)."""
    results = make_shared_dir("pgdyno-corpus-raw-")
    out = run_cli_here(["bench", "tpcb", "--scale", "1", "--clients", "1", "--duration",
                        "2", "--warmup", "0", "--iterations", "1", "--no-progress",
                        "--results-dir", str(results)], workdir)
    assert out.returncode == 0, out.stderr
    (run,) = (p.parent for p in results.glob("*/tpcb-*/manifest.json"))
    return run


def _flip(path: Path) -> None:
    """One byte of the middle inverted: bit rot, a bad copy."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _bad_histogram(path: Path) -> None:
    """Whole lines, but one interval's histogram of the wrong length (a hand edit)."""
    lines = path.read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if line.startswith("Tag="))
    lines[n] = lines[n].replace(",HISTF", ",HISTFAAAX", 1)
    path.write_text("".join(lines))


def _cut_inside_a_line(path: Path) -> None:
    """Cut at half, moved off a line's end: a text file cut exactly after a line is a
    shorter file, whole (an interrupted run's), not a truncated one."""
    data = path.read_bytes()
    cut = len(data) // 2
    while data[cut - 1:cut] == b"\n":
        cut -= 1
    path.write_bytes(data[:cut])


RAW_DAMAGE = {**DAMAGE, "flipped": _flip, "bad-histogram": _bad_histogram,
              "cut-inside-a-line": _cut_inside_a_line}
LOG_ROUTE, SECONDS_ROUTE = "logs", "seconds"
"""The iteration's percentiles come from its per-transaction logs when they are all there,
else from its per-second files: the damage of the latter is read with the logs moved away."""
RAW_CASES = [
    ("tx.gz", LOG_ROUTE, "truncated", "truncated .*gzip stream ends early"),
    ("tx.gz", LOG_ROUTE, "empty", "empty"),
    ("tx.gz", LOG_ROUTE, "garbage", "not a gzip file"),
    ("tx.gz", LOG_ROUTE, "flipped", "gzip data is corrupt|gzip stream ends early"),
    ("latency.hlog", SECONDS_ROUTE, "cut-inside-a-line", "truncated"),
    ("latency.hlog", SECONDS_ROUTE, "empty", "empty"),
    ("latency.hlog", SECONDS_ROUTE, "garbage", "binary data"),
    ("latency.hlog", SECONDS_ROUTE, "bad-histogram", "line 6 is damaged: its histogram does "
                                                     "not decode"),
    ("latency.hlog", SECONDS_ROUTE, "directory", "directory"),
    ("seconds.csv", SECONDS_ROUTE, "cut-inside-a-line", "truncated"),
    ("seconds.csv", SECONDS_ROUTE, "empty", "empty"),
    ("seconds.csv", SECONDS_ROUTE, "garbage", "binary data"),
    ("seconds.csv", SECONDS_ROUTE, "wrong-type", "not a pgdyno seconds file"),
]


def _raw_copy(run: Path, tmp_path: Path, route: str) -> tuple[Path, Path]:
    """A copy of the run (its results directory around it) and its iteration directory;
    with route SECONDS_ROUTE, its per-transaction logs moved away."""
    copy = tmp_path / "results" / run.parent.name / run.name
    shutil.copytree(run, copy)
    (iteration,) = (p.parent for p in copy.glob("raw/pgbench/*/seconds.csv"))
    if route == SECONDS_ROUTE:
        for log in iteration.glob("tx.*"):
            log.unlink()
    return copy, iteration


@pytest.mark.parametrize("file, route, kind, words", RAW_CASES,
                         ids=[f"{f}-{k}" for f, _, k, _ in RAW_CASES])
def test_damaged_raw_file_is_one_line_naming_it(tpcb_run: Path, tmp_path: Path, file: str,
                                                route: str, kind: str, words: str) -> None:
    """Before, a truncated gzip log raised EOFError, which Click turns into an abort: the
    command line said "interrupted" and exited 130, as for Ctrl-C."""
    run, iteration = _raw_copy(tpcb_run, tmp_path, route)
    damaged = next(iteration.glob("tx.*.gz")) if file == "tx.gz" else iteration / file
    RAW_DAMAGE[kind](damaged)
    before = sorted((p, p.stat().st_mtime_ns) for p in run.rglob("*"))
    out = run_cli_here(["report", str(run)], tmp_path)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), out.stderr
    assert str(damaged) in lines[0] and "interrupted" not in lines[0], lines[0]
    assert re.search(words, lines[0], re.IGNORECASE), lines[0]
    assert sorted((p, p.stat().st_mtime_ns) for p in run.rglob("*")) == before  # untouched


@pytest.mark.parametrize("file", ["meta.json", "smart.json", "marks.csv", "checkpoints.csv",
                                  "host_raw.jsonl", "pg_stats.jsonl"])
def test_damaged_telemetry_is_left_out(tpcb_run: Path, tmp_path: Path, file: str) -> None:
    """Telemetry is context: a damaged file's samples are left out and the report is still
    built (before, a file of binary garbage raised a traceback). A torn last line, what a
    crash leaves, was already skipped."""
    run, iteration = _raw_copy(tpcb_run, tmp_path, LOG_ROUTE)
    _garbage(iteration / "telemetry" / file)
    out = run_cli_here(["report", str(run)], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def test_an_eof_error_is_not_taken_for_ctrl_c(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An EOFError a reader lets out (a bug: every damaged file must be named) ends as a bug
    does, one line and exit 70 with its traceback saved to a file, never with "interrupted"
    and exit 130 as Click's abort would."""
    import tempfile

    from pgdyno.runner import report

    def cut_short(_path: Path) -> Path:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(report, "report_target", lambda ref, _results: Path(ref))
    monkeypatch.setattr(report, "rebuild", cut_short)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the traceback goes
    out = run_cli_here(["report", str(tmp_path / "run")], tmp_path)
    assert out.returncode == 70, (out.returncode, out.stderr)
    assert "interrupted" not in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert ("EOFError: Compressed file ended before the end-of-stream marker was reached"
            in out.stderr)
    saved = next(tmp_path.glob("pgdyno-traceback-*.txt"))
    assert str(saved) in out.stderr and "EOFError" in saved.read_text()


# ----- the search's study (pgdyno tune --search) ------------------------------------------

TUNE_SEARCH = ["tune", "--search", "tpcb", "--budget", "1", "--search-name", "t",
               "--scale", "1", "--duration", "2", "--clients", "1", "--no-progress"]


@pytest.fixture(scope="module")
def study_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real study.db: Optuna's tables and three finished baselines."""
    from types import SimpleNamespace

    from pgdyno.search import study as study_mod

    directory = tmp_path_factory.mktemp("study")
    study = study_mod.open_study(directory, "maximize", 1)
    for i, name in enumerate(("default", "pgtune", "tuned")):
        study_mod.record_baseline(study, name, name, SimpleNamespace(
            status="ok", value=100.0 + i, run_dir=f"r{i}", reason="", seconds=1.0))
    return directory / "study.db"


def _zero_header(path: Path) -> None:
    """SQLite's 16-byte magic string overwritten (another program's file, a bad copy)."""
    path.write_bytes(b"\0" * 16 + path.read_bytes()[16:])


def _other_sqlite(path: Path) -> None:
    """A whole SQLite database, but not an Optuna study."""
    path.unlink()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()


STUDY_CASES = [
    ("garbage", _garbage, "not a SQLite database"),
    ("bad-header", _zero_header, "not a SQLite database"),
    ("truncated", _truncated, "truncated or corrupt"),
    ("truncated-to-a-page", lambda p: p.write_bytes(p.read_bytes()[:4096]),
     "truncated or corrupt"),
    ("directory", _directory, "a directory"),
    ("not-a-study", _other_sqlite, "not an Optuna study"),
]


@pytest.mark.parametrize("damage, words", [(d, w) for _, d, w in STUDY_CASES],
                         ids=[i for i, _, _ in STUDY_CASES])
def test_damaged_study_is_one_line_naming_it(study_db: Path, tmp_path: Path,
                                             damage: Callable[[Path], None],
                                             words: str) -> None:
    """Before, a 105-line SQLAlchemy traceback and exit 1; and the search's directory got
    a new trials/ and search.json first."""
    search_dir = tmp_path / "res" / "searches" / "t"
    search_dir.mkdir(parents=True)
    study = search_dir / "study.db"
    shutil.copyfile(study_db, study)
    damage(study)
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    out = run_cli_here([*TUNE_SEARCH, "--results-dir", str(tmp_path / "res")],
                       tmp_path / "work")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), out.stderr
    assert str(study) in lines[0] and words in lines[0], lines[0]
    assert "--search-name" in lines[0]  # the way out
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("kind", ["truncated", "garbage", "wrong-type", "empty",
                                  "unknown-schema"])
def test_damaged_search_record_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    search_dir = tmp_path / "res" / "searches" / "t"
    search_dir.mkdir(parents=True)
    record = search_dir / "search.json"
    record.write_text(json.dumps({"schema_version": 1, "name": "t", "space": {"knobs": []}},
                                 indent=2))
    DAMAGE[kind](record)
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    out = run_cli_here([*TUNE_SEARCH, "--results-dir", str(tmp_path / "res")],
                       tmp_path / "work")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stderr)
    (line,) = out.stderr.strip().splitlines()
    assert str(record) in line and re.search(WORDS[kind], line, re.IGNORECASE), line
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


# ----- the other workloads' raw files -----------------------------------------------------

def _response_log(path: Path) -> None:
    import gzip

    with gzip.open(path, "wt") as out:
        out.write("end_epoch\tpid\ttransaction\tms\n")
        out.writelines(f"{1e9 + i:.3f}\t7\tnew_order\t1.250\n" for i in range(20_000))


def _read(reader: str, path: Path) -> None:
    """One raw file through the reader `pgdyno report` uses for it."""
    from pgdyno.results.rundir import read_window_start
    from pgdyno.workloads.tprocc import report as tprocc_report
    from pgdyno.workloads.tprocc import response
    from pgdyno.workloads.tproch import streams

    {"response": response.read_samples, "consistency": tprocc_report.read_conditions,
     "queries": lambda p: streams.read_queries(p.parent),
     "tests": lambda p: streams.read_tests(p.parent),
     "window": lambda p: read_window_start(p.parent)}[reader](path)


QUERIES_HEAD = "test,stream,position,query,start,end,seconds,rows,status,error\n"
OTHER_RAW = [  # (reader, file, its whole content or a writer, damage, words)
    ("response", "response_times.tsv.gz", _response_log, "truncated", "truncated"),
    ("response", "response_times.tsv.gz", _response_log, "garbage", "damaged response-time"),
    ("consistency", "consistency.json", '{"conditions": [{"number": 1}]}', "wrong-type",
     "not a pgdyno consistency check"),
    ("consistency", "consistency.json", '{"conditions": []}', "garbage", "binary data"),
    ("queries", "queries.csv", f"{QUERIES_HEAD}power,0,1,1,1.0,2.0,1.0,5,ok,\n", "garbage",
     "binary data"),
    ("queries", "queries.csv", f"{QUERIES_HEAD}power,0,1,1,1.0,2.0,1.0,5,ok,\npower,0,2,2,2.0,3",
     "none", "row 2 is damaged or truncated"),
    ("tests", "tests.json", '{"power": {"seconds": 1.5}}', "truncated", "truncated"),
    ("window", "window.json", '{"window_start": 1.5}', "wrong-type",
     "not a pgdyno iteration window"),
    ("window", "window.json", '{"window_start": 1.5}', "empty", "empty"),
]


@pytest.mark.parametrize("reader, name, content, kind, words", OTHER_RAW,
                         ids=[f"{r}-{k}" for r, _, _, k, _ in OTHER_RAW])
def test_other_raw_files_are_one_line_naming_them(tmp_path: Path, reader: str, name: str,
                                                 content: str | Callable[[Path], None],
                                                 kind: str, words: str) -> None:
    """TPROC-C's response times and consistency check, TPROC-H's timings and tests, the CPU
    baseline's and fio's window: before, a JSONDecodeError, UnicodeDecodeError or (for the gzip log)
    an EOFError read as Ctrl-C."""
    from pgdyno.errors import UsageError

    path = tmp_path / name
    if callable(content):
        content(path)
    else:
        path.write_text(content)
    if kind != "none":
        DAMAGE[kind](path)
    with pytest.raises(UsageError) as caught:
        _read(reader, path)
    assert str(path) in str(caught.value) and words in str(caught.value), caught.value
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ['{"a": 1.', '{"a": 2e-', '{"a": 12e', '{"a": tr',
                                  '{"a": fals', '{"a": [1, 2', '{"a": "x'])
def test_json_cut_anywhere_reads_as_truncated(text: str) -> None:
    """Wherever a cut falls (inside a number or a literal too), the file is 'truncated'."""
    from pgdyno.errors import UsageError
    from pgdyno.results.manifest import parse_json

    with pytest.raises(UsageError, match="the file is truncated"):
        parse_json(text, "f.json", "thing")
    with pytest.raises(UsageError, match="not valid JSON"):
        parse_json('{"a": 1x}', "f.json", "thing")
