"""Words follow the statistics: a study says one side's writes were burstier or smoother only
when the write-IOPS CV's interval says so, and says nothing of writes that are noise."""

from __future__ import annotations

from types import SimpleNamespace

from pgdyno.compare.core import compare_values
from pgdyno.compare.model import SCHEMA_VERSION, Comparison
from pgdyno.study.conclusions import _write_cv
from pgdyno.study.model import WorkloadResult
from pgdyno.study.report import _write_cv as word_write_cv

NO_RECORD = SimpleNamespace(workload=lambda name: None)
"""The study record the sentence names its workload from (none here: the bare name)."""


def _result(a_cv: list[float], b_cv: list[float], a_tps: list[float] | None = None
            ) -> WorkloadResult:
    tps = a_tps or [1000.0, 1010.0, 990.0]
    metrics = [compare_values(4, "tps", "tx/s", 1, tps, tps, label="TPS"),
               compare_values(4, "data_wal_write_iops_cv", "%", 0, a_cv, b_cv,
                              label="Data + WAL (vda) write IOPS CV")]
    cmp = Comparison(schema_version=SCHEMA_VERSION, baseline_label="pg15",
                     candidate_label="pg18", baseline_runs=[], candidate_runs=[],
                     confidence=0.95, changes=[], metrics=metrics, method_note="")
    return WorkloadResult(workload="tpcb", description="", headline="tps",
                          anchor="workload-tpcb", sides=[], comparison=cmp)


def test_close_cvs_are_not_called_burstier() -> None:
    result = _result([19.0, 20.4, 19.7], [21.2, 19.9, 20.7])  # 19.7% against 20.6%
    found = _write_cv(result)
    assert len(found) == 1 and found[0].words["trend"] == ""
    text = word_write_cv(found[0], NO_RECORD)  # type: ignore[arg-type]
    assert "burstier" not in text and "smoother" not in text
    assert "no significant difference in how bursty" in text


def test_a_clear_difference_is_worded_with_its_interval() -> None:
    result = _result([30.1, 29.5, 30.6, 30.0], [15.2, 14.8, 15.5, 15.1])
    found = _write_cv(result)
    assert found[0].words["trend"] == "smoother"
    assert found[0].values["high_pct"] < 0
    text = word_write_cv(found[0], NO_RECORD)  # type: ignore[arg-type]
    assert "pg18's writes were smoother" in text and "interval" in text


def test_writes_that_are_noise_make_no_finding() -> None:
    # Below the floor (a CV under 1%, or no CV at all: too few IOPS), nothing is said.
    assert _write_cv(_result([0.5, 0.6, 0.4], [0.9, 0.8, 0.7])) == []
    assert _write_cv(_result([], [])) == []
