"""Every config pgdyno generates leaves room for the benchmark's clients, pgdyno's own
sessions and the reserved slots: the arithmetic recomputed here from
the runner's headroom and the catalogue's boot values, and one real server start."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pgdyno.config import load_hardware, resolve_config
from pgdyno.config.resolve import NAMED
from pgdyno.config.setting_specs import snapshot
from pgdyno.config.sizing import PGDYNO_SESSIONS as CONNECTION_HEADROOM
from pgdyno.config.units import KB
from pgdyno.targets.local import BASE_SETTINGS
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

RESERVED = ("superuser_reserved_connections", "reserved_connections")


def reserved_slots(pg_settings: dict[str, str], major: int) -> int:
    """The reserved slots as the resolved config sets them, else the version's boot values."""
    specs = snapshot(major).by_name
    total = 0
    for name in RESERVED:
        if name in pg_settings:
            total += int(pg_settings[name].strip("'"))
        elif name in specs:
            total += int(specs[name].boot_val or 0)
    return total


def effective_max_connections(pg_settings: dict[str, str]) -> int:
    """What the server pgdyno starts gets: the config's value, else pgdyno's base setting."""
    return int(pg_settings.get("max_connections", BASE_SETTINGS["max_connections"]))


@pytest.mark.parametrize("major", [18, 15])
@pytest.mark.parametrize("clients", [1, 2, 300])
@pytest.mark.parametrize("name", NAMED)
def test_every_named_config_leaves_room(name: str, clients: int, major: int) -> None:
    r = resolve_config(name, [], pg_major=major, workload="tpcb", connections=clients,
                       tuning=("oltp", True), hardware=load_hardware("r8g.large"))
    needed = clients + CONNECTION_HEADROOM + reserved_slots(r.pg_settings, major)
    have = effective_max_connections(r.pg_settings)
    assert have >= needed, (name, clients, have, needed)
    assert have > reserved_slots(r.pg_settings, major)  # PostgreSQL's own start condition
    if "max_connections" in r.pg_settings:  # a value pgdyno chose states its arithmetic
        why = r.sources["max_connections"]
        assert f"{clients} client" in why and f"{CONNECTION_HEADROOM} pgdyno sessions" in why
        assert why.endswith(f"= {have}")
    assert not r.warnings or all("max_connections" not in w for w in r.warnings)


@pytest.mark.parametrize("name", ["pgtune", "tuned"])
def test_generated_configs_size_max_connections_exactly(name: str) -> None:
    """Clients known: max_connections is the sum, not a guess that may fall short (the bug:
    pgtune wrote 2 for two clients, tuned 12)."""
    r = resolve_config(name, [], pg_major=18, workload="tpcb", connections=2,
                       tuning=("oltp", True), hardware=load_hardware("r8g.large"))
    assert int(r.pg_settings["max_connections"]) == 2 + CONNECTION_HEADROOM + 3 + 0


def test_pgtune_sizes_work_mem_for_the_room() -> None:
    """pgtune's connections input is the room, so its work_mem formula divides by it."""
    hw = load_hardware("r8g.large")
    r = resolve_config("pgtune", [], pg_major=18, workload="tpcb", connections=2,
                       tuning=("oltp", True), hardware=hw)
    conns = int(r.pg_settings["max_connections"])
    ram_kb = hw.ram_bytes // KB
    workers = 8  # pgtune's default below 4 CPUs (r8g.large has 2)
    want = max(math.floor((ram_kb - ram_kb // 4) / ((conns + workers) * 3)), 4 * 1024)
    assert r.pg_settings["work_mem"] == f"'{want}kB'"
    budget = next(line for line in r.plan.sizing if line.label == "budget")
    assert budget.ok is True


def test_raised_reserved_slots_raise_generated_max_connections() -> None:
    r = resolve_config("tuned", ["superuser_reserved_connections=10"], pg_major=18,
                       workload="tpcb", connections=2, tuning=("oltp", True),
                       hardware=load_hardware("r8g.large"))
    assert int(r.pg_settings["max_connections"]) == 2 + CONNECTION_HEADROOM + 10 + 0
    assert "raised from" in r.sources["max_connections"]


def test_default_config_raised_above_the_base_only_when_needed() -> None:
    small = resolve_config("default", [], pg_major=18, workload="oltp", connections=8,
                           hardware=load_hardware("r8g.large"))
    assert small.pg_settings == {}  # stock: pgdyno's base max_connections holds 8 clients
    big = resolve_config("default", [], pg_major=18, workload="oltp", connections=300,
                         hardware=load_hardware("r8g.large"))
    assert int(big.pg_settings["max_connections"]) == 300 + CONNECTION_HEADROOM + 3
    assert f"base {BASE_SETTINGS['max_connections']}" in big.sources["max_connections"]


def test_user_max_connections_is_kept_with_a_warning() -> None:
    """The user's own value is theirs; the warning gives the arithmetic."""
    r = resolve_config("tuned", ["max_connections=2"], pg_major=18, workload="tpcb",
                       connections=2, tuning=("oltp", True), hardware=load_hardware("r8g.large"))
    assert r.pg_settings["max_connections"] == "2"
    warning = next(w for w in r.warnings if w.startswith("max_connections 2 <"))
    assert "refuse to start" in warning and f"= {2 + CONNECTION_HEADROOM + 3}" in warning


def test_pgtune_bench_with_two_clients_starts(workdir: Path) -> None:
    """The reported failure: pgtune at --clients 2 wrote max_connections=2 and the server
    never started. The run must succeed and the live server hold the room."""
    own = make_shared_dir("pgdyno-room-")
    results = make_shared_dir("pgdyno-room-results-")
    proc = run_cli(["bench", "tpcb", "--config", "pgtune", "--clients", "2", "--scale", "1",
                    "--duration", "2", "--warmup", "1", "--iterations", "1", "--no-telemetry",
                    "--no-progress", "--results-dir", str(results)], own)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(next(results.glob("*/*/manifest.json")).read_text())
    assert manifest["status"] == "ok"
    live = int(manifest["server"]["non_default_settings"]["max_connections"])
    settings = manifest["config"]["pg_settings"]
    assert live == int(settings["max_connections"])
    assert live >= 2 + CONNECTION_HEADROOM + reserved_slots(settings, 18)
