"""Rejected input leaves nothing behind: no run directory, no reserve file, no index row."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", [
    ["--iterations", "100000000000000000000"],
    ["--iterations", "10000000000"],
    ["--duration", "100000000000"],
    ["--warmup", "99999999999"],
    ["--max-tries", "100000000000"],
    ["--clients", "100000"],
    ["--rate", "inf"],
    ["--rate", "nan"],
    ["--latency-limit", "nan", "--rate", "10"],
    ["--threads", "100000"],
    ["--tx-logs", "lots"],
    ["--tx-logs", "-5"],
    ["--dataset-size", "100TB"],
    ["--scale", "100000000"],
    ["--context", "../outside"],
    ["--context", ".."],
    ["--set", "no_such_setting=1"],
    ["--set", "shared_buffers=lots"],
    ["--set", "work_mem"],
    ["--dsn", f"host=127.0.0.1 port={_closed_port()} dbname=x user=x connect_timeout=2"],
])
def test_rejected_input_leaves_no_clutter(tmp_path: Path, args: list[str]) -> None:
    results = tmp_path / "results"
    defaults = {"--scale": "1", "--clients": "2", "--duration": "2"}
    given = [a for k, v in defaults.items() if k not in args and not (
        k == "--scale" and "--dataset-size" in args) for a in (k, v)]
    out = run_cli(["bench", "tpcb", *given, "--results-dir", str(results), "--no-progress",
                   *args], tmp_path / "work")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error:"), out.stderr
    assert "run directory" not in lines[0]
    assert not results.exists(), sorted(str(p) for p in results.rglob("*"))


@pytest.mark.parametrize("args", [
    ["tprocc", "--warehouses", "100000000000000000000"],
    ["tprocc", "--warehouses", "10,200000"],
    ["tprocc", "--mix", ""],
    ["tproch", "--scale-factor", "0"],
    ["tproch", "--scale-factor", "0.001"],
    ["tproch", "--scale-factor", "1", "--dataset-size", "3GB"],
    ["tproch", "--tests", "speed"],
    ["tproch", "--queries", "23"],
    ["tproch", "--queries", "5-3"],
    ["tproch", "--query-timeout", "soon"],
    ["tproch", "--query-timeout", "0s"],
    ["tproch", "--streams", "0"],
    ["tproch", "--seed", "-1"],
    ["tpcb", "--streams", "2"],
])
def test_tprocc_input_is_refused_before_anything(tmp_path: Path, args: list[str]) -> None:
    results = tmp_path / "results"
    out = run_cli(["bench", *args, "--results-dir", str(results), "--no-progress"],
                  tmp_path / "work")
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not results.exists()


@pytest.mark.parametrize(("body", "words"), [
    ("\\set x random(1,\nSELECT 1;\n", ['syntax error in command "set"']),
    ("\\sleepy 3\nSELECT 1;\n", ['invalid command in command "sleepy"']),
    ("\\set aid random(1, :nosuch)\nSELECT :aid;\n", []),  # parses; fails only when run
])
def test_scripts_are_parsed_by_pgbench_before_anything(tmp_path: Path, body: str,
                                                        words: list[str]) -> None:
    script = tmp_path / "mine.sql"
    script.write_text(body)
    results = tmp_path / "results"
    out = run_cli(["bench", "custom", "--script", str(script), "--results-dir", str(results),
                   "--clients", "1", "--duration", "1", "--no-progress", "--scale", "1",
                   "--dsn", f"host=127.0.0.1 port={_closed_port()} dbname=x user=x"],
                  tmp_path / "work")
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    if words:  # pgbench's own words, about the script
        assert line.startswith("pgdyno: error: --script: pgbench refuses it: ")
        assert str(script) in line and all(w in line for w in words), line
    else:  # a script pgbench accepts goes on to the next check (here: the DSN)
        assert "--dsn" in line and "cannot connect" in line, line
    assert not results.exists()


@pytest.mark.parametrize(("given", "cap"), [("all", None), ("none", 0), ("1000", 1000),
                                            ("2_000_000", 2_000_000), (None, 1_000_000)])
def test_tx_logs_values(given: str | None, cap: int | None) -> None:
    from pgdyno.runner.options import parse_tx_logs

    assert parse_tx_logs(given) == cap



# ----- refusals found by a pre-flight check, before the run directory -----------------

def _one_line_and_nothing_made(out, root: Path, *words: str) -> None:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stderr)
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("pgdyno: error: ") and "run directory" not in line, line
    for word in words:
        assert word in line, (word, line)
    assert not (root / "results").exists(), sorted(str(p) for p in root.rglob("*"))
    assert not (root / "work").exists()


ARCHIVE = ["bench", "tpcb", "--scale", "1", "--clients", "1", "--duration", "1",
           "--no-progress", "--archive", "buffered"]


@pytest.mark.parametrize(("where", "words"), [
    ("afile", ["is a file", "a directory (created if absent)"]),
    ("afile/archive", ["afile is a file"]),
])
def test_an_archive_dir_that_cannot_be_is_refused_before_anything(
        tmp_path: Path, where: str, words: list[str]) -> None:
    """Before, the run started, made its run directory and failed there (exit 2, but a
    failed run left behind)."""
    (tmp_path / "afile").write_text("x")
    out = run_cli([*ARCHIVE, "--archive-dir", str(tmp_path / where), "--results-dir",
                   str(tmp_path / "results")], tmp_path / "work")
    _one_line_and_nothing_made(out, tmp_path, f"--archive-dir {tmp_path / where}", *words)


def test_a_sweep_with_bad_input_is_refused_before_its_directory(tmp_path: Path) -> None:
    """A sweep (one run per dataset size) checks once before its own directory: inside it,
    a refused step would only fail that step, and the sweep end with exit 0."""
    (tmp_path / "afile").write_text("x")
    out = run_cli(["bench", "tprocc", "--warehouses", "1,2", "--duration", "1",
                   "--no-progress", "--archive", "buffered", "--archive-dir",
                   str(tmp_path / "afile"), "--results-dir", str(tmp_path / "results")],
                  tmp_path / "work")
    _one_line_and_nothing_made(out, tmp_path, "is a file")


def test_an_archive_dir_out_of_the_server_users_reach_is_refused(tmp_path: Path) -> None:
    from pgdyno.targets.osuser import running_as_root

    if not running_as_root():
        pytest.skip("the server runs as this user: every directory it may write it reaches")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    out = run_cli([*ARCHIVE, "--archive-dir", str(private / "archive"), "--results-dir",
                   str(tmp_path / "results")], tmp_path / "work")
    _one_line_and_nothing_made(out, tmp_path, "cannot traverse", str(private))
    assert list(private.iterdir()) == []


def test_an_archive_dir_the_server_user_cannot_write_is_refused_and_left_as_it_is(
        tmp_path: Path) -> None:
    """A directory that is there already, root's and closed to others: refused before
    anything is made, its owner and mode unchanged (pgdyno gives away only what it made)."""
    from pgdyno.targets.osuser import running_as_root, server_user

    if not running_as_root():
        pytest.skip("the server runs as this user: every directory it may write it reaches")
    theirs = make_shared_dir("pgdyno-theirs-")  # under /var/tmp, which the server user reaches
    before = theirs.stat()
    out = run_cli([*ARCHIVE, "--archive-dir", str(theirs), "--results-dir",
                   str(tmp_path / "results")], tmp_path / "work")
    _one_line_and_nothing_made(out, tmp_path, f"the server user {server_user().name} cannot "
                               "write to it", f"chown {server_user().name} {theirs}")
    after = theirs.stat()
    assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode)
    assert list(theirs.iterdir()) == []


def test_an_archive_dir_on_a_read_only_filesystem_is_refused(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {made.stderr.decode().strip()}")
    try:
        for where in (mount, mount / "archive"):
            out = run_cli([*ARCHIVE, "--archive-dir", str(where), "--results-dir",
                           str(tmp_path / "results")], tmp_path / "work")
            _one_line_and_nothing_made(out, tmp_path, f"{mount} is on a read-only filesystem")
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_missing_tpchgen_cli_is_refused_before_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TPROC-H's data generator is looked for before the run directory is made (before, it
    was looked for by the load, in a run directory then left failed)."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    out = run_cli(["bench", "tproch", "--scale-factor", "0.01", "--no-progress",
                   "--results-dir", str(tmp_path / "results")], tmp_path / "work",
                  env={"PATH": str(tmp_path)})
    _one_line_and_nothing_made(out, tmp_path, "tpchgen-cli not found", "pip install tpchgen-cli")


@pytest.mark.server
def test_a_dsn_database_the_tproch_load_would_refuse_is_refused_before_anything(
        server, tmp_path: Path) -> None:
    """A --dsn database holding a user's lineitem: the load's refusal (tables pgdyno did
    not create, --force offered) comes before the run directory, read without changing the
    database; with --force the run goes on past it."""
    import psycopg

    from tests.conftest import scratch_database

    for conn in scratch_database(server, "pgdyno_refuse_lineitem"):
        with psycopg.connect(conn.in_schema(None).conninfo(), autocommit=True) as db:
            db.execute("CREATE TABLE lineitem (precious text)")
        out = run_cli(["bench", "tproch", "--scale-factor", "0.01", "--no-progress",
                       "--dsn", conn.conninfo(), "--results-dir", str(tmp_path / "results")],
                      tmp_path / "work")
        _one_line_and_nothing_made(out, tmp_path, "public.lineitem", "--force")
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            assert db.execute("SELECT count(*) FROM pg_namespace WHERE nspname = "
                              "'pgdyno_tpch'").fetchone() == (0,)


@pytest.mark.server
@pytest.mark.parametrize(("args", "table"), [
    (["tpcb", "--scale", "1"], "pgbench_accounts"),
    (["tprocc", "--warehouses", "1"], "customer"),
    (["oltp-read-only", "--tables", "1", "--table-size", "100"], "sbtest1"),
])
def test_every_workload_refuses_a_dsn_database_before_its_run_directory(
        server, tmp_path: Path, args: list[str], table: str) -> None:
    """The same pre-flight for every workload with a dataset (Workload.dataset_tables):
    a --dsn database holding a user's table is refused in one line before anything is
    made, and the database is left as it was (no schema of pgdyno's)."""
    import psycopg

    from tests.conftest import scratch_database

    for conn in scratch_database(server, f"pgdyno_refuse_{args[0].replace('-', '_')}"):
        with psycopg.connect(conn.in_schema(None).conninfo(), autocommit=True) as db:
            db.execute(f"CREATE TABLE {table} (precious text)")
        out = run_cli(["bench", *args, "--clients", "1", "--no-progress", "--dsn",
                       conn.conninfo(), "--results-dir", str(tmp_path / "results")],
                      tmp_path / "work")
        _one_line_and_nothing_made(out, tmp_path, f"public.{table}", "--force")
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            assert db.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE "
                              "'pgdyno%'").fetchone() == (0,)
