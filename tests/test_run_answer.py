"""What a reader sees first: every run report opens with the answer the terminal printed,
and every dataset a workload builds has its load reported.

- The closing lines of `pgdyno bench` and the report's first section (Answer) are the same
  statements: the peak and its interval, saturation, p99, the verdict, where the dataset
  lived, the share of it that memory could hold with the hit ratio the peak measured, and
  the load. Every figure is recomputed here from summary.json and the manifest.
- A peak at the most clients tried says how much it was still rising and what to
  try next, not "saturates"; the dataset line is a sentence.
- The Load table shows each phase's seconds as the manifest records them and as pgbench's
  own log timed them, with rows/s over rows the test counts in the database itself; a
  reused dataset says so, with the build seconds pgdyno's registry holds (read here by SQL).
"""

from __future__ import annotations

import json
import math
import re
import statistics

import psycopg
import pytest

from pgdyno.analysis.summary import RunSummary
from pgdyno.config.units import human_bytes
from pgdyno.options import BenchOptions
from pgdyno.reports.document import CHANGE_SIGN, RunView, Section, build_document, change_text
from pgdyno.results import load
from pgdyno.results.rundir import RunPlan
from pgdyno.runner.outcome import CachedShare, answer_rows, cached_text, describe_fit, outcome_of
from pgdyno.workloads import registry
from pgdyno.workloads.base import HIGHER, LOWER, headline_of
from pgdyno.workloads.pgbench.dataset import init_phases
from tests.answer import answer, check_load_table, markdown_table, seconds, sections
from tests.conftest import make_shared_dir, scratch_database
from tests.conftest import run_cli_here as run_cli

MIB, GIB = 2**20, 2**30
T_975 = {1: 12.7062, 2: 4.3027}  # Student's t, two-sided 95%, from the published table
PGBENCH_DONE = ("dropping old tables...\ncreating tables...\ngenerating data (server-side)...\n"
                "vacuuming...\ncreating primary keys...\n"
                "done in 1.52 s (drop tables 0.01 s, create tables 0.02 s, server-side "
                "generate 0.91 s, vacuum 0.31 s, primary keys 0.27 s).\n")


# ----- quick checks (no server) -------------------------------------------------------------

def test_pgbench_load_phases_come_from_its_own_step_timings() -> None:
    assert init_phases(PGBENCH_DONE) == pytest.approx(
        {"data": 0.01 + 0.02 + 0.91, "vacuum": 0.31, "keys": 0.27})
    assert init_phases("creating tables...\n") == {}  # an old pgbench: no phases, no guess


def test_a_load_record_rates_each_phase_over_the_whole_dataset() -> None:
    record = load.built(1_000_000, 12.5, {"vacuum": 2.0, "data": 8.0, "keys": 2.5})
    assert [p.phase for p in record.phases] == ["data", "keys", "vacuum"]  # as they ran
    assert [p.rows_per_s for p in record.phases] == [125_000.0, 400_000.0, 500_000.0]
    assert load.LoadRecord.from_dict(record.to_dict()) == record
    lines = dict(load.load_lines(record))
    assert lines["load"] == "built in 12.5 s, 1,000,000 rows (80,000 rows/s overall)"
    assert lines["load keys and indexes"] == "2.50 s, 400,000 rows/s"
    assert dict(load.load_lines(load.reused(42.0)))["load"] == (
        "reused, not loaded again (built in 42.0 s by an earlier run)")
    assert "not recorded" in dict(load.load_lines(load.reused(None)))["load"]


def _sweep(tps: dict[int, list[float]]) -> RunSummary:
    """A sweep whose iterations at each client count measured ``tps``."""
    from tests.test_report_rendering import iteration, run_summary

    its = []
    for clients, values in tps.items():
        for number, value in enumerate(values, 1):
            it = iteration(clients, number, [value])
            it.metrics = {"tps": value, "latency_p99_ms": 2.0}
            its.append(it)
    return run_summary(its)


def _said(tps: dict[int, list[float]], direction: int = HIGHER) -> dict[str, str]:
    summary = _sweep(tps)
    head = headline_of(summary, registry.get("tpcb").metrics)
    assert head is not None
    return {row.item: row.text
            for row in answer_rows(outcome_of(summary, head, "", direction=direction))}


