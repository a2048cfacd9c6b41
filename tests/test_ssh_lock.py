"""One pgdyno at a time per remote workdir on an --ssh host, and recovery from a killed one.

The host is this machine reached through Debian's sshd on 127.0.0.1 as a throwaway OS user
(tests/sshhost.py): the lock is util-linux ``flock`` on ``<remote workdir>/pgdyno.lock``
held by a shell at the end of pgdyno's own SSH connection, so it must go when pgdyno goes,
even by SIGKILL, which nothing can catch.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pgdyno.errors import UsageError
from pgdyno.targets.remote import RemoteLock
from pgdyno.targets.ssh import SshTransport
from tests.conftest import make_shared_dir, run_cli, wait_for_load
from tests.sshhost import ssh_hosts

_HOLDER = """
import sys, time
from pathlib import Path
from pgdyno.targets.remote import RemoteLock
from pgdyno.targets.ssh import SshTransport
ssh = SshTransport(sys.argv[1], Path(sys.argv[2]))
lock = RemoteLock(ssh, sys.argv[3])
lock.acquire()
lock.hold_for(Path("/nonexistent/run"), Path("/nonexistent"), sys.argv[3] + "/data")
print("held", flush=True)
time.sleep(600)
"""


def _flock_free(host, path: str) -> bool:  # noqa: ANN001
    """The lock file is free, as flock on the host itself sees it."""
    return subprocess.run(["runuser", "-u", host.user, "--", "flock", "-n", path, "true"],
                          capture_output=True, check=False).returncode == 0


def test_remote_lock_refuses_a_second_and_dies_with_a_sigkilled_holder() -> None:
    """No server: the lock alone. A holder process (as pgdyno would be) takes it; a second
    lock is refused naming host, workdir and holder; SIGKILL on the holder frees it, and
    the next acquire gets the killed holder's record (a clean release leaves none)."""
    with ssh_hosts(1) as (host,):
        workdir = f"{host.home}/locked"
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, host.destination,
                                   str(host.config_file), workdir],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with (SshTransport(host.destination, host.config_file) as ssh,
                  pytest.raises(UsageError) as refused):
                RemoteLock(ssh, workdir).acquire()
            line = str(refused.value)
            assert "\n" not in line
            assert (f"another pgdyno is using remote workdir {workdir} on {host.destination} "
                    f"(pid {holder.pid} on {socket.gethostname()}, run /nonexistent/run)"
                    in line)
            assert not _flock_free(host, f"{workdir}/pgdyno.lock")
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
            deadline = time.monotonic() + 10
            while not _flock_free(host, f"{workdir}/pgdyno.lock"):
                assert time.monotonic() < deadline, "the lock outlived its SIGKILLed holder"
                time.sleep(0.1)
            with SshTransport(host.destination, host.config_file) as ssh:
                lock = RemoteLock(ssh, workdir)
                previous = lock.acquire()
                assert previous is not None and previous.pid == holder.pid
                assert previous.data_dir == f"{workdir}/data"
                assert lock.stop_orphaned_server(previous.data_dir) is None  # none there
                lock.release()
                again = RemoteLock(ssh, workdir)
                assert again.acquire() is None  # a clean release leaves no record
                again.release()
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()


# ----- real sshd, real servers ----------------------------------------------------------------


def _bench(host, results: Path, duration: int) -> list[str]:  # noqa: ANN001
    return ["bench", "tpcb", "--ssh", host.destination, "--ssh-config", str(host.config_file),
            "--clients", "2", "--duration", str(duration), "--warmup", "0", "--iterations",
            "1", "--scale", "1", "--no-telemetry", "--no-progress", "--results-dir",
            str(results)]


@pytest.mark.server
def test_second_run_on_one_ssh_host_is_refused_and_a_killed_run_recovered(
        workdir: Path) -> None:
    """Two runs against one host and remote workdir: the second is refused in one line
    while the first holds the lock; the first is then SIGKILLed with its postmaster running
    on the host, and the next run stops that server and marks the killed run failed, as a
    local workdir's lock does."""
    results = make_shared_dir("pgdyno-sshlock-")
    with ssh_hosts(1) as (host,):
        remote_workdir = f"{host.home}/.local/share/pgdyno"
        env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
        first = subprocess.Popen([sys.executable, "-m", "pgdyno", *_bench(host, results, 60)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        children: list[psutil.Process] = []
        try:
            run = wait_for_load(first, results, timeout=180)
            # 1. Refused while the first holds the lock: exit 2, one line, nothing made.
            second = run_cli(_bench(host, results, 2), workdir, timeout=120)
            assert second.returncode == 2, second.stderr
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert (f"another pgdyno is using remote workdir {remote_workdir} on "
                    f"{host.destination} (pid {first.pid} on {socket.gethostname()}, "
                    f"run {run})") in lines[0]
            assert len(list(results.glob("*--tpcb/tpcb-*"))) == 1
            # 2. SIGKILL: nothing can stop the host's server, and the manifest says running.
            data_dir = Path(json.loads((run / "manifest.json").read_text())
                            ["target"]["data_dir"])
            postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
            children = psutil.Process(first.pid).children(recursive=True)
            first.kill()
            first.communicate(timeout=30)
            assert psutil.pid_exists(postmaster)
            assert json.loads((run / "manifest.json").read_text())["status"] == "running"
            # 3. The next run takes the lock, stops the orphan, marks the killed run failed,
            # and runs on the same cluster.
            third = run_cli(_bench(host, results, 2), workdir, timeout=300)
            assert third.returncode == 0, third.stderr
            assert ("stopped the server left running by a killed pgdyno (postmaster pid "
                    f"{postmaster})") in third.stderr
            assert f"marked run {run} failed: pgdyno (pid {first.pid}) was killed" \
                in third.stderr.replace("\n", " ")
            manifest = json.loads((run / "manifest.json").read_text())
            assert manifest["status"] == "failed" and "pgdyno was killed" in manifest["reason"]
            assert not psutil.pid_exists(postmaster)
            newest = max(results.glob("*--tpcb/tpcb-*"), key=lambda p: p.stat().st_mtime)
            after = json.loads((newest / "manifest.json").read_text())
            assert after["status"] == "ok" and after["target"]["data_dir"] == str(data_dir)
            assert not (data_dir / "postmaster.pid").exists()  # stopped: no --keep
            # A clean end leaves the lock free and its record empty.
            assert (Path(remote_workdir) / "pgdyno.lock").read_text() == ""
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
            for child in children:  # the killed run's pgbench, if still running: by pid
                if child.is_running():
                    child.kill()
