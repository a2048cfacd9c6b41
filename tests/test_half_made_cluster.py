"""A workdir is never left unusable by an interrupted first start.

The cluster is built beside its place and renamed into it once pgdyno's configuration is
written (targets.clusterdir). A cluster an older pgdyno left without its include line (it
then started on PostgreSQL's default socket, and every start waited 60 s for it) is rebuilt
when it holds nothing initdb did not make, and refused in one line otherwise; a build
directory a killed pgdyno left is removed. On an --ssh host the cluster is built and moved
the same way, a leftover build is removed and an unfinished cluster refused. Real servers
and real `pgdyno bench` runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from pgdyno.errors import UsageError
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.clusterdir import (
    INCLUDE_DIRECTIVE,
    INCLUDE_FILE,
    INCLUDE_LINE,
    build_dirs,
    is_whole,
)
from pgdyno.targets.local import DATABASE, LocalServer
from tests.conftest import SHORT_RUN, interruptible, make_shared_dir
from tests.conftest import run_cli_here as run_cli

pytestmark = pytest.mark.server

QUICK_S = 20.0
"""For a repair and a start: well under the 60 s a start used to wait for a server that
listens where pgdyno never looks."""
RUN_S = 45.0
"""For a whole one-second run (dataset included) on a loaded machine: the same start used
to cost two such waits (the start, then the rollback's), over 120 s."""


def data_dir(workdir: Path) -> Path:
    return workdir / "instances" / f"pg{embedded_install().major}-embedded" / "data"


def bench(workdir: Path, results: Path) -> tuple[subprocess.CompletedProcess, float]:
    """A one-second `pgdyno bench select-only` in ``workdir``, and how long it took."""
    began = time.monotonic()
    proc = run_cli(["bench", "select-only", "--scale", "1", *SHORT_RUN,
                    "--results-dir", str(results)], workdir, timeout=120)
    return proc, time.monotonic() - began


def bench_args(results: Path) -> list[str]:
    return [sys.executable, "-m", "pgdyno", "bench", "select-only", "--scale", "1",
            *SHORT_RUN, "--results-dir", str(results)]


def half_made(workdir: Path, wal_dir: Path | None = None, started: bool = False) -> Path:
    """The cluster an older pgdyno left when interrupted between initdb and its include
    line: initdb'd, its postgresql.conf without the line, no include file. ``started``: as
    it was after later starts (each wrote the include file, started the server where pgdyno
    did not look, waited 60 s and stopped it), which leave postmaster.opts too."""
    srv = LocalServer(install=embedded_install(), workdir=workdir, wal_dir=wal_dir)
    srv.prepare()
    if started:
        srv.start()
        # Never reached, those starts made no database of pgdyno's: drop the one this made.
        with psycopg.connect(srv.admin_connection().conninfo("postgres"),
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{DATABASE}"')
        srv.stop()
    conf = srv.data_dir / "postgresql.conf"
    conf.write_text(conf.read_text().replace(INCLUDE_DIRECTIVE, ""))
    if not started:
        (srv.data_dir / INCLUDE_FILE).unlink()
    assert (srv.data_dir / "PG_VERSION").exists() and not is_whole(srv.data_dir)
    assert (srv.data_dir / "postmaster.opts").exists() == started
    return srv.data_dir


def lines_naming(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def assert_usable(workdir: Path, results: Path) -> None:
    """A normal run in ``workdir`` works and has nothing to repair."""
    proc, elapsed = bench(workdir, results)
    assert proc.returncode == 0, proc.stderr
    assert "unfinished" not in proc.stderr and "Traceback" not in proc.stderr
    assert is_whole(data_dir(workdir)) and not build_dirs(data_dir(workdir))
    assert elapsed < RUN_S


def test_an_older_pgdyno_s_half_made_cluster_is_rebuilt_at_once() -> None:
    """As the issue found it: after later starts that each waited 60 s (twice, with the
    rollback's start) and failed."""
    workdir = make_shared_dir("pgdyno-half-")
    results = make_shared_dir("pgdyno-half-results-")
    data = half_made(workdir, started=True)
    proc, elapsed = bench(workdir, results)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    said = lines_naming(proc.stderr, str(data))
    assert len(said) == 1 and said[0].startswith("pgdyno: ")
    assert "interrupted first start" in said[0] and "making it again" in said[0]
    assert elapsed < RUN_S, f"{elapsed:.1f} s: the start waited instead of repairing"
    assert is_whole(data) and not build_dirs(data)
    assert_usable(workdir, results)


@pytest.mark.parametrize(("extra", "named"), [
    ("base/16384", "a database (base/16384)"),
    ("my-notes.txt", "holds my-notes.txt"),
])
def test_a_half_made_cluster_with_more_than_initdb_made_is_refused(extra: str,
                                                                   named: str) -> None:
    """Not certainly pgdyno's unfinished cluster: one line naming it, exit 2, nothing
    removed, and no server started."""
    workdir = make_shared_dir("pgdyno-half-refused-")
    results = make_shared_dir("pgdyno-half-refused-results-")
    data = half_made(workdir)
    (data / extra).mkdir() if extra.startswith("base/") else (data / extra).write_text("x")
    proc, elapsed = bench(workdir, results)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(data) in lines[0] and named in lines[0] and INCLUDE_LINE in lines[0]
    assert "use another --workdir" in lines[0]
    assert elapsed < QUICK_S
    assert (data / extra).exists() and (data / "PG_VERSION").exists()
    assert not list(results.iterdir())


def test_a_first_start_interrupted_during_initdb_leaves_the_workdir_usable() -> None:
    """Ctrl-C while initdb runs: no cluster and no build directory left, and the next run
    makes the cluster as a first start does."""
    workdir = make_shared_dir("pgdyno-half-sigint-")
    results = make_shared_dir("pgdyno-half-sigint-results-")
    data = data_dir(workdir)
    proc = subprocess.Popen(bench_args(results), env={**os.environ,
                            "PGDYNO_WORKDIR": str(workdir)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    wait_for_build(proc, data)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not data.exists() and not build_dirs(data)
    assert_usable(workdir, results)


def test_a_build_left_by_a_killed_pgdyno_is_removed() -> None:
    """SIGKILL while initdb runs: initdb goes on alone and finishes a build directory that
    pgdyno never configures; the next run removes it, says so in one line, and works."""
    workdir = make_shared_dir("pgdyno-half-kill-")
    results = make_shared_dir("pgdyno-half-kill-results-")
    data = data_dir(workdir)
    proc = subprocess.Popen(bench_args(results), env={**os.environ,
                            "PGDYNO_WORKDIR": str(workdir)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    build = wait_for_build(proc, data)
    proc.kill()
    proc.wait(timeout=30)
    wait_for_orphaned_initdb(build)
    assert build.is_dir() and not data.exists()
    again, elapsed = bench(workdir, results)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    said = lines_naming(again.stderr, str(build))
    assert len(said) == 1 and said[0].startswith("pgdyno: removed ")
    assert elapsed < RUN_S
    assert not build.exists() and is_whole(data) and not build_dirs(data)
    assert_usable(workdir, results)


@pytest.mark.parametrize(("started", "external_wal"), [(False, False), (True, False),
                                                      (False, True)])
def test_a_half_made_cluster_is_repaired_and_started_in_seconds(
        started: bool, external_wal: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """The repair and the start that used to wait 60 s, timed on their own. With --wal-dir
    the unfinished cluster's WAL lives outside it: emptied (the directory kept), so that the
    rebuilt cluster can use it again."""
    workdir = make_shared_dir("pgdyno-half-timed-")
    wal = make_shared_dir("pgdyno-half-wal-") / "wal" if external_wal else None
    data = half_made(workdir, wal, started)
    assert wal is None or any(wal.iterdir())
    capsys.readouterr()
    began = time.monotonic()
    srv = LocalServer(install=embedded_install(), workdir=workdir, wal_dir=wal)
    try:
        srv.prepare()
        srv.start()
        elapsed = time.monotonic() - began
    finally:
        srv.stop()
    assert elapsed < QUICK_S, f"{elapsed:.1f} s"
    err = capsys.readouterr().err
    said = lines_naming(err, str(data))
    assert len(said) == 1 and "making it again" in said[0] and "Traceback" not in err
    assert is_whole(data) and not build_dirs(data)
    if wal is not None:
        assert (data / "pg_wal").resolve() == wal.resolve()


def test_an_unfinished_cluster_s_wal_directory_with_foreign_files_is_refused() -> None:
    workdir = make_shared_dir("pgdyno-half-walx-")
    wal = make_shared_dir("pgdyno-half-walx-dir-") / "wal"
    data = half_made(workdir, wal)
    (wal / "README").write_text("mine")
    with pytest.raises(UsageError, match=r"WAL directory .* holds README") as err:
        LocalServer(install=embedded_install(), workdir=workdir, wal_dir=wal)
    assert "\n" not in str(err.value)
    assert (wal / "README").exists() and (data / "PG_VERSION").exists()


def test_a_symbolic_link_in_the_cluster_s_place_is_never_followed_to_remove() -> None:
    """pgdyno removes only directories it made: a link to an empty directory is refused."""
    workdir = make_shared_dir("pgdyno-half-link-")
    elsewhere = make_shared_dir("pgdyno-half-link-target-")
    data = data_dir(workdir)
    data.parent.mkdir(parents=True)
    data.symlink_to(elsewhere)
    with pytest.raises(UsageError, match="a symbolic link"):
        LocalServer(install=embedded_install(), workdir=workdir)
    assert data.is_symlink() and elsewhere.is_dir()


def test_a_first_start_makes_the_cluster_whole_and_owned_as_before(
        capsys: pytest.CaptureFixture[str]) -> None:
    workdir = make_shared_dir("pgdyno-half-fresh-")
    srv = LocalServer(install=embedded_install(), workdir=workdir)
    srv.prepare()
    assert capsys.readouterr().err == ""
    assert is_whole(srv.data_dir) and not build_dirs(srv.data_dir)
    assert (srv.data_dir / INCLUDE_FILE).exists()
    info = srv.data_dir.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (srv.user.uid, 0o700)
    try:
        srv.start()
        assert srv.is_running()
    finally:
        srv.stop()


# ----- helpers that watch a first start ------------------------------------------------

def wait_for_build(proc: subprocess.Popen, data: Path, timeout_s: float = 60) -> Path:
    """The build directory of ``proc``'s first start, once initdb is writing it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before its initdb was seen"
        found = build_dirs(data)
        if found and (found[0] / "PG_VERSION").exists():
            return found[0]
        time.sleep(0.005)
    raise AssertionError("no build directory appeared")


def wait_for_orphaned_initdb(build: Path, timeout_s: float = 30) -> None:
    """An initdb whose pgdyno was killed goes on alone: wait until it is done."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(str(build) in " ".join(p.info["cmdline"] or [])
                   for p in psutil.process_iter(["cmdline"])):
            return
        time.sleep(0.1)
    raise AssertionError(f"initdb still writing {build}")


# ----- on an --ssh host ------------------------------------------------------------------

def test_on_an_ssh_host_a_leftover_build_goes_and_a_half_made_cluster_is_refused() -> None:
    """The same build-then-move on the host (one script): a build directory left there is
    removed with one line; an unfinished cluster an older pgdyno left is refused in one
    line (the host's files are the ssh user's to judge), without a start that waits."""
    from tests.sshhost import ssh_hosts

    results = make_shared_dir("pgdyno-half-ssh-")
    local = make_shared_dir("pgdyno-half-ssh-work-")
    with ssh_hosts(1) as (host,):
        args = ["bench", "select-only", "--ssh", host.destination, "--ssh-config",
                str(host.config_file), "--scale", "1", *SHORT_RUN, "--results-dir",
                str(results)]
        instance = (host.home / ".local/share/pgdyno/instances" /
                    f"pg{embedded_install().major}-embedded")
        build = instance / "data.partial-0badc0de"
        (build / "base").mkdir(parents=True)
        (build / "PG_VERSION").write_text("18\n")
        give_to_host_user(host.home, host.user)
        first = run_cli(args, local, timeout=300)
        assert first.returncode == 0, first.stderr
        said = lines_naming(first.stderr, str(build))
        assert len(said) == 1 and said[0].startswith("pgdyno: removed "), first.stderr
        data = instance / "data"
        assert not build.exists() and is_whole(data)
        conf = data / "postgresql.conf"
        conf.write_text(conf.read_text().replace(INCLUDE_DIRECTIVE, ""))
        began = time.monotonic()
        again = run_cli(args, local, timeout=300)
        elapsed = time.monotonic() - began
        assert again.returncode == 2, again.stderr
        lines = again.stderr.strip().splitlines()
        assert len(lines) == 1 and str(data) in lines[0], again.stderr
        assert "left unfinished" in lines[0] and INCLUDE_LINE in lines[0]
        assert elapsed < QUICK_S
        assert (data / "PG_VERSION").exists()


def give_to_host_user(home: Path, user: str) -> None:
    """What the test made in the stand-in host's home, as if its user had made it."""
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(home / ".local"):
        for path in [root, *(os.path.join(root, name) for name in dirs + files)]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
