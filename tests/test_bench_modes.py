"""Bench modes: several scripts, fixed rate, TCP, cold cache, other PostgreSQL binaries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli
from tests.recompute import recompute_iteration

pytestmark = pytest.mark.server  # every test here starts PostgreSQL

DEBIAN_PG = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))


def _only_run(results: Path) -> Path:
    runs = list(results.glob("*/*/manifest.json"))
    assert len(runs) == 1
    return runs[0].parent


def test_scripts_rate_and_tcp(workdir: Path, tmp_path: Path) -> None:
    script = tmp_path / "lookup.sql"
    script.write_text("\\set aid random(1, 100000 * :scale)\n"
                      "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
    shared_script = make_shared_dir("pgdyno-script-") / "lookup.sql"
    shared_script.write_text(script.read_text())
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "simple-update", "--script", f"{shared_script}@3", "--clients", "2",
                    "--duration", "3", "--warmup", "0", "--iterations", "1", "--scale", "1",
                    "--rate", "300", "--latency-limit", "50", "--via", "tcp", "--no-progress",
                    "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    run = _only_run(results)
    summary = json.loads((run / "summary.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    assert "(tcp)" in manifest["connection"]
    assert any("-h 127.0.0.1" in c and "-R 300" in c for c in manifest["commands"])
    it = summary["iterations"][0]
    raw = recompute_iteration(run, it, warmup_s=0, duration_s=3)
    scripts = {s["name"]: s for s in it["scripts"]}
    assert set(scripts) == {"simple-update", "lookup"}
    assert scripts["simple-update"]["transactions"] == raw.per_script[0]
    assert scripts["lookup"]["transactions"] == raw.per_script[1]
    assert scripts["lookup"]["weight"] == 3
    # A Poisson schedule at 300 tps for 3 s: the achieved rate is near the target.
    assert 200 < it["tps_mean"] < 400
    assert it["lag"] is not None and it["lag"]["count"] == it["transactions"]
    assert (run / "raw" / "scripts" / "lookup.sql").exists()
    md = (run / "report.md").read_text()
    assert "## Fixed-rate schedule" in md and "## Per script" in md


def test_cold_cache_restarts_and_drops_cache(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "select-only", "--cache", "cold", "--clients", "1", "--duration",
                    "2", "--warmup", "0", "--iterations", "2", "--scale", "1", "--no-progress",
                    "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    run = _only_run(results)
    log = (workdir / "instances" / "pg18-embedded" / "server.log").read_text()
    assert log.count("database system is ready to accept connections") >= 2
    manifest = json.loads((run / "manifest.json").read_text())
    import os

    if os.geteuid() == 0:
        assert not any("not dropped" in n for n in manifest["notes"])
    else:
        assert any("not dropped" in n for n in manifest["notes"])


@pytest.mark.skipif(not DEBIAN_PG, reason="no Debian PostgreSQL binaries installed")
def test_other_binaries_with_pg_bin(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-results-")
    bin_dir = DEBIAN_PG[0].parent
    proc = run_cli(["bench", "select-only", "--pg-bin", str(bin_dir), "--clients", "1",
                    "--duration", "2", "--warmup", "0", "--iterations", "1", "--scale", "1",
                    "--no-progress", "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((_only_run(results) / "manifest.json").read_text())
    assert manifest["server"]["version"].split(".")[0] == bin_dir.parent.name
    assert manifest["target"]["kind"] == "local"
    summary = json.loads((_only_run(results) / "summary.json").read_text())
    assert summary["per_clients"][0]["transactions"] > 0
    assert not math.isnan(summary["per_clients"][0]["tps_mean"])


def test_dsn_target_is_never_restarted_and_password_never_written(server, workdir: Path) -> None:
    import psycopg

    conn = server.connection()
    with psycopg.connect(conn.conninfo()) as db:
        before = db.execute("SELECT pg_postmaster_start_time(), "
                            "(SELECT count(*) FROM pg_settings WHERE source <> 'default')"
                            ).fetchone()
    results = make_shared_dir("pgdyno-results-")
    dsn = (f"postgresql://{conn.user}:s3cret-pw@/{conn.dbname}?host={conn.host}"
           f"&port={conn.port}")
    proc = run_cli(["bench", "select-only", "--dsn", dsn, "--clients", "1", "--duration", "2",
                    "--warmup", "0", "--iterations", "1", "--scale", "1", "--no-progress",
                    "--force", "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    with psycopg.connect(conn.conninfo()) as db:
        after = db.execute("SELECT pg_postmaster_start_time(), "
                           "(SELECT count(*) FROM pg_settings WHERE source <> 'default')"
                           ).fetchone()
    assert after == before
    assert server.is_running()
    for path in results.rglob("*"):
        if path.is_file() and path.suffix != ".gz":
            assert b"s3cret-pw" not in path.read_bytes(), path
    assert "s3cret-pw" not in proc.stdout + proc.stderr
    refused = run_cli(["bench", "select-only", "--dsn", dsn, "--config", "tuned"], workdir)
    assert refused.returncode == 2 and "never changes" in refused.stderr


def test_dsn_role_without_pg_checkpoint_runs_and_says_so(server, workdir: Path) -> None:
    import psycopg

    from pgdyno.workloads.base import NO_CHECKPOINT

    admin = server.admin_connection().conninfo("postgres")
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute("DROP DATABASE IF EXISTS plain_db WITH (FORCE)")
        db.execute("DROP ROLE IF EXISTS plain_role")
        db.execute("CREATE ROLE plain_role LOGIN")
        db.execute("CREATE DATABASE plain_db OWNER plain_role")
    try:
        conn = server.connection()
        results = make_shared_dir("pgdyno-results-")
        dsn = f"host={conn.host} port={conn.port} user=plain_role dbname=plain_db"
        proc = run_cli(["bench", "select-only", "--dsn", dsn, "--clients", "1", "--duration",
                        "1", "--warmup", "0", "--iterations", "2", "--scale", "1",
                        "--no-telemetry", "--no-progress", "--results-dir", str(results)],
                       workdir)
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads(next(results.glob("*/*/manifest.json")).read_text())
        assert manifest["status"] == "ok" and manifest["notes"].count(NO_CHECKPOINT) == 1
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute("DROP DATABASE IF EXISTS plain_db WITH (FORCE)")
            db.execute("DROP ROLE IF EXISTS plain_role")


def test_dsn_clients_beyond_the_servers_connections_are_refused(server, workdir: Path) -> None:
    import psycopg

    conn = server.connection()
    with psycopg.connect(conn.conninfo()) as db:
        limit = int(db.execute("SHOW max_connections").fetchone()[0])
    results = make_shared_dir("pgdyno-results-")
    dsn = f"host={conn.host} port={conn.port} user={conn.user} dbname={conn.dbname}"
    proc = run_cli(["bench", "select-only", "--dsn", dsn, "--clients", str(limit),
                    "--duration", "1", "--no-progress", "--results-dir", str(results)], workdir)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"--clients {limit}: this server accepts at most" in line
    assert f"max_connections {limit}" in line
    assert not any(results.iterdir())
