"""TelemetryRecorder against the real embedded server, the analysis recomputed from its raw
files, the JSON round trips of the summary and the verdict, and the report sections."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from pgdyno.analysis import procfs
from pgdyno.analysis.hosttick import CLK_TCK, HostTick
from pgdyno.analysis.telemetry import TelemetrySummary, analyse_telemetry
from pgdyno.analysis.verdict import Verdict, decide_bottleneck
from pgdyno.reports.markdown import render_sections
from pgdyno.reports.telemetry_sections import telemetry_plots, telemetry_sections
from pgdyno.results.rawfiles import read_csv, read_jsonl
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder, catalog
from pgdyno.workloads import registry
from pgdyno.workloads.engine.pgbench import WindowSnapshots


def telemetry_markdown(s: TelemetrySummary, verdict: Verdict | None,
                       plots: dict[str, str]) -> str:
    """The telemetry sections of one iteration as the run report's Markdown shows them."""
    return render_sections(telemetry_sections(s, verdict, plots))


@pytest.fixture(scope="module")
def recorded(server, workdir: Path) -> tuple[Path, float, float]:  # noqa: ANN001
    """A 4 s write run (small tpcb-like) with telemetry on; (raw_dir, start, end)."""
    conn = server.connection()
    pgbench = server.install.program("pgbench")
    subprocess.run([pgbench, *conn.client_args(), "-i", "-q", "-s", "1", conn.dbname],
                   env=conn.client_env(), check=True, capture_output=True)
    raw = workdir / "raw-recorder"
    rec = TelemetryRecorder(raw, conn, server.data_dir, server.effective_wal_dir,
                            server.log_path, server.log_size(), TelemetryConfig())
    rec.start()
    rec.mark("measure_start")
    # TPROC-C's NOPM snapshots, as an iteration takes them (their figures fail here, with
    # no TPROC-C tables, and are skipped: the session is what this test is about).
    window = WindowSnapshots(registry.get("tprocc"), conn, 0.5, 3.0, raw / "window.json",
                             count_as_ours=rec.count_as_ours)
    window.start()
    t0 = time.time()
    subprocess.run([pgbench, *conn.client_args(), "-c", "2", "-T", "4", "-n", conn.dbname],
                   env=conn.client_env(), check=True, capture_output=True)
    with server_conn(conn) as pg:
        pg.execute("CHECKPOINT")  # a checkpoint inside the run, for the log parser
        # The oracle of which backends are pgdyno's: the server's own list of the
        # sessions named as pgdyno's telemetry and its snapshots name them.
        seen = [row[0] for row in pg.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            [catalog.APPLICATION_NAME])]
        snapshots = [row[0] for row in pg.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdyno-snapshot'")]
    (raw / "sampler_sessions.json").write_text(json.dumps(seen))
    (raw / "snapshot_sessions.json").write_text(json.dumps(snapshots))
    time.sleep(1.2)  # a host tick after the query, so the last session is ticked too
    window.finish()
    t1 = time.time()
    rec.mark("measure_end")
    rec.stop()
    rec.stop()  # idempotent
    return raw, t0, t1


def server_conn(conn: ConnectionInfo):  # noqa: ANN201
    import psycopg

    return psycopg.connect(conn.conninfo(), autocommit=True)


def test_raw_files_are_written(recorded: tuple[Path, float, float]) -> None:
    raw, t0, t1 = recorded
    tdir = raw / "telemetry"
    for name in ("meta.json", "marks.csv", "host_raw.jsonl", "cpu.csv", "disk.csv",
                 "memory.csv", "waits.jsonl", "pg_stats.jsonl", "checkpoints.csv",
                 "checkpoint_log.txt", "smart.json", "errors.jsonl"):
        assert (tdir / name).exists(), name
    meta = json.loads((tdir / "meta.json").read_text())
    assert meta["schema_version"] == 1 and meta["server"]["version_num"] >= 150000
    assert meta["stopped_at"] >= t1
    assert [r["label"] for r in read_csv(tdir / "marks.csv")] == ["measure_start", "measure_end"]
    waits = list(read_jsonl(tdir / "waits.jsonl"))
    # ~10 Hz for ~4.5 s; generous lower bound for a loaded 2-core VM.
    assert len(waits) >= 20
    assert (tdir / "errors.jsonl").read_text() == ""
    ckpt = read_csv(tdir / "checkpoints.csv")
    assert any(r["event"] == "start" and "immediate" in r["reason"] for r in ckpt)


def test_samplers_backends_are_told_from_the_servers(recorded) -> None:  # noqa: ANN001
    """The server backends of pgdyno's own sessions are named in every host tick, as the
    server lists them, and their CPU is counted as pgdyno's, not the server's."""
    raw, t0, t1 = recorded
    seen = set(json.loads((raw / "sampler_sessions.json").read_text()))
    rows = list(read_jsonl(raw / "telemetry" / "host_raw.jsonl"))
    named = {pid for row in rows for pid in row["sampler_backends"]}
    assert len(seen) >= 3  # waits, statistics, debt
    assert {str(pid) for pid in seen} <= named
    # TPROC-C's NOPM snapshot session is pgdyno's measuring too, not the load.
    (snapshot,) = json.loads((raw / "snapshot_sessions.json").read_text())
    assert str(snapshot) in named
    ticks: list[HostTick] = []
    for tick in map(HostTick.from_raw, rows):  # as the summary keeps them: whole intervals
        if not ticks or tick.mono - ticks[-1].mono >= 0.5:
            ticks.append(tick)
    for tick in ticks:  # server processes, never the driver's
        assert set(tick.sampler_backends) <= set(tick.workload_ticks).difference(
            tick.driver_pids)
    own = server = 0
    for a, b in zip(ticks, ticks[1:], strict=False):
        for pid, used in b.workload_ticks.items():
            if pid in a.workload_ticks and pid not in b.driver_pids:
                spent = max(0, used - a.workload_ticks[pid])
                if pid in b.sampler_backends:
                    own += spent
                else:
                    server += spent
    wall = ticks[-1].mono - ticks[0].mono
    c = analyse_telemetry(raw, None).contamination
    assert c.sampler_server_cores == pytest.approx(own / CLK_TCK / wall)
    assert c.server_cores == pytest.approx(server / CLK_TCK / wall)
    assert c.server_cores > c.sampler_server_cores
    assert c.harness_share_of_busy_pct == pytest.approx(
        100 * (c.sampler_cores + c.sampler_server_cores) / c.busy_cores)


def test_cpu_and_disk_csv_recompute_from_raw_snapshots(recorded) -> None:  # noqa: ANN001
    raw, _, _ = recorded
    tdir = raw / "telemetry"
    ticks = list(read_jsonl(tdir / "host_raw.jsonl"))
    cpu_rows = read_csv(tdir / "cpu.csv")
    assert len(cpu_rows) >= 3
    by_t = {round(float(r["t"]), 3): r for r in cpu_rows}
    checked = 0
    for prev, cur in zip(ticks, ticks[1:], strict=False):
        row = by_t.get(round(cur["t"], 3))
        if row is None:
            continue
        pct = procfs.cpu_percent(procfs.parse_proc_stat(prev["stat"]).cpu,
                                 procfs.parse_proc_stat(cur["stat"]).cpu)
        assert pct is not None
        assert float(row["usr"]) == pytest.approx(pct.usr, rel=1e-4, abs=1e-4)
        assert float(row["idle"]) == pytest.approx(pct.idle, rel=1e-4, abs=1e-4)
        disk_rows = [r for r in read_csv(tdir / "disk.csv")
                     if round(float(r["t"]), 3) == round(cur["t"], 3)]
        d0, d1 = procfs.parse_diskstats(prev["diskstats"]), procfs.parse_diskstats(cur["diskstats"])
        for r in disk_rows:
            rates = procfs.disk_rates(d0[r["device"]], d1[r["device"]], cur["mono"] - prev["mono"])
            assert rates is not None
            assert float(r["w_s"]) == pytest.approx(rates.w_s, rel=1e-4, abs=1e-4)
        checked += 1
    assert checked >= 3


def test_summary_over_the_window(recorded) -> None:  # noqa: ANN001
    raw, t0, t1 = recorded
    s = analyse_telemetry(raw, (t0, t1))
    assert s.cpu.samples >= 3 and s.cpu.busy.avg is not None and 0 <= s.cpu.busy.avg <= 100
    # pgbench and the server are descendants of the test process: their CPU is seen.
    assert s.cpu.workload_cores.avg and s.cpu.workload_cores.avg > 0
    assert {r.role for r in s.roles} == {"data", "wal"}
    data = s.role_device("data")
    assert data is not None and "data" in data.roles and data.w_s.avg and data.w_s.avg > 0
    assert s.waits.ticks >= 20 and s.waits.aas > 0
    assert abs(sum(r.pct for r in s.waits.by_class) - 100.0) < 1e-6
    assert s.database.commits_per_s and s.database.commits_per_s > 0
    assert s.wal.bytes_per_s and s.wal.bytes_per_s > 0 and s.wal.records
    assert s.checkpoints.started >= 1 and s.checkpoints.requested >= 1
    assert s.hardware_limits and s.hardware_limits[0].resource == "CPU"
    assert s.smart and all(not c.available for c in s.smart if c.device.startswith("vd"))
    # Windows select the samples: an empty window has none.
    empty = analyse_telemetry(raw, (t0 - 1000, t0 - 900))
    assert empty.waits.ticks == 0 and empty.cpu.samples == 0


def _every_field_set(obj, path: str = "") -> list[str]:  # noqa: ANN001
    """Paths of dataclass fields that are None/empty: the round trip must cover real values."""
    missing = []
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            missing += _every_field_set(getattr(obj, f.name), f"{path}.{f.name}")
    elif obj is None or (isinstance(obj, (list, dict)) and not obj):
        missing.append(path)
    return missing


def test_summary_and_verdict_json_round_trip(recorded) -> None:  # noqa: ANN001
    raw, t0, t1 = recorded
    s = analyse_telemetry(raw, (t0, t1))
    back = TelemetrySummary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    v = decide_bottleneck(s, clients=2, cpu_count=2)
    vback = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    assert vback == v and len(v.ranked) == 7 and v.evidence and v.next_step


def test_round_trip_covers_every_field() -> None:
    """A summary with every field filled survives the JSON round trip unchanged."""
    from pgdyno.analysis import telemetry as t

    stat = t.Stat(1.0, 2.0, 3.0, 0.5)
    s = t.TelemetrySummary(
        window_start=1.0, window_end=2.0, duration_s=1.0, server_version_num=180006,
        settings={"block_size": "8192"},
        cpu=t.CpuSummary(samples=3, online_cpus=2, limit_cores=1.5, effective_cores=1.5,
                         usr=stat, nice=stat, sys=stat, iowait=stat, irq=stat, soft=stat,
                         steal=stat, idle=stat, busy=stat, busy_of_limit_pct=90.0,
                         workload_cores=stat, workload_share_of_busy_pct=50.0, run_queue=stat,
                         procs_blocked=stat),
        devices=[t.DeviceSummary("vda", ["data"], 3, stat, stat, stat, stat, stat, stat, stat,
                                 stat, 0.1, 0.2, 1.0, 2.0, 5.0, 6.0)],
        roles=[t.RoleInfo("data", "/d", "vda", ["vda"], ["vda"], "/", "ext4", "none")],
        memory=t.MemorySummary(3, 100.0, stat, stat, stat, stat, stat),
        waits=t.WaitSummary(10, 10.0, 1.0, 2.0, 0.5, 0.1, [t.WaitShare("CPU", "", 1.0, 100.0)],
                            [t.WaitShare("CPU", "CPU", 1.0, 100.0)],
                            [t.WaitShare("IO", "DataFileRead", 0.1, 100.0)]),
        checkpoints=t.CheckpointSummary(1, 0, 1, 1, 1, 0.5, 0.1, 2.0, 0.0, 1.0, 500.0, 100.0,
                                        10.0, 5.0, 3.0, 0.0, 7.0,
                                        [t.CheckpointEvent(1.0, 1.5, "wal", 10, 0.4, 0.1, 0.5,
                                                           16384)]),
        wal=t.WalSummary(1.0, 2.0, 3.0, 4.0, 0.5, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0),
        database=t.DatabaseSummary(1.0, 2.0, 3.0, 99.0, 5.0, 0.0, 1.5, 8.0, 9.0),
        io=[t.IoRow("client backend", "relation", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)],
        hardware_limits=[t.HardwareLimit("CPU", 2.0, "cores", 1.0, 2.0, 50.0, "n")],
        smart=[t.SmartChange("nvme0n1", True, "nvme smart-log", 35.0, 37.0, 1e9, 2e9, 12.0,
                             12.0, 0, 0, 0)],
        series=t.Series([1.0], [1.0], [2.0], [3.0], [4.0], [5.0], {"vda": [6.0]},
                        {"vda": [7.0]}, [1.5], {"CPU": [1.0]}),
        marks=[t.Mark(1.0, "measure_start")], errors={"waits": 1}, notes=["n"],
    )
    s.gaps = [t.TelemetryGap("host", 1.0, 2.0, "ssh connection lost")]  # --ssh
    from pgdyno.analysis.telemetry.model import CpuPerUnit

    c = s.contamination  # whose CPU: the server's tree and the load driver apart
    c.server_cores, c.driver_cores, c.driver_programs = 1.2, 0.1, ["pgbench"]
    c.sampler_server_cores, c.harness_share_of_busy_pct = 0.002, 0.4  # pgdyno's sessions
    c.per_unit = CpuPerUnit("New-Order", 10.0, 0.12, 0.01, 8.3)
    s.client_cpu = s.cpu
    from pgdyno.analysis import archive as a

    s.archive = a.ArchiveSummary(  # --archive
        method="direct", segment_bytes=16 * 2**20, archived=3, failed=1, archived_mb_s=1.5,
        wal_written_mb_s=2.0, last_archived_wal="000000010000000000000003",
        last_failed_wal="000000010000000000000004", lag_start=0, lag_end=1, lag_max=2,
        ready_end=1, commands=a.CommandStats(3, {"ok": 3}, 30.0, 40.0, 50.0, 35.0),
        cache_mib={"wal": 16.0}, cache_sample_ms=120.0, fell_behind=True, failing=True,
        evidence=["e"], lag_t=[1.0], lag_segments=[1],
        memory=a.MemorySeries([1.0], {"Cached": [10.0]}, {"wal": [16.0]}))
    from pgdyno.analysis import merge as m

    s.drivers = [m.DriverFigures(  # --drivers
        "d1", 2, "ok", 100, 50.0, 3.5, 1, 2,
        m.DriverLoad("d1", 0.5, 1.0, 50.0, 60.0, 1.5, 0.2, 12.0))]
    assert _every_field_set(s) == []
    assert TelemetrySummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_report_sections_and_plots(recorded, tmp_path: Path) -> None:  # noqa: ANN001
    raw, t0, t1 = recorded
    s = analyse_telemetry(raw, (t0, t1))
    v = decide_bottleneck(s, clients=2, cpu_count=2)
    tps = [(t0 + i + 0.5, 1000.0) for i in range(4)]
    paths = telemetry_plots(s, tmp_path / "plots", tps)
    assert set(paths) == {"write_iops_vs_tps", "top_activity", "cpu"}
    assert all(p.stat().st_size > 5000 and p.read_bytes()[:4] == b"\x89PNG"
               for p in paths.values())
    text = telemetry_markdown(s, v, {k: f"plots/{p.name}" for k, p in paths.items()})
    for heading in ("## Bottleneck verdict", "## CPU breakdown",
                    "## Disk I/O per device and role", "## Wait events",
                    "## Checkpoints and WAL", "## Hardware limits", "## Drive health"):
        assert heading in text, heading
    assert "write IOPS CV" in text and "plots/top_activity.png" in text
    assert "not available" in text  # the VM's virtio disk has no SMART


def test_recorder_survives_an_unreachable_server(tmp_path: Path) -> None:
    """A sampler that cannot connect records errors; start/stop never raise."""
    bad = ConnectionInfo(host="127.0.0.1", port=1, user="nobody", dbname="none")
    rec = TelemetryRecorder(tmp_path, bad, None, None, Path("/nonexistent.log"), 0,
                            TelemetryConfig(interval_s=0.2, wait_sample_hz=5, smart=True))
    rec.start()
    time.sleep(1.0)
    rec.mark("x")
    rec.stop()
    tdir = tmp_path / "telemetry"
    errors = list(read_jsonl(tdir / "errors.jsonl"))
    assert {e["sampler"] for e in errors} >= {"waits", "stats"}
    assert len(list(read_jsonl(tdir / "host_raw.jsonl"))) >= 3  # host sampling went on
    s = analyse_telemetry(tmp_path, None)
    assert s.errors and any("sampler errors" in n for n in s.notes)


def test_disabled_recorder_writes_nothing(tmp_path: Path) -> None:
    bad = ConnectionInfo(host="127.0.0.1", port=1, user="nobody", dbname="none")
    rec = TelemetryRecorder(tmp_path, bad, None, None, None, 0, TelemetryConfig(enabled=False))
    rec.start()
    rec.mark("x")
    rec.stop()
    assert not (tmp_path / "telemetry").exists()


BINARY = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _in_window(rows: list[dict], t0: float, t1: float) -> list[dict]:
    """The samples of the window, half an interval of slack at each edge, a sample less
    than half an interval after the one kept before it dropped (a partial interval)."""
    kept: list[dict] = []
    for r in rows:
        if t0 - 0.5 <= float(r["t"]) <= t1 + 0.5 and (
                not kept or float(r["mono"]) - float(kept[-1]["mono"]) >= 0.5):
            kept.append(r)
    return kept


def _prefix(n_bytes: float) -> str:
    """The binary prefix a value reads in: the largest whose value is at least 1."""
    return next(u for u, f in reversed(BINARY.items()) if n_bytes >= f or u == "B")


def test_report_rates_are_binary_and_recomputed_from_raw(recorded) -> None:  # noqa: ANN001
    """The WAL rate and the data device's write rate in the run report equal the raw
    samples' counters recomputed here, labelled with the binary prefix they read in."""
    from tests.answer import markdown_table

    raw, t0, t1 = recorded
    tdir = raw / "telemetry"
    s = analyse_telemetry(raw, (t0, t1))
    text = telemetry_markdown(s, None, {})
    # WAL: pg_stat_wal.wal_bytes over the window's first and last snapshots (every snapshot
    # within half an interval of the window; unlike host ticks, none is dropped as partial:
    # counters over a short last interval are still exact).
    snaps = [r for r in read_jsonl(tdir / "pg_stats.jsonl") if t0 - 0.5 <= float(r["t"])
             <= t1 + 0.5]
    wal = ((snaps[-1]["wal"]["wal_bytes"] - snaps[0]["wal"]["wal_bytes"])
           / (snaps[-1]["mono"] - snaps[0]["mono"]))
    rows = {r[0]: r[1] for r in markdown_table(text, "| metric | value |")[2:]}
    number, unit = rows["WAL written per second"].split()
    assert unit == f"{_prefix(wal)}/s", (rows["WAL written per second"], wal)
    assert float(number.replace(",", "")) == pytest.approx(wal / BINARY[unit[:-2]], rel=0.006)
    # The data device: sectors written (diskstats field 10) over the window's ticks, MiB/s.
    device = s.role_device("data").device
    ticks = _in_window(list(read_jsonl(tdir / "host_raw.jsonl")), t0, t1)

    def sectors(tick: dict) -> int:
        line = next(x for x in tick["diskstats"].splitlines() if x.split()[2] == device)
        return int(line.split()[9])

    written = (sectors(ticks[-1]) - sectors(ticks[0])) * 512 / (ticks[-1]["mono"]
                                                                 - ticks[0]["mono"])
    disk = markdown_table(text, "| device | role |")
    header = next(h for h in disk[0] if h.startswith("write ") and h.endswith("/s"))
    unit = header.split()[1][:-2]
    assert unit in BINARY, header
    cells = {r[0]: r[disk[0].index(header)] for r in disk[2:]}
    avg = float(cells[device].split(" (")[0].replace(",", ""))
    assert avg == pytest.approx(written / BINARY[unit], rel=0.006, abs=0.006)
    # One prefix for the column, the one its largest figure (avg or peak) reads in.
    shown = [float(x.replace(",", "")) * BINARY[unit] for c in cells.values() if c != "–"
             for x in c.replace("(", "").replace(")", "").split()]
    assert unit == _prefix(max(shown)), (header, shown)
    assert "MB" not in text and "GB" not in text and "Units: byte sizes" in text


def test_wait_event_tables_say_what_each_wait_means(recorded) -> None:  # noqa: ANN001
    from tests.answer import markdown_table

    raw, t0, t1 = recorded
    text = telemetry_markdown(analyse_telemetry(raw, (t0, t1)), None, {})
    events = markdown_table(text, "| wait class | event |")
    assert events[0][-1] == "meaning"
    assert len(events) > 2 and all(row[-1] for row in events[2:])
    classes = markdown_table(text, "| wait class | AAS |")
    assert classes[0][-1] == "meaning" and all(row[-1] for row in classes[2:])
    # A pgbench write run commits: its sessions wait on the WAL flush or run on CPU.
    assert {r[0] for r in events[2:]} & {"IO", "CPU", "LWLock", "Client"}
