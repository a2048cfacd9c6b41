"""Shared fixtures: a real embedded PostgreSQL 18 server, started by the code under test.

The workdir lives under /var/tmp with mode 755 because, when the suite runs as root,
the server runs as the unprivileged ``pgdyno`` user, which cannot enter pytest's
private tmp_path (/tmp/pytest-of-root is mode 700).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from pgdyno.targets import default_workdir
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset

if TYPE_CHECKING:
    from pgdyno.search.space import SearchSpace

T = TypeVar("T")

SERVER_FIXTURES = frozenset({"server", "fresh_server", "workdir", "tiny_study"})
"""Fixtures that start or hold clusters, or measure the host (the tiny study's CPU baseline
runs): a test using one, even through another fixture, is marked ``server`` so that
``pytest -m "not server"`` leaves it out."""

_SHARED_DIRS: list[Path] = []
"""Every directory make_shared_dir made this session: where test clusters live."""
_STARTED = pytest.StashKey[float]()
_NO_SERVER = pytest.StashKey[bool]()
_LEFT_RUNNING = pytest.StashKey[list[int]]()


def make_shared_dir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    path.chmod(0o755)
    _SHARED_DIRS.append(path)
    return path


def pytest_configure(config: pytest.Config) -> None:
    """A developer's shared results database (PGDYNO_RESULTS_DB) must not receive the
    suite's runs: tests that want one give it themselves."""
    import os

    os.environ.pop("PGDYNO_RESULTS_DB", None)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it must see the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.time()


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_NO_SERVER] = not any(item.get_closest_marker("server")
                                               for item in session.items)