def test_a_peak_at_the_most_clients_tried_says_how_much_it_was_still_rising() -> None:
    tps = {2: [1000.0, 1010.0], 4: [1500.0, 1530.0], 8: [1800.0, 1790.0]}
    said = _said(tps)
    before, peak = statistics.fmean(tps[4]), statistics.fmean(tps[8])  # 1,515.0 and 1,795.0
    assert said["peak TPS"].startswith(f"{peak:,.1f} tx/s at 8 clients ")
    assert said["still rising"] == (
        f"TPS grew {100 * (peak / before - 1):.1f}% from 4 clients to 8 clients "
        f"({before:,.1f} to {peak:,.1f} tx/s), the most tried; try up to 16 clients "
        "(--clients 8,16) to find the peak")
    assert "18.5%" in said["still rising"]  # 1,795 / 1,515 − 1, by hand
    assert "saturates" not in said and "levelling off" not in said  # still climbing at 8


def test_a_peak_in_the_middle_still_saturates() -> None:
    tps = {1: [600.0], 2: [1000.0, 1020.0], 4: [990.0, 960.0], 8: [900.0]}
    said = _said(tps)
    peak = statistics.fmean(tps[2])
    assert min(c for c, v in tps.items() if statistics.fmean(v) >= 0.95 * peak) == 2
    assert said["saturates"] == "at 2 clients (within 5% of the peak)"
    assert "still rising" not in said


def test_a_last_step_within_the_margin_saturates_before_it_and_levels_off() -> None:
    said = _said({2: [1000.0], 4: [1900.0], 8: [1950.0]})
    assert said["saturates"] == "at 4 clients (within 5% of the peak)"  # 1,900 ≥ 0.95 × 1,950
    assert said["levelling off"] == (
        f"TPS grew only {100 * (1950 / 1900 - 1):.1f}% from 4 clients to 8 clients "
        "(1,900.0 to 1,950.0 tx/s), the most tried; try up to 16 clients (--clients 8,16) "
        "to confirm the plateau")
    assert "still rising" not in said


def test_one_client_count_or_a_time_says_neither() -> None:
    edge = {"saturates", "still rising", "levelling off"}
    assert not edge & set(_said({4: [1000.0, 1100.0]}))
    lower = _said({1: [1000.0], 2: [500.0]}, direction=LOWER)  # best: the smaller time
    assert not edge & set(lower)


def _record(fit: str, size: int, available: int | None) -> dict:
    return {"fits": fit, "size_bytes": size, "shared_buffers_bytes": 128 * MIB,
            "available_bytes": available}


@pytest.mark.parametrize(("record", "sentence"), [
    (_record("shared_buffers", 20 * MIB, 22 * GIB),
     "{size}, within shared_buffers ({sb}): every read is a shared-buffer hit, so the run "
     "measures CPU, locks and WAL rather than storage"),
    (_record("page cache", 157 * MIB, 22 * GIB + 600 * MIB),
     "{size}, larger than shared_buffers ({sb}) but within memory ({available} available): "
     "reads that miss shared_buffers hit the OS page cache, not the disk"),
    (_record("disk", 30 * GIB, 2 * GIB),
     "{size}, larger than shared_buffers ({sb}) and memory ({available} available): reads "
     "reach the storage"),
    (_record("beyond shared_buffers", 1536 * MIB, None),
     "{size}, larger than shared_buffers ({sb}); the server's memory is unknown, so reads "
     "that miss shared_buffers may hit its page cache or its disk"),
])
def test_the_dataset_line_is_a_sentence(record: dict, sentence: str) -> None:
    """The sentence around the sizes (their rounding is config.units' own, tested there)."""
    available = record["available_bytes"]
    assert describe_fit(record) == sentence.format(
        size=human_bytes(record["size_bytes"]), sb=human_bytes(128 * MIB),
        available=human_bytes(available) if available is not None else "")


