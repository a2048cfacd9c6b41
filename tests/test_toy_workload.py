"""A workload shipped as a package of its own (tests/data/toy_workload): installed by pip
into a directory of its own, found through the ``pgdyno.workloads`` entry point, and run
end to end through bench, compare, a sweep (and sweep against sweep) and a campaign, while
no line of pgdyno names it. A plugin that cannot be loaded is one line naming it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_shared_dir, run_cli_here

TOY = Path(__file__).resolve().parent / "data" / "toy_workload"
ROOT = Path(__file__).resolve().parents[1]
SHORT = ["--clients", "1", "--duration", "1", "--warmup", "0", "--iterations", "1",
         "--no-progress", "--context", "test--toy"]


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy installed with pip (offline, no dependencies) into a directory of its own;
    pgdyno (``run_cli_here``) sees it first on the path, as PYTHONPATH puts it for a
    process, as it would see it in site-packages."""
    root = tmp_path_factory.mktemp("toy")
    shutil.copytree(TOY, root / "src")  # a build writes beside its sources: not in the repo
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(root / "site"),
                    str(root / "src")], check=True, capture_output=True, timeout=300)
    assert (next((root / "site").glob("pgdyno_toy_workload-*.dist-info")) / "entry_points.txt"
            ).read_text().count("toy = toy_workload.plugin:Toy") == 1
    return root / "site"


def test_the_toy_is_found_through_its_entry_point(toy_site: Path,
                                                   tmp_path: Path) -> None:
    out = run_cli_here(["bench", "--help"], tmp_path, site=toy_site)
    assert out.returncode == 0, out.stderr
    assert "toy: a toy from its own package" in out.stdout
    assert "--toy-rows" in out.stdout
    section = out.stdout.split("Workloads:", 1)[1].split("Arguments:", 1)[0]
    listed = re.findall(r"^\s+([a-z-]+): ", section, re.MULTILINE)
    assert listed[-1] == "toy" and listed[:3] == ["tpcb", "simple-update", "select-only"]
    refused = run_cli_here(["bench", "tpcb", "--toy-rows", "5", "--results-dir",
                            str(tmp_path / "r")], tmp_path, site=toy_site)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "pgdyno: error: --toy-rows belongs to toy, not tpcb"
    assert not (tmp_path / "r").exists()


def test_no_line_of_pgdyno_names_the_toy() -> None:
    """Nothing outside the toy's folder had to change for it."""
    word = re.compile(r"\btoy(_workload)?\b")
    named = [str(p.relative_to(ROOT)) for p in [*(ROOT / "src").rglob("*.py"),
                                                ROOT / "pyproject.toml"]
             if word.search(p.read_text())]
    assert named == []


def test_the_smallest_plugin_is_a_few_lines() -> None:
    """Every hook has a default: a name and a description make a workload (its run and its
    summary are the only hooks that must say something)."""
    from pgdyno.options import NoOptions
    from pgdyno.runner.options import build_options
    from pgdyno.workloads.base import CLIENTS_PER_CORE, Workload

    class Mini(Workload):
        name = "mini"
        description = "the smallest plugin"

    mini, opts = Mini(), build_options("tpcb")
    assert mini.engine_dir == "mini" and mini.needs_server and mini.default_max_tries == 1
    assert isinstance(mini.options_from_cli({}, opts).workload_options, NoOptions)
    cores = len(os.sched_getaffinity(0))
    assert mini.default_clients() == tuple(cores * k for k in CLIENTS_PER_CORE)
    assert (mini.dataset_bytes(opts), mini.describe_dataset(opts), mini.sweep_steps(opts),
            mini.storage_directories(opts), mini.compare_detail([], []),
            mini.cpu_baseline_metric) == (None, "", [], {}, {}, None)


