"""Spaced checkpoints and wal_level minimal around a bulk load (workloads.bulkload), on a
real server pgdyno owns.

The server's own counters are the oracle: pg_stat_checkpointer counts the checkpoints the
load caused, pg_current_wal_lsn() the WAL it wrote. A server with a tiny max_wal_size
checkpoints every few MB, so a TPROC-C load of one warehouse shows the effect that
W=100 shows on a stock server: hint-bit page images in the keys and vacuum phases.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import INCLUDE_FILE, LocalServer
from pgdyno.units import format_bytes
from pgdyno.workloads import bulkload
from pgdyno.workloads.oltp import schema as oltp
from pgdyno.workloads.tprocc import LoadOptions, load
from tests.conftest import own_cluster_run, scratch_database

SMALL_WAL = {"max_wal_size": "32MB", "min_wal_size": "32MB"}
MB = 2**20


@pytest.fixture(scope="module")
def small_wal_server(workdir: Path) -> Iterator[LocalServer]:
    """A server of its own whose config checkpoints every ~17 MB of WAL."""
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="bulkload",
                      settings=dict(SMALL_WAL))
    srv.prepare()
    srv.start()
    yield srv
    srv.stop()


def _show(conn: ConnectionInfo, name: str) -> str:
    with psycopg.connect(conn.conninfo(), autocommit=True) as c:
        return c.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]


def _counters(conn: ConnectionInfo, settle: bool = False,
              at_least: int = 0) -> tuple[int, str]:
    """(checkpoints so far, WAL position); ``settle``: after a CHECKPOINT, so that one an
    earlier load requested is counted before, not during, what follows. The checkpointer
    reports its count a moment after a checkpoint ends (later on a busy host), so the
    count is waited for: one above what it was before the CHECKPOINT, or ``at_least``."""
    query = ("SELECT (SELECT num_requested + num_timed FROM pg_stat_checkpointer),"
             " pg_current_wal_lsn()::text")
    with psycopg.connect(conn.conninfo(), autocommit=True) as c:
        if settle:
            at_least = c.execute(query).fetchone()[0] + 1
            c.execute("CHECKPOINT")
        deadline = time.monotonic() + 10
        while (row := c.execute(query).fetchone())[0] < at_least \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        return row


def _measured_load(conn: ConnectionInfo, spaced: bool) -> tuple[int, float, object]:
    """(checkpoints, WAL bytes, result) of a W=1 load, as the server counted them."""
    ckpt0, lsn0 = _counters(conn, settle=True)
    result = load(conn, LoadOptions(warehouses=1, workers=2, rebuild=True,
                                    checkpoint_at_end=spaced))
    ckpt1, lsn1 = _counters(conn, at_least=ckpt0 + 1 if spaced else 0)  # its closing one
    with psycopg.connect(conn.conninfo(), autocommit=True) as c:
        wal = c.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn1, lsn0)).fetchone()[0]
    return ckpt1 - ckpt0, float(wal), result


@pytest.mark.server
def test_spaced_checkpoints_remove_the_hint_bit_page_images(small_wal_server) -> None:
    for conn in scratch_database(small_wal_server, "bulkload_effect"):
        assert _show(conn, "data_checksums") == "on"  # what makes hint bits cost WAL
        plain_ckpts, plain_wal, _ = _measured_load(conn, spaced=False)
        with bulkload.spaced_checkpoints(small_wal_server, conn, 200 * MB) as spacing:
            assert spacing.applied, spacing.note
            assert _show(conn, "max_wal_size") == "600MB"
            assert _show(conn, "checkpoint_timeout") == "1h"
            spaced_ckpts, spaced_wal, result = _measured_load(conn, spaced=True)
        # The plain load checkpointed every ~17 MB; the spaced one only at its end.
        assert plain_ckpts >= 1, plain_ckpts  # requests merge while one is spread out
        assert spaced_ckpts == 1
        assert "checkpoint" in result.phase_seconds
        # The page images of hint bits set after a checkpoint are gone: a third less WAL.
        assert spaced_wal < 0.8 * plain_wal, (spaced_wal / MB, plain_wal / MB)
        assert _show(conn, "max_wal_size") == "32MB"
        assert _show(conn, "checkpoint_timeout") == "5min"


@pytest.mark.server
def test_the_oltp_build_is_spaced_the_same_way(small_wal_server) -> None:
    rows = 2 * 60_000
    for conn in scratch_database(small_wal_server, "bulkload_oltp"):
        counted = []
        for spaced in (False, True):
            with bulkload.spaced_checkpoints(small_wal_server if spaced else None, conn,
                                             oltp.LOAD_WAL_PER_ROW * rows) as spacing:
                assert spacing.applied == spaced
                ckpt0, lsn0 = _counters(conn, settle=True)
                result = oltp.load(conn, oltp.LoadOptions(
                    tables=2, table_size=rows // 2 + spaced, workers=2,  # a new size: rebuilt
                    checkpoint_at_end=spacing.applied))
                ckpt1, lsn1 = _counters(conn, at_least=ckpt0 + 1 if spaced else 0)
            with psycopg.connect(conn.conninfo(), autocommit=True) as c:
                wal = c.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn1, lsn0)).fetchone()[0]
            counted.append((ckpt1 - ckpt0, float(wal), result))
        (plain_ckpts, plain_wal, _), (spaced_ckpts, spaced_wal, result) = counted
        # Checkpoints requested while one is spread out merge: at least one, spaced only
        # the closing one.
        assert plain_ckpts >= 1 and spaced_ckpts == 1, (plain_ckpts, spaced_ckpts)
        assert list(result.phase_seconds)[-1] == "checkpoint"
        assert spaced_wal < 0.9 * plain_wal, (spaced_wal / MB, plain_wal / MB)
        assert _show(conn, "max_wal_size") == "32MB"


@pytest.mark.server
def test_the_config_comes_back_even_when_the_load_fails(small_wal_server) -> None:
    include = small_wal_server.data_dir / INCLUDE_FILE
    before = include.read_text()
    for conn in scratch_database(small_wal_server, "bulkload_fail"):
        with pytest.raises(RuntimeError), \
                bulkload.spaced_checkpoints(small_wal_server, conn, 100 * MB) as spacing:
            assert spacing.settings == {"max_wal_size": "300MB", "checkpoint_timeout": "1h"}
            assert "max_wal_size = 300MB" in include.read_text()
            raise RuntimeError("the load failed")
        assert include.read_text() == before
        assert small_wal_server.settings == SMALL_WAL
        assert _show(conn, "max_wal_size") == "32MB"
        assert _show(conn, "checkpoint_timeout") == "5min"


@pytest.mark.server
def test_a_server_pgdyno_does_not_own_keeps_its_settings(small_wal_server) -> None:
    for conn in scratch_database(small_wal_server, "bulkload_foreign"):
        with bulkload.spaced_checkpoints(None, conn, 500 * MB) as spacing:
            assert not spacing.applied
            assert "does not own" in spacing.note
            assert _show(conn, "max_wal_size") == "32MB"


@pytest.mark.server
def test_a_run_records_and_reports_the_load_settings() -> None:
    """Through pgdyno bench on its embedded server: the load record names the settings
    and the closing checkpoint, the report says so, and the config's own are back. In a
    workdir of its own: the sbtest table must not grow other tests' databases."""
    with own_cluster_run("pgdyno-bulkload", "oltp-read-only", "--tables", "1",
                         "--table-size", "100000", "--set", "max_wal_size=32MB", "--set",
                         "min_wal_size=32MB") as (run, workdir):
        record = json.loads((run / "manifest.json").read_text())["dataset"]["load_record"]
        mb = 3 * oltp.LOAD_WAL_PER_ROW * 100_000 // MB  # thrice the build's expected WAL
        # wal_level minimal by a restart (the stock 4 MB of wal_buffers raised to 64 MB),
        # and spaced checkpoints inside it: the rows are still WAL-logged
        assert record["settings"] == {"wal_level": "minimal", "max_wal_senders": "0",
                                      "wal_buffers": "64MB", "wal_writer_delay": "10ms",
                                      "max_wal_size": f"{mb}MB", "checkpoint_timeout": "1h"}
        assert [p["phase"] for p in record["phases"]][-1] == "checkpoint"
        report = (run / "report.md").read_text()
        assert f"max_wal_size {format_bytes(mb * MB)} and" in report
        assert "wal_level minimal" in report and "wal_buffers 64MB" in report
        assert "wal_writer_delay 10ms" in report
        include = workdir / "instances" / "pg18-embedded" / "data" / INCLUDE_FILE
        text = include.read_text()
        assert "max_wal_size = '32MB'" in text  # the config's, as --set gave it
        assert "wal_level" not in text and "wal_buffers" not in text
        assert "wal_writer_delay" not in text