def test_the_cached_line_says_what_share_of_reads_hit_shared_buffers() -> None:
    share = CachedShare(size_bytes=157 * MIB, shared_buffers_bytes=128 * MIB,
                        in_shared_buffers=128 / 157, in_memory=1.0, hit_ratio_pct=99.14)
    assert cached_text(share) == ("82% of the dataset fits in shared_buffers, 100% with the "
                                  "page cache; 99.1% of block reads hit shared_buffers at the "
                                  "peak")


def _view(manifest: dict, answer_rows: list[tuple[str, str]]) -> RunView:
    opts = BenchOptions(workload="tpcb", clients=(2,), threads=None, duration_s=3,
                        warmup_s=1, iterations=1)
    return RunView(manifest=manifest, plan=RunPlan(schema_version=1, workload="tpcb",
                                                   context="t"),
                   opts=opts, dataset="scale 1", answer=answer_rows)


def test_the_answer_is_the_first_section_even_of_a_failed_run() -> None:
    from tests.test_report_rendering import iteration, run_summary

    summary = run_summary([iteration(2, 1, [100.0, 102.0])])
    doc = build_document(summary, _view({"status": "ok"}, [("peak TPS", "101.0 tx/s")]), {})
    assert doc.sections[0].title == "Answer"
    assert doc.sections[0].tables[0].rows == [["peak TPS", "101.0 tx/s"]]
    failed = build_document(summary, _view({"status": "failed", "reason": "disk full"}, []),
                            {})
    assert failed.sections[0].title == "Answer"
    assert "failed" in failed.sections[0].paragraphs[0]
    assert "disk full" in failed.sections[0].paragraphs[0]


def test_one_sign_convention_with_its_word() -> None:
    """CHANGE_SIGN: B/A − 1 of the value; the word says better or worse."""
    assert change_text(100 * (200.3 / 189.5 - 1), -1) == "+5.7% (slower)"  # a time grew
    assert change_text(100 * (189.5 / 200.3 - 1), -1) == "-5.4% (faster)"
    assert change_text(8.7, 1) == "+8.7% (faster)"  # a throughput grew
    assert change_text(-3.0, 0) == "-3.0% (lower)"
    assert "B/A − 1" in CHANGE_SIGN


def test_ssh_environment_shows_the_database_host_beside_the_client() -> None:
    from tests.test_report_rendering import iteration, run_summary

    client = {"hostname": "laptop", "os": "Linux-6.1", "cpu_model": "Client CPU",
              "cpu_count": 4, "ram_bytes": 8 * 2**30, "kernel": "6.1"}
    db = {"hostname": "db1", "os": "Linux x86_64", "cpu_model": "Server CPU",
          "cpu_count": 64, "ram_bytes": 512 * 2**30, "kernel": "6.8", "destination": "me@db1",
          "storage": [{"role": "data", "summary": "nvme0n1: 3.5 TB, ext4"}]}
    summary = run_summary([iteration(2, 1, [100.0])])
    doc = build_document(summary, _view({"status": "ok", "host": client,
                                         "database_host": db}, []), {})
    env = next(s for s in doc.sections if s.title == "Environment and configuration")
    machines = env.tables[0]
    assert machines.headers[1] == "Database host (me@db1)"
    assert machines.headers[2].startswith("Client")
    rows = {r[0]: r[1:] for r in machines.rows}
    assert rows["CPU"] == ["Server CPU × 64", "Client CPU × 4"]
    assert rows["RAM"] == ["512.0 GiB", "8.0 GiB"]
    assert rows["Host"] == ["db1 (Linux x86_64)", "laptop (Linux-6.1)"]
    assert rows["Storage (data)"] == ["nvme0n1: 3.5 TB, ext4", "–"]
    assert all(r[0] not in ("CPU", "RAM") for r in env.tables[1].rows)
    # A local run keeps one column.
    local = build_document(summary, _view({"status": "ok", "host": client}, []), {})
    env = next(s for s in local.sections if isinstance(s, Section)
               and s.title == "Environment and configuration")
    assert env.tables[0].headers == ["Item", "Value"]
    assert ["CPU", "Client CPU × 4"] in env.tables[0].rows


# ----- real runs --------------------------------------------------------------------------

