"""The run record round-trips through the one serialiser, every field, and refuses unknown
schema versions with one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno import serde
from pgdyno.analysis.summary import SCHEMA_VERSION as SUMMARY_VERSION
from pgdyno.analysis.summary import RunSummary, load_summary
from pgdyno.errors import UsageError
from pgdyno.results.manifest import (
    MANIFEST_SCHEMA_VERSION,
    BenchOptions,
    Manifest,
    load_manifest,
    manifest_to_dict,
)
from pgdyno.results.rundir import PLAN_SCHEMA_VERSION, RunDirectory, RunPlan
from pgdyno.results.sweepdir import SWEEP_FILE, SweepRecord
from pgdyno.workloads import registry
from tests.samples import left_at_default, sample


@pytest.mark.parametrize("cls", [RunPlan, RunSummary, SweepRecord])
def test_round_trip_every_field(cls: type) -> None:
    value = sample(cls)
    assert left_at_default(value) == []  # booleans too: a dropped field must show
    assert serde.from_dict(cls, json.loads(json.dumps(serde.to_dict(value)))) == value


@pytest.mark.parametrize("workload", registry.names())
def test_manifest_round_trip_with_each_workloads_options(workload: str) -> None:
    plugin = registry.get(workload)
    options = dataclasses.replace(sample(BenchOptions), workload=workload,
                                  workload_options=sample(plugin.options_type))
    manifest = dataclasses.replace(sample(Manifest), options=options,
                                   schema_version=MANIFEST_SCHEMA_VERSION)
    assert left_at_default(options) == [] and left_at_default(options.workload_options) == []
    text = json.dumps(manifest_to_dict(manifest))
    loaded = registry.typed_manifest(serde.from_dict(Manifest, json.loads(text)))
    assert loaded == manifest


def test_dsn_is_never_written() -> None:
    opts = dataclasses.replace(sample(BenchOptions), target=dataclasses.replace(
        sample(BenchOptions).target, dsn="postgresql://u:s3cret@h/db"))
    assert "s3cret" not in json.dumps(serde.to_dict(opts))


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


@pytest.mark.parametrize("content, words", [
    ({"schema_version": 99}, "schema_version 99 is not supported"),
    ('{"schema_version": 2, "tool"', "cannot read the run manifest"),
    ([1, 2], "not a pgdyno manifest"),
])
def test_manifest_loader_refuses_in_one_line(tmp_path: Path, content: Any, words: str) -> None:
    _write(tmp_path / "manifest.json", content)
    with pytest.raises(UsageError) as err:
        load_manifest(tmp_path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_plan_and_summary_loaders_check_their_versions(tmp_path: Path) -> None:
    _write(tmp_path / "raw" / "run.json", {"schema_version": PLAN_SCHEMA_VERSION + 1})
    with pytest.raises(UsageError, match="run record schema_version"):
        RunDirectory(tmp_path).load_plan()
    _write(tmp_path / "summary.json", {"schema_version": SUMMARY_VERSION + 1})
    with pytest.raises(UsageError, match="summary schema_version"):
        load_summary(tmp_path / "summary.json")
    _write(tmp_path / "summary.json", "{")
    with pytest.raises(UsageError, match="cannot read the run summary"):
        load_summary(tmp_path / "summary.json")


def test_sweep_record_of_version_1_is_read_as_a_warehouse_sweep(tmp_path: Path) -> None:
    """Version 1 recorded TPROC-C sweeps only, with W and two options inline."""
    (tmp_path / SWEEP_FILE).write_text(json.dumps({
        "schema_version": 1, "context": "c", "status": "ok", "started_at": "t0",
        "ended_at": "t1", "keying_thinking": True, "time_scale": 0.5, "config": "default",
        "steps": [{"warehouses": 2, "clients": [20], "run": "tprocc-1", "status": "ok",
                   "reason": ""}]}))
    record = SweepRecord.load(tmp_path)
    assert (record.workload, record.size_unit) == ("tprocc", "warehouses")
    assert record.workload_options == {"keying_thinking": True, "time_scale": 0.5}
    assert [(s.size, s.clients, s.run) for s in record.steps] == [(2, [20], "tprocc-1")]
    (tmp_path / SWEEP_FILE).write_text(json.dumps({"schema_version": 9}))
    with pytest.raises(UsageError, match="schema_version 9 is not supported"):
        SweepRecord.load(tmp_path)


@pytest.mark.parametrize(("module", "name"), [("validation", "validation.json"),
                                              ("scaling", "scaling-check.json")])
def test_campaign_records_are_read_through_the_versioned_loader(tmp_path: Path, module: str,
                                                                name: str) -> None:
    import importlib

    mod = importlib.import_module(f"pgdyno.campaign.{module}")
    loader = mod.load_validation if module == "validation" else mod.load_scaling
    assert loader(tmp_path) is None  # none recorded
    (tmp_path / name).write_text('{"schema_version": 1, "cores"')
    with pytest.raises(UsageError, match=str(tmp_path / name)):
        loader(tmp_path)
    (tmp_path / name).write_text('{"schema_version": 7}')
    with pytest.raises(UsageError, match="schema_version 7 is not supported"):
        loader(tmp_path)
