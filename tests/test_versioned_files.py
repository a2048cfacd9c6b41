"""Every file pgdyno writes goes through the one serialiser and the one versioned loader.

- Every dataclass that is a file or part of one (a ``Serialisable``, or one that carries a
  ``schema_version``), found by importing every module, round-trips through ``serde`` with
  every field set apart from its default, booleans included: a field dropped on either side,
  or read back as its default, fails.
- A file whose ``schema_version`` is unknown or newer is refused in one line naming it
  (``UsageError``: exit 2), and a file an older version wrote is still read.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

import pytest

import pgdyno
from pgdyno import serde
from pgdyno.analysis.telemetry import analyse_telemetry
from pgdyno.analysis.telemetry.meta import (
    META_SCHEMA_VERSION,
    CpuMeta,
    DeviceMeta,
    RemoteMeta,
    TelemetryMeta,
    read_meta,
)
from pgdyno.errors import UsageError
from pgdyno.results.manifest import check_version, from_versioned
from pgdyno.search import confirm, select, validate_long
from pgdyno.search import run as search_run
from pgdyno.search import space as search_space
from pgdyno.serde import Serialisable
from pgdyno.telemetry.devices import DeviceResolution
from pgdyno.telemetry.host import CpuCapacity
from tests.samples import current_versions, left_at_default, sample


def _file_classes() -> list[type]:
    """Every dataclass of pgdyno that is serialised as a file or inside one."""
    for info in pkgutil.walk_packages(pgdyno.__path__, "pgdyno."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    found: dict[str, type] = {}
    pending = list(Serialisable.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    for module in [m for name, m in list(sys.modules.items())
                   if name.startswith("pgdyno.")]:
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) \
                    and obj.__module__.startswith("pgdyno.") \
                    and any(f.name == "schema_version" for f in dataclasses.fields(obj)):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


FILE_CLASSES = _file_classes()


def test_the_classes_found_include_every_kind_of_file() -> None:
    names = {cls.__name__ for cls in FILE_CLASSES}
    assert {"Manifest", "RunSummary", "TelemetryMeta", "Selection", "Confirmation",
            "LongValidation", "SearchRecord", "SearchSpace", "ProvisionState",
            "ProvisionEvent", "ProvisionPlan", "HardwareProfile", "ConfigPlan",
            "ResolvedConfig", "SmartReading", "LoadRecord"} <= names


@pytest.mark.parametrize("cls", FILE_CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_field_round_trips(cls: type) -> None:
    value = sample(cls)
    assert left_at_default(value) == []  # else that field's loss would go unseen
    text = json.dumps(serde.to_dict(value))
    assert serde.from_dict(cls, json.loads(text)) == value


def test_the_telemetry_records_mirror_what_the_recorder_saves() -> None:
    """The recorder saves a DeviceResolution's and a CpuCapacity's fields as they are: the
    records that read them back hold the same keys (the devices module travels to an --ssh
    host as source, so it cannot share the record's class)."""
    fields = [f.name for f in dataclasses.fields(DeviceResolution)]
    assert [f.name for f in dataclasses.fields(DeviceMeta)] == fields
    capacity = {f.name for f in dataclasses.fields(CpuCapacity)}
    assert {f.name for f in dataclasses.fields(CpuMeta)} == capacity | {"effective_cores"}


# ----- the loader ------------------------------------------------------------------------

def test_a_newer_or_unknown_version_is_one_line_naming_the_file() -> None:
    with pytest.raises(UsageError) as newer:
        check_version({"schema_version": 3}, 2, "/r/x.json", "thing record", "; advice",
                      older={1: dict})
    assert str(newer.value) == ("/r/x.json: thing record schema_version 3 is not supported "
                                "(a newer pgdyno wrote it; this pgdyno reads 1 and 2); advice")
    with pytest.raises(UsageError, match=r"schema_version 'two' is not supported \(this "
                                         r"pgdyno reads 2\)$"):
        check_version({"schema_version": "two"}, 2, "x.json", "thing record")
    with pytest.raises(UsageError, match="schema_version True is not supported"):
        check_version({"schema_version": True}, 1, "x.json", "thing record", older={1: dict})
    with pytest.raises(UsageError, match=r"not a pgdyno record \(no schema_version\)"):
        check_version({}, 1, "x.json", "thing record")


@dataclasses.dataclass
class _Thing:
    name: str
    count: int = 0
    schema_version: int = 2


def test_older_versions_are_read_through_their_upgrade() -> None:
    def from_v1(data: dict[str, Any]) -> dict[str, Any]:
        return {"name": data.pop("title"), "count": len(data.get("items", []))}

    older = {1: from_v1, None: lambda data: {**data, "count": 0}}
    v1 = {"schema_version": 1, "title": "a", "items": [1, 2, 3]}
    assert from_versioned(_Thing, v1, 2, "x.json", "thing", older=older) == _Thing("a", 3)
    # A file from before it carried a version at all.
    assert from_versioned(_Thing, {"name": "b"}, 2, "x.json", "thing", older=older) == \
        _Thing("b", 0)
    with pytest.raises(UsageError, match=r"^x.json: damaged thing \(schema_version 1: "
                                         r"KeyError: 'title'\)$"):
        from_versioned(_Thing, {"schema_version": 1}, 2, "x.json", "thing", older=older)


# ----- each file's reader ------------------------------------------------------------------

def _newer(value: Any) -> dict[str, Any]:
    data = serde.to_dict(value)
    data["schema_version"] += 1
    return data


READERS = [  # (file name, its class, the reader pgdyno uses)
    ("select.json", select.Selection, select.load_selection),
    ("confirm.json", confirm.Confirmation, confirm.load_confirmation),
    ("validate.json", validate_long.LongValidation, validate_long.load_validation),
    ("search.json", search_run.SearchRecord, search_run.read_record),
]


@pytest.mark.parametrize(("name", "cls", "reader"), READERS, ids=[r[0] for r in READERS])
def test_search_state_files_are_read_whole_and_refused_when_newer(
        tmp_path: Path, name: str, cls: type, reader: Any) -> None:
    path = tmp_path / name
    value = current_versions(sample(cls))
    path.write_text(json.dumps(serde.to_dict(value)))
    assert reader(path) == value
    path.write_text(json.dumps(_newer(value)))
    with pytest.raises(UsageError) as refused:
        reader(path)
    line = str(refused.value)
    assert line.startswith(f"{path}: ") and "\n" not in line
    assert "is not supported (a newer pgdyno wrote it" in line
    path.write_text(json.dumps({"schema_version": _current(cls), "done": "three"}))
    with pytest.raises(UsageError, match=f"^{path}: damaged "):
        reader(path)


def _current(cls: type) -> int:
    return next(f.default for f in dataclasses.fields(cls) if f.name == "schema_version")


def test_a_search_record_whose_space_is_newer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "search.json"
    record = current_versions(sample(search_run.SearchRecord))
    record.space.schema_version = search_space.SCHEMA_VERSION + 1
    path.write_text(json.dumps(serde.to_dict(record)))
    with pytest.raises(UsageError, match=f"^{path}: search space schema_version "
                                         f"{search_space.SCHEMA_VERSION + 1} is not supported"):
        search_run.read_record(path)


# ----- telemetry/meta.json -------------------------------------------------------------------

OLD_META = {  # as the recorder wrote it, a dict built by hand, before it had a model
    "schema_version": 1, "started_at": 1700000000.25,
    "config": {"enabled": True, "interval_s": 0.5, "wait_sample_hz": 4.0, "smart": False},
    "host": {"hostname": "db1", "kernel": "6.8.0", "machine": "aarch64"},
    "cpu": {"online": 4, "limit_cores": None, "source": "ssh u@db1", "effective_cores": 4.0},
    "devices": {"data": {"path": "/d", "top": "nvme1n1", "chain": ["nvme1n1"],
                         "physical": ["nvme1n1"], "mount_point": "/d", "fstype": "xfs",
                         "error": None}},
    "server": {"connection": "host=db1 port=5432", "version_num": 180001, "supported": True,
               "settings": {"shared_buffers": {"setting": "16384", "unit": "8kB"}}},
    "server_log": "/d/log/postgresql.log", "server_log_offset": 2048,
    "client": {"host": {"hostname": "c1", "kernel": "6.1", "machine": "x86_64"},
               "cpu": {"online": 2, "limit_cores": 1.5, "source": "cgroup v2",
                       "effective_cores": 1.5}},
    "remote": {"via": "ssh", "destination": "u@db1", "user": "u", "hostname": "db1",
               "kernel": "6.8.0", "machine": "aarch64", "online_cpus": 4,
               "storage": {"data": [{"name": "nvme1n1", "model": "X"}]},
               "server_log": "/d/log/postgresql.log"},
    "stopped_at": 1700000060.75, "errors": {"waits": 3},
}


def test_meta_json_of_the_first_version_is_read_into_its_model(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(OLD_META))
    meta = read_meta(tmp_path)
    assert meta is not None and meta.schema_version == META_SCHEMA_VERSION == 1
    assert (meta.started_at, meta.stopped_at, meta.errors) == (1700000000.25, 1700000060.75,
                                                               {"waits": 3})
    assert (meta.config.interval_s, meta.config.wait_sample_hz, meta.config.smart) == (
        0.5, 4.0, False)
    assert meta.cpu == CpuMeta(online=4, limit_cores=None, source="ssh u@db1",
                               effective_cores=4.0)
    assert meta.client is not None and meta.client.cpu.limit_cores == 1.5
    assert meta.devices["data"].top == "nvme1n1" and meta.devices["data"].fstype == "xfs"
    assert meta.server is not None and meta.server.version_num == 180001
    assert meta.server.settings["shared_buffers"] == {"setting": "16384", "unit": "8kB"}
    assert meta.remote == RemoteMeta(destination="u@db1", user="u", hostname="db1",
                                     kernel="6.8.0", machine="aarch64", online_cpus=4,
                                     storage={"data": [{"name": "nvme1n1", "model": "X"}]},
                                     server_log="/d/log/postgresql.log")
    # Written again by this version, the file holds the same keys and values.
    assert serde.to_dict(meta) == OLD_META


def test_meta_json_of_a_killed_run_is_read_with_what_it_has(tmp_path: Path) -> None:
    """The first write, before the server was reached: no stop, no errors, no version."""
    first = {k: v for k, v in OLD_META.items()
             if k not in ("stopped_at", "errors", "client", "remote")}
    first["server"] = {"connection": "host=db1 port=5432"}
    (tmp_path / "meta.json").write_text(json.dumps(first))
    meta = read_meta(tmp_path)
    assert meta is not None and meta.stopped_at is None and meta.errors == {}
    assert meta.server is not None and meta.server.version_num is None


def test_a_newer_meta_json_is_refused_and_a_damaged_one_left_out(tmp_path: Path) -> None:
    tdir = tmp_path / "telemetry"
    tdir.mkdir()
    (tdir / "meta.json").write_text(json.dumps({**OLD_META, "schema_version": 2}))
    with pytest.raises(UsageError) as refused:
        analyse_telemetry(tmp_path, None)
    assert str(refused.value).startswith(
        f"{tdir / 'meta.json'}: telemetry metadata schema_version 2 is not supported (a "
        "newer pgdyno wrote it")
    # Telemetry is context: a damaged file is left out and the summary says so.
    (tdir / "meta.json").write_text(json.dumps({**OLD_META, "cpu": "four"}))
    assert read_meta(tdir) is None
    assert f"no telemetry in {tdir}" in analyse_telemetry(tmp_path, None).notes


def test_the_model_is_what_the_recorder_writes(tmp_path: Path) -> None:
    """A recorder with no server and nothing to sample: its meta.json is a TelemetryMeta
    whose every key was written by the model (none added by hand beside it)."""
    from pgdyno.telemetry.recorder import TelemetryConfig, TelemetryRecorder

    rec = TelemetryRecorder(tmp_path, None, tmp_path, None, None, 0,
                            TelemetryConfig(interval_s=0.2, wait_sample_hz=0, smart=False))
    rec.start()
    rec.stop()
    data = json.loads((tmp_path / "telemetry" / "meta.json").read_text())
    meta = serde.from_dict(TelemetryMeta, data)
    assert serde.to_dict(meta) == data
    assert meta.server is None and meta.stopped_at is not None and meta.stopped_at >= \
        meta.started_at
    assert meta.devices["data"].path == str(tmp_path)
