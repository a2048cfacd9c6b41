"""Workloads are plugins of one run loop: the registry, their options on the command line,
and the CPU baseline, which runs without any PostgreSQL server."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import psutil
import pytest

from pgdyno.runner.options import build_options, workload_options
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_metric
from tests.conftest import run_cli_here as run_cli


def test_bench_help_lists_every_registered_workload(tmp_path: Path) -> None:
    out = run_cli(["bench", "--help"], tmp_path)
    assert out.returncode == 0
    for name, plugin in registry.WORKLOADS.items():
        assert name in out.stdout
        assert plugin.description.split()[0] in out.stdout


def test_every_workload_declares_a_headline_with_unit_and_direction() -> None:
    for plugin in registry.WORKLOADS.values():
        head = headline_metric(plugin.metrics)
        assert head.unit and head.direction in (1, -1), plugin.name
        names = [m.name for m in plugin.metrics]
        assert len(names) == len(set(names)), plugin.name


def test_an_option_of_another_workload_is_refused_before_anything_exists(
        tmp_path: Path) -> None:
    out = run_cli(["bench", "tpcb", "--warehouses", "3", "--results-dir",
                   str(tmp_path / "r")], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == "pgdyno: error: --warehouses belongs to tprocc, not tpcb"
    assert not (tmp_path / "r").exists()


def test_workload_options_are_typed_and_owned() -> None:
    owners = {o.name: o.workloads for o in workload_options()}
    assert set(owners["scale"]) >= {"tpcb", "simple-update", "select-only", "custom"}
    assert owners["warehouses"] == ("tprocc",)
    opts = build_options("tprocc", warehouses="10,20", vus="4")
    assert opts.workload_options.warehouses == 10
    assert opts.workload_options.sweep == (10, 20)
    assert opts.clients == (4,) and opts.max_tries == 10
    assert build_options("tpcb", dataset_size="157MB").workload_options.scale == 10


def _postgres_pids(fragment: str) -> set[int]:
    """postgres processes whose command line names ``fragment`` (other tests' servers may
    run beside this one)."""
    return {p.pid for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "postgres" and fragment in " ".join(p.info["cmdline"] or [])}


def _events_per_s(stdout: Path) -> float:
    """sysbench's own figure, read with a regex of the test's (not the parser's)."""
    match = re.search(r"events per second:\s+([\d.]+)", stdout.read_text())
    assert match is not None
    return float(match.group(1))


@pytest.mark.server  # seconds of real work: out of the quick run
def test_cpu_baseline_runs_without_a_server(tmp_path: Path) -> None:
    workdir = tmp_path / "no-workdir"
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:  # a server started and stopped during the run would be missed
        while not stop.wait(0.1):
            seen.update(_postgres_pids(str(workdir)))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = run_cli(["bench", "cpu", "--clients", "1,2", "--duration", "2", "--warmup", "1",
                       "--iterations", "1", "--results-dir", str(tmp_path / "r"),
                       "--no-progress"], workdir)
    finally:
        stop.set()
        watcher.join()
    assert out.returncode == 0, out.stderr
    assert not seen, "a postgres process ran during `pgdyno bench cpu`"
    assert not workdir.exists()  # no cluster made, no binaries copied
    run_dir = next((tmp_path / "r").glob("*--cpu/cpu-*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    cores = len(os.sched_getaffinity(0))
    for it in summary["iterations"]:
        raw = run_dir / "raw" / "sysbench" / f"c{it['clients']}-i{it['iteration']}"
        eps = _events_per_s(raw / "stdout.txt")
        assert it["metrics"]["events_per_s"] == pytest.approx(eps)
        assert it["metrics"]["events_per_s_per_core"] == pytest.approx(
            eps / min(it["clients"], cores))
        assert (raw / "warmup.txt").is_file()  # the warm-up is its own, uncounted run
        assert (raw / "telemetry" / "host_raw.jsonl").is_file()
        assert not (raw / "telemetry" / "waits.jsonl").exists()  # no server to sample
    report = (run_dir / "report.md").read_text()
    assert "CPU baseline (sysbench cpu)" in report and "plots/cpu_events.png" in report
    assert "Transactions per second" not in report
    # Host-only telemetry: CPU, disks and memory, no server sections and no session verdict.
    assert "(iteration 1, median Events/s)" in report and "### CPU breakdown" in report
    assert "### Wait events" not in report and "### Checkpoints and WAL" not in report
    assert "Bottleneck verdict" not in report
    assert all(it["verdict"] is None and not it["telemetry"]["server_sampled"]
               for it in summary["iterations"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["target"] is None and manifest["options"]["workload"] == "cpu"
    assert "Events/s" in out.stdout


def test_cpu_without_sysbench_says_how_to_install_it(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    out = run_cli(["bench", "cpu", "--results-dir", str(tmp_path / "r")], tmp_path, env=env)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt install sysbench" in lines[0]
    assert not (tmp_path / "r").exists()
