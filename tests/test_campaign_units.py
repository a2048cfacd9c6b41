"""Pure parts of campaigns and reports: scaling efficiency, root causes, telemetry metrics."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from pgdyno.analysis.telemetry import TelemetrySummary
from pgdyno.campaign.journal import root_cause
from pgdyno.campaign.scaling import ScalingCheck, _efficiency
from pgdyno.compare.core import _telemetry_metrics
from pgdyno.compare.runs import add_note, read_notes


def test_efficiency_and_its_interval() -> None:
    check = ScalingCheck(1, [1, 2, 2, 1], [], [100.0, 190.0, 200.0, 105.0], 4, None)
    _efficiency(check, 1, 2)
    geo = math.sqrt(190 * 200) / math.sqrt(100 * 105)
    assert check.efficiency == pytest.approx(geo / 2)
    assert check.efficiency_low < check.efficiency < check.efficiency_high


def test_efficiency_without_repeats_has_no_interval() -> None:
    check = ScalingCheck(1, [1, 2], [], [100.0, 150.0], 4, None)
    _efficiency(check, 1, 2)
    assert check.efficiency == pytest.approx(0.75)
    assert check.efficiency_low is None


def test_root_cause_keeps_the_fatal_line() -> None:
    reason = ("the server did not start (PostgreSQL exited during start (code 1); server log "
              "x.log: 2026 LOG:  starting | 2026 FATAL:  the database system is starting up | "
              "2026 FATAL:  could not access file \"nope\": No such file or directory)")
    assert root_cause(reason) == ('the server did not start: FATAL:  could not access file '
                                  '"nope": No such file or directory')
    assert root_cause("pgbench exited with code 2") == "pgbench exited with code 2"


def test_telemetry_metrics_per_iteration() -> None:
    telemetry = {"cpu": {"busy": {"avg": 93.5}}, "wal": {"bytes_per_s": 2 * 2**20},
                 "roles": [{"role": "data", "path": "/d", "device": "vda"},
                           {"role": "wal", "path": "/w", "device": "vdb"}],
                 "devices": [{"device": "vda", "roles": ["data"], "w_s": {"avg": 120.0},
                              "r_s": {"avg": 3.0}},
                             {"device": "vdb", "roles": ["wal"], "w_s": {"avg": 400.0}}]}
    it = SimpleNamespace(telemetry=TelemetrySummary.from_dict(telemetry))
    values = {m.name: m.value(it.telemetry) for m in _telemetry_metrics([it], [])}
    # No CV without 1 s samples above the IOPS floor: none is made up.
    assert values == {"cpu_busy_pct": 93.5, "wal_mb_s": 2.0, "data_write_iops": 120.0,
                      "data_read_iops": 3.0, "wal_write_iops": 400.0, "wal_read_iops": None,
                      "data_write_iops_cv": None, "wal_write_iops_cv": None}
    assert _telemetry_metrics([SimpleNamespace(telemetry=None)], []) == []
    assert all(m.value(None) is None for m in _telemetry_metrics([it], []))


def test_notes_are_kept_in_an_editable_file(tmp_path: Path) -> None:
    add_note(tmp_path, "checkpoint   at 30 s", "2026-01-01T00:00:00Z")
    with (tmp_path / "notes.md").open("a") as fh:
        fh.write("- added by hand\n")
    assert read_notes(tmp_path) == ["2026-01-01T00:00:00Z: checkpoint at 30 s",
                                    "added by hand"]


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wal-archiving.toml"


def test_config_bench_overrides_bench_per_config() -> None:
    from pgdyno.campaign.spec import load_spec

    spec = load_spec(EXAMPLE, Path("results"))
    by_label = {c.config.label: spec.options_for(c) for c in spec.cells()}
    assert {label: o.target.archive for label, o in by_label.items()} == {
        "archive-buffered": "buffered", "archive-direct": "direct"}
    for opts in by_label.values():  # [bench] applies to both
        assert opts.workload_options.sweep == (10, 30) and opts.duration_s == 60


@pytest.mark.parametrize(("table", "message"), [
    ('[config.bench]\narchive = "sideways"', "sideways"),
    ('[config.bench]\nclients = 4', "archive-x \\[config.bench\\] clients not accepted"),
    ('[config.bench]\nduration = "long"', "archive-x \\[config.bench\\] duration"),
    ('bench = 3', "a table of `pgdyno bench` options"),
])
def test_bad_config_bench_is_one_line(tmp_path: Path, table: str, message: str) -> None:
    from pgdyno.campaign.spec import load_spec
    from pgdyno.errors import UsageError

    spec_file = tmp_path / "c.toml"
    spec_file.write_text('[campaign]\nworkloads = ["tpcb"]\n[[config]]\nlabel = "archive-x"\n'
                         + table + "\n")
    with pytest.raises(UsageError, match=message) as info:
        load_spec(spec_file, tmp_path)
    assert "\n" not in str(info.value)
