"""--random-seed: pgbench's seed of a run's first iteration, the next ones one more each, so
that a run draws the same keys, transactions and think times again; refused where it would
make several load generators draw alike (--drivers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_shared_dir, run_cli_here


@pytest.mark.parametrize("args, words", [
    (["--random-seed", "-1"], "--random-seed -1: must be zero or more"),
    (["--random-seed", "seven"], "Invalid value for '--random-seed'"),
])
def test_a_bad_seed_is_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    out = run_cli_here(["bench", "tpcb", *args, "--results-dir", str(tmp_path)], tmp_path)
    assert out.returncode == 2 and words in out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.glob("*/tpcb-*"))


def test_drivers_refuse_a_seed(tmp_path: Path) -> None:
    drivers = tmp_path / "drivers.txt"
    drivers.write_text("root@127.0.0.1\n")
    out = run_cli_here(["bench", "tpcb", "--drivers", str(drivers), "--random-seed", "3",
                        "--results-dir", str(tmp_path)], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().endswith("--drivers --random-seed 3: every driver would draw "
                                       "the same keys; accepted: --random-seed without "
                                       "--drivers")


@pytest.mark.server
def test_each_iteration_seeds_pgbench_one_more(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-seed-")
    out = run_cli_here(["bench", "tpcb", "--scale", "1", "--clients", "1", "--duration", "1",
                        "--warmup", "0", "--iterations", "2", "--no-telemetry",
                        "--no-progress", "--random-seed", "42", "--results-dir",
                        str(results)], workdir)
    assert out.returncode == 0, out.stderr
    run = next(results.glob("*/tpcb-*"))
    for iteration, seed in ((1, 42), (2, 43)):  # pgbench's own words: it took the seed
        stderr = (run / "raw" / "pgbench" / f"c1-i{iteration}" / "stderr.txt").read_text()
        assert f"setting random seed to {seed}\n" in stderr
