"""pgdyno starts without its heavy parts: every test, fleet host and SSH target that starts
it pays for what start-up imports, so the CLI imports what a command uses inside the
command, and the workload plugins (loaded at every start: their options are ``bench``'s)
import theirs where they use them.

Checked on the modules a real start holds when it ends (``python -X importtime`` names the
chain that imported one), not on how long it took: the machine's speed varies, the list of
modules does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("matplotlib", "numpy", "psycopg", "hdrh", "jinja2", "optuna", "duckdb", "pyarrow",
         "psutil", "PIL")
"""Libraries that take tens to hundreds of milliseconds to import, none needed to build the
commands or parse their arguments."""

HEAVY_PGDYNO = ("pgdyno.reports.plots", "pgdyno.reports.html", "pgdyno.runner.bench",
                "pgdyno.compare.command", "pgdyno.campaign", "pgdyno.study", "pgdyno.fleet",
                "pgdyno.provision", "pgdyno.search.run")
"""pgdyno's own layers that do a command's work (and import the libraries above)."""

NEEDED = ("typer", "pgdyno.cli.app", "pgdyno.runner.options", "pgdyno.workloads.registry",
          "pgdyno.workloads.pgbench.plugin", "pgdyno.workloads.tproch.plugin")
"""What every start does import: the app, and the plugins whose options make ``bench``'s
(so an empty or unread list cannot pass for a light start)."""


class Imports:
    """The modules one start imported, and which module imported each."""

    def __init__(self, importtime: str) -> None:
        self.importer: dict[str, str | None] = {}
        pending: list[tuple[int, str]] = []  # (depth, name) still without their importer
        # -X importtime prints a module after the modules it imported, indented 2 per level.
        for line in importtime.splitlines():
            if not line.startswith("import time:") or line.endswith("imported package"):
                continue
            raw = line.split("|", 2)[2]
            name, depth = raw.strip(), (len(raw) - len(raw.lstrip(" "))) // 2
            self.importer[name] = None
            for d, child in pending:
                if d == depth + 1:
                    self.importer[child] = name
            pending = [(d, c) for d, c in pending if d <= depth] + [(depth, name)]

    def chain(self, module: str) -> list[str]:
        """``module``, its importer, that one's importer... up to a top-level import."""
        found = [module]
        while (up := self.importer[found[-1]]) is not None:
            found.append(up)
        return found

    def of(self, packages: tuple[str, ...]) -> dict[str, str]:
        """The first module of ``packages`` on each import path, with that path."""
        return {m: " <- ".join(self.chain(m)) for m in self.importer
                if _within(m, packages) and not _within(self.importer[m] or "", packages)}


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


# -m pgdyno as runpy runs it, then every module the process holds (plugins that importlib
# loaded too, which -X importtime leaves out) written to the file named first.
RUN_AND_LIST = """
import json, runpy, sys
listing = sys.argv.pop(1)
try:
    runpy.run_module("pgdyno", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exc:
    code = exc.code
with open(listing, "w") as fh:
    json.dump(sorted(sys.modules), fh)
sys.exit(code)
"""


class Start:
    """One start of pgdyno: every module it held at exit, and -X importtime's reading."""

    def __init__(self, args: list[str], listing: Path) -> None:
        env = {**os.environ, "COLUMNS": "120"}
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", RUN_AND_LIST,
                               str(listing), *args],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        self.stdout = done.stdout
        self.modules: set[str] = set(json.loads(listing.read_text()))
        self.imports = Imports(done.stderr)

    def of(self, packages: tuple[str, ...]) -> dict[str, str]:
        """Each of ``packages`` this start imported, with the chain that imported it."""
        found = {}
        for package in packages:
            held = sorted(m for m in self.modules if _within(m, (package,)))
            if held:
                logged = self.imports.of((package,))
                found[package] = "; ".join(logged.values()) or held[0]
        return found


@pytest.fixture(scope="module")
def help_start(tmp_path_factory: pytest.TempPathFactory) -> Start:
    return Start(["--help"], tmp_path_factory.mktemp("help") / "modules.json")


@pytest.fixture(scope="module")
def runs_start(tmp_path_factory: pytest.TempPathFactory) -> Start:
    results = tmp_path_factory.mktemp("empty-results")
    return Start(["runs", "--results-dir", str(results)], results.parent / "modules.json")


@pytest.mark.parametrize("which", ["help_start", "runs_start"])
def test_a_start_builds_the_app_with_its_plugins(which: str,
                                                 request: pytest.FixtureRequest) -> None:
    started: Start = request.getfixturevalue(which)
    assert [m for m in NEEDED if m not in started.modules] == []
    assert started.stdout.split()[:1] in (["Usage:"], ["run"]), started.stdout[:200]


@pytest.mark.parametrize("which", ["help_start", "runs_start"])
def test_a_start_imports_no_heavy_part(which: str, request: pytest.FixtureRequest) -> None:
    started: Start = request.getfixturevalue(which)
    assert started.of(HEAVY) == {}, "import it inside the function that uses it"
    assert started.of(HEAVY_PGDYNO) == {}, "import it inside the command that uses it"


def test_help_imports_no_console_library(help_start: Start) -> None:
    """rich prints a command's tables: --help has none to print."""
    assert help_start.of(("rich",)) == {}


def test_the_chains_name_who_imported_what() -> None:
    """The reading of -X importtime: a module's importers are the first less indented
    lines after it (a recorded sample of its output)."""
    sample = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       100 |        100 |       numpy.core",
        "import time:       200 |        300 |     numpy",
        "import time:        50 |        350 |   pgdyno.analysis.hdr",
        "import time:        10 |         10 |   pgdyno.errors",
        "import time:        20 |        380 | pgdyno.analysis.summary",
        "import time:         5 |          5 | typer",
    ])
    imports = Imports(sample)
    assert imports.chain("numpy.core") == ["numpy.core", "numpy", "pgdyno.analysis.hdr",
                                           "pgdyno.analysis.summary"]
    assert imports.chain("pgdyno.errors") == ["pgdyno.errors", "pgdyno.analysis.summary"]
    assert imports.chain("typer") == ["typer"]
    assert imports.of(("numpy",)) == {
        "numpy": "numpy <- pgdyno.analysis.hdr <- pgdyno.analysis.summary"}
