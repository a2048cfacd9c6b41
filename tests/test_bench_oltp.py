"""sysbench-style OLTP through the run loop, checked against pgbench's raw log and against
what the server itself counted."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

pytestmark = pytest.mark.server

STATEMENTS = {"oltp-read-only": (14, 0, 2), "oltp-read-write": (14, 4, 2)}
"""(reads, writes, other) per transaction, from sysbench's oltp_common.lua."""


def _database(server, name: str) -> str:
    conn = server.connection()
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        db.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"postgresql://{conn.user}@/{name}?host={conn.host}&port={conn.port}"


def _table_counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_del), 0), "
                         "coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables "
                         "WHERE relname LIKE 'sbtest%'").fetchone()
    return {"upd": int(row[0]), "del": int(row[1]), "ins": int(row[2])}


def _committed(run_dir: Path) -> tuple[int, float]:
    """Committed transactions in every pgbench log (warm-up included), and the measured
    window's TPS recomputed from the logs: the test's own reading of the raw files."""
    summary = json.loads((run_dir / "summary.json").read_text())
    total = 0
    for path in (run_dir / "raw" / "pgbench").glob("*/tx.*.gz"):
        with gzip.open(path, "rt") as fh:
            total += sum(1 for line in fh if line.split()[2] not in ("failed", "skipped"))
    it = summary["iterations"][0]
    start, end = it["window_start_epoch"], it["window_start_epoch"] + it["duration_s"]
    in_window = 0
    for path in (run_dir / "raw" / "pgbench").glob("*/tx.*.gz"):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                f = line.split()
                if f[2] in ("failed", "skipped"):
                    continue
                done = int(f[4]) + int(f[5]) / 1e6  # epoch seconds of the end
                in_window += start <= done < end
    return total, in_window / it["duration_s"]


def _run(workload: str, dsn: str, results: Path, workdir: Path, *extra: str):
    return run_cli(["bench", workload, "--dsn", dsn, "--tables", "2", "--table-size", "20000",
                    "--rand-type", "uniform", "--clients", "4", "--duration", "3", "--warmup",
                    "1", "--iterations", "1", "--no-progress", "--results-dir", str(results),
                    *extra], workdir)


@pytest.mark.parametrize("workload", ["oltp-read-only", "oltp-read-write"])
def test_oltp_figures_match_the_log_and_the_server(server, workdir: Path, workload: str) -> None:
    dsn = _database(server, f"oltp_{workload.replace('-', '_')}")
    results = make_shared_dir("pgdyno-oltp-")
    first = _run(workload, dsn, results, workdir)
    assert first.returncode == 0, first.stderr
    before = _table_counts(dsn)
    second = _run(workload, dsn, results, workdir)  # the dataset is reused
    assert second.returncode == 0, second.stderr
    after = _table_counts(dsn)
    run_dir = sorted((results).glob(f"*--{workload}/{workload}-*"))[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["dataset"]["reused"] is True
    summary = json.loads((run_dir / "summary.json").read_text())
    it = summary["iterations"][0]
    reads, writes, other = STATEMENTS[workload]
    total, window_tps = _committed(run_dir)
    assert it["metrics"]["tps"] == pytest.approx(window_tps, rel=1e-6)
    assert it["metrics"]["qps"] == pytest.approx((reads + writes + other) * window_tps)
    assert it["metrics"]["writes_per_s"] == pytest.approx(writes * window_tps)
    # The server's own counts of the second run (warm-up included) against the log's.
    delta = {k: after[k] - before[k] for k in after}
    if writes:
        assert delta["upd"] == pytest.approx(2 * total, rel=0.02)
        assert delta["del"] == pytest.approx(total, rel=0.02)
        assert delta["ins"] == pytest.approx(total, rel=0.02)
    else:
        assert delta == {"upd": 0, "del": 0, "ins": 0}
    report = (run_dir / "report.md").read_text()
    assert f"sysbench-style {workload}" in report and "QPS" in report
    with psycopg.connect(dsn) as db:  # deletes and re-inserts keep every table full
        for n in (1, 2):
            count = db.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier("pgdyno_bench", f"sbtest{n}"))).fetchone()[0]
            assert count == 20000


def test_oltp_refuses_foreign_tables(server, workdir: Path) -> None:
    dsn = _database(server, "oltp_foreign")
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("CREATE TABLE mine (id int)")
    results = make_shared_dir("pgdyno-oltp-")
    out = _run("oltp-read-only", dsn, results, workdir)
    assert out.returncode == 2
    assert "public.mine" in out.stderr and "--force" in out.stderr