@pytest.hookimpl(trylast=True)  # after the session's fixtures have stopped their servers
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A session of unmarked tests only (``-m "not server"``) must leave no server behind.

    A server found means some test starts PostgreSQL without the ``server`` mark: mark it
    (or its module, with ``pytestmark = pytest.mark.server``)."""
    if session.config.stash.get(_NO_SERVER, False):
        left = _postgres_started_since(session.config.stash[_STARTED],
                                       [*_SHARED_DIRS, default_workdir()])
        if left:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            session.config.stash[_LEFT_RUNNING] = left
    _remove_shared_dirs()


def _remove_shared_dirs() -> None:
    """The session's /var/tmp directories (clusters, datasets, results: gigabytes over a
    suite) go with it, except one where a server still runs, and except when the
    developer asks to keep them (PGDYNO_KEEP_TEST_DIRS=1) to look at a failure."""
    import os

    if os.environ.get("PGDYNO_KEEP_TEST_DIRS"):
        return
    running = postgres_processes("")
    for path in _SHARED_DIRS:
        if not any(str(path) in _cmdline(pid) for pid in running):
            shutil.rmtree(path, ignore_errors=True)


def _cmdline(pid: int) -> str:
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    left = config.stash.get(_LEFT_RUNNING, [])
    if left:
        terminalreporter.write_line(
            f"FAILED: a session without server tests left PostgreSQL running (pids {left}); "
            "mark the test that starts it with pytest.mark.server", red=True)


def _postgres_started_since(since: float, places: list[Path]) -> list[int]:
    """postgres processes begun after ``since`` whose command line names one of ``places``."""
    import psutil

    found = []
    for place in places:
        for pid in postgres_processes(str(place)):
            try:
                if psutil.Process(pid).create_time() >= since - 1:
                    found.append(pid)
            except psutil.NoSuchProcess:
                continue
    return sorted(set(found))


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


def run_cli(args: list[str], env_workdir: Path, timeout: float = 300,
            env: dict[str, str] | None = None, **kw):
    """Run ``python -m pgdyno`` in a subprocess, as a user would, with a given workdir
    (``env``: variables to set on top of this process's environment)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PGDYNO_WORKDIR": str(env_workdir), "COLUMNS": "120", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pgdyno", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


def run_campaign(text: str, root: Path, workdir: Path | None = None, *,
                 relative: bool = False, timeout: float = 300) -> tuple[Path, str]:
    """``pgdyno campaign`` of the campaign ``text`` as a user runs it, in a process of its
    own: the file written as ``root``/campaign.toml, the results under ``root``/results, the
    clusters in ``workdir`` (default ``root``). ``relative``: run from inside ``root`` with
    relative paths, as from a project directory. It must succeed; returns (the results
    directory, what it printed)."""
    spec, results = root / "campaign.toml", root / "results"
    spec.write_text(text)
    paths = (spec.name, results.name) if relative else (str(spec), str(results))
    out = run_cli(["campaign", paths[0], "--results-dir", paths[1], "--no-progress"],
                  workdir or root, timeout=timeout, cwd=root if relative else None)
    assert out.returncode == 0, out.stderr[-3000:]
    return results, out.stdout


TINY_STUDY = """
[campaign]
name = "tiny"
workloads = ["cpu"]
clients = [1]
repeat = 2
[bench]
duration = 1
warmup = 0
iterations = 1
telemetry = false
[[config]]
label = "a"
[study]
question = "Is a damaged run named?"
"""
"""The cheapest study: two one-second runs of the CPU baseline, no server."""


@pytest.fixture(scope="session")
def tiny_study() -> Path:
    """TINY_STUDY run once per session, from inside its directory with a relative
    --results-dir: its directory, holding campaign.toml and results/. A test damages a
    copy of the results (``shutil.copytree``), never these."""
    root = make_shared_dir("pgdyno-tiny-study-")
    run_campaign(TINY_STUDY, root, relative=True, timeout=120)
    return root


SHORT_RUN = ("--clients", "1", "--duration", "1", "--warmup", "0", "--iterations", "1",
             "--no-telemetry", "--no-progress")
"""One client for one measured second, once, quietly: a run whose figures do not matter."""


@contextlib.contextmanager
def own_cluster_run(prefix: str, workload: str, *args: str) -> Iterator[tuple[Path, Path]]:
    """``pgdyno bench WORKLOAD ARGS`` for one second in a workdir of its own (a fresh
    cluster, so its dataset is built and other tests' databases do not grow): (the run
    directory, the workdir), both removed afterwards. It runs through the CLI's entry point
    in this process (``run_cli_here``): nothing signals it."""
    results = make_shared_dir(f"{prefix}-run-")
    workdir = make_shared_dir(f"{prefix}-work-")
    try:
        out = run_cli_here(["bench", workload, *args, *SHORT_RUN, "--results-dir",
                            str(results)], workdir)
        assert out.returncode == 0, out.stdout + out.stderr
        yield next(results.glob(f"*/{workload}-*")), workdir
    finally:
        shutil.rmtree(results, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


def run_cli_here(args: list[str], env_workdir: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None, site: Path | None = None, **_kw):
    """``pgdyno ARGS`` inside this process: the same entry point, exit code, stdout and
    stderr as ``run_cli``, without a new interpreter's second of start-up. For the
    bad-input corpora (hundreds of cases that fail before anything starts); a test that
    signals or kills pgdyno needs ``run_cli``. ``site``: a directory of installed packages
    (a workload plugin) first on the path for this call only, as PYTHONPATH puts it for a
    process: pgdyno finds its plugins afresh, writes no bytecode there, and forgets them
    (and their modules) afterwards."""
    import contextlib
    import io
    import os
    import signal
    import subprocess
    import sys
    import traceback

    from pgdyno.cli import main, signals

    _build_each_command_tree_once()
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_handlers = {s: signal.getsignal(s) for s in signals.HANDLED}
    os.environ.update({"PGDYNO_WORKDIR": str(env_workdir), "COLUMNS": "120", **(env or {})})
    sys.argv = ["pgdyno", *args]
    code = 0
    try:
        with _plugins_from(site):
            if cwd is not None:
                os.chdir(cwd)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    main.run()
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (
                        0 if exc.code is None else 1)
                except Exception:  # noqa: BLE001 - what a user would see: a traceback, exit 1
                    traceback.print_exc()
                    code = 1
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        for signum, handler in saved_handlers.items():
            signal.signal(signum, handler)
        signals.reset()
    return subprocess.CompletedProcess(["pgdyno", *args], code, out.getvalue(), err.getvalue())


_COMMAND_TREES: dict[object, object] = {}
"""typer app -> the click command typer built from it (the app kept alive as the key)."""


def _build_each_command_tree_once() -> None:
    """typer builds the click command tree from every command function's signature on each
    call of an app: 30-70 ms for pgdyno's, once in a process of its own but hundreds of
    times in this one. Built once per app object instead; ``pgdyno_app()`` returns the
    same object until the plugins are read afresh (``_forget_plugins``), whose new app
    gets a tree of its own."""
    import typer.main

    if getattr(typer.main.get_command, "_once_per_app", False):
        return
    build = typer.main.get_command

    def get_command(app: object) -> object:
        if app not in _COMMAND_TREES:
            _COMMAND_TREES[app] = build(app)
        return _COMMAND_TREES[app]

    get_command._once_per_app = True  # type: ignore[attr-defined]
    typer.main.get_command = get_command


@contextlib.contextmanager
def _plugins_from(site: Path | None) -> Iterator[None]:
    """``site`` first on sys.path while the block runs, pgdyno's plugin registry read afresh
    before and after it, and the modules imported from ``site`` forgotten at its end (the
    next test's plugin may have the same module name)."""
    import importlib
    import sys

    if site is None:
        yield
        return
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    sys.path.insert(0, str(site))
    sys.dont_write_bytecode = True  # no __pycache__ beside the plugin, as PYTHONDONTWRITEBYTECODE
    importlib.invalidate_caches()
    _forget_plugins()
    try:
        yield
    finally:
        sys.path[:] = saved_path
        sys.dont_write_bytecode = saved_bytecode
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(site)):
                del sys.modules[name]
        importlib.invalidate_caches()
        _forget_plugins()


def _forget_plugins() -> None:
    """pgdyno reads its plugins once per process: the registry, the options they add and
    the app built from them are cached; cleared, the next call reads them again."""
    from pgdyno.cli import app
    from pgdyno.runner import options
    from pgdyno.workloads import registry

    for cached in (registry.workloads, registry._loaded, options.workload_options,
                   app.pgdyno_app):
        cached.cache_clear()


def postgres_processes(fragment: str) -> list[int]:
    """PIDs of postgres processes whose command line mentions ``fragment``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if proc.info.get("name") == "postgres" and fragment in cmdline:
            found.append(proc.pid)
    return found


def scratch_database(server: LocalServer, name: str,
                     schema: str = dataset.SCHEMA) -> Iterator[ConnectionInfo]:
    """A new, empty database on ``server`` for one test or module; dropped afterwards.

    The connection resolves names in pgdyno's own schema, as workload connections do (its
    ``in_schema(None)`` is the plain way in, where a user's tables go)."""
    import psycopg
    from psycopg import sql

    admin = server.admin_connection()
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin.conninfo("postgres"), autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield dataset.scoped(server.connection().with_dbname(name), schema)
    with psycopg.connect(admin.conninfo("postgres"), autocommit=True) as conn:
        conn.execute(drop)


def foreign_table_refuses_the_load(target: ConnectionInfo, load: Callable[[bool], T]) -> T:
    """A user's table in the database (``my_accounts``, where a user's tables go) refuses an
    unforced ``load(force)`` in one line naming it, before pgdyno builds anything in its own
    schema; forced, the load builds beside it and leaves it as it was. Returns the forced
    load's result, for each workload's own checks."""
    import psycopg

    from pgdyno.errors import UsageError

    user = target.in_schema(None)
    with psycopg.connect(user.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE my_accounts (id int)")
        conn.execute("INSERT INTO my_accounts VALUES (1)")
    with pytest.raises(UsageError, match="my_accounts") as refused:
        load(False)
    assert "\n" not in str(refused.value)
    assert _tables_in(target, target.search_path) == []
    result = load(True)
    assert not result.reused and _tables_in(target, target.search_path)
    with psycopg.connect(user.conninfo(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM public.my_accounts").fetchone() == (1,)
    return result


def _tables_in(target: ConnectionInfo, schema: str | None) -> list[str]:
    import psycopg

    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]


CPU_RUN = ["bench", "cpu", "--clients", "1", "--duration", "1", "--warmup", "0",
           "--iterations", "1", "--no-telemetry", "--no-progress"]
"""The cheapest real run: no server, no warm-up, about 2 s (for tests about run
directories, which check its files, not its figures)."""


def cpu_runs(root: Path, count: int = 2) -> Path:
    """``count`` real `pgdyno bench cpu` runs in ``root/results`` (with their index)."""
    results = root / "results"
    for _ in range(count):
        out = run_cli_here([*CPU_RUN, "--results-dir", str(results)], root)
        assert out.returncode == 0, out.stderr
    return results


def wait_for_load(proc, results: Path, timeout: float = 90) -> Path:  # noqa: ANN001
    """The run directory of a ``pgdyno bench tpcb --clients 2`` started as ``proc``, once
    pgbench is running in it (for tests that signal or kill pgdyno mid-load)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for run in results.glob("*--tpcb/tpcb-*"):
            if any((run / "raw" / "pgbench").glob("c2-i1/*")):
                time.sleep(1.0)  # pgbench is connected and running
                return run
        time.sleep(0.2)
    raise AssertionError("the run did not start its load")


def write_search_record(directory: Path, workload: str, space: SearchSpace) -> None:
    """The search.json of an earlier search, as a search writes it (``--from`` reads it)."""
    import json

    from pgdyno import serde
    from pgdyno.search.run import SearchRecord

    record = SearchRecord(name=directory.name, workload=workload, metric="tps", direction=1,
                          space=space, options={}, allow_unsafe=False,
                          created_at="2025-01-01T00:00:00Z")
    (directory / "search.json").write_text(json.dumps(serde.to_dict(record)))
