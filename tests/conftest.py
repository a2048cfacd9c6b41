"""Shared fixtures: a real embedded PostgreSQL 18 server, started by the code under test.

The workdir lives under /var/tmp with mode 755 because, when the suite runs as root,
the server runs as the unprivileged ``pgdyno`` user, which cannot enter pytest's
private tmp_path (/tmp/pytest-of-root is mode 700).
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer


def make_shared_dir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    path.chmod(0o755)
    return path


def interruptible() -> None:
    """``preexec_fn`` for a pgdyno child that a test stops with SIGINT, as Ctrl-C would.

    A shell starting the suite in the background leaves SIGINT ignored, children inherit
    that, and Python then never raises KeyboardInterrupt: restore the default first."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    """One workdir for the whole session, so clusters and the binary copy are made once."""
    path = make_shared_dir("pgdyno-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def server(workdir: Path) -> Iterator[LocalServer]:
    """A running embedded server shared by tests that only read or use their own tables."""
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="shared")
    srv.prepare()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture()
def fresh_server(workdir: Path, request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """A server with its own cluster, for tests that change settings or kill things."""
    name = "t-" + request.node.name.replace("[", "-").replace("]", "")[:40]
    srv = LocalServer(install=embedded_install(), workdir=workdir, name=name)
    srv.prepare()
    srv.start()
    yield srv
    srv.stop()


def run_cli(args: list[str], env_workdir: Path, timeout: float = 300, **kw):
    """Run ``python -m pgdyno`` in a subprocess, as a user would, with a given workdir."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PGDYNO_WORKDIR=str(env_workdir), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "pgdyno", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


def postgres_processes(fragment: str) -> list[int]:
    """PIDs of postgres processes whose command line mentions ``fragment``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if proc.info.get("name") == "postgres" and fragment in cmdline:
            found.append(proc.pid)
    return found
