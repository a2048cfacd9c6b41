"""Reading a run report's Answer and Load sections back, as a reader would, for the tests
that check them against figures recomputed from raw files (plain text splitting: no
pgdyno code)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


def markdown_table(text: str, header_start: str) -> list[list[str]]:
    """The rows (header, separator, cells) of the first Markdown table whose header starts
    so."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def sections(md: str) -> list[str]:
    """The titles of the report's sections (##), in order."""
    return [line[3:] for line in md.splitlines() if line.startswith("## ")]


def answer(md: str) -> list[tuple[str, str]]:
    """(item, statement) rows of the Answer section's table."""
    body = md.split("## Answer", 1)[1].split("\n## ", 1)[0]
    rows = markdown_table(body.strip(), "|  | What this run measured")
    return [(r[0], r[1]) for r in rows[2:]]


def seconds(text: str) -> float:
    """"0.23 s", "27.3 s", "2 min 5 s" as seconds."""
    m = re.fullmatch(r"(?:(\d+) min )?([0-9.]+) s", text.strip())
    assert m, text
    return 60 * int(m.group(1) or 0) + float(m.group(2))


def decimals(text: str) -> int:
    number = text.strip().split()[-2] if text.strip().endswith(" s") else text
    return len(number.split(".")[1]) if "." in number else 0


def load_table(md: str) -> dict[str, tuple[str, str]]:
    """Phase -> (time cell, rows/s cell) of the Load table."""
    body = md.split("## Load", 1)[1].split("\n## ", 1)[0]
    rows = markdown_table(body.strip().split("\n\n", 1)[-1], "| Phase | Time | Rows/s |")
    return {r[0]: (r[1], r[2]) for r in rows[2:]}


PHASES = {"data": "data", "keys": "keys and indexes", "vacuum": "vacuum and analyze",
          "check": "consistency check", "checkpoint": "closing checkpoint"}


def check_load_table(run: Path, rows: int, phase_seconds: dict[str, float] | None = None
                     ) -> dict[str, float]:
    """The Load table against the manifest's load record, and each phase's rows/s against
    ``rows`` (counted by the test) over its seconds; ``phase_seconds``: seconds measured by
    the test itself (pgbench's own log), which the table must show. Returns the phases'
    seconds the table shows."""
    md = (run / "report.md").read_text()
    record = json.loads((run / "manifest.json").read_text())["dataset"]["load_record"]
    assert record["reused"] is False and record["rows"] == rows
    table = load_table(md)
    shown = {}
    for phase in record["phases"]:
        time_cell, rate_cell = table[PHASES[phase["phase"]]]
        value = seconds(time_cell)
        step = 10 ** -decimals(time_cell)
        assert value == pytest.approx(phase["seconds"], abs=step / 2 + 1e-9), phase
        if phase_seconds is not None:
            assert value == pytest.approx(phase_seconds[phase["phase"]], abs=step / 2 + 0.006)
        # The record keeps seconds to the millisecond: the rate is known to that precision.
        assert int(rate_cell.replace(",", "")) == pytest.approx(
            rows / phase["seconds"], rel=0.0006 / phase["seconds"], abs=1), phase
        shown[phase["phase"]] = value
    assert list(shown) == [p for p in PHASES if p in shown]  # in the order they ran
    assert seconds(table["whole load"][0]) == pytest.approx(record["seconds"], abs=0.06)
    assert "## Load" in md and sections(md).index("Load") > sections(md).index("Answer")
    return shown


def check_database_host_columns(run: Path, destination: str, ssh_config: Path) -> None:
    """An --ssh run's environment shows the database host beside the client: the host's
    facts read here over ssh, the client's read here directly."""
    import os
    import socket
    import subprocess

    import psutil

    script = ("uname -n; uname -r; python3 -c 'import os; print(len(os.sched_getaffinity(0)))'"
              "; grep MemTotal /proc/meminfo")
    out = subprocess.run(["ssh", "-F", str(ssh_config), destination, script],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    name, kernel, cpus, mem = out.splitlines()[:4]
    mem_bytes = int(mem.split()[1]) * 1024
    manifest = json.loads((run / "manifest.json").read_text())
    db = manifest["database_host"]
    assert db["destination"] == destination
    assert (db["hostname"], db["kernel"], db["cpu_count"], db["ram_bytes"]) == (
        name, kernel, int(cpus), mem_bytes)
    md = (run / "report.md").read_text()
    table = markdown_table(md, "| Machine |")
    assert table[0] == ["Machine", f"Database host ({destination})",
                        "Client (this machine, ran the load)"]
    rows = {r[0]: r[1:] for r in table[2:]}
    assert rows["Host"][0].startswith(f"{name} (")
    assert rows["Kernel"][0] == kernel
    assert rows["CPU"][0].endswith(f"× {cpus}")
    assert rows["RAM"][0] == f"{mem_bytes / 2**30:.1f} GiB"
    # The client: this machine, as this process sees it.
    assert rows["Host"][1].startswith(f"{socket.gethostname()} (")
    assert rows["Kernel"][1] == os.uname().release
    assert rows["CPU"][1].endswith(f"× {len(os.sched_getaffinity(0))}")
    assert rows["RAM"][1] == f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    # The one-column table no longer repeats the machine rows.
    items = [r[0] for r in markdown_table(md, "| Item | Value |")[2:]]
    assert "CPU" not in items and "RAM" not in items
