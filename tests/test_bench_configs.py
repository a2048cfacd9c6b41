"""Named configs in bench: the server runs with them, and a config that breaks start rolls back."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

pytestmark = pytest.mark.server  # every test here starts PostgreSQL

SHORT = ["--clients", "2", "--duration", "2", "--warmup", "0", "--iterations", "1", "--scale",
         "1", "--no-progress"]


def test_tuned_config_is_applied_and_recorded(workdir: Path) -> None:
    own = make_shared_dir("pgdyno-cfg-")
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "tpcb", "--config", "tuned", "--set", "work_mem=8MB", *SHORT,
                    "--results-dir", str(results), "--keep"], own)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(next(results.glob("*/*/manifest.json")).read_text())
    config = manifest["config"]
    assert config["name"] == "tuned"
    assert config["pg_settings"]["work_mem"] in ("'8MB'", "8MB")
    assert "shared_buffers" in config["pg_settings"] and config["sources"]["shared_buffers"]
    settings = manifest["server"]["non_default_settings"]
    assert settings["work_mem"] == "8192 kB"
    server = LocalServer(install=embedded_install(), workdir=own)
    with psycopg.connect(server.connection().conninfo().replace(
            f"port={server.port}", f"port={_port(own)}")) as db:
        assert db.execute("SHOW work_mem").fetchone()[0] == "8MB"
    run_cli(["bench", "tpcb", *SHORT, "--results-dir", str(results)], own)  # stops it


def _port(workdir: Path) -> int:
    pid = (workdir / "instances" / "pg18-embedded" / "data" / "postmaster.pid").read_text()
    return int(pid.splitlines()[3])


def test_config_that_cannot_start_is_rolled_back(workdir: Path) -> None:
    own = make_shared_dir("pgdyno-cfg-")
    results = make_shared_dir("pgdyno-results-")
    first = run_cli(["bench", "select-only", *SHORT, "--results-dir", str(results)], own)
    assert first.returncode == 0, first.stderr
    # Valid as a setting, fatal at start: a preload library that does not exist.
    bad = run_cli(["bench", "select-only", "--set", "shared_preload_libraries=no_such_lib",
                   *SHORT, "--results-dir", str(results)], own)
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1
    manifests = [json.loads(m.read_text()) for m in sorted(results.glob("*/*/manifest.json"))]
    failed = [m for m in manifests if m["status"] == "failed"]
    assert "rolled back" in bad.stderr and "no_such_lib" in bad.stderr
    assert failed[0]["config_rollback"]["rolled_back_to"] == "default"
    assert "did not start" in " ".join(failed[0]["notes"])
    again = run_cli(["bench", "select-only", *SHORT, "--results-dir", str(results)], own)
    assert again.returncode == 0, again.stderr