def test_capabilities_are_asked_of_the_plugins() -> None:
    from pgdyno.runner.options import build_options
    from pgdyno.workloads import registry
    from pgdyno.workloads.base import Workload

    assert registry.names(lambda w: w.cpu_baseline_metric is not None) == ["cpu"]
    swept = [n for n, w in registry.WORKLOADS.items()
             if type(w).compare_sweeps is not Workload.compare_sweeps]
    assert swept == ["tprocc"]  # the one sweep comparison of its own
    tpcb = registry.get("tpcb")
    opts = build_options("tpcb", dataset_size="157MB")
    assert opts.workload_options.scale == 10 == tpcb.size_for_bytes(157_000_000)
    assert tpcb.dataset_bytes(opts) == 10 * tpcb.bytes_per_size


def test_a_metric_shows_with_its_unit_as_a_number() -> None:
    from pgdyno.reports.document import Table
    from pgdyno.workloads.base import HIGHER, MetricSpec

    spec = MetricSpec("widgets_per_s", "Widgets/s", "widgets per second", HIGHER)
    table = Table(["Run", "Widgets/s"], [["a", spec.cell(1234.5)], ["b", spec.cell(None)]])
    assert table.numeric_columns() == [False, True]
    assert Table(["Run", "Widgets/s"], [["a", "1,234 widgets per second"]]
                 ).numeric_columns() == [False, False]  # a unit by hand is text


def test_the_tuned_advice_comes_from_the_plugins() -> None:
    from pgdyno.config import load_hardware, resolve_config
    from pgdyno.workloads.registry import ADVICE

    def benchmark(**kw) -> list[tuple[str, str]]:
        r = resolve_config("tuned", [], pg_major=18, workload="oltp",
                           hardware=load_hardware("r8g.xlarge"), connections=50, **kw)
        assert r.plan is not None
        return [(s.key, s.value) for s in r.plan.settings if s.group == "benchmark"]

    assert benchmark() == []  # the config engine knows no workload
    advised = dict(benchmark(advisor=ADVICE))
    assert list(advised) == ["PGBENCH_SCALE", "PGBENCH_DURATION", "PGBENCH_CLIENTS_LIGHT",
                             "PGBENCH_CLIENTS_MEDIUM", "PGBENCH_CLIENTS_HEAVY", "FIO_RUNTIME"]
    ram = load_hardware("r8g.xlarge").ram_bytes
    assert advised["PGBENCH_SCALE"] == str(int(ram * 1.25) // 15_700_000)
    assert advised["FIO_RUNTIME"] == "60"


def test_sweeps_of_two_workloads_are_refused_in_one_line(tmp_path: Path) -> None:
    from pgdyno.compare.sweeps import compare_sweeps
    from pgdyno.errors import UsageError
    from pgdyno.results.sweepdir import SCHEMA_VERSION, SweepRecord

    for name, workload, unit in (("a", "tprocc", "warehouses"), ("b", "tpcb", "scale")):
        (tmp_path / name).mkdir()
        SweepRecord(schema_version=SCHEMA_VERSION, context="c", status="ok", started_at="t",
                    ended_at="t", config="default", workload=workload,
                    size_unit=unit).save(tmp_path / name)
    with pytest.raises(UsageError, match="a tpcb sweep against .*, a tprocc sweep; compare "
                                         "takes two sweeps of one workload"):
        compare_sweeps(tmp_path / "a", tmp_path / "b")


def _broken_plugin(site: Path, entry: str) -> Path:
    """A package's metadata in ``site`` (returned) whose entry point names ``entry``."""
    info = site / "pgdyno_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pgdyno-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pgdyno.workloads]\n{entry}\n")
    (site / "broken_plugin.py").write_text(
        "from pgdyno.workloads.base import Workload\n\n"
        "class Named(Workload):\n    name = 'other'\n\n"
        "class NotAWorkload:\n    name = 'broken'\n")
    return site


