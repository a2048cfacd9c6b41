"""bench --drivers: pgbench on two stand-in driver hosts against one server, merged.

Two throwaway OS users behind two real sshd on loopback (tests/sshhost.py) are the drivers;
the server is an embedded one started here that admits the benchmark's role over loopback
TCP with its password only (scram-sha-256), given to pgdyno in the DSN. pgdyno copies
pgbench to each driver, splits the clients, starts both together and merges their logs.
The merged figures are recomputed here from the drivers' raw logs (tests/recompute.py,
plain line splitting): per-second TPS is the sum of both drivers' counts, p99 the exact
p99 of every transaction of both (as the HDR bucket holding it). A driver whose pgbench is
killed mid-window fails the run, stops the other and leaves its partial data; an
unreachable driver refuses the run in one line before anything is made. The password that
every driver's pgbench logged in with is in no file on any host, nor in the results.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import psycopg
import pytest

from pgdyno.analysis import hdr
from pgdyno.errors import UsageError
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.drivers import DriverConnection, read_drivers
from pgdyno.targets.local import LocalServer
from tests.conftest import interruptible, make_shared_dir, run_cli_here
from tests.recompute import recompute
from tests.sshhost import SshHost, ssh_hosts

PASSWORD = "Dr1ver-S3cret"


@pytest.fixture(scope="module")
def dsn(workdir: Path):
    """A server whose benchmark role logs in over TCP with its password only."""
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="drivers-scram")
    srv.prepare()
    srv.start()
    try:
        with psycopg.connect(srv.admin_connection().conninfo(), autocommit=True) as db:
            db.execute("DROP DATABASE IF EXISTS drivers_bench")
            db.execute("DROP ROLE IF EXISTS drivers_bench")
            db.execute(f"CREATE ROLE drivers_bench LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
            db.execute("CREATE DATABASE drivers_bench OWNER drivers_bench")
        with psycopg.connect(srv.admin_connection().conninfo(dbname="drivers_bench"),
                             autocommit=True) as db:
            db.execute("CREATE TABLE public.drivers_seen (client integer)")
            db.execute("GRANT ALL ON public.drivers_seen TO drivers_bench")
            hba = srv.data_dir / "pg_hba.conf"
            hba.write_text("host all drivers_bench 127.0.0.1/32 scram-sha-256\n"
                           + hba.read_text())
            db.execute("SELECT pg_reload_conf()")
        conn = srv.connection("tcp")
        yield (f"postgresql://drivers_bench:{PASSWORD}@127.0.0.1:{conn.port}/drivers_bench")
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def drivers():
    """Two driver hosts, one ssh_config naming both, and a file listing them."""
    base = make_shared_dir("pgdyno-drivers-")
    with ssh_hosts(2, prefix="pgdyno-drivers-ssh-") as hosts:
        config = base / "ssh_config"
        config.write_text("".join(h.config_file.read_text() for h in hosts))
        listing = base / "drivers.txt"
        listing.write_text("# the load generators\n" + "".join(f"{h.destination}\n"
                                                               for h in hosts))
        yield hosts, config, listing, base


SYSTEM_PYTHON = Path("/usr/bin/python3")


@contextlib.contextmanager
def pgdyno_on(host: SshHost):
    """This pgdyno in the host's ~/.local/bin (where ``pip install --user`` puts it), so
    that the driver bins its own logs, until the block ends. The test's interpreter may sit
    where that user cannot read (a pyenv under /root): the system's python3 of the same
    version runs this checkout's source with this environment's packages."""
    import sysconfig

    import pgdyno

    said = subprocess.run([str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert said == str(sys.version_info[:2]), f"{SYSTEM_PYTHON} is {said}"
    source = Path(pgdyno.__file__).parents[1]
    local_bin = host.home / ".local" / "bin"
    local_bin.mkdir(parents=True, exist_ok=True)
    script = local_bin / "pgdyno"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={source}:{sysconfig.get_paths()['purelib']} "
                      f"exec {SYSTEM_PYTHON} -m pgdyno \"$@\"\n")
    script.chmod(0o755)
    for path in (host.home / ".local", local_bin, script):
        os.chown(path, _uid(host), -1)
    try:
        yield
    finally:
        script.unlink()


def _bench(listing: Path, config: Path, results: Path, duration: int, dsn: str) -> list[str]:
    return ["bench", "tpcb", "--dsn", dsn, "--drivers", str(listing), "--ssh-config", str(config),
            "--clients", "4", "--duration", str(duration), "--warmup", "1", "--iterations", "1",
            "--scale", "1", "--tx-logs", "all", "--results-dir", str(results), "--no-progress",
            "--force"]  # beside public.drivers_seen


def _run_dir(results: Path) -> Path:
    runs = list(results.glob("*/*/manifest.json"))
    assert len(runs) == 1, runs
    return runs[0].parent


def _uid(host: SshHost) -> int:
    return pwd.getpwnam(host.user).pw_uid


def _programs_of(host: SshHost, name: str) -> list[psutil.Process]:
    uid = _uid(host)
    return [p for p in psutil.process_iter(["uids", "name"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["name"] == name]


def _driver_logs(it_dir: Path, name: str) -> list[Path]:
    return sorted((it_dir / "drivers" / name).glob("tx.*.gz"))


def _no_password_in(*roots: Path) -> None:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                if path.suffix == ".gz":
                    data = gzip.decompress(data)
                assert PASSWORD.encode() not in data, path


def _left_behind(hosts: list[SshHost]) -> None:
    """No pgbench or sampler left on a driver, and no scratch directory of the run."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            _programs_of(h, "pgbench") or _programs_of(h, "python3") for h in hosts):
        time.sleep(0.2)
    for h in hosts:
        assert not _programs_of(h, "pgbench"), h.alias
        assert not _programs_of(h, "python3"), h.alias
        scratch = h.home / ".local/share/pgdyno/drivers"
        assert not scratch.exists() or not any(scratch.iterdir()), list(scratch.iterdir())