def test_the_load_raises_wal_buffers_and_shortens_the_writer_delay_only_past_the_config(
        ) -> None:
    # stock: wal_buffers a 32nd of the 128 MB shared_buffers, wal_writer_delay 200 ms
    stock = bulkload.load_wal_settings(4 * MB, 200)
    assert stock == {"wal_level": "minimal", "max_wal_senders": "0", "wal_buffers": "64MB",
                     "wal_writer_delay": "10ms"}
    assert bulkload.load_wal_settings(64 * MB, 10) == bulkload.MINIMAL_WAL
    assert bulkload.load_wal_settings(256 * MB, 5) == bulkload.MINIMAL_WAL
    assert bulkload.load_wal_settings(256 * MB, 200) == {**bulkload.MINIMAL_WAL,
                                                          "wal_writer_delay": "10ms"}
    note = bulkload.minimal_note(stock)
    assert "with wal_buffers 64MB and wal_writer_delay 10ms" in note
    assert "wal_buffers" not in bulkload.minimal_note(bulkload.MINIMAL_WAL)


def test_nested_load_settings_keep_both_and_the_inner_wins() -> None:
    outer = bulkload.LoadSpacing({"wal_level": "minimal", "max_wal_size": "1GB"}, "restarted")
    inner = bulkload.LoadSpacing({"max_wal_size": "9GB"}, "spaced")
    both = outer.then(inner)
    assert both.settings == {"wal_level": "minimal", "max_wal_size": "9GB"}
    assert both.note == "restarted; spaced"
    assert bulkload.LoadSpacing(note="").then(inner).note == "spaced"
    assert not bulkload.LoadSpacing().then(bulkload.LoadSpacing()).applied
    # the closing CHECKPOINT follows the spacing whichever side it is on
    assert outer.then(bulkload.LoadSpacing({}, "", closing_checkpoint=True)).closing_checkpoint
    assert not outer.then(inner).closing_checkpoint