@pytest.mark.parametrize(("entry", "why"), [
    ("broken = no_such_module:Broken",
     "failed to load: ModuleNotFoundError: No module named 'no_such_module'"),
    ("broken = broken_plugin:NotAWorkload", "is not a pgdyno Workload"),
    ("broken = broken_plugin:Named", "names itself 'other'"),
])
def test_a_plugin_that_fails_to_load_is_one_line(tmp_path: Path, entry: str, why: str) -> None:
    site = _broken_plugin(tmp_path / "site", entry)
    for args in (["bench", "--help"], ["runs", "--results-dir", str(tmp_path / "r")]):
        out = run_cli_here(args, tmp_path, site=site)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith("pgdyno: error: workload plugin broken (")
        assert "from pgdyno-broken 0.1" in lines[0] and why in lines[0]


@pytest.fixture()
def results() -> Iterator[Path]:
    path = make_shared_dir("pgdyno-toy-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.server
def test_the_toy_end_to_end(toy_site: Path, workdir: Path, results: Path) -> None:
    base = ["--results-dir", str(results), *SHORT]

    def pgdyno(*args: str) -> subprocess.CompletedProcess:
        out = run_cli_here([*args], workdir, site=toy_site)
        assert out.returncode == 0, out.stderr[-2000:]
        return out

    # a campaign of it, then a bench of the same toy, and the two runs compared
    campaign = results / "toy.toml"
    campaign.write_text('[campaign]\nname = "toy"\ncontext = "test--toy-campaign"\n'
                        'workloads = ["toy"]\nclients = [1]\nrepeat = 1\n\n'
                        '[bench]\ntoy-rows = "100"\nduration = 1\nwarmup = 0\n'
                        'iterations = 1\n\n[[config]]\nlabel = "default"\n')
    out = pgdyno("campaign", str(campaign), "--results-dir", str(results), "--no-progress")
    assert "ran 1, skipped 0 already done, failed 0" in out.stdout
    journal = results / "campaigns" / "toy" / "journal.jsonl"
    ends = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [e["status"] for e in ends if e["event"] == "run-end"] == ["ok"]
    pgdyno("bench", "toy", "--toy-rows", "100", *base)
    runs = [*(results / "test--toy-campaign").glob("toy-2*"),
            *(results / "test--toy").glob("toy-2*")]
    assert len(runs) == 2
    for run in runs:
        summary = json.loads((run / "summary.json").read_text())
        assert summary["workload"] == "toy"
        assert summary["iterations"][0]["metrics"]["tps"] > 0
        assert (run / "raw" / "scripts" / "toy.sql").read_text().startswith(
            "SELECT count(*) FROM generate_series(1, 100)")
        assert "| Dataset | 100 rows;" in (run / "report.md").read_text()
    out = pgdyno("compare", str(runs[0]), str(runs[1]), "--out", str(results / "cmp"))
    assert "TPS" in out.stdout
    assert "TPS" in (results / "cmp" / "compare.md").read_text()

    # a sweep over --toy-rows, twice, and sweep against sweep
    for _ in range(2):
        pgdyno("bench", "toy", "--toy-rows", "100,1000", *base)
    sweeps = sorted((results / "test--toy").glob("toy-sweep-*"))
    assert len(sweeps) == 2
    for sweep in sweeps:
        record = json.loads((sweep / "sweep.json").read_text())
        assert (record["workload"], record["size_unit"]) == ("toy", "rows")
        assert [(s["size"], s["status"]) for s in record["steps"]] == [(100, "ok"),
                                                                       (1000, "ok")]
        report = (sweep / "report.md").read_text()
        assert "# pgdyno toy sweep: 100, 1000 rows" in report
        assert re.search(r"^\| 1000 \| 1 \| [\d,.]+ tx/s \|", report, re.MULTILINE)
    out = pgdyno("compare", str(sweeps[0]), str(sweeps[1]), "--at-step", "1000", "--out",
                 str(results / "cmp-sweeps"))
    assert out.stdout.count("best TPS") == 2
    text = (results / "cmp-sweeps" / "compare.md").read_text()
    assert "| Rows | Clients | TPS A | TPS B | B vs A |" in text
    assert "| 1000 | 1 |" in text and "| 100 | 1 |" not in text
