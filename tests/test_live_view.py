"""The live view: its lines, read from a real run, against the run's own
per-second data recomputed from pgbench's raw logs; its rendering on a terminal, in a log
and under --no-progress.

Why the TPS must match exactly: the live view reads ``seconds.csv``, to which the log tail
writes a second only once every pgbench thread's log has passed it (a thread's lines come
in the order its transactions end), so the second it shows is whole. A second can arrive
in parts only when a thread falls STALE_SECONDS (30 s) behind, which a 7-second run cannot;
a row read half-written is held back until its line ends.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from rich.console import Console

from pgdyno.runner.iterations import LIVE_LOG_EVERY_S, LiveProgress, LiveSink, live_text
from pgdyno.runner.live import LIVE_LOG_ENV, LIVE_LOG_NAME, LiveFigures, LiveModel
from tests.conftest import run_cli_here as run_cli

WARMUP_S, DURATION_S = 1, 6
LINE = re.compile(r"^(?:(?P<elapsed>\d+) s: (?P<tps>[\d,]+) tps, )?"
                  r"(?:p99 (?P<p99>[\d.,]+) ms \((?P<span>\d) s\), )?"
                  r"CPU (?P<cpu>\d+)% busy(?:, wait (?P<wait>\S+) (?P<share>\d+)%)?$")
COST = re.compile(r"^# live view: (?P<cpu_s>[\d.]+) s of CPU in (?P<looks>\d+) looks$")


@pytest.fixture(scope="module")
def live_run(workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One short run with its live lines recorded and --no-progress: (iteration dir,
    stderr)."""
    results = tmp_path_factory.mktemp("live-results")
    out = run_cli(["bench", "tpcb", "--scale", "1", "--clients", "2", "--warmup",
                   str(WARMUP_S), "--duration", str(DURATION_S), "--iterations", "1",
                   "--no-progress", "--results-dir", str(results)], workdir,
                  env={LIVE_LOG_ENV: "1"})
    assert out.returncode == 0, out.stderr
    (it_dir,) = results.glob("*/*/raw/pgbench/c2-i1")
    return it_dir, out.stderr


def _exact_seconds(it_dir: Path) -> tuple[dict[int, list[int]], float]:
    """Latencies (µs) of the successful transactions, by the second they ended in, from
    pgbench's own logs; and the time origin."""
    run = it_dir.parents[2]
    plan = json.loads((run / "raw" / "run.json").read_text())
    (record,) = plan["records"]
    origin = record["origin_epoch"]
    by_second: dict[int, list[int]] = defaultdict(list)
    for name in record["log_files"]:
        with gzip.open(run / name, "rt") as fh:
            for fields in (line.split() for line in fh if line.strip()):
                if fields[2].isdigit():  # "failed" and "skipped" are not transactions done
                    end = int(fields[4]) + int(fields[5]) / 1e6
                    by_second[math.floor(end - origin)].append(int(fields[2]))
    return by_second, origin


def _nearest_rank_p99_ms(latencies_us: list[int]) -> float:
    ordered = sorted(latencies_us)
    return ordered[math.ceil(0.99 * len(ordered)) - 1] / 1000


def _lines(it_dir: Path) -> tuple[list[re.Match], re.Match]:
    text = (it_dir / LIVE_LOG_NAME).read_text().splitlines()
    *lines, cost = text
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), [line for line, m in zip(lines, parsed, strict=True) if m is None]
    found = COST.match(cost)
    assert found, cost
    return parsed, found


@pytest.mark.server
def test_live_tps_and_p99_are_the_runs_own_seconds(live_run: tuple[Path, str]) -> None:
    it_dir, _ = live_run
    lines, _ = _lines(it_dir)
    exact, _ = _exact_seconds(it_dir)
    with_tps = [m for m in lines if m["tps"]]
    assert len(with_tps) >= DURATION_S - 2, [m.string for m in lines]
    # The last look, once pgbench has ended, shows its last planned second.
    assert int(with_tps[-1]["elapsed"]) == WARMUP_S + DURATION_S, with_tps[-1].string
    for m in with_tps:
        second = int(m["elapsed"]) - 1  # labelled as pgbench -P: the second's end
        assert 0 <= second < WARMUP_S + DURATION_S, m.string
        assert int(m["tps"].replace(",", "")) == len(exact[second]), (m.string, second)
        if not m["p99"]:
            continue
        # Over the newest seconds with a histogram: those up to the second shown, or up to
        # the one before when its histogram line was not written yet (the same flush
        # writes seconds.csv first).
        span, shown = int(m["span"]), float(m["p99"].replace(",", ""))
        rounding = 0.005 if "." in m["p99"] else 0.5
        candidates = []
        for last in (second, second - 1):
            window = [lat for s in range(last - span + 1, last + 1) for lat in exact.get(s, [])]
            if window:
                candidates.append(_nearest_rank_p99_ms(window))
        # A histogram bucket's top: never below the exact value, above by < 1/1024.
        assert any(p - rounding - 0.001 <= shown <= p * (1 + 1 / 1024) + rounding + 0.001
                   for p in candidates), (m.string, candidates)