@pytest.mark.server
def test_two_drivers_merged_exactly(drivers, dsn: str, workdir: Path) -> None:
    hosts, config, listing, base = drivers
    results = base / "merged"
    # A script that records each client's :client_id, mixed into TPC-B.
    seen = base / "seen.sql"
    seen.write_text("INSERT INTO public.drivers_seen VALUES (:client_id);\n")
    with pgdyno_on(hosts[0]):  # host-a bins its logs; host-b's are fetched and binned here
        out = run_cli_here([*_bench(listing, config, results, 4, dsn), "--script",
                            f"{seen}@1"], workdir, env={"PGDYNO_LIVE_LOG": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    # Client ids run across the drivers (TPROC-C's home warehouses, OLTP's slices rely on
    # them): 2 clients on each of 2 drivers are clients 0 to 3, not 0 and 1 twice.
    with psycopg.connect(dsn) as db:
        ids = {row[0] for row in db.execute("SELECT DISTINCT client FROM drivers_seen")}
    assert ids == {0, 1, 2, 3}
    _no_password_in(results, *(h.home for h in hosts))
    run = _run_dir(results)
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    it_dir = run / "raw" / "pgbench" / "c4-i1"
    recorded = json.loads((it_dir / "drivers.json").read_text())["drivers"]
    assert [(d["name"], d["clients"], d["status"], d["binned_on"]) for d in recorded] == [
        ("host-a", 2, "ok", "driver"), ("host-b", 2, "ok", "here")]
    # Each driver's seconds from its own launch, over the window the merge used.
    per_driver = {d["name"]: recompute(_driver_logs(it_dir, d["name"]), it["warmup_s"],
                                       it["duration_s"], d["origin_epoch"]) for d in recorded}
    assert all(r.transactions > 0 for r in per_driver.values())
    summed = np.sum([r.interval_tps for r in per_driver.values()], axis=0).tolist()
    assert it["interval_tps"] == summed
    assert it["transactions"] == sum(r.transactions for r in per_driver.values())
    assert it["failed"] == sum(r.failed for r in per_driver.values())
    every = np.concatenate([r.latencies_ms for r in per_driver.values()])
    ordered = np.sort(every)
    exact_p99_us = ordered[int(np.ceil(0.99 * len(ordered))) - 1] * 1000
    assert it["latency"]["percentiles_ms"]["p99"] == pytest.approx(
        hdr.top_of_bucket(round(exact_p99_us)) / 1000)
    assert {d["name"]: d["transactions"] for d in it["drivers"]} == {
        name: r.transactions for name, r in per_driver.items()}
    assert all(d["load"] is not None and d["load"]["capacity_cores"] == 2 for d in it["drivers"])
    assert "| host-a | 2 | ok |" in (run / "report.md").read_text()
    _live_line_is_the_drivers_seconds(it_dir, ["host-a", "host-b"])
    _left_behind(hosts)


def _live_line_is_the_drivers_seconds(it_dir: Path, names: list[str]) -> None:
    """Each second the live view showed: the drivers' own -P 1 lines of that second (in their
    fetched stderr), TPS summed and the highest mean latency."""
    reported: dict[str, dict[str, tuple[float, float]]] = {}
    for name in names:
        for line in (it_dir / "drivers" / name / "stderr.txt").read_text().splitlines():
            if line.startswith("progress: "):
                words = line.replace(",", "").split()
                reported.setdefault(words[1], {})[name] = (float(words[3]), float(words[6]))
    # Lines before the drivers' first second hold the database host's CPU alone.
    shown = [line for line in (it_dir / "live.log").read_text().splitlines()
             if line[:1].isdigit()]
    assert len(shown) >= 3, (it_dir / "live.log").read_text()
    for line in shown:
        second, _, rest = line.partition(" s: ")
        seen = reported[f"{second}.0"]
        assert set(seen) == set(names), line
        tps = sum(t for t, _ in seen.values())
        worst = max(lat for _, lat in seen.values())
        assert rest.startswith(f"{tps:,.0f} tps on {len(names)} drivers, worst driver's "
                               f"mean {worst:.2f} ms"), (line, seen)


@pytest.mark.server
@pytest.mark.parametrize(("cut", "status", "said"), [
    ("pgbench", "failed", "driver host-b pgbench exited with code"),
    ("connection", "lost", "driver host-b lost (its connection ended before pgbench did)")])
def test_a_driver_lost_mid_window_fails_the_run(drivers, dsn: str, workdir: Path, cut: str,
                                                 status: str, said: str) -> None:
    """host-b's pgbench killed, or every SSH session of host-b cut (a network loss as the
    client sees it), four seconds into a six-second window."""
    hosts, config, listing, base = drivers
    results = base / f"lost-{cut}"
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    proc = subprocess.Popen([sys.executable, "-m", "pgdyno", *_bench(listing, config, results,
                                                                    6, dsn),
                             "--no-telemetry"],  # not what this test reads: less to wait for
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        found = _programs_of(hosts[1], "pgbench")
        victim = found[0] if found else None
        time.sleep(0.1)
    assert victim is not None, proc.communicate()[1][-3000:]
    time.sleep(4)  # inside the measured window (seconds 1-7 after launch)
    if cut == "pgbench":
        victim.send_signal(signal.SIGKILL)
    else:
        assert hosts[1].drop_connections() > 0
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr[-3000:]
    assert said in stderr
    run = _run_dir(results)
    assert json.loads((run / "manifest.json").read_text())["status"] == "failed"
    it_dir = run / "raw" / "pgbench" / "c4-i1"
    recorded = {d["name"]: d for d in json.loads((it_dir / "drivers.json").read_text())[
        "drivers"]}
    assert recorded["host-b"]["status"] == status
    assert recorded["host-a"]["status"] == "stopped"
    # host-a was stopped with host-b (within the 0.2 s poll and its stop), well before its
    # planned end (launch + 1 + 6 s).
    last = {name: max(i for i, n in enumerate(recompute(
        _driver_logs(it_dir, name), 0, 30, recorded[name]["origin_epoch"]).interval_tps) if n)
        for name in ("host-a", "host-b")}
    assert last["host-a"] <= last["host-b"] + 1 < 7, last
    # The partial data, over the seconds both drivers covered only.
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    assert 1 <= it["duration_s"] < 6
    per_driver = [recompute(_driver_logs(it_dir, name), it["warmup_s"], it["duration_s"],
                            recorded[name]["origin_epoch"]) for name in ("host-a", "host-b")]
    assert all(min(r.interval_tps) > 0 for r in per_driver)  # both ran every second of it
    assert it["interval_tps"] == np.sum([r.interval_tps for r in per_driver], axis=0).tolist()
    _no_password_in(results, *(h.home for h in hosts))
    _left_behind(hosts)


@pytest.mark.server
def test_an_unreachable_driver_is_refused_before_anything(drivers, dsn: str,
                                                          workdir: Path) -> None:
    hosts, config, _listing, base = drivers
    listing = base / "unreachable.txt"
    listing.write_text(f"{hosts[0].destination}\nnobody@127.0.0.1\n")
    closed = base / "closed_config"
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    closed.write_text(config.read_text() + "Host 127.0.0.1\n  Port 9\n  BatchMode yes\n")
    results = base / "unreachable"
    out = run_cli_here(_bench(listing, closed, results, 2, dsn), workdir)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "driver 127.0.0.1 (nobody@127.0.0.1) cannot be reached" in lines[0]
    assert not results.exists() or not list(results.glob("*/*/manifest.json"))
    _left_behind(hosts)


RATE = 400
"""--rate of the paced run: 200 a second on each driver, well within the stand-in server."""


@pytest.fixture(scope="module")
def paced_interrupted(drivers, dsn: str, workdir: Path):
    """A paced run (--rate RATE, 2 clients a driver) stopped by Ctrl-C four seconds after
    both drivers' pgbench started: (the process, its stderr, the run's directory)."""
    hosts, config, listing, base = drivers
    results = base / "paced"
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgdyno", *_bench(listing, config, results, 30, dsn),
         "--rate", str(RATE), "--no-telemetry"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, preexec_fn=interruptible)
    deadline = time.monotonic() + 120
    while (time.monotonic() < deadline and proc.poll() is None
           and not all(_programs_of(h, "pgbench") for h in hosts)):
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    return proc, stderr, _run_dir(results)


@pytest.mark.server
def test_ctrl_c_stops_every_driver_and_keeps_the_partial_run(drivers, paced_interrupted
                                                              ) -> None:
    hosts = drivers[0]
    proc, stderr, run = paced_interrupted
    assert proc.returncode == 130, stderr[-3000:]
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    record = json.loads((run / "raw" / "run.json").read_text())["records"][0]
    assert record["status"] == "interrupted"
    it_dir = run / "raw" / "pgbench" / "c4-i1"
    recorded = json.loads((it_dir / "drivers.json").read_text())["drivers"]
    assert [(d["name"], d["status"]) for d in recorded] == [("host-a", "stopped"),
                                                            ("host-b", "stopped")]
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    assert it["status"] == "interrupted" and 1 <= it["duration_s"] < 5
    per_driver = [recompute(_driver_logs(it_dir, d["name"]), it["warmup_s"], it["duration_s"],
                            d["origin_epoch"]) for d in recorded]
    assert it["interval_tps"] == np.sum([r.interval_tps for r in per_driver], axis=0).tolist()
    # Each driver stopped about when Ctrl-C came, far before its planned 31 s.
    for d in recorded:
        done = recompute(_driver_logs(it_dir, d["name"]), 0, 60, d["origin_epoch"])
        assert max(i for i, n in enumerate(done.interval_tps) if n) < 10, d["name"]
    assert "| host-a | 2 | stopped |" in (run / "report.md").read_text()  # no telemetry
    _left_behind(hosts)


@pytest.mark.server
def test_the_rate_is_split_across_the_drivers(paced_interrupted) -> None:
    _proc, _stderr, run = paced_interrupted
    record = json.loads((run / "raw" / "run.json").read_text())["records"][0]
    assert [c.split()[:2] + c.split()[c.split().index("-R"):][:2] for c in record["command"]
            ] == [["[driver", "host-a]", "-R", "200"], ["[driver", "host-b]", "-R", "200"]]
    it_dir = run / "raw" / "pgbench" / "c4-i1"
    recorded = json.loads((it_dir / "drivers.json").read_text())["drivers"]
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    shares = [recompute(_driver_logs(it_dir, d["name"]), it["warmup_s"], it["duration_s"],
                        d["origin_epoch"]).transactions / it["duration_s"] for d in recorded]
    # Poisson arrivals: 200 ± 14 a second on each driver over 2 s (one standard deviation).
    assert shares == [pytest.approx(RATE / 2, rel=0.25)] * 2, shares
    assert it["tps_mean"] == pytest.approx(sum(shares))
    assert it["tps_mean"] == pytest.approx(RATE, rel=0.2)


@pytest.mark.server
def test_latency_limit_skips_summed_over_the_drivers(drivers, dsn: str, workdir: Path
                                                     ) -> None:
    """A rate far past what the stand-in server does, with a 1 ms limit: pgbench skips the
    transactions already late at their scheduled start, on every driver."""
    hosts, config, listing, base = drivers
    results = base / "limited"
    out = run_cli_here([*_bench(listing, config, results, 1, dsn), "--rate", "40000",
                        "--latency-limit", "1", "--no-telemetry"], workdir)
    assert out.returncode == 0, out.stderr[-3000:]
    run = _run_dir(results)
    it_dir = run / "raw" / "pgbench" / "c4-i1"
    recorded = json.loads((it_dir / "drivers.json").read_text())["drivers"]
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    skipped = {d["name"]: _skipped_in(_driver_logs(it_dir, d["name"]), d["origin_epoch"]
                                      + it["warmup_s"], it["duration_s"]) for d in recorded}
    assert all(n > 0 for n in skipped.values()), skipped
    assert it["skipped"] == sum(skipped.values())
    _left_behind(hosts)


@pytest.mark.server
def test_a_driver_with_pgdyno_bins_its_logs_and_keeps_them_there(drivers, tmp_path: Path,
                                                                  monkeypatch) -> None:
    """pgdyno on the driver bins a log there; only the per-second files come back when the
    logs are not kept, and the driver's directory is gone. A pgdyno of another version
    there bins nothing (its files might not be what this one reads)."""
    from pgdyno.targets.drivers import DriverHost, connect, find_pgdyno

    hosts, config, _listing, _base = drivers
    conn = connect(DriverHost("host-a", hosts[0].destination, config))
    try:
        with pgdyno_on(hosts[0]):
            find_pgdyno(conn)
            assert conn.pgdyno == f"{hosts[0].home}/.local/bin/pgdyno"
            count = _bin_a_log_there(conn, hosts[0], tmp_path)
            from pgdyno.workloads.engine import drivers as engine

            monkeypatch.setattr(engine, "__version__", "0.0.0-another")
            assert _bin_a_log_there(conn, hosts[0], tmp_path / "another") is None
        assert count == 13
        local = tmp_path / "drivers" / "host-a"
        assert sorted(p.name for p in local.iterdir()) == ["latency.hlog", "seconds.csv"]
        rows = (local / "seconds.csv").read_text().splitlines()
        assert [r.split(",")[:4] for r in rows[1:]] == [["0", "0", "5", "0"],
                                                       ["1", "0", "7", "0"],
                                                       ["2", "0", "0", "1"]]
        assert not (hosts[0].home / "bin-test").exists()
    finally:
        conn.transport.close()


def _bin_a_log_there(conn: DriverConnection, host: SshHost, tmp_path: Path) -> int | None:
    """A log written on the driver, binned there, fetched without it: its count."""
    from pgdyno.analysis.merge import DriverRecord
    from pgdyno.analysis.per_second import LogLayout
    from pgdyno.workloads.engine import drivers as engine

    # 5 transactions ending in second 0, 7 in second 1, 1 failed in second 2 of 1000.0.
    log = "".join(f"0 {k} {100 + k} 0 1000 {k * 1000}\n" for k in range(5))
    log += "".join(f"1 {k} {200 + k} 0 1001 {k * 1000}\n" for k in range(7))
    log += "1 7 failed 0 1002 5\n"
    remote = f"{host.home}/bin-test"
    assert conn.transport.run(f"mkdir -p {remote} && cat > {remote}/tx.42",
                              input_text=log).returncode == 0
    session = engine._Session(conn, DriverRecord("host-a", "", 2, 1, "drivers/host-a",
                                                 origin_epoch=1000.0), remote, "",
                              engine._ProgressLog(tmp_path / "p.jsonl", 1))
    count = engine._bin_there(session, LogLayout(has_lag=False, has_retries=False), None)
    assert engine._fetch_driver(session, tmp_path, logs=False)
    return count


def _skipped_in(logs: list[Path], start: float, seconds: int) -> int:
    """Lines of pgbench's logs marked ``skipped`` that ended inside [start, start+seconds)."""
    count = 0
    for path in logs:
        with gzip.open(path, "rt") as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 6 and line.endswith("\n") and f[2] == "skipped":
                    count += 0 <= int(f[4]) + int(f[5]) / 1e6 - start < seconds
    return count


def test_driver_files_are_read_or_refused(tmp_path: Path) -> None:
    listing = tmp_path / "drivers.txt"
    listing.write_text("# drivers\nbench@gen1\n\nbench@gen2  # the second\n")
    assert [(h.name, h.destination) for h in read_drivers(listing)] == [
        ("gen1", "bench@gen1"), ("gen2", "bench@gen2")]
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[drivers]\ngen1 ansible_host=10.0.0.5 ansible_user=bench "
                         "ansible_port=2222 ansible_ssh_common_args='-F /etc/pgdyno/ssh'\n"
                         "gen2\n")
    found = read_drivers(inventory)
    assert [(h.name, h.destination, h.options, h.config_file) for h in found] == [
        ("gen1", "bench@10.0.0.5", ("Port=2222",), Path("/etc/pgdyno/ssh")),
        ("gen2", "gen2", (), None)]
    inventory.write_text("[drivers]\ngen1 ansible_password=secret\n")
    with pytest.raises(UsageError, match="ansible_password is set; pgdyno takes no password"):
        read_drivers(inventory)
    with pytest.raises(UsageError, match="no such file"):
        read_drivers(tmp_path / "missing.txt")


def _sampler_lines(path: Path, cores_used: float, quota: float | None) -> None:
    """Eleven samples a second apart, as a driver's sampler writes them: the host's CPU
    ticks (100 a second a core, 2 cores, half of them idle), 3 running, 1 MiB/s received
    and 1 MiB/s sent, and pgbench at ``cores_used``, throttled 40% of the time under a
    quota."""
    lines = []
    for k in range(11):
        lines.append(json.dumps({
            "t": 1000.0 + k, "cpu": [100 * k, 0, 0, 100 * k, 0, 0, 0, 0], "running": 3,
            "net": [k * 2**20, k * 2**20], "proc": round(100 * cores_used * k), "hz": 100,
            "ncpu": 2, "quota": quota,
            "throttled_us": 400_000 * k if quota else None}))
    path.write_text("\n".join(lines) + "\n{\"t\": 10")  # the last line cut short


def test_a_driver_load_and_driver_bound_verdict(tmp_path: Path) -> None:
    from pgdyno.analysis import telemetry as t
    from pgdyno.analysis.merge import DriverFigures, DriverRecord, driver_load
    from pgdyno.analysis.verdict import CLIENT, DRIVER_BOUND, DRIVER_HOST, decide_bottleneck
    from pgdyno.reports.evidence import evidence_text

    rec = DriverRecord(name="gen1", destination="bench@gen1", clients=4, threads=2,
                       directory="drivers/gen1", origin_epoch=999.0)
    _sampler_lines(tmp_path / "limited.jsonl", 0.245, 0.25)
    load = driver_load(tmp_path / "limited.jsonl", rec, 1001.0, 1009.0)
    assert load is not None
    assert load.pgbench_cores == pytest.approx(0.245, abs=0.002)
    assert load.capacity_cores == 0.25  # its quota, below its 2 threads and 2 cores
    assert load.pgbench_pct == pytest.approx(98.0, abs=1.0)
    assert load.host_busy_pct == pytest.approx(50.0)
    assert load.run_queue == 3 and load.net_mib_s == pytest.approx(2.0)
    assert load.throttled_pct == pytest.approx(40.0)
    # Second by second, from the driver's launch: pgbench's ticks between two samples.
    ticks = [round(100 * 0.245 * k) for k in range(11)]
    assert [(x.t_s, x.pgbench_cores, x.net_mib_s) for x in load.series] == [
        (1.5 + k, (ticks[k + 1] - ticks[k]) / 100, 2.0) for k in range(10)]
    assert (load.seconds, load.seconds_at_limit) == (8, 8)  # 0.24 or 0.25 of 0.25 cores
    _sampler_lines(tmp_path / "free.jsonl", 0.5, None)
    free = driver_load(tmp_path / "free.jsonl", rec, 1001.0, 1009.0)
    assert free is not None and free.capacity_cores == 2 and free.pgbench_pct == 25.0
    assert free.throttled_pct is None and (free.seconds, free.seconds_at_limit) == (8, 0)

    def verdict(driver_load_: object, server_cores: float):
        s = t.TelemetrySummary(duration_s=8.0)
        s.cpu = t.CpuSummary(samples=8, online_cpus=2, effective_cores=2.0,
                             busy=t.Stat(avg=50.0), busy_of_limit_pct=50.0)
        s.waits = t.WaitSummary(ticks=80, sample_hz=10.0, aas=0.5, by_event=[
            t.WaitShare("Client", "ClientRead", 0.4, 80.0),
            t.WaitShare("CPU", "CPU", 0.1, 20.0)])
        s.contamination = t.Contamination(cpu_attributed=True, host_cores=2,
                                          server_cores=server_cores)
        s.drivers = [DriverFigures("gen1", 4, "ok", 1000, 100.0, 5.0, 0, 0, driver_load_)]
        return decide_bottleneck(s, clients=4, cpu_count=2)

    bound = verdict(load, server_cores=0.2)
    assert bound.primary == DRIVER_BOUND and bound.label == "driver-bound"
    found = next(e for e in bound.evidence if e.kind == DRIVER_HOST)
    assert found.names == {"driver": "gen1"}
    assert found.figures["server_busy_pct"] == pytest.approx(10.0)
    assert "pgbench on driver gen1 used 0.24 of the 0.25 cores it could use (98%; at 90% " \
           "or more of them 8 of 8 seconds" in evidence_text(found)
    # A driver with room to spare, or a busy server, is not the limit.
    assert verdict(free, server_cores=0.2).primary == CLIENT
    assert verdict(load, server_cores=1.6).primary != DRIVER_BOUND


def test_drivers_option_checked_in_bench_and_campaigns(tmp_path: Path) -> None:
    from pgdyno.campaign.spec import load_spec
    from pgdyno.runner.options import build_options

    listing = tmp_path / "drivers.txt"
    listing.write_text("bench@gen1\nbench@gen2\n")
    opts = build_options("tpcb", drivers=str(listing))
    assert opts.drivers == listing and opts.via == "tcp"  # drivers reach the server by TCP
    for kw, said in (({"drivers": str(tmp_path / "none.txt")}, "--drivers .*: no such file"),
                     ({"drivers": str(listing), "tx_logs": "aggregate"},
                      "--drivers --tx-logs aggregate: every driver's per-transaction log"),
                     ({"drivers": str(listing), "tx_logs": "sample"},
                      "--drivers --tx-logs sample")):
        with pytest.raises(UsageError, match=said):
            build_options("tpcb", **kw)
    with pytest.raises(UsageError, match="--drivers: cpu does not run pgbench"):
        build_options("cpu", drivers=str(listing))
    campaign = tmp_path / "campaign.toml"
    campaign.write_text('[campaign]\nname = "d"\nworkloads = ["tpcb"]\nclients = [2]\n'
                        f'repeat = 1\n\n[bench]\ndrivers = "{listing}"\nscale = 1\n\n'
                        '[[config]]\nlabel = "default"\n')
    assert load_spec(campaign, tmp_path / "results").bench["drivers"] == str(listing)


def test_an_inventory_group_selects_drivers_or_is_refused(tmp_path: Path) -> None:
    """Bare host names under group lines are an inventory, not SSH destinations; a group
    keeps its hosts and its children's; an empty (or unknown) group refuses the run before
    anything starts, naming the groups there."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[drivers]\ngen1\ngen2\n[drivers:children]\nlate\n[late]\ngen3\n"
                         "[empty]\n[db]\ndb1\n")
    assert [h.name for h in read_drivers(inventory, group="drivers")] == [
        "gen1", "gen2", "gen3"]
    results = tmp_path / "results"
    out = run_cli_here(["bench", "tpcb", "--drivers", str(inventory), "--drivers-group",
                        "empty", "--clients", "4", "--results-dir", str(results)],
                       tmp_path / "work")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"pgdyno: error: --drivers-group empty: no host of --drivers {inventory} is in such "
        "a group; accepted: its groups with hosts: db, drivers, late"]
    assert not results.exists() and not (tmp_path / "work").exists()
    listing = tmp_path / "drivers.txt"
    listing.write_text("bench@gen1\n")
    with pytest.raises(UsageError, match="lists SSH destinations, which have no groups"):
        read_drivers(listing, group="drivers")


def test_the_live_line_sums_the_drivers_seconds(tmp_path: Path) -> None:
    """The view shows the newest second every driver reported: TPS summed, the worst mean."""
    from pgdyno.analysis.merge import PROGRESS_NAME
    from pgdyno.runner.iterations import live_text
    from pgdyno.runner.live import LiveModel

    def line(driver: str, t: float, tps: float, lat: float) -> str:
        return json.dumps({"driver": driver, "of": 2, "t": t, "tps": tps, "lat_ms": lat}) + "\n"

    (tmp_path / PROGRESS_NAME).write_text(line("a", 1.0, 100.0, 2.0))
    model = LiveModel(tmp_path, last_second=4)
    assert model.update().tps is None  # b has not reported its first second yet
    with (tmp_path / PROGRESS_NAME).open("a") as fh:
        fh.write(line("b", 1.0, 110.0, 3.5) + line("a", 2.0, 120.0, 1.5))
    fig = model.update()
    assert (fig.elapsed_s, fig.tps, fig.worst_mean_ms, fig.drivers) == (1, 210.0, 3.5, 2)
    assert live_text(fig) == "1 s: 210 tps on 2 drivers, worst driver's mean 3.50 ms"
    with (tmp_path / PROGRESS_NAME).open("a") as fh:  # b's second 2 arrives
        fh.write(line("b", 2.0, 90.0, 1.25))
    fig = model.update()
    assert (fig.elapsed_s, fig.tps, fig.worst_mean_ms) == (2, 210.0, 1.5)
    model.close()
