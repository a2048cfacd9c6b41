"""fio's json+ and pg_test_fsync's text on recorded samples, and the job set's rules.

The samples in tests/data/fio/ were recorded on this host (fio 3.33 on a loop-mounted
XFS, PostgreSQL 18's pg_test_fsync); the expected values are typed out from reading them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.workloads.fio import jobs
from pgdyno.workloads.fio.fsync import ONE_WRITE, fsync_command, parse_fsync_output
from pgdyno.workloads.fio.jobs import Place
from pgdyno.workloads.fio.results import (
    JobRecord,
    job_result,
    percentile_from_bins,
    read_fio_json,
)

DATA = Path(__file__).parent / "data" / "fio"


def record(name: str, output: str, kind: str) -> JobRecord:
    return JobRecord(place="target", name=name, kind=kind, block="4k", iodepth=1, numjobs=1,
                     output=output, command=[], started=0.0)


def test_random_read_qd1_sample() -> None:
    job = job_result(DATA, record("randread-d1", "randread_qd1.json", "randread"))
    assert not job.error and job.write is None
    r = job.read
    assert (r.ios, r.runtime_ms, r.bytes) == (25256, 1000, 103448576)
    assert r.iops == 25256.0
    assert r.mib_s == 103448576 / 2**20
    assert r.latency.avg_us == pytest.approx(30.141889016)
    assert (r.latency.p50_us, r.latency.p99_us) == (31.104, 78.336)  # fio's own percentiles
    assert r.latency.max_us == pytest.approx(2239.693)
    assert job.kernel is None  # no device sampled in the record


def test_percentiles_follow_fio_rule_at_every_listed_percentile() -> None:
    clat = read_fio_json(DATA / "randread_qd1.json")["jobs"][0]["read"]["clat_ns"]
    bins = sorted((int(k), v) for k, v in clat["bins"].items())
    for p, value in clat["percentile"].items():
        assert percentile_from_bins(bins, float(p)) == value


def test_wal_sample_has_fdatasync_latency() -> None:
    job = job_result(DATA, record("wal-1j", "wal_fdatasync.json", "wal"))
    assert job.read is None
    assert (job.write.ios, job.write.runtime_ms) == (1602, 1001)
    assert job.iops == pytest.approx(1602 / 1.001)
    assert job.sync.avg_us == pytest.approx(613.131540574)
    assert job.sync.p99_us == 839.68


def test_damaged_output_is_an_error_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("fio: something went wrong\n")
    job = job_result(tmp_path, record("x", "x.json", "randread"))
    assert "not fio json+ output" in job.error


def test_pg_test_fsync_sample() -> None:
    result = parse_fsync_output((DATA / "pg_test_fsync.txt").read_text())
    assert result.seconds_per_test == 1
    assert result.sync_methods() == {"open_datasync": 6346.604, "fdatasync": 5386.036,
                                     "fsync": 4739.076, "fsync_writethrough": None,
                                     "open_sync": 5391.601}
    one = result.group(ONE_WRITE)
    assert [r.usecs_per_op for r in one.rows] == [158, 186, 211, None, 185]
    assert len(result.groups) == 5
    assert "O_DIRECT supported on this platform for open_datasync and open_sync." in result.notes


def test_pg_test_fsync_truncated() -> None:
    with pytest.raises(ValueError, match="no 'ops/sec' results"):
        parse_fsync_output("1 second per test\nCompare file sync methods using one 8kB write:\n")
    assert fsync_command("/bin/pg_test_fsync", "/x/f", 30)[-1] == "5"  # its own default cap


def test_sweep_shape_and_stopping_rule() -> None:
    assert jobs.sweep_depths(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert jobs.sweep_depths(6) == [1, 2, 4, 6]
    assert [(j.numjobs, j.iodepth) for j in map(lambda d: jobs.sweep_job("randread", d),
                                                 (1, 32, 64, 256))] == \
        [(1, 1), (1, 32), (2, 32), (8, 32)]
    depths = jobs.sweep_depths(256)
    # Before QD32 the sweep goes on even when IOPS stalls (the QD32 figures are needed).
    assert not jobs.sweep_done([100, 100, 100], depths)
    # From QD32 on: stop once doubling gains less than 5% over the best so far.
    assert not jobs.sweep_done([1, 2, 4, 8, 16, 32, 40], depths)
    assert jobs.sweep_done([1, 2, 4, 8, 16, 32, 33], depths)
    assert jobs.sweep_done([1, 1, 1], [1, 2, 4])  # the last planned point


def test_bandwidth_jobs_stream_through_their_own_slices() -> None:
    place = Place(label="data", path="/d/.pgdyno-fio-x/pgdyno-fio.dat", size_bytes=2**30,
                  device="sda1")
    cmd = jobs.job_command("fio", jobs.bandwidth_jobs(4)[0], place, engine="libaio",
                           runtime_s=30, ramp_s=0, output="o.json")
    assert f"--size={2**28}" in cmd and f"--offset_increment={2**28}" in cmd
    assert "--direct=1" in cmd and "--output-format=json+" in cmd
    wal = jobs.job_command("fio", jobs.wal_jobs(4)[1], place, engine="libaio", runtime_s=30,
                           ramp_s=0, output="o.json")
    assert "--fdatasync=1" in wal and "--direct=0" in wal and "--numjobs=4" in wal
    assert "--directory=/d/.pgdyno-fio-x" in wal
