"""The tuned engine's values and rationale, validation of user values, named configs, renderers."""

from __future__ import annotations

import ast
import graphlib
import json
from pathlib import Path

import pytest

import pgdyno.config
from pgdyno.config import ResolvedConfig, load_hardware, resolve_config
from pgdyno.config.envfile import parse_env, settings_from_env
from pgdyno.config.matrix_keys import MATRIX_KEYS
from pgdyno.config.render import RENDERERS
from pgdyno.config.setting_specs import snapshot
from pgdyno.config.units import GB, MB
from pgdyno.errors import UsageError
from pgdyno.workloads.registry import ADVICE


def resolve(name: str, overrides: list[str] | None = None, hardware: str = "r8g.xlarge",
            workload: str = "oltp", **kw) -> ResolvedConfig:
    """As `pgdyno tune` and `pgdyno bench` resolve: with the workloads' advice (the tuned
    matrix's benchmark group comes from the workload plugins)."""
    return resolve_config(name, overrides or [], pg_major=18, workload=workload,
                          hardware=load_hardware(hardware), **{"advisor": ADVICE, **kw})


def size(resolved: ResolvedConfig, key: str) -> int:
    value = snapshot(18).to_bytes(key, resolved.pg_settings[key])
    assert value is not None
    return value


def test_r8g_xlarge_oltp_memory_values_and_rationale() -> None:
    r = resolve("tuned")
    ram = 32 * GB
    assert size(r, "shared_buffers") == ram // 4
    assert "25% of RAM" in r.sources["shared_buffers"]
    ecs = size(r, "effective_cache_size")
    assert 0.70 * ram <= ecs <= 0.75 * ram
    assert "RAM" in r.sources["effective_cache_size"]
    # huge pages: sized from shared_buffers, try because none are reserved in the catalogue
    assert r.pg_settings["huge_pages"] == "try"
    plan = r.plan
    assert plan is not None
    nr = int(next(s.value for s in plan.settings if s.name == "vm.nr_hugepages"))
    assert ram // 4 / (2 * MB) < nr < ram // 4 / (2 * MB) * 1.10
    assert "shared_buffers" in next(s.rationale for s in plan.settings
                                    if s.name == "vm.nr_hugepages")
    budget = next(line for line in plan.sizing if line.label == "budget")
    assert budget.ok is True


def test_tuned_covers_every_group_with_defaults_and_rationale() -> None:
    r = resolve("tuned", hardware="epyc9254-dc3000me", workload="oltp")
    assert r.plan is not None
    groups = {s.group for s in r.plan.settings}
    for group in ("instance", "os_memory", "os_files", "os_network", "os_scheduler",
                  "raid_data", "raid_wal", "xfs", "block_data", "block_wal", "md", "pg_paths",
                  "pg_memory", "pg_io", "pg_wal", "pg_checkpoint", "pg_commit", "pg_bgwriter",
                  "pg_autovacuum", "pg_parallel", "pg_logging", "benchmark"):
        assert group in groups, group
    assert len(r.plan.settings) >= 100
    assert all(s.rationale for s in r.plan.settings)
    assert all(s.default for s in r.plan.pg())
    # NVMe data volume: no I/O scheduler, cheap random pages, deep I/O queue
    sched = next(s for s in r.plan.settings if s.key == "DATA_SCHEDULER")
    assert sched.value == "none" and "nvme" in sched.rationale.lower()
    assert r.pg_settings["random_page_cost"] == "1.1"
    assert int(r.pg_settings["effective_io_concurrency"]) >= 200
    assert int(r.pg_settings["max_worker_processes"]) == 96
    numa = next(s for s in r.plan.settings if s.name == "kernel.numa_balancing")
    assert numa.value == "0"


def test_hdd_and_cgroup_inputs_change_values() -> None:
    hw = load_hardware("r8g.large")
    hw.data.kind = "hdd"
    r = resolve_config("tuned", [], pg_major=18, workload="oltp", hardware=hw)
    assert r.pg_settings["random_page_cost"] == "4"
    assert r.pg_settings["effective_io_concurrency"] == "2"
    small = load_hardware("r8g.large")
    small.ram_bytes = 4 * GB  # a container limit below the host's RAM
    r = resolve_config("tuned", [], pg_major=18, workload="oltp", hardware=small)
    assert snapshot(18).to_bytes("shared_buffers", r.pg_settings["shared_buffers"]) == GB


def test_default_is_stock_and_overrides_are_validated() -> None:
    assert resolve("default").pg_settings == {}
    r = resolve("default", ["shared_buffers=2GB", "jit=off"])
    assert r.pg_settings == {"shared_buffers": "'2GB'", "jit": "off"}
    assert r.sources["shared_buffers"].startswith("--set")
    r = resolve("pgtune", ["work_mem=32MB"])
    assert r.pg_settings["work_mem"] == "'32MB'" and r.sources["work_mem"].startswith("--set")


@pytest.mark.parametrize("item, words", [
    ("work_mem=10kB", ["work_mem", "64kB"]),
    ("shared_buffers=lots", ["shared_buffers", "not a number"]),
    ("io_method=bogus", ["io_method", "worker"]),
    ("shard_buffers=1GB", ["shard_buffers", "shared_buffers"]),
    ("max_connections=0", ["max_connections", "1 .. "]),
    ("jit", ["key=value"]),
])
def test_bad_override_is_one_line_naming_the_key(item: str, words: list[str]) -> None:
    with pytest.raises(UsageError) as err:
        resolve("tuned", [item])
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_memory_budget_and_huge_pages_must_be_coherent() -> None:
    with pytest.raises(UsageError, match="memory budget"):
        resolve("default", ["work_mem=1GB", "max_connections=100"])
    with pytest.raises(UsageError, match="huge_pages = on"):
        resolve("tuned", ["huge_pages=on"])
    hw = load_hardware("r8g.xlarge")
    hw.huge_pages_total = 5000
    r = resolve_config("tuned", [], pg_major=18, workload="oltp", hardware=hw)
    assert r.pg_settings["huge_pages"] == "on"