@pytest.mark.server
def test_live_cpu_and_waits_are_the_telemetrys(live_run: tuple[Path, str]) -> None:
    it_dir, _ = live_run
    lines, _ = _lines(it_dir)
    with (it_dir / "telemetry" / "cpu.csv").open() as fh:
        busy = {round(float(row["busy"])) for row in csv.DictReader(fh)}
    classes = {"CPU"}
    for line in (it_dir / "telemetry" / "waits.jsonl").read_text().splitlines():
        for _backend, state, wtype, _event, _count in json.loads(line)["rows"]:
            if state == "active" and wtype:
                classes.add(wtype)
    assert {int(m["cpu"]) for m in lines} <= busy
    waits = {m["wait"] for m in lines if m["wait"]}
    assert waits and waits <= classes
    assert all(0 < int(m["share"]) <= 100 for m in lines if m["share"])


@pytest.mark.server
def test_the_live_view_costs_little_and_no_progress_silences_it(
        live_run: tuple[Path, str]) -> None:
    """Its thread's CPU time is recorded in live.log: a loose bound, 2% of a core (it
    measures about 0.1%; bench/live_view_cost.py measures the whole process)."""
    it_dir, stderr = live_run
    _, cost = _lines(it_dir)
    looks = int(cost["looks"])
    assert looks >= DURATION_S
    assert float(cost["cpu_s"]) <= 0.02 * looks, cost.string
    assert not any(LINE.match(line) for line in stderr.splitlines()), stderr


# ----- rendering, without a server ---------------------------------------------------------

FIGURES = LiveFigures(elapsed_s=12, tps=1234.4, p99_ms=3.214, p99_seconds=5,
                      cpu_busy_pct=87.2, wait_class="LWLock", wait_share_pct=61.5)


def test_live_text() -> None:
    assert live_text(FIGURES) == \
        "12 s: 1,234 tps, p99 3.21 ms (5 s), CPU 87% busy, wait LWLock 62%"
    assert live_text(LiveFigures(None, None, None, 0, 50.0, None, None)) == "CPU 50% busy"
    assert LINE.match(live_text(FIGURES))


def _sink(terminal: bool, shown: bool = True) -> tuple[LiveSink, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=40)  # narrower than a line
    return LiveSink(LiveProgress(console=console), "2 clients, iteration 1", shown=shown,
                    log_path=None), out


def test_on_a_terminal_the_line_is_redrawn_under_the_bars() -> None:
    sink, out = _sink(terminal=True)
    sink.show(FIGURES)
    assert sink.progress.live_line == live_text(FIGURES)
    assert out.getvalue() == ""


def test_in_a_log_a_line_every_ten_seconds() -> None:
    """As pgbench -P 10 writes to a log: the clock is moved, not waited for."""
    sink, out = _sink(terminal=False)
    sink.show(FIGURES)
    assert out.getvalue() == ""  # the first 10 s
    sink.printed_at -= LIVE_LOG_EVERY_S
    sink.show(FIGURES)
    sink.show(FIGURES)
    assert out.getvalue().splitlines() == [f"2 clients, iteration 1, {live_text(FIGURES)}"]
    assert sink.progress.live_line == ""


def test_no_progress_shows_nothing(tmp_path: Path) -> None:
    sink, out = _sink(terminal=True, shown=False)
    sink.log_path = tmp_path / LIVE_LOG_NAME
    sink.show(FIGURES)
    sink.show(FIGURES)  # the same figures: one line
    assert out.getvalue() == "" and sink.progress.live_line == ""
    assert sink.log_path.read_text() == live_text(FIGURES) + "\n"


def test_the_model_holds_back_a_line_being_written(tmp_path: Path) -> None:
    """A row read half-written waits for its end; parts of one second add up."""
    from pgdyno.analysis.per_second import SecondsWriter

    SecondsWriter(tmp_path, 0.0).close()  # the header, as the log tail writes it
    model = LiveModel(tmp_path, last_second=9)
    seconds = tmp_path / "seconds.csv"
    header = seconds.read_text().strip().split(",")

    def row(second: int, ok: int) -> str:
        values = {c: "0" for c in header} | {"second": str(second), "ok": str(ok)}
        return ",".join(values[c] for c in header) + "\n"

    with seconds.open("a") as fh:
        fh.write(row(3, 100) + row(4, 50)[:5])
    assert model.update().tps == 100 and model.update().elapsed_s == 4
    with seconds.open("a") as fh:
        fh.write(row(4, 50)[5:] + row(4, 7) + row(10, 1))  # 10: past the last second
    fig = model.update()
    assert (fig.elapsed_s, fig.tps, fig.p99_ms, fig.cpu_busy_pct) == (5, 57, None, None)
    model.close()
