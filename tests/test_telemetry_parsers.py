# ruff: noqa: E501 - recorded /proc and server-log lines are kept verbatim
"""The /proc parsers, the mpstat/iostat formulas, device resolution, the checkpoint-log
parser and the version-aware catalog, on small recorded samples.

The expected values are computed here from the raw counters with the formulas of
reference/telemetry.md, independently of pgdyno's own arithmetic.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgdyno.analysis import procfs
from pgdyno.telemetry import catalog, checkpoints, devices, smart
from pgdyno.telemetry.host import cpu_capacity

# Two /proc/stat samples one second apart, recorded on a 2-vCPU VM under pgbench load
# (the "intr" line shortened).
STAT_A = """cpu  3262 0 1397 44781 319 0 37 13 0 0
cpu0 515 0 411 23949 13 0 7 2 0 0
cpu1 2746 0 985 20831 305 0 30 10 0 0
intr 129761 0 0 0
ctxt 254710
btime 1795340000
processes 5120
procs_running 3
procs_blocked 1
"""
STAT_B = """cpu  3320 2 1435 44851 331 1 42 14 4 1
cpu0 546 1 430 23988 18 1 9 2 2 0
cpu1 2774 1 1005 20863 313 0 33 12 2 1
intr 131000 0 0 0
ctxt 262000
procs_running 5
procs_blocked 0
"""

DISK_A = """   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 34003 7355 2586994 11279 8546 18376 1511824 5621 0 4668 17256 3444 56 143936 244 1743 110
 254       1 vda1 100 0 800 10 50 0 400 5 0 12 15
"""
DISK_B = """   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 34065 7355 2588026 11297 17134 18500 1776960 7030 2 5088 18984 3444 56 143936 244 1743 110
 254       1 vda1 100 0 800 10 50 0 400 5 0 12 15
