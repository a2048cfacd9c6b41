"""Rejected input leaves nothing behind: no run directory, no reserve file, no index row."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", [
    ["--set", "no_such_setting=1"],
    ["--set", "shared_buffers=lots"],
    ["--set", "work_mem"],
    ["--dsn", f"host=127.0.0.1 port={_closed_port()} dbname=x user=x connect_timeout=2"],
])
def test_rejected_input_leaves_no_clutter(tmp_path: Path, args: list[str]) -> None:
    results = tmp_path / "results"
    out = run_cli(["bench", "tpcb", "--scale", "1", "--clients", "2", "--duration", "2",
                   "--results-dir", str(results), "--no-progress", *args], tmp_path / "work")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error:"), out.stderr
    assert "run directory" not in lines[0]
    assert not results.exists(), sorted(str(p) for p in results.rglob("*"))