def _terminal(stdout: str) -> list[str]:
    """The closing lines before the report's paths."""
    lines = stdout.splitlines()
    return lines[:next(i for i, line in enumerate(lines) if line.startswith("report: "))]


def _statement_lines(rows: list[tuple[str, str]]) -> list[str]:
    return [f"{item}{' ' if item == 'saturates' else ': '}{text}" for item, text in rows]


@pytest.mark.server
def test_tpcb_report_opens_with_the_terminal_answer_and_reports_its_load() -> None:
    results = make_shared_dir("pgdyno-answer-")
    own = make_shared_dir("pgdyno-answer-wd-")  # a workdir of its own: the dataset is built
    args = ["bench", "tpcb", "--scale", "1", "--clients", "1,2", "--duration", "2",
            "--warmup", "0", "--iterations", "2", "--no-progress", "--results-dir",
            str(results)]
    out = run_cli(args, own, timeout=600)
    assert out.returncode == 0, out.stderr
    run = next(results.glob("*--tpcb/tpcb-*"))
    md = (run / "report.md").read_text()
    assert sections(md)[0] == "Answer"
    rows = answer(md)
    # The report's first section is what the terminal printed, statement for statement.
    assert _statement_lines(rows) == _terminal(out.stdout)
    said = dict(rows)

    # The peak and its interval, recomputed from summary.json's iterations.
    summary = json.loads((run / "summary.json").read_text())
    means = {c: statistics.fmean(it["metrics"]["tps"] for it in summary["iterations"]
                                 if it["clients"] == c) for c in summary["client_counts"]}
    peak = max(means, key=means.get)
    values = [it["metrics"]["tps"] for it in summary["iterations"] if it["clients"] == peak]
    half = T_975[len(values) - 1] * statistics.stdev(values) / math.sqrt(len(values))
    assert said["peak TPS"] == (
        f"{means[peak]:,.1f} tx/s at {peak} client{'s' if peak != 1 else ''} (95% interval "
        f"{means[peak] - half:,.1f} to {means[peak] + half:,.1f} over 2 iterations)")
    p99 = statistics.fmean(it["metrics"]["latency_p99_ms"] for it in summary["iterations"]
                           if it["clients"] == peak)
    assert said["p99 at the peak"] == f"{p99:,.2f} ms"

    # The cached share: the manifest's measured sizes, and the peak's measured hit ratio.
    ds = json.loads((run / "manifest.json").read_text())["dataset"]
    share = min(1.0, ds["shared_buffers_bytes"] / ds["size_bytes"])
    hits = [it["telemetry"]["database"]["cache_hit_pct"] for it in summary["iterations"]
            if it["clients"] == peak]
    assert said["cached"] == (f"{100 * share:.0f}% of the dataset fits in shared_buffers; "
                              f"{statistics.fmean(hits):.1f}% of block reads hit "
                              "shared_buffers at the peak")

    # The load: pgbench's own timing of its steps (its log, parsed here), 100,011 rows a
    # scale unit (pgbench_accounts, _tellers, _branches).
    log = (run / "raw" / "pgbench" / "init.log").read_text()
    done = re.search(r"done in [0-9.]+ s \((.*)\)", log)
    assert done is not None, log
    steps = {name.strip(", "): float(v) for name, v in re.findall(r"([a-z -]+) ([0-9.]+) s",
                                                                  done.group(1))}
    timed = {"data": steps.get("create tables", 0) + steps["client-side generate"],
             "keys": steps["primary keys"], "vacuum": steps["vacuum"]}
    shown = check_load_table(run, rows=100_011, phase_seconds=timed)
    assert set(shown) == {"data", "keys", "vacuum"}
    assert said["load"].startswith("built in ") and "100,011 rows" in said["load"]
    assert seconds(said["load data"].split(",")[0]) == pytest.approx(shown["data"], abs=0.01)

    # A second run reuses the dataset, and names the first build's seconds: one client
    # count, one iteration of 1 s (its load line is what is read).
    again = run_cli([*args[:5], "2", "--duration", "1", "--warmup", "0", "--iterations", "1",
                     *args[12:]], own, timeout=600)
    assert again.returncode == 0, again.stderr
    second = max(results.glob("*--tpcb/tpcb-*"), key=lambda p: p.name)
    first_seconds = json.loads((run / "manifest.json").read_text())[
        "dataset"]["load_record"]["seconds"]
    line = next(x for x in _terminal(again.stdout) if x.startswith("load: "))
    built = re.fullmatch(r"load: reused, not loaded again \(built in (.*) by an earlier run\)",
                         line)
    assert built is not None, line
    assert seconds(built.group(1)) == pytest.approx(first_seconds, abs=0.006)
    assert "reused, not loaded again" in (second / "report.md").read_text()