"""

MEMINFO = """MemTotal:       24684084 kB
MemFree:        24280180 kB
MemAvailable:   24273904 kB
Cached:           197876 kB
Dirty:              1232 kB
Writeback:            16 kB
Shmem:             45748 kB
AnonHugePages:      2048 kB
HugePages_Total:     100
HugePages_Free:       60
HugePages_Rsvd:       10
Hugepagesize:       2048 kB
"""


def test_cpu_percentages_match_mpstat_formulas() -> None:
    a, b = procfs.parse_proc_stat(STAT_A), procfs.parse_proc_stat(STAT_B)
    assert a.procs_running == 3 and b.procs_blocked == 0 and b.ctxt == 262000
    assert set(b.per_cpu) == {"cpu0", "cpu1"}
    pct = procfs.cpu_percent(a.cpu, b.cpu)
    assert pct is not None
    # Deltas: user 58 (guest 4), nice 2 (guest_nice 1), system 38, idle 70, iowait 12,
    # irq 1, softirq 5, steal 1; total excludes guest fields = 58+2+38+70+12+1+5+1 = 187.
    total = 187
    assert pct.usr == pytest.approx(100 * (58 - 4) / total)
    assert pct.nice == pytest.approx(100 * (2 - 1) / total)
    assert pct.sys == pytest.approx(100 * 38 / total)
    assert pct.idle == pytest.approx(100 * 70 / total)
    assert pct.iowait == pytest.approx(100 * 12 / total)
    assert pct.soft == pytest.approx(100 * 5 / total)
    assert pct.busy == pytest.approx(100 - 100 * 70 / total - 100 * 12 / total)
    # guest time is inside user time: the parts add up to 100 minus the guest share.
    parts = pct.usr + pct.nice + pct.sys + pct.idle + pct.iowait + pct.irq + pct.soft + pct.steal
    assert parts == pytest.approx(100 * (total - 5) / total)
    assert procfs.cpu_percent(a.cpu, a.cpu) is None


def test_keep_stat_lines_drops_interrupt_counts() -> None:
    kept = procfs.keep_stat_lines(STAT_A)
    assert "intr" not in kept and "procs_running 3" in kept and kept.startswith("cpu ")


def test_disk_rates_match_iostat_formulas() -> None:
    a, b = procfs.parse_diskstats(DISK_A), procfs.parse_diskstats(DISK_B)
    assert set(a) == {"loop0", "vda", "vda1"}
    dt = 2.0
    r = procfs.disk_rates(a["vda"], b["vda"], dt)
    assert r is not None
    reads, writes = 34065 - 34003, 17134 - 8546
    assert r.r_s == pytest.approx(reads / dt)
    assert r.w_s == pytest.approx(writes / dt)
    assert r.rkb_s == pytest.approx((2588026 - 2586994) / 2 / dt)
    assert r.wkb_s == pytest.approx((1776960 - 1511824) / 2 / dt)
    assert r.r_await_ms == pytest.approx((11297 - 11279) / reads)
    assert r.w_await_ms == pytest.approx((7030 - 5621) / writes)
    assert r.aqu_sz == pytest.approx((18984 - 17256) / (1000 * dt))
    assert r.util_pct == pytest.approx(100 * (5088 - 4668) / (1000 * dt))
    idle = procfs.disk_rates(a["vda1"], b["vda1"], dt)
    assert idle is not None and idle.r_await_ms == 0.0 and idle.util_pct == 0.0
    assert procfs.disk_rates(b["vda"], a["vda"], dt) is None  # counters went backwards


def test_meminfo_fields_and_huge_pages() -> None:
    mem = procfs.parse_meminfo(MEMINFO)
    assert mem["cached_kb"] == 197876 and mem["dirty_kb"] == 1232
    assert mem["writeback_kb"] == 16 and mem["shmem_kb"] == 45748
    assert procfs.hugepages_used(mem) == 100 - 60 + 10


def test_device_resolution_of_a_real_directory() -> None:
    res = devices.resolve_path("/var/tmp")
    st = os.stat("/var/tmp").st_dev
    if res.error:
        pytest.skip(f"/var/tmp is not on a block device here: {res.error}")
    assert res.top is not None and res.chain[0] == res.top and res.physical
    number = Path(f"/sys/class/block/{res.top}/dev").read_text().strip()
    if os.major(st) != 0:  # btrfs/overlay report anonymous numbers; then mountinfo decides
        assert number == f"{os.major(st)}:{os.minor(st)}"
    assert res.mount_point and res.fstype


def test_device_resolution_never_raises() -> None:
    res = devices.resolve_path("/nonexistent/pgdyno")
    assert res.top is None and res.error
    proc = devices.resolve_path("/proc")
    assert proc.top is None and "not a block device" in (proc.error or "")


def test_loop_device_backing_file_is_followed(tmp_path: Path) -> None:
    """A filesystem on a loop device resolves to loopN, then to the disk holding its file."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    image = Path("/var/tmp") / f"pgdyno-loop-{os.getpid()}.img"
    image.write_bytes(b"\0" * (1 << 20))
    try:
        proc = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"losetup failed: {proc.stderr.strip()}")
        loop = Path(proc.stdout.strip()).name
        try:
            res = devices.DeviceResolution(path=str(image), top=loop)
            devices._walk(loop, res, depth=0)
            backing = devices.resolve_path(image)
            assert res.chain[0] == loop
            assert res.chain[1:] == backing.chain
            assert res.physical == backing.physical
        finally:
            subprocess.run(["losetup", "-d", f"/dev/{loop}"], check=False)
    finally:
        image.unlink(missing_ok=True)


def test_virtual_devices_report_no_smart() -> None:
    reading = smart.read_smart("vda")
    assert reading.available is False and "virtual" in reading.reason
    assert reading.temperature_c is None and reading.host_written_bytes is None


LOG = """2026-01-05 12:00:00.123 UTC [10] LOG:  checkpoints are occurring too frequently (2 seconds apart)
2026-01-05 12:00:00.123 UTC [10] HINT:  Consider increasing the configuration parameter "max_wal_size".
2026-01-05 12:00:00.124 UTC [10] LOG:  checkpoint starting: wal
2026-01-05 12:00:01.500 UTC [10] LOG:  checkpoint complete: wrote 1852 buffers (11.3%), wrote 2 SLRU buffers; 0 WAL file(s) added, 0 removed, 1 recycled; write=0.428 s, sync=0.002 s, total=0.443 s; sync files=6, longest=0.001 s, average=0.001 s; distance=16423 kB, estimate=19670 kB; lsn=0/15F3F070, redo lsn=0/1500D7A8
2026-01-05 12:05:00 UTC [10] LOG:  checkpoint starting: time
2026-01-05 12:05:01.000 UTC [10] LOG:  checkpoint complete: wrote 3 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.1 s, sync=0.2 s, total=0.4 s; sync files=1, longest=0.0 s, average=0.0 s; distance=1 kB, estimate=2 kB
2026-01-05 12:06:00.000 CET [10] LOG:  checkpoint starting: time
"""


