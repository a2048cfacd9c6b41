"""--ssh: the database host's telemetry read through a real sshd, as another OS user.

The "remote" host is this machine reached through Debian's sshd on 127.0.0.1 as a throwaway
user (tests/sshhost.py); the database is a real embedded PostgreSQL 18 that logs to a file
it names (pg_current_logfile), so that its checkpoint lines can only reach the run through
the SSH view: with --dsn alone pgdyno has no server log and no data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgdyno.analysis import procfs
from pgdyno.analysis.hosttick import HostTick
from pgdyno.errors import UsageError
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.targets.ssh import check_destination
from pgdyno.telemetry.devices import resolve_path
from pgdyno.telemetry.remote import parse_frame
from tests.answer import check_database_host_columns
from tests.conftest import make_shared_dir, run_cli
from tests.sshhost import ssh_hosts

# ----- quick checks (no server, no sshd) ---------------------------------------------------


def test_destination_refuses_options_and_spaces() -> None:
    assert check_destination("postgres@db1") == "postgres@db1"
    assert check_destination("db-alias") == "db-alias"
    for bad in ("-oProxyCommand=sh", "a b", "user:pw@host", ""):
        with pytest.raises(UsageError, match="--ssh"):
            check_destination(bad)


def test_frame_parser_splits_the_three_files() -> None:
    frame = "@@stat\ncpu  1 2 3 4 5 6 7 8\n@@diskstats\n 8 0 sda 1 2 3\n@@meminfo\nMemTotal: 5 kB\n"
    parts = parse_frame(frame)
    assert parts["stat"].startswith("cpu  1 2")
    assert "sda" in parts["diskstats"]
    assert procfs.parse_meminfo(parts["meminfo"])["mem_total_kb"] == 5


# ----- real sshd, real server ---------------------------------------------------------------



@pytest.fixture(scope="module")
def remote(workdir: Path):
    """(stand-in host, server): the server logs to a file in a directory the ssh user can
    read, the way a DBA gives a monitoring user the log."""
    log_dir = make_shared_dir("pgdyno-sshlog-")
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="ssh-remote",
                      settings={"logging_collector": "on", "log_directory": f"'{log_dir}'",
                                "log_file_mode": "0644", "log_checkpoints": "on",
                                "listen_addresses": "'127.0.0.1'"})
    os.chown(log_dir, srv.user.uid, srv.user.gid)  # the server writes it; 0755: others read
    srv.prepare()
    srv.start()
    try:
        with ssh_hosts(1) as (host,):
            yield host, srv, log_dir
    finally:
        srv.stop()
        shutil.rmtree(log_dir, ignore_errors=True)


def _dsn(srv: LocalServer) -> str:
    conn = srv.connection("tcp")
    return f"host=127.0.0.1 port={conn.port} user={conn.user} dbname={conn.dbname}"


def _bench(host, srv, results: Path, duration: int, **popen) -> list[str]:
    return ["bench", "tpcb", "--dsn", _dsn(srv), "--ssh", host.destination, "--ssh-config",
            str(host.config_file), "--clients", "2", "--duration", str(duration), "--warmup",
            "0", "--iterations", "1", "--scale", "1", "--no-progress", "--force",
            "--results-dir", str(results)]


def _accepted(host) -> int:
    return (host.base / "sshd.log").read_text().count("Accepted publickey")


@pytest.mark.server
def test_tpcb_over_ssh_reads_the_remote_hosts_view_through_one_connection(remote,
                                                                          workdir) -> None:
    host, srv, log_dir = remote
    results = make_shared_dir("pgdyno-ssh-results-")
    before = _accepted(host)
    proc = run_cli(_bench(host, srv, results, 3), workdir, timeout=180)
    assert proc.returncode == 0, proc.stderr
    tdir = next(results.rglob("telemetry/meta.json")).parent
    meta = json.loads((tdir / "meta.json").read_text())
    # Who answered: the throwaway user on the "remote" host, through ssh.
    assert meta["remote"]["user"] == host.user
    assert meta["remote"]["via"] == "ssh"
    # The data directory's device mapping, which a --dsn run cannot know, resolved on the
    # host by the ssh user: the same devices this test resolves directly.
    local = resolve_path(srv.data_dir)
    assert meta["devices"]["data"]["path"] == str(srv.data_dir)
    assert meta["devices"]["data"]["top"] == local.top
    assert meta["devices"]["data"]["chain"] == local.chain
    assert meta["remote"]["storage"]["data"][0]["name"] == local.chain[0]
    # The server's own log file, named by the server and sized through ssh when the
    # iteration began: just after the CHECKPOINT pgdyno runs before each iteration.
    log = Path(meta["remote"]["server_log"])
    assert log.parent == log_dir
    offset = meta["server_log_offset"]
    head = log.read_bytes()[:offset].decode(errors="replace")
    assert 0 < offset <= log.stat().st_size
    assert "checkpoint complete" in head.rsplit("checkpoint starting", 1)[1]
    copied = [line for line in (tdir / "checkpoint_log.txt").read_text().splitlines() if line]
    tail = log.read_bytes()[offset:].decode(errors="replace").splitlines()
    assert copied == [line for line in tail if "checkpoint" in line]
    # The host series: one tick a second from the stream, each a complete /proc sample
    # whose memory total is this machine's (the stand-in host is this machine).
    ticks = [HostTick.from_raw(json.loads(line))
             for line in (tdir / "host_raw.jsonl").read_text().splitlines()]
    assert len(ticks) >= 3
    mem_total = procfs.parse_meminfo(Path("/proc/meminfo").read_text())["mem_total_kb"]
    assert {procfs.parse_meminfo(t.meminfo)["mem_total_kb"] for t in ticks} == {mem_total}
    # The client's CPU is its own series, with the same number of samples give or take one.
    client = (tdir / "client" / "host_raw.jsonl").read_text().splitlines()
    assert abs(len(client) - len(ticks)) <= 2
    # One multiplexed connection for the whole run (sshd logs each connection it accepts):
    # not one per sample, nor one per command.
    assert _accepted(host) - before == 1
    report = next(results.rglob("report.md")).read_text()
    assert "The client host" in report
    assert host.user not in json.dumps(meta["host"])  # host facts: the machine, not a login
    # The environment table: the database host (detected over the run's one connection)
    # beside this client.
    check_database_host_columns(next(results.rglob("report.md")).parent, host.destination,
                                host.config_file)


@pytest.mark.server
def test_ssh_connection_killed_mid_run_leaves_a_marked_gap_and_a_finished_run(remote,
                                                                              workdir) -> None:
    host, srv, _log = remote
    results = make_shared_dir("pgdyno-ssh-gap-")
    cmd = [sys.executable, "-m", "pgdyno", *_bench(host, srv, results, 7)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PGDYNO_WORKDIR": str(workdir)})
    try:
        deadline = time.monotonic() + 120
        raw = None
        while time.monotonic() < deadline:
            raw = next(results.rglob("telemetry/host_raw.jsonl"), None)
            if raw is not None and len(raw.read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        assert raw is not None, "the run never sampled the host"
        cut_at = time.time()
        assert host.drop_connections() >= 1
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    run_dir = next(results.rglob("manifest.json")).parent
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "ok"
    tdir = raw.parent
    marks = (tdir / "marks.csv").read_text()
    assert "telemetry_gap_start host" in marks
    errors = [json.loads(line) for line in (tdir / "errors.jsonl").read_text().splitlines()]
    assert any(e["sampler"] == "host" and e["t"] >= cut_at - 0.5 for e in errors)
    # The connection came back (sshd still listens): the gap has an end, and samples follow.
    assert "telemetry_gap_end host" in marks
    after = [json.loads(line)["t"] for line in raw.read_text().splitlines()]
    assert any(t > cut_at + 1 for t in after)
    report = (run_dir / "report.md").read_text()
    assert "telemetry gap: host samples missing" in report