def _counted(dsn: str, tables: list[str], schema: str = "pgdyno_bench") -> int:
    with psycopg.connect(dsn, autocommit=True) as db:
        return sum(db.execute(f'SELECT count(*) FROM {schema}."{t}"').fetchone()[0]
                   for t in tables)


@pytest.mark.server
def test_oltp_load_phases_and_the_reused_build_seconds_of_the_registry(server) -> None:
    """OLTP over --dsn: rows counted here in the database; the reused run names the build
    seconds pgdyno_dataset holds, read here."""
    own = make_shared_dir("pgdyno-answer-oltp-")
    for target in scratch_database(server, "answer_oltp"):
        results = make_shared_dir("pgdyno-results-")
        dsn = target.conninfo()
        args = ["bench", "oltp-read-only", "--dsn", dsn, "--tables", "2", "--table-size",
                "5000", "--clients", "1", "--duration", "1", "--warmup", "0", "--iterations",
                "1", "--no-telemetry", "--no-progress", "--results-dir", str(results)]
        first = run_cli(args, own, timeout=600)
        assert first.returncode == 0, first.stderr
        run = next(results.glob("*/oltp-read-only-*"))
        counted = _counted(dsn, ["sbtest1", "sbtest2"])
        assert counted == 10_000
        check_load_table(run, rows=counted)
        assert any(x.startswith("load keys and indexes: ") for x in _terminal(first.stdout))

        again = run_cli(args, own, timeout=600)
        assert again.returncode == 0, again.stderr
        with psycopg.connect(dsn, autocommit=True) as db:
            registry = db.execute("SELECT build_seconds FROM pgdyno_bench.pgdyno_dataset "
                                  "WHERE workload = 'oltp'").fetchone()[0]
        line = next(x for x in _terminal(again.stdout) if x.startswith("load: "))
        m = re.fullmatch(r"load: reused, not loaded again \(built in (.*) by an earlier run\)",
                         line)
        assert m is not None, line
        assert seconds(m.group(1)) == pytest.approx(registry, abs=0.006)
        second = max(results.glob("*/oltp-read-only-*"), key=lambda p: p.name)
        record = json.loads((second / "manifest.json").read_text())["dataset"]["load_record"]
        assert record["reused"] is True and record["seconds"] == pytest.approx(registry,
                                                                              abs=0.001)


@pytest.mark.server
def test_tprocc_load_phases(server) -> None:
    """TPROC-C over --dsn: its rows as its loader counted them, the phases' seconds."""
    own = make_shared_dir("pgdyno-answer-tprocc-")
    for target in scratch_database(server, "answer_tprocc"):
        results = make_shared_dir("pgdyno-results-")
        proc = run_cli(["bench", "tprocc", "--dsn", target.conninfo(),
                        "--warehouses", "1", "--clients", "1", "--duration", "1", "--warmup",
                        "0", "--iterations", "1", "--no-telemetry", "--no-progress",
                        "--results-dir", str(results)], own, timeout=900)
        assert proc.returncode == 0, proc.stderr
        run = next(results.glob("*/tprocc-*"))
        loaded = json.loads((run / "manifest.json").read_text())["dataset"]["load"]
        shown = check_load_table(run, rows=loaded["rows"])
        assert shown == pytest.approx({p: round(s, 3) for p, s in
                                       loaded["phase_seconds"].items()}, abs=0.051)
        md = (run / "report.md").read_text()
        assert markdown_table(md, "| Phase | Time | Rows/s |")[2][0] == "data"
