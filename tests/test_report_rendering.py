"""The run report's tables, rendered from summaries and manifests built here (no server):
alignment, settings in their units with their rationale, the connection, counts, the I/O
consistency and hardware-limit tables. One short ``--dsn`` run checks the same against a
real server, with PostgreSQL's own SHOW as the oracle for the settings' units."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pgdyno.analysis import telemetry as t
from pgdyno.analysis.summary import (
    ClientSummary,
    IterationSummary,
    LatencyStats,
    RunSummary,
    ScriptSummary,
    TimelinePoint,
)
from pgdyno.options import BenchOptions
from pgdyno.reports import html, markdown
from pgdyno.reports.document import (
    Document,
    RunView,
    Section,
    Table,
    build_document,
    is_numeric_cell,
    setting_source,
    setting_value,
)
from pgdyno.reports.telemetry_sections import telemetry_sections
from pgdyno.results.rundir import RunPlan
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.dsn import DsnServer
from tests.answer import markdown_table

# ===== builders ==========================================================================


def telemetry_markdown(s: t.TelemetrySummary, verdict: None, plots: dict[str, str]) -> str:
    """The telemetry sections of one iteration as the run report's Markdown shows them."""
    return markdown.render_sections(telemetry_sections(s, verdict, plots))


def latency(count: int = 1000, mean: float = 1.5) -> LatencyStats:
    pct = {"p50": mean, "p75": mean * 1.2, "p80": mean * 1.3, "p90": mean * 1.5,
           "p95": mean * 2, "p99": mean * 3, "p99.9": mean * 5}
    return LatencyStats(count=count, mean_ms=mean, median_ms=mean, stddev_ms=0.3,
                        min_ms=0.1, max_ms=mean * 9, percentiles_ms=pct)


