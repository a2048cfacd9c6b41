"""TPROC-C models and script generation, without a server (fast)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.workloads.tprocc import (
    IDEAL_NOPM_PER_WAREHOUSE,
    SCRIPT_ORDER,
    ConditionResult,
    ConsistencyReport,
    IdealComparison,
    LoadOptions,
    LoadProgress,
    LoadResult,
    Mix,
    NURandConstants,
    ScriptOptions,
    ScriptSet,
    Snapshot,
    ThroughputMetrics,
    against_ideal,
    generate,
    ideal_nopm,
    interval_series,
    parse_warehouses,
    schema,
    script_for,
    scripts,
    throughput,
)


def test_mix_parse_forms_and_errors() -> None:
    assert Mix.parse("45,43,4,4,4") == Mix()
    assert Mix.parse("new_order=50,payment=50") == Mix(50, 50, 0, 0, 0)
    assert Mix.parse("new-order=1, stock_level=1").share("stock_level") == 0.5
    for bad in ("45,43,4", "foo=3", "0,0,0,0,0", "-1,2,3,4,5"):
        with pytest.raises(UsageError):
            Mix.parse(bad)


def test_parse_warehouses_sweep() -> None:
    assert parse_warehouses("10,20, 30") == [10, 20, 30]
    with pytest.raises(UsageError):
        parse_warehouses("10,x")
    with pytest.raises(UsageError):
        parse_warehouses("0")


def test_script_order_and_weights() -> None:
    ss = generate(ScriptOptions(warehouses=3, seed=7))
    assert [s.name for s in ss.scripts] == [name for name, _, _ in SCRIPT_ORDER]
    assert [s.script_no for s in ss.scripts] == list(range(6))
    weights = {s.name: s.weight for s in ss.scripts}
    # 45/43/4/4/4 with 1% of New-Orders rolled back, in units of 0.01%.
    assert weights == {"new_order": 4455, "new_order_rollback": 45, "payment": 4300,
                       "order_status": 400, "delivery": 400, "stock_level": 400}
    assert script_for(1) == ("new_order_rollback", "new_order", "rollback")
    assert ss.transaction_of(5) == "stock_level"


def test_scripts_written_in_script_no_order(tmp_path) -> None:
    ss = generate(ScriptOptions(warehouses=2, seed=1))
    args = ss.pgbench_args(tmp_path)
    files = args[1::2]
    assert args[0::2] == ["-f"] * 6
    assert [f.rsplit("@", 1)[1] for f in files] == [str(s.weight) for s in ss.scripts]
    for info, spec in zip(ss.scripts, files, strict=True):
        assert spec.startswith(str(tmp_path / info.file_name))


def test_nurand_constants_respect_the_last_name_rule() -> None:
    for seed in range(200):
        c = scripts.choose_constants(seed)
        delta = abs(c.c_last - schema.LOAD_C_LAST)
        assert 65 <= delta <= 119 and delta not in (96, 112)
        assert 0 <= c.c_last <= 255 and 0 <= c.c_id <= 1023 and 0 <= c.ol_i_id <= 8191
    assert scripts.choose_constants(3) == scripts.choose_constants(3)


def test_the_server_draws_with_the_run_constants_in_one_statement() -> None:
    """The NURand constants, W and the percentages reach the server's draws (test_tprocc_run
    checks what the draws give); pgbench itself only picks the warehouse."""
    ss = generate(ScriptOptions(warehouses=4, seed=11))
    c = ss.constants
    assert (f"FROM tprocc_draw_new_order(:w_id, 0, false, 4, {c.c_id}, {c.ol_i_id}, 1) AS o;"
            in ss.texts[0])
    assert f"tprocc_draw_payment(:w_id, 0, 4, {c.c_id}, {c.c_last}, 15, 60)" in ss.texts[2]
    assert f"tprocc_draw_order_status(0, {c.c_id}, {c.c_last}, 60)" in ss.texts[3]
    for text in ss.texts:
        body = [line for line in text.splitlines() if not line.startswith("--")]
        assert sum(line.startswith("\\") for line in body) <= 2  # \set w_id (home_d_id)
        assert "^" not in text and ":c_id" not in text


def test_home_warehouse_by_default_and_all_warehouses_option() -> None:
    home = generate(ScriptOptions(warehouses=5, seed=1))
    spread = generate(ScriptOptions(warehouses=5, seed=1, all_warehouses=True))
    for text in home.texts:
        assert "\\set w_id (:client_id % 5) + 1" in text
    for text in spread.texts:
        assert "\\set w_id random(1, 5)" in text


def test_single_warehouse_has_no_remote_lines_or_payments() -> None:
    ss = generate(ScriptOptions(warehouses=1, seed=1))
    c = ss.constants
    assert f"tprocc_draw_new_order(:w_id, 0, false, 1, {c.c_id}, {c.ol_i_id}, 0)" in ss.texts[0]
    assert f"tprocc_draw_payment(:w_id, 0, 1, {c.c_id}, {c.c_last}, 0, 60)" in ss.texts[2]


def test_rollback_variant_sets_an_invalid_last_item_and_rolls_back() -> None:
    simple = generate(ScriptOptions(warehouses=2, seed=1)).texts[1]
    assert "tprocc_draw_new_order(:w_id, 0, true, 2, " in simple
    assert re.search(r"^BEGIN \\; SELECT tprocc_new_order\(.*\) AS o \\; ROLLBACK;$", simple,
                     re.M)
    prepared = generate(ScriptOptions(warehouses=2, seed=1, protocol="prepared")).texts[1]
    assert prepared.rstrip().splitlines()[-1] == "ROLLBACK;"
    assert "\\;" not in prepared


def test_compliant_mode_keying_and_think_times() -> None:
    ss = generate(ScriptOptions(warehouses=2, seed=1, keying_thinking=True, time_scale=0.5))
    assert ss.clients == 20
    no, payment = ss.texts[0], ss.texts[2]
    assert "\\sleep 9000000 us" in no  # 18 s keying x 0.5
    assert "* 6000000), 60000000)" in no  # think mean 12 s x 0.5, capped at 10x
    assert "\\sleep 1500000 us" in payment
    assert "tprocc_draw_new_order(:w_id, :home_d_id, false, 2, " in no
    assert generate(ScriptOptions(warehouses=2)).clients is None


def test_compliant_sleeps_end_a_second_after_the_runs_T(tmp_path) -> None:
    ss = generate(ScriptOptions(warehouses=1, seed=1, keying_thinking=True, run_s=75))
    no = ss.texts[0].splitlines()
    call = next(k for k, line in enumerate(no) if "tprocc_new_order(" in line)
    # Each sleep is cut where the terminal's sleeps so far reach -T + 1 s, and added to them.
    assert no[call - 3:call] == [
        "\\set keying_us least(18000000, greatest(0, 76000000 - :slept_us))",
        "\\set slept_us :slept_us + :keying_us", "\\sleep :keying_us us"]
    assert no[call + 1].startswith("\\set think_us least(least(int(-ln(random(1, 1000000)")
    assert no[call + 1].endswith("120000000), greatest(0, 76000000 - :slept_us))")
    assert no[call + 2:] == ["\\set slept_us :slept_us + :think_us", "\\sleep :think_us us"]
    assert all(text.count("slept_us + ") == 2 for text in ss.texts)
    # Every terminal starts at none slept, once however many scripts read it.
    assert ss.defines == (("slept_us", 0),)
    args = ss.pgbench_args(tmp_path)
    assert args[:2] == ["-D", "slept_us=0"] and args.count("-D") == 1
    # Outside compliant mode, or without the run's length, there is nothing to cut.
    for options in (ScriptOptions(warehouses=1, run_s=75),
                    ScriptOptions(warehouses=1, keying_thinking=True)):
        plain = generate(options)
        assert plain.defines == () and not any("slept_us" in t for t in plain.texts)


def test_each_define_goes_to_pgbench_once() -> None:
    from pgdyno.workloads.engine.pgbench import ScriptSpec, script_args

    specs = [ScriptSpec(name=n, weight=w, path=Path(f"/s/{n}.sql"), defines=(("x", 0),))
             for n, w in (("a", 3), ("b", 1))]
    assert script_args(specs) == ["-D", "x=0", "-f", "/s/a.sql@3", "-f", "/s/b.sql@1"]
    assert script_args([ScriptSpec(name="tpcb", builtin="tpcb-like")]) == ["-b", "tpcb-like@1"]


def test_ideal_nopm_is_12_86_per_warehouse() -> None:
    assert ideal_nopm(1) == pytest.approx(IDEAL_NOPM_PER_WAREHOUSE, abs=0.01)
    assert ideal_nopm(10, time_scale=0.1) == pytest.approx(1286, rel=0.001)


def test_throughput_from_two_snapshots() -> None:
    start = Snapshot(time_s=100.0, sum_next_o_id=30_010, xact_commit=500, xact_rollback=5)
    end = Snapshot(time_s=130.0, sum_next_o_id=30_610, xact_commit=1800, xact_rollback=15)
    m = throughput(start, end, warehouses=1)
    assert m.new_orders == 600 and m.transactions == 1310
    assert m.nopm == pytest.approx(1200) and m.tpm == pytest.approx(2620)
    assert m.efficiency == pytest.approx(1200 / 12.86)
    with pytest.raises(ValueError):
        throughput(end, start, warehouses=1)


def test_interval_series_and_ideal_comparison() -> None:
    snaps = [Snapshot(time_s=t, sum_next_o_id=30_010 + n, xact_commit=c, xact_rollback=0)
             for t, n, c in ((0, 0, 0), (6, 10, 30), (12, 13, 40))]
    series = interval_series(snaps, warehouses=1)
    assert [round(m.nopm) for m in series] == [100, 30]
    fine = against_ideal(series[0], time_scale=0.1)
    assert fine.ideal_nopm == pytest.approx(128.6, rel=0.001)
    assert fine.ratio == pytest.approx(100 / 128.6, rel=0.001) and fine.saturated
    assert not against_ideal(series[0], time_scale=0.12).saturated


def test_options_validation() -> None:
    with pytest.raises(UsageError):
        ScriptOptions(warehouses=0)
    with pytest.raises(UsageError):
        ScriptOptions(warehouses=1, protocol="bogus")
    with pytest.raises(UsageError):
        ScriptOptions(warehouses=1, rollback_pct=101)


def _sample(cls):
    """An instance of every model with non-default values in every field."""
    samples = {
        Mix: Mix(40, 40, 10, 5, 5),
        NURandConstants: NURandConstants(c_last=230, c_id=5, ol_i_id=77),
        ScriptOptions: ScriptOptions(warehouses=3, mix=Mix(40, 40, 10, 5, 5),
                                     all_warehouses=True, keying_thinking=True,
                                     time_scale=0.5, rollback_pct=2, remote_line_pct=3,
                                     remote_payment_pct=20, by_name_pct=50,
                                     protocol="prepared", seed=9),
        LoadOptions: LoadOptions(warehouses=4, workers=3, order_line_partitions=2,
                                 force=True, rebuild=True, maintenance_work_mem="1GB"),
        LoadProgress: LoadProgress(phase="keys", warehouses_done=2, warehouses_total=4,
                                   rows=1000, elapsed_s=2.5, steps_done=3, steps_total=9),
        LoadResult: LoadResult(schema_version=1, warehouses=4, reused=True, workers=3,
                               order_line_partitions=2, rows=10, seconds=1.5,
                               phase_seconds={"data": 1.0}, load_c_last=157),
        Snapshot: Snapshot(time_s=1.5, sum_next_o_id=3, xact_commit=4, xact_rollback=5),
        ThroughputMetrics: ThroughputMetrics(warehouses=2, duration_s=60, new_orders=5,
                                             transactions=9, nopm=5, tpm=9, efficiency=0.2),
        IdealComparison: IdealComparison(warehouses=3, nopm=30.5, ideal_nopm=38.58,
                                         ratio=0.79, saturated=True),
        ConditionResult: ConditionResult(number=2, description="x", passed=False, checked=3,
                                         violations=1, examples=("w=1 d=1: 3 / 2 / 2",)),
    }
    if cls is ConsistencyReport:
        return ConsistencyReport(schema_version=1, seconds=0.5,
                                 conditions=(samples[ConditionResult],) * 2)
    if cls is ScriptSet:
        return generate(samples[ScriptOptions])
    return samples[cls]


@pytest.mark.parametrize("cls", [Mix, NURandConstants, ScriptOptions, LoadOptions,
                                 LoadProgress, LoadResult, Snapshot, ThroughputMetrics,
                                 IdealComparison, ConditionResult, ConsistencyReport, ScriptSet])
def test_round_trip_over_every_field(cls) -> None:
    obj = _sample(cls)
    data = json.loads(json.dumps(obj.to_dict()))
    assert set(data) == {f.name for f in dataclasses.fields(cls)}
    assert cls.from_dict(data) == obj


def test_partitioning_is_automatic_only_for_large_datasets() -> None:
    assert schema.auto_partitions(199) == 0
    assert schema.auto_partitions(200) == 16
    assert schema.auto_partitions(9450) == 64
    first, after = schema.key_jobs(500, 4)
    tables = [job.table for job in first]
    assert tables[0] == "stock" and "order_line" not in tables
    assert [f"order_line_p{r}" for r in range(4)] == [t for t in tables if "order_line" in t]
    assert [job.table for job in after] == ["order_line"]
    assert schema.key_jobs(10, 0)[1] == []
    statements = [s.as_string() for s in schema.vacuum_statements(4, 180000)]
    assert statements[-1] == 'ANALYZE ONLY "order_line"'
    assert len(schema.vacuum_statements(4, 170000)) == len(statements) - 1