def test_checkpoint_log_lines() -> None:
    events = checkpoints.parse_lines(LOG.splitlines())
    kinds = [e.event for e in events]
    assert kinds == ["too_frequent", "start", "complete", "start", "complete"]  # CET skipped
    assert events[0].apart_s == 2
    assert events[1].reason == "wal"
    assert events[1].t == pytest.approx(1767614400.124)  # 2026-01-05 12:00:00.124 UTC
    done = events[2]
    assert (done.buffers, done.write_s, done.sync_s, done.total_s) == (1852, 0.428, 0.002, 0.443)
    assert (done.distance_kb, done.estimate_kb) == (16423, 19670)
    assert events[3].reason == "time" and events[4].buffers == 3


@pytest.mark.parametrize("version", [150008, 160004, 170002, 180006])
def test_catalog_queries_per_version(version: int) -> None:
    cat = catalog.Catalog(version)
    assert cat.supported()
    sql = cat.checkpointer_sql()
    if version < 170000:
        assert "pg_stat_bgwriter" in sql and "checkpoints_timed" in sql
        assert "pg_stat_checkpointer" not in sql
    else:
        assert "pg_stat_checkpointer" in sql and "buffers_written" in sql
        assert ("c.num_done" in sql) == (version >= 180000)
    wal = cat.wal_sql()
    assert ("pg_stat_io" in wal) == (version >= 180000)
    io = cat.io_sql()
    if version < 160000:
        assert io is None
    else:
        assert io is not None and (("op_bytes" in io) == (version < 180000))
    # Parameters only: no value is ever pasted into the SQL text.
    assert "%(dbname)s" in catalog.DATABASE_SQL and "$1::text[]" in catalog.WAIT_SAMPLE_SQL
    assert catalog.wait_sample_params() == [
        b'{"client backend","parallel worker","io worker"}', b"pgdyno-telemetry"]


def test_catalog_queries_run_on_the_embedded_server(server) -> None:  # noqa: ANN001
    from pgdyno.telemetry import pg

    with pg.connect(server.connection()) as conn:
        cat = catalog.Catalog(pg.server_version_num(conn))
        snap = pg.snapshot_stats(conn, cat, server.connection().dbname)
        waits = pg.WaitSampler().sample(conn)
        settings = pg.read_settings(conn)
    expected = {"num_timed", "num_requested", "write_time_ms", "sync_time_ms",
                "buffers_checkpoint", "buffers_clean", "buffers_alloc", "stats_reset"}
    assert expected <= set(snap["checkpointer"])
    assert {"wal_records", "wal_fpi", "wal_bytes", "wal_write", "wal_sync"} <= set(snap["wal"])
    assert snap["database"]["xact_commit"] > 0
    assert all(row["backend_type"] and row["object"] for row in snap["io"])
    assert all(len(row) == 5 for row in waits)
    # The sampler's own connection is not in its sample.
    assert not any(r[0] == "client backend" and r[1] == "active" for r in waits)
    assert settings["block_size"]["setting"] == "8192"


def test_wait_sampler_sees_an_idle_session_and_survives_a_new_connection(server) -> None:  # noqa: ANN001
    """The libpq path of the wait sampler: an idle session of another name is counted as
    the server shows it; the statement is prepared again on a new connection (after a
    reconnect); a failure comes back as psycopg's error, and the next tick prepares the
    statement again."""
    import psycopg

    from pgdyno.telemetry import pg

    conn = server.connection()
    sampler = pg.WaitSampler()
    with psycopg.connect(conn.conninfo(), application_name="idle-one") as idle:
        idle.execute("SELECT 1")
        idle.commit()
        for _ in range(2):
            with pg.connect(conn) as mine:
                rows = sampler.sample(mine)
                with psycopg.connect(conn.conninfo(), autocommit=True) as oracle:
                    idle_now = oracle.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND "
                        "backend_type = 'client backend' AND application_name <> %s",
                        [catalog.APPLICATION_NAME]).fetchone()[0]
        counted = sum(r[4] for r in rows if r[:4] == ["client backend", "idle", "Client",
                                                      "ClientRead"])
        assert counted >= 1 and counted <= idle_now + 1  # the oracle's own session aside
    with pg.connect(conn) as mine:
        sampler.sample(mine)
        mine.pgconn.exec_(b"DEALLOCATE ALL")  # gone behind the sampler's back
        with pytest.raises(psycopg.OperationalError, match="does not exist"):
            sampler.sample(mine)
        assert sampler.sample(mine)  # the next tick prepares it again


def test_cpu_capacity_is_sane() -> None:
    cap = cpu_capacity()
    assert cap.online >= 1
    assert cap.limit_cores is None or cap.limit_cores > 0
    assert 0 < cap.effective_cores <= cap.online