def test_user_config_files(tmp_path: Path) -> None:
    toml = tmp_path / "mine.toml"
    toml.write_text('[config]\nname = "mine"\nbase = "pgtune"\n[postgresql]\n'
                    'shared_buffers = "4GB"\njit = true\nrandom_page_cost = 1.5\n')
    r = resolve(str(toml))
    assert r.name == "mine"
    assert r.pg_settings["shared_buffers"] == "'4GB'" and r.pg_settings["jit"] == "on"
    assert r.pg_settings["random_page_cost"] == "1.5"
    assert r.pg_settings["max_wal_size"] == "'8GB'"  # from the pgtune base
    assert str(toml) in r.sources["shared_buffers"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[postgresql]\nwork_mem = "1kB"\n')
    with pytest.raises(UsageError) as err:
        resolve(str(bad))
    assert str(bad) in str(err.value) and "work_mem" in str(err.value)
    env = tmp_path / "tuning.env"
    env.write_text("# from a kit\nPG_SHARED_BUFFERS=8GB\nPG_WAL_COMPRESSION=pglz\n"
                   "VM_SWAPPINESS=1\nDATA_SCHEDULER=none\n")
    r = resolve(str(env))
    assert r.pg_settings == {"shared_buffers": "'8GB'", "wal_compression": "pglz"}
    assert r.plan is not None
    assert any(s.name == "vm.swappiness" and s.value == "1" for s in r.plan.settings)
    with pytest.raises(UsageError, match="accepted: default, pgtune, tuned"):
        resolve("nonsense")


def test_resolved_config_json_round_trip() -> None:
    for name in ("default", "pgtune", "tuned"):
        r = resolve(name, ["log_min_duration_statement=250ms"], dataset_bytes=40 * GB,
                    connections=64)
        again = ResolvedConfig.from_dict(json.loads(json.dumps(r.to_dict())))
        assert again == r
        assert again.to_dict() == r.to_dict()


def test_renderers_and_env_export_import() -> None:
    r = resolve("tuned", dataset_bytes=40 * GB)
    for fmt, render in RENDERERS.items():
        text = render(r)
        assert text.strip(), fmt
    conf = RENDERERS["conf"](r)
    assert "shared_buffers = '8GB'" in conf
    sql = RENDERERS["sql"](r)
    assert "ALTER SYSTEM SET shared_buffers = '8GB';" in sql
    sysctl = RENDERERS["sysctl"](r)
    assert "vm.swappiness = 1" in sysctl and "shared_buffers" not in sysctl.split("#")[0]
    from pgdyno.provision.script import script_for

    script = script_for(r)
    assert script.startswith("#!/bin/sh") and 'APPLY="${APPLY:-0}"' in script
    md = RENDERERS["md"](r)
    assert "### " in md and "| PG_SHARED_BUFFERS | 8GB | 128MB |" in md and "## Sizing" in md
    env = parse_env(RENDERERS["env"](r), "x")
    assert env["PG_SHARED_BUFFERS"] == "8GB" and env["VM_SWAPPINESS"] == "1"
    assert env["INSTANCE_TYPE"] == "r8g.xlarge"


@pytest.mark.parametrize("hardware", ["r8g.xlarge", "epyc9254-dc3000me", "r8g.large"])
def test_matrix_keys_table_matches_what_tuned_emits(hardware: str) -> None:
    """The .env reader's static key table and the tuning rules name keys alike."""
    r = resolve("tuned", hardware=hardware, workload="oltp", dataset_bytes=10 * GB)
    assert r.plan is not None
    emitted = {s.key: s for s in r.plan.settings if s.apply != "pg"}
    aws_only = set() if load_hardware(hardware).is_aws else {"EBS_GBPS"}
    assert set(emitted) == set(MATRIX_KEYS) - aws_only
    for key, s in emitted.items():
        spec = MATRIX_KEYS[key]
        assert (s.group, s.name, s.layer, s.apply) == (spec.group, spec.name, spec.layer,
                                                       spec.apply), key


def test_env_import_uses_the_static_key_table() -> None:
    settings = settings_from_env({"VM_SWAPPINESS": "1", "WAL_SCHEDULER": "none",
                                  "PG_PORT": "5433", "PG_WORK_MEM": "64MB"}, "t.env")
    by_key = {s.key: s for s in settings}
    assert (by_key["VM_SWAPPINESS"].name, by_key["VM_SWAPPINESS"].default) == ("vm.swappiness",
                                                                              "60")
    assert by_key["WAL_SCHEDULER"].group == "block_wal"
    assert (by_key["PG_PORT"].apply, by_key["PG_WORK_MEM"].apply) == ("info", "pg")


def test_config_imports_form_a_dag_without_function_level_imports() -> None:
    """Modules of pgdyno.config import each other at the top only, and never in a cycle."""
    folder = Path(pgdyno.config.__file__).parent
    edges: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        deps = edges.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "pgdyno.config."):
                assert node.col_offset == 0, f"{path.name}: imports {node.module} in a function"
                deps.add(node.module.split(".")[2])
    graphlib.TopologicalSorter(edges).prepare()  # raises CycleError on a cycle
