"""A server that does not start says why in one line, then where its log is, and the
campaign journal's root cause keeps that line whole. The expected lines
are read from the real server log here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.campaign.journal import root_cause
from pgdyno.errors import TargetError
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer, ServerStartError, start_error_line
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

MISSING_LIBRARY = "pgdyno_no_such_library"


def log_line(log: Path, *needles: str) -> str:
    """The last line of the log holding every needle, from its severity or 'postgres:' on."""
    line = [x for x in log.read_text().splitlines() if all(n in x for n in needles)][-1]
    for marker in ("PANIC:", "FATAL:", "postgres:"):
        if marker in line:
            return line[line.index(marker):].strip()
    raise AssertionError(f"no error marker in {line!r}")


def failed_start(server: LocalServer, settings: dict[str, str]) -> TargetError:
    server.write_settings(settings)
    with pytest.raises(ServerStartError) as err:
        server.start()
    return err.value


def test_start_failure_is_the_fatal_line_then_the_log(workdir: Path) -> None:
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="start-errors")
    srv.prepare()
    try:
        err = failed_start(srv, {"shared_preload_libraries": f"'{MISSING_LIBRARY}'"})
        lines = str(err).splitlines()
        assert lines[0] == log_line(srv.log_path, "FATAL:", MISSING_LIBRARY)
        assert lines[0].startswith("FATAL:")
        assert lines[1:] == [f"server log: {srv.log_path}"]
        # A second failure reports its own line, not the first one still in the log.
        err = failed_start(srv, {"max_connections": "2"})
        lines = str(err).splitlines()
        assert lines[0] == log_line(srv.log_path, "max_connections", "(2)")
        assert MISSING_LIBRARY not in str(err)
        assert lines[1] == f"server log: {srv.log_path}"
        # and the same server starts again once the settings are good
        srv.write_settings({})
        srv.start()
        assert srv.is_running()
    finally:
        srv.stop()


def test_bench_records_the_line_and_the_journal_keeps_it_whole(workdir: Path) -> None:
    """Through `pgdyno bench`: the rollback record holds the FATAL line then the log path,
    and the journal's root cause shows a start error with parentheses in full (it used to
    be cut at the first '(': 'superuser_reserved_connections')."""
    own = make_shared_dir("pgdyno-start-")
    results = make_shared_dir("pgdyno-start-results-")
    short = ["--clients", "1", "--scale", "1", "--duration", "2", "--warmup", "1",
             "--iterations", "1", "--no-telemetry", "--no-progress", "--results-dir",
             str(results)]
    for setting in (f"shared_preload_libraries={MISSING_LIBRARY}", "max_connections=2"):
        proc = run_cli(["bench", "select-only", "--set", setting, *short], own)
        assert proc.returncode != 0
    log = own / "instances" / "pg18-embedded" / "server.log"
    manifests = [json.loads(m.read_text()) for m in sorted(results.glob("*/*/manifest.json"))]
    failed = sorted((m for m in manifests if m["status"] == "failed"),
                    key=lambda m: m["started_at"])
    assert len(failed) == 2
    library, connections = failed
    error = library["config_rollback"]["error"].splitlines()
    assert error[0] == log_line(log, "FATAL:", MISSING_LIBRARY)
    assert error[1] == f"server log: {log}"
    want = log_line(log, "max_connections", "(2)")
    assert connections["config_rollback"]["error"].splitlines()[0] == want
    assert root_cause(connections["reason"]).endswith(want)
    assert root_cause(library["reason"]).endswith(log_line(log, "FATAL:", MISSING_LIBRARY))


# ----- recorded samples: the parsers on their own ---------------------------------------------

LOG_CONFIG_ERROR = """\
2026-01-01 00:00:00.000 UTC [1] LOG:  1 kB is outside the valid range for parameter "work_mem" \
(64 kB .. 2147483647 kB)
2026-01-01 00:00:00.000 UTC [1] FATAL:  configuration file "/x/pgdyno.conf" contains errors
"""
LOG_STARTING_UP = """\
2026-01-01 00:00:00.000 UTC [1] LOG:  starting PostgreSQL 18.6
2026-01-01 00:00:00.100 UTC [2] FATAL:  the database system is starting up
2026-01-01 00:00:00.200 UTC [1] PANIC:  could not write to file "pg_wal/xlogtemp.1": No space left
2026-01-01 00:00:00.300 UTC [1] LOG:  database system is shut down
"""


def test_start_error_line_picks_the_cause() -> None:
    assert start_error_line(LOG_CONFIG_ERROR) == (
        'FATAL:  configuration file "/x/pgdyno.conf" contains errors: 1 kB is outside the '
        'valid range for parameter "work_mem" (64 kB .. 2147483647 kB)')
    assert start_error_line(LOG_STARTING_UP).startswith("PANIC:  could not write")
    bare = 'postgres: invalid argument: "x"'
    assert start_error_line(f"{bare}\n") == bare
    assert start_error_line("2026 LOG:  nothing wrong\n") == ""


def test_root_cause_keeps_parentheses_of_old_reasons() -> None:
    """A reason recorded before the fix: the log tail joined by ' | ' inside parentheses."""
    reason = ("the server did not start with config pgtune (PostgreSQL exited during start "
              "(code 1); server log /w/server.log: 2026 [9] FATAL:  superuser_reserved_"
              "connections (3) plus reserved_connections (0) must be less than max_connections "
              "(2)); rolled back to config default, which starts; server log: 2026 [8] LOG:  "
              "background worker \"logical replication launcher\" (PID 9) exited | 2026 LOG:  x")
    assert root_cause(reason) == (
        "the server did not start with config pgtune: FATAL:  superuser_reserved_connections "
        "(3) plus reserved_connections (0) must be less than max_connections (2)")