def test_spacing_is_thrice_the_load_bounded_by_half_the_free_space() -> None:
    settings, note = bulkload.spacing_for(5 * 1024 * MB, 1024 * MB, 100 * 1024 * MB)
    assert settings == {"max_wal_size": "15360MB", "checkpoint_timeout": "1h"}
    assert "15.0 GiB" in note and "CHECKPOINT" in note
    # 8 GB free: max_wal_size at most 4 GB.
    settings, _ = bulkload.spacing_for(5 * 1024 * MB, 1024 * MB, 8 * 1024 * MB)
    assert settings["max_wal_size"] == "4096MB"
    # Too little free space, or a config already roomy enough: left alone, saying why.
    settings, note = bulkload.spacing_for(5 * 1024 * MB, 1024 * MB, 1024 * MB)
    assert settings == {} and "free space" in note
    settings, note = bulkload.spacing_for(100 * MB, 1024 * MB, 100 * 1024 * MB)
    assert settings == {} and "already" in note


def _wal_and_level(workdir: Path) -> tuple[int, int, str]:
    """(WAL bytes the cluster has written since initdb, the pgbench tables' bytes, its
    wal_level) from the run's own cluster, started again: pg_stat_wal survives a clean
    shutdown."""
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="pg18-embedded")
    srv.locate()
    srv.start()
    try:
        with psycopg.connect(srv.admin_connection().conninfo(), autocommit=True) as c:
            return c.execute(
                "SELECT (SELECT wal_bytes FROM pg_stat_wal)::bigint, (SELECT sum("
                "pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON "
                "n.oid = c.relnamespace WHERE n.nspname = 'pgdyno_bench' AND c.relkind = 'r' "
                "AND c.relname LIKE 'pgbench_%')::bigint, current_setting('wal_level')"
            ).fetchone()
    finally:
        srv.stop()


@pytest.mark.server
def test_a_pgbench_build_with_minimal_wal_writes_none_and_the_run_gets_its_config_back(
        ) -> None:
    """pgdyno bench tpcb at scale 10 (160 MB) in two fresh clusters: --load-wal minimal
    (the default) and configured. The cluster's own WAL counter is the oracle: minimal
    wrote a few MB in all, configured half the dataset more; both clusters are back at
    wal_level replica, the config's. The measured second runs at 20 transactions a second:
    unthrottled, its page images (each first touch of a page after the checkpoint) grow
    with the machine's speed of the moment, up to tens of MB."""
    seen = {}
    for mode in ("minimal", "configured"):
        with own_cluster_run("pgdyno-loadwal", "tpcb", "--scale", "10", "--load-wal",
                             mode, "--rate", "20") as (run, workdir):
            manifest = json.loads((run / "manifest.json").read_text())
            record = manifest["dataset"]["load_record"]
            # the restarted server listens on a new port: the manifest names the one the
            # measured run's pgbench connected to
            command = json.loads((run / "raw" / "run.json").read_text())["records"][0][
                "command"]
            port = command[command.index("-p") + 1]
            assert f".s.PGSQL.{port}/" in manifest["connection"], manifest["connection"]
            seen[mode] = (record, *_wal_and_level(workdir), (run / "report.md").read_text())
    record, wal, size, level, report = seen["minimal"]
    assert record["settings"] == {**bulkload.MINIMAL_WAL, "wal_buffers": "64MB",
                                  "wal_writer_delay": "10ms"}
    assert "wal_level minimal" in record["note"] and "wal_level minimal" in report
    assert level == "replica" and size > 100 * MB
    assert wal < 0.25 * size, (wal / MB, size / MB)
    minimal_wal = wal
    record, wal, size, level, report = seen["configured"]
    assert record["settings"] == {} and "--load-wal configured" in record["note"]
    assert level == "replica"
    assert wal > minimal_wal + 0.5 * size, (wal / MB, minimal_wal / MB, size / MB)


@pytest.mark.server
def test_a_config_that_cannot_run_at_minimal_builds_with_its_own_settings() -> None:
    """summarize_wal = on stops a server from starting at wal_level minimal (a FATAL line):
    the build goes on under the config's settings, and the load record says why."""
    with own_cluster_run("pgdyno-loadwal-refused", "tpcb", "--scale", "1", "--set",
                         "summarize_wal=on") as (run, _):
        record = json.loads((run / "manifest.json").read_text())["dataset"]["load_record"]
        assert record["settings"] == {} and not record["reused"]
        assert record["note"].startswith("wal_level left as configured: the server did not "
                                         "start with wal_level minimal"), record["note"]
        assert "summarize" in record["note"], record["note"]
