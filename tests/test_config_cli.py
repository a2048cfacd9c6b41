"""`pgdyno detect` and `pgdyno tune` through the CLI's entry point, as users run them."""

from __future__ import annotations

import json
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest

from pgdyno.config.envfile import parse_env
from tests.conftest import run_cli_here


def pgdyno(*args: str) -> subprocess.CompletedProcess:
    return run_cli_here(list(args), Path(tempfile.gettempdir()) / "pgdyno-config-cli")


def error_lines(out: subprocess.CompletedProcess) -> list[str]:
    # Ignore warnings third-party libraries print on import in this environment.
    return [line for line in out.stderr.splitlines()
            if line.strip() and "Warning" not in line and not line.startswith("  ")]


def test_tune_conf_for_a_catalogue_profile() -> None:
    out = pgdyno("tune", "--hardware", "r8g.xlarge", "--workload", "oltp", "--format", "conf")
    assert out.returncode == 0, out.stderr
    assert "shared_buffers = '8GB'" in out.stdout
    assert "huge_pages = try" in out.stdout


@pytest.mark.parametrize("fmt, needle", [
    ("table", "PostgreSQL - Memory"), ("md", "## Sizing"), ("sql", "ALTER SYSTEM SET"),
    ("sysctl", "vm.nr_hugepages = "), ("script", "#!/bin/sh"),
])
def test_tune_formats(fmt: str, needle: str) -> None:
    out = pgdyno("tune", "--hardware", "r8g.2xlarge", "--workload", "tpcb", "--pg-version", "16",
                 "--dataset-size", "40GB", "--format", fmt)
    assert out.returncode == 0, out.stderr
    assert needle in out.stdout


def test_tune_env_and_pgtune_config() -> None:
    out = pgdyno("tune", "--hardware", "r8g.xlarge", "--workload", "oltp", "--config", "pgtune",
                 "--format", "env")
    assert out.returncode == 0, out.stderr
    env = parse_env(out.stdout, "stdout")
    assert env["PG_SHARED_BUFFERS"] == "8GB" and env["PG_WORK_MEM"] == "27594kB"


def test_bad_value_exits_2_with_one_line() -> None:
    out = pgdyno("tune", "--hardware", "r8g.xlarge", "--set", "work_mem=1kB", "--format", "conf")
    assert out.returncode == 2
    lines = error_lines(out)
    assert len(lines) == 1 and "work_mem" in lines[0] and "64kB" in lines[0]
    assert out.stdout == ""
    out = pgdyno("tune", "--hardware", "nope")
    assert out.returncode == 2 and len(error_lines(out)) == 1


def test_detect_formats() -> None:
    out = pgdyno("detect", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["vcpus"] >= 1 and data["ram_bytes"] > 0 and data["source"] == "detect"
    out = pgdyno("detect", "--format", "toml")
    assert tomllib.loads(out.stdout)["vcpus"] == data["vcpus"]
    out = pgdyno("detect")
    assert out.returncode == 0 and "vCPUs" in out.stdout


def md_rows(text: str) -> dict[str, list[str]]:
    """KEY -> [value, default, rationale] from a Markdown matrix."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] != "Parameter":
            rows[cells[0]] = cells[1:]
    return rows


def test_tune_on_this_host_is_consistent() -> None:
    """The hardware detected from this host's /sys, as `pgdyno tune` prints it."""
    from pgdyno.config.sizing import PGDYNO_SESSIONS as CONNECTION_HEADROOM

    out = pgdyno("tune", "--config", "tuned", "--connections", "2", "--pg-version", "18",
                 "--format", "md")
    assert out.returncode == 0, out.stderr
    rows = md_rows(out.stdout)
    # max_connections leaves room: 2 clients + pgdyno's sessions + 3 reserved slots
    assert int(rows["PG_MAX_CONNECTIONS"][0]) == 2 + CONNECTION_HEADROOM + 3
    assert rows["VCPU"][2] != rows["RAM_GB"][2]
    vendor = Path("/sys/class/dmi/id/sys_vendor")
    if not (vendor.exists() and vendor.read_text().strip() == "Amazon EC2"):
        assert "EBS_GBPS" not in rows
    kind = out.stdout.split("data on ", 1)[1].split(")", 1)[0]
    rotational = rows["DATA_ROTATIONAL"]
    assert rotational[0] == ("1" if kind == "hdd" else "0")
    assert rotational[2].startswith(f"{kind}:")