def iteration(clients: int, number: int, interval_tps: list[float], *, warmup_s: int = 1,
              start: float = 1_000.0, transactions: int | None = None, failed: int = 0,
              tail_tps: float | None = None,
              telemetry: t.TelemetrySummary | None = None) -> IterationSummary:
    """An iteration whose timeline is ``warmup_s`` seconds of warm-up at the first measured
    rate, the measured seconds, and optionally a partial last second (``tail_tps``)."""
    seconds = [interval_tps[0]] * warmup_s + list(interval_tps)
    timeline = [TimelinePoint(t_s=i, tps=v, latency_mean_ms=1.0, latency_p99_ms=2.0,
                              latency_max_ms=3.0, failed=0, measured=i >= warmup_s)
                for i, v in enumerate(seconds)]
    if tail_tps is not None:
        timeline.append(TimelinePoint(t_s=len(seconds), tps=tail_tps, latency_mean_ms=1.0,
                                      latency_p99_ms=2.0, latency_max_ms=3.0, failed=0,
                                      measured=False))
    n = transactions if transactions is not None else int(sum(interval_tps))
    mean = sum(interval_tps) / len(interval_tps)
    return IterationSummary(
        clients=clients, iteration=number, status="ok", duration_s=len(interval_tps),
        warmup_s=warmup_s, window_start_epoch=start + warmup_s, transactions=n, failed=failed,
        serialization_failures=0, deadlock_failures=0, retried=0, retries=0, skipped=0,
        late=0, tps_mean=mean, tps_median=sorted(interval_tps)[len(interval_tps) // 2],
        tps_stddev=1.0, tps_min=min(interval_tps), tps_max=max(interval_tps),
        interval_tps=list(interval_tps), latency=latency(n), lag=None, scripts=[],
        timeline=timeline, log_files=[f"raw/c{clients}-i{number}/tx.log"],
        pgbench_tps=mean, telemetry=telemetry)


def run_summary(iterations: list[IterationSummary],
                scripts: dict[int, list[ScriptSummary]] | None = None) -> RunSummary:
    counts = sorted({it.clients for it in iterations})
    per = []
    for c in counts:
        its = [it for it in iterations if it.clients == c]
        values = [v for it in its for v in it.interval_tps]
        n = sum(it.transactions for it in its)
        per.append(ClientSummary(
            clients=c, iterations=len(its), tps_mean=sum(values) / len(values),
            tps_median=sorted(values)[len(values) // 2], tps_stddev=1.0,
            tps_iteration_mean=sum(it.tps_mean for it in its) / len(its),
            tps_iteration_stddev=float("nan") if len(its) < 2 else 1.0, transactions=n,
            failed=sum(it.failed for it in its), retried=0, skipped=0, latency=latency(n),
            lag=None, scripts=(scripts or {}).get(c, [])))
    return RunSummary(schema_version=2, workload="tpcb", context="test", status="ok",
                      client_counts=counts, per_clients=per, iterations=iterations)


def run_view(manifest: dict | None = None, clients: tuple[int, ...] = (2,)) -> RunView:
    opts = BenchOptions(workload="tpcb", clients=clients, threads=None, duration_s=3,
                        warmup_s=1, iterations=1)
    plan = RunPlan(schema_version=1, workload="tpcb", context="test")
    return RunView(manifest=manifest or {"status": "ok"}, plan=plan, opts=opts,
                   dataset="scale 1")


class Cells(HTMLParser):
    """(text, class attribute, style attribute) of every <td> of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self._open: dict | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "td":
            self._open = {"text": "", **dict(attrs)}

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._open is not None:
            self.cells.append((self._open["text"].strip(), self._open.get("class") or "",
                               self._open.get("style") or ""))
            self._open = None


# ===== 1. alignment ======================================================================

NUMBERS = ["3,838", "0.519", "11,515", "15.4%", "3,838 ± 12.5", "4 (13)", "0 / 0 (0)",
           "7.16 MB/s", "2.0 cores", "128 MB", "35 → 37 °C", "-1", "1.2e-05"]
TEXTS = ["WAL write/sync", "53% of active session time in WAL waits (IO:WalSync 53%)",
         "use --iterations 3 or more before comparing configurations", "c2-i1", "vda",
         "data+wal", "127.0.0.1", "ISO, MDY", "tpcb@1", "2026-11-23T05:36:39Z",
         "too little activity (mean 3 IOPS < 10)"]


def test_cells_are_numbers_or_text() -> None:
    assert [c for c in NUMBERS if not is_numeric_cell(c)] == []
    assert [c for c in TEXTS if is_numeric_cell(c)] == []


def test_numbers_right_text_left_in_markdown_and_html(tmp_path: Path) -> None:
    """Numbers right, text left: one decision per column, the same in Markdown (---:) and
    HTML (its class)."""
    table = Table(["Clients", "Verdict", "TPS", "Evidence", "p99"], [
        ["2", "WAL write/sync", "3,838", "53% of active session time in WAL waits", "–"],
        ["4", "lock contention", "12,873", "65% of active session time waiting on locks",
         "3.25"],
    ])
    warnings = Table(["Code", "Finding", "Advice"], [
        ["few-iterations", "2 clients: 1 iteration(s)", "use --iterations 3 or more"]])
    limits = Table(["resource", "capacity"], [["CPU", "7 cores"]])
    doc = Document("t", [Section("S", tables=[table, warnings], body=[limits])])
    md = markdown.render_document(doc)
    assert "|---:|---|---:|---|---:|" in md.splitlines()
    assert "|---|---|---|" in md.splitlines()
    page = html.render_document(doc, tmp_path)
    assert re.search(r"th, td \{[^}]*text-align: left", page)  # cells without class: left
    assert re.search(r"td\.num \{[^}]*text-align: right", page)
    cells = Cells()
    cells.feed(page)
    classes = {text: cls for text, cls, _ in cells.cells}
    for number in ("2", "4", "3,838", "12,873", "3.25", "–"):
        assert classes[number] == "num", number
    for text in ("WAL write/sync", "53% of active session time in WAL waits",
                 "few-iterations", "use --iterations 3 or more"):
        assert classes[text] == "", text
    # A table in a section's own order of blocks: the same decision, and text stays left
    # (the page's default alignment is left, not right).
    assert "|---|---:|" in md.splitlines()
    assert classes["CPU"] == "" and classes["7 cores"] == "num"


def test_telemetry_tables_use_the_same_alignment() -> None:
    s = telemetry_summary()
    text = telemetry_markdown(s, None, {})
    rows = markdown_table(text, "| resource |")
    assert rows[1] == ["---", "---", "---:", "---:", "---:", "---:", "---"]


# ===== 2. settings, connection, counts ====================================================

@pytest.mark.parametrize(("raw", "shown"), [
    ("16384 8kB", "128 MB"), ("1024 MB", "1 GB"), ("80 MB", "80 MB"),
    ("2314112 8kB", "18079 MB"), ("1048576 kB", "1 GB"), ("900 s", "15 min"),
    ("10000 ms", "10 s"), ("15 s", "15 s"), ("86400 s", "1 d"), ("0 kB", "0"), ("-1 ms", "-1"),
    ("128 8kB", "1 MB"), ("ISO, MDY", "ISO, MDY"), ("%m [%p] ", "%m [%p] "), ("on", "on"),
    ("300", "300"), ("0.9", "0.9"),
])
def test_setting_values_in_natural_units(raw: str, shown: str) -> None:
    """A setting in the unit a reader thinks in: 'shared_buffers 128 MB', not '16384 8kB'
    (arithmetic: 16384 × 8 kB)."""
    assert setting_value(raw) == shown


def test_settings_rationale_comes_from_the_config_engine() -> None:
    """Every setting a config set shows the config engine's own rationale, and a
    --set value says '--set on the command line' once."""
    from pgdyno.config import resolve_config

    resolved = resolve_config("tuned", ["work_mem=8MB"], pg_major=18, workload="oltp",
                              connections=4)
    record = resolved.to_dict()
    assert resolved.plan is not None
    engine = {s.name: s for s in resolved.plan.settings if s.apply == "pg"}
    settings = {name: "1" for name in record["pg_settings"]}
    settings.update({"DateStyle": "ISO, MDY", "port": "5999"})
    manifest = {"status": "ok", "config": record, "target": {"kind": "embedded"},
                "server": {"non_default_settings": settings}}
    md = markdown.render_document(build_document(run_summary([iteration(2, 1, [10.0])]),
                                                 run_view(manifest), {}))
    rows = {r[0]: r[3] for r in markdown_table(md, "| Setting | Stock |")[2:]}
    for name in record["pg_settings"]:
        why = engine[name].rationale
        assert why and why in rows[name], name
        assert rows[name].count(why) == 1
    assert rows["work_mem"] == "--set on the command line"
    assert rows["shared_buffers"].startswith("tuned: ")
    assert rows["port"].startswith("pgdyno: ") and rows["DateStyle"] == "initdb"
    # A server pgdyno does not own: nobody's rationale is invented.
    assert setting_source("DateStyle", {}, "dsn") == ""


def test_connection_says_how_it_connected_once() -> None:
    """A --dsn over TCP is described as TCP, once; a socket by its file."""
    dsn = DsnServer(dsn="postgresql://bench:pw@127.0.0.1:5433/app?sslmode=disable",
                    install=embedded_install())
    conn = dsn.connection("socket")  # the CLI's default --via does not override the DSN
    assert conn.via == "tcp"
    text = conn.describe()
    assert text == "bench@127.0.0.1:5433/app (tcp, sslmode=disable)"
    assert "socket" not in text and "pw" not in text
    only_addr = DsnServer(dsn="hostaddr=10.1.2.3 port=5432 user=u dbname=d",
                          install=embedded_install())
    assert only_addr.connection().via == "tcp"
    assert only_addr.connection().describe() == "u@10.1.2.3:5432/d (tcp)"
    sock = ConnectionInfo(host="/run/pg/", port=5432, user="u", dbname="d")
    assert sock.describe() == "u@/run/pg/.s.PGSQL.5432/d (socket)"
    manifest = {"status": "ok", "target": {"kind": "dsn", "pg_bin": "/x"},
                "connection": text, "options": {"via": "socket"}}
    md = markdown.render_document(build_document(run_summary([iteration(2, 1, [10.0])]),
                                                 run_view(manifest), {}))
    rows = [r for r in markdown_table(md, "| Item |") if r[0] == "Connection"]
    assert rows == [["Connection", text]]
    assert md.count("(tcp") == 1


def test_counts_have_thousands_separators() -> None:
    """Transactions, failed and other counts with thousands separators in every table."""
    script = ScriptSummary(script_no=0, name="tpcb-like", weight=1, transactions=1_234_567,
                           failed=2_345, retried=0, tps=4115.2, latency=latency())
    its = [iteration(2, 1, [3838.0, 3900.0, 3790.0], transactions=11_515, failed=1_234),
           iteration(4, 1, [12873.0, 12900.0, 12850.0], transactions=1_234_567)]
    summary = run_summary(its, scripts={2: [script]})
    md = markdown.render_document(build_document(summary, run_view(clients=(2, 4)), {}))
    overview = markdown_table(md, "| Clients | TPS |")
    assert overview[2][-2:] == ["11,515", "1,234"]
    assert overview[3][-2] == "1,234,567"
    per_script = markdown_table(md, "| Clients | Script |")
    assert per_script[2][3] == "1,234,567" and per_script[2][-1] == "2,345"
    iterations = markdown_table(md, "| Clients | Iteration | Status |")
    assert iterations[2][8] == "1,234"
    # No count of four or more digits anywhere in a table without its separator.
    for line in md.splitlines():
        if line.startswith("|"):
            assert not re.search(r"(?<![\d.,])\d{4,}(?![\d.])", line), line


# ===== 6, 7. telemetry tables =============================================================

def telemetry_summary(w_iops: list[float] | None = None) -> t.TelemetrySummary:
    """A summary whose device wrote ``w_iops`` per second (3 IOPS by default: an idle disk)."""
    w = w_iops or [0.0, 0.0, 9.0, 0.0, 6.0, 3.0]
    mean = sum(w) / len(w)
    dev = t.DeviceSummary(
        "vda", ["data", "wal"], len(w), r_s=t.Stat(1200.0, 1300.0, 1400.0, 1000.0),
        w_s=t.Stat(mean, max(w), max(w), min(w)),
        read_iops_cv=t.coefficient_of_variation([1000.0, 1400.0, 1200.0], t.MIN_IOPS_FOR_CV),
        write_iops_cv=t.coefficient_of_variation(w, t.MIN_IOPS_FOR_CV), write_iops_std=3.0)
    limits = [t.HardwareLimit("CPU", 2.0, "cores", 1.9, 2.0, 95.0, "online CPUs"),
              t.HardwareLimit("data device vda busy time", 100.0, "%util", 35.51, 39.6, 35.5),
              t.HardwareLimit("Connections", 300.0, "backends", 2.0, None, 0.7, "1.0 active"),
              t.HardwareLimit("Memory", 23.5, "GiB", 0.48, 0.49, 2.0)]
    return t.TelemetrySummary(
        window_start=1001.0, window_end=1004.0, devices=[dev],
        roles=[t.RoleInfo("data", "/d", "vda"), t.RoleInfo("wal", "/d/pg_wal", "vda")],
        memory=t.MemorySummary(samples=3, mem_total_kb=24e6, cached_kb=t.Stat(503e3, 0, 514e3),
                               hugepages_used=t.Stat(0.0, 0.0, 0.0)),
        waits=t.WaitSummary(ticks=30, sample_hz=10.0, aas=1.0, connections_avg=2.0),
        checkpoints=t.CheckpointSummary(), hardware_limits=limits)


def test_io_cv_of_an_idle_device_says_too_little_activity() -> None:
    """An idle device's I/O variation is not shown as a figure: no "309.9%" (nor "n/a")
    where the analysis leaves the CV out below 10 IOPS."""
    s = telemetry_summary()
    assert s.devices[0].write_iops_cv is None  # analysis' own decision, mean 3 < 10
    text = telemetry_markdown(s, None, {})
    table = markdown_table(text, "| device | write IOPS mean |")
    row = dict(zip(table[0], table[2], strict=True))
    assert row["device"] == "vda (data+wal)"
    assert row["write IOPS CV"] == "too little activity (mean 3 IOPS < 10)"
    read = [1000.0, 1400.0, 1200.0]
    mean = sum(read) / 3
    cv = (sum((v - mean) ** 2 for v in read) / 3) ** 0.5 / mean
    assert row["read IOPS CV"] == f"{100 * cv:.1f}%"
    # The means stay right-aligned numbers; the CV column with the words is text.
    assert table[1] == ["---", "---:", "---:", "---:", "---", "---:"]
    busy = telemetry_markdown(telemetry_summary([100.0, 300.0]), None, {})
    table = markdown_table(busy, "| device | write IOPS mean |")
    assert dict(zip(table[0], table[2], strict=True))["write IOPS CV"] == "50.0%"  # σ/μ 100/200
    assert "n/a" not in text and "n/a" not in busy


def test_hardware_limits_memory_and_checkpoints_units() -> None:
    """The hardware limits table: a unit column, counts as integers, '–' for a missing value
    (no 'n/a s'), huge pages in pages under no MiB heading."""
    text = telemetry_markdown(telemetry_summary(), None, {})
    limits = markdown_table(text, "| resource |")
    assert limits[0][:6] == ["resource", "unit", "capacity", "used (avg)", "used (peak)",
                             "% of capacity"]
    rows = {r[0]: r[1:6] for r in limits[2:]}
    assert rows["Connections"] == ["backends", "300", "2", "–", "0.7%"]
    assert rows["CPU"] == ["cores", "2", "1.90", "2.00", "95.0%"]
    assert rows["Memory"][:2] == ["GiB", "23.5"]
    memory = markdown_table(text, "| item |")
    assert memory[0] == ["item", "unit", "avg", "peak"]
    units = {r[0]: r[1] for r in memory[2:]}
    assert units["huge pages in use"] == "pages" and units["page cache (Cached)"] == "MiB"
    checkpoints = {r[0]: r[1] for r in markdown_table(text, "| metric | value |")[2:]}
    assert checkpoints["shortest interval between checkpoints"] == "–"
    assert checkpoints["checkpoint write / sync time (views)"] == "– / –"
    for bad in ("n/a", ".0 backends", "(MiB)", "– s", "– ms"):
        assert bad not in text, bad


# ===== one short run against a real server ==============================================

def test_dsn_run_report_against_the_server(server, workdir: Path) -> None:  # noqa: ANN001
    """A --dsn run over TCP: the report's Connection row says TCP once, its settings are
    in the units PostgreSQL's SHOW picks, and its counts match the raw logs."""
    import psycopg

    from tests.conftest import make_shared_dir
    from tests.conftest import run_cli_here as run_cli
    from tests.recompute import recompute_iteration

    tcp = server.connection("tcp")
    results = make_shared_dir("pgdyno-results-")
    dsn = f"postgresql://{tcp.user}@127.0.0.1:{tcp.port}/{tcp.dbname}"
    proc = run_cli(["bench", "select-only", "--dsn", dsn, "--clients", "1", "--duration", "2",
                    "--warmup", "1", "--iterations", "1", "--scale", "1", "--no-telemetry",
                    "--no-progress", "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    run = next(results.glob("*/*/manifest.json")).parent
    manifest = json.loads((run / "manifest.json").read_text())
    md = (run / "report.md").read_text()
    connection = [r for r in markdown_table(md, "| Item |") if r[0] == "Connection"]
    assert connection == [["Connection", f"{tcp.user}@127.0.0.1:{tcp.port}/{tcp.dbname} (tcp)"]]
    assert "socket" not in connection[0][1]
    shown = {r[0]: r[1] for r in markdown_table(md, "| Setting |")[2:]}
    with psycopg.connect(tcp.conninfo(), autocommit=True) as db:
        units = dict(db.execute("SELECT name, unit FROM pg_settings WHERE unit IS NOT NULL"))
        for name in manifest["server"]["non_default_settings"]:
            if name in units:
                show = db.execute(f"SHOW {name}").fetchone()[0]  # names from pg_settings
                assert shown[name].replace(" ", "") == show, name
    summary = json.loads((run / "summary.json").read_text())
    it = summary["iterations"][0]
    raw = recompute_iteration(run, it, warmup_s=1, duration_s=2)
    overview = markdown_table(md, "| Clients | TPS |")
    assert overview[2][5] == f"{raw.transactions:,}"
    assert "plots/tps_histogram.png" in md and (run / "plots" / "tps_histogram.png").exists()
    assert not (run / "plots" / "scaling.png").exists()  # one client count: no curve
