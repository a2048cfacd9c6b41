"""The run report's first screen, its contents and folds, and the one server it describes.

One real run (two client counts, two iterations each, a dataset built in a workdir of its
own, so that the load's wal_level-minimal restarts happen) is kept running (``--keep``)
and read three ways: in headless Chromium (the answer and its chart on the first 900 px,
a screenshot of that screen left in the test artefacts, a table of contents, telemetry
folded), against figures the test computes from the run's iterations, and against the
server itself (its postmaster.pid and pg_settings): the port and settings the report shows
are those of the server the measured window ran on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import statistics
import struct
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import psycopg
import pytest

from tests.answer import markdown_table, sections
from tests.chromium import ARTEFACTS, WINDOW, assert_fits, screenshot
from tests.conftest import make_shared_dir, run_cli_here

pytestmark = pytest.mark.server

RUN = ["bench", "tpcb", "--scale", "1", "--clients", "1,2", "--iterations", "2",
       "--duration", "2", "--warmup", "0", "--keep"]
T_975_DF1 = 12.706204736174705
"""Student's t, 97.5th percentile, one degree of freedom (two iterations): from a table."""


@pytest.fixture(scope="module")
def kept_run() -> Iterator[tuple[Path, Path, str]]:
    """(the run directory, its workdir, what it printed on stderr), its server still up
    until the module's tests are done."""
    results, workdir = make_shared_dir("pgdyno-first-"), make_shared_dir("pgdyno-first-work-")
    proc = run_cli_here([*RUN, "--results-dir", str(results)], workdir)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run,) = results.glob("*/tpcb-*")
        yield run, workdir, proc.stderr
    finally:
        _stop(workdir)


def _pid_file(workdir: Path) -> Path:
    return workdir / "instances" / "pg18-embedded" / "data" / "postmaster.pid"


def _stop(workdir: Path) -> None:
    """The kept server, stopped by a fast shutdown (SIGINT to the postmaster)."""
    pid_file = _pid_file(workdir)
    with contextlib.suppress(OSError, ValueError, IndexError):
        os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGINT)
    deadline = time.monotonic() + 30
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk
    return width, height


def test_the_answer_and_its_chart_are_on_the_first_screen(kept_run) -> None:
    run, _, _ = kept_run
    page_path = run / "report.html"
    shot = screenshot(page_path, ARTEFACTS / "run-report-first-screen.png")
    assert _png_size(shot) == WINDOW
    page = assert_fits(page_path)  # every fold opened: what they hold fits too
    screen = WINDOW[1]
    answer = [t for t in page.tables if t.label.startswith("What this run measured")]
    by_clients = [t for t in page.tables if t.label.startswith("TPS by clients")]
    assert len(answer) == len(by_clients) == 1, [t.label for t in page.tables]
    figures, statements = by_clients[0], answer[0]
    assert figures.height_px > 0 and figures.top_px + figures.height_px <= screen, figures
    # The statements follow on the same screen, at least their header and the peak's line
    # (how many there are below depends on the run: rising, past the peak, load phases).
    assert statements.height_px > 0 and statements.top_px + 60 <= screen, statements
    charts = dict(page.image_tops_px)
    sizes = {alt: (w, h) for alt, w, h in page.image_sizes_px}
    (chart,) = [alt for alt in charts if alt.startswith("TPS and p99 latency against clients")]
    assert charts[chart] + sizes[chart][1] <= screen, (chart, charts[chart], sizes[chart])
    # Beside it: the chart starts level with the table.
    assert abs(charts[chart] - figures.top_px) < 60
    assert figures.top_px < statements.top_px  # the figures first, then the words


def test_the_headline_by_clients_is_each_count_mean_and_interval(kept_run) -> None:
    """The table beside the chart, against the mean and t interval the test computes from
    the iterations' TPS in summary.json."""
    run, _, _ = kept_run
    summary = json.loads((run / "summary.json").read_text())
    tps: dict[int, list[float]] = {}
    for it in summary["iterations"]:
        tps.setdefault(it["clients"], []).append(it["metrics"]["tps"])
    md = (run / "report.md").read_text()
    rows = markdown_table(md.split("## Answer", 1)[1], "| Clients | TPS (tx/s) |")[2:]
    assert [r[0] for r in rows] == ["1 client", "2 clients"]
    for row, clients in zip(rows, sorted(tps), strict=True):
        values = tps[clients]
        assert len(values) == 2 and row[3] == "2"
        mean = statistics.fmean(values)
        half = T_975_DF1 * statistics.stdev(values) / math.sqrt(2)
        # Each figure to the precision it is shown with (1,283 for 1,283.25; 12.4 for 12.43).
        ends = re.split(r" – ", row[2])
        assert _number(row[1]) == pytest.approx(mean, abs=_half_unit(row[1]))
        assert [_number(x) for x in ends] == pytest.approx(
            [mean - half, mean + half], abs=max(_half_unit(x) for x in ends))


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _half_unit(text: str) -> float:
    """Half a unit of a shown figure's last digit: how far rounding may have moved it."""
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10 ** -decimals + 1e-9


class _Folds(HTMLParser):
    """The headings inside <details> and those outside, and the contents' links."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.heading: str | None = None
        self.folded: list[str] = []
        self.open: list[str] = []
        self.in_nav = False
        self.contents: list[str] = []
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.depth += 1
        elif tag == "nav":
            self.in_nav = True
        elif re.fullmatch(r"h[2-4]", tag) or (tag == "a" and self.in_nav):
            self.heading, self._text = tag, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.depth -= 1
        elif tag == "nav":
            self.in_nav = False
        elif tag == self.heading:
            if tag == "a":
                self.contents.append(self._text)
            elif not self.in_nav:
                (self.folded if self.depth else self.open).append(self._text)
            self.heading = None

    def handle_data(self, data: str) -> None:
        if self.heading:
            self._text += data


def test_contents_lead_to_every_section_and_telemetry_folds(kept_run) -> None:
    run, _, _ = kept_run
    md = (run / "report.md").read_text()
    parsed = _Folds()
    parsed.feed((run / "report.html").read_text().replace("<wbr>", ""))
    assert parsed.contents == sections(md)  # every top-level section, in order
    telemetry = [s for s in sections(md) if s.startswith("Telemetry: ")]
    assert len(telemetry) == 2  # one per client count
    # Folded: each telemetry section and every subsection under it, nothing else.
    assert all(_subsections(md, s) for s in telemetry)
    assert parsed.folded == [t for s in telemetry for t in [s, *_subsections(md, s)]]
    assert not set(telemetry) & set(parsed.open)
    assert "Answer" in parsed.open and "Bottleneck verdicts" in parsed.open


def _subsections(md: str, title: str) -> list[str]:
    part = md.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [line.lstrip("#").strip() for line in part.splitlines()
            if re.match(r"#{3,4} ", line)]


def test_the_report_describes_the_server_the_window_ran_on(kept_run) -> None:
    """The load restarted the server twice (wal_level minimal and back, each on a new
    port); the report's Connection row, its settings table and the manifest name the port
    of the server still running the window's config, and every setting it shows is that
    server's, as pg_settings says."""
    run, workdir, _ = kept_run
    pid_lines = _pid_file(workdir).read_text().splitlines()
    port, socket_dir = int(pid_lines[3]), pid_lines[4]
    manifest = json.loads((run / "manifest.json").read_text())
    plan = json.loads((run / "raw" / "run.json").read_text())
    window_ports = {int(r["command"][r["command"].index("-p") + 1]) for r in plan["records"]}
    assert window_ports == {port}
    init = next(c for c in manifest["commands"] if " -i " in c)
    assert int(re.search(r" -p (\d+)", init).group(1)) != port  # the load ran on another
    md = (run / "report.md").read_text()
    env = {r[0]: r[1] for r in markdown_table(
        md.split("## Environment and configuration", 1)[1], "| Item | Value |")[2:]}
    assert f".s.PGSQL.{port}/" in env["Connection"]
    shown = {r[0]: r[2] for r in markdown_table(
        md.split("## Environment and configuration", 1)[1], "| Setting | Stock | Value |")[2:]}
    assert shown["port"] == str(port)
    with psycopg.connect(host=socket_dir, port=port, user="pgdyno", dbname="pgdyno") as db:
        live = {name: f"{setting}{' ' + unit if unit else ''}" for name, setting, unit in
                db.execute("SELECT name, setting, coalesce(unit, '') FROM pg_settings "
                           "WHERE source NOT IN ('default', 'override')").fetchall()}
    assert manifest["server"]["non_default_settings"] == live
    assert set(shown) == set(live)
    # Not the load's: wal_level minimal (shown when not the default) and its WAL writer.
    assert live.get("wal_level") != "minimal" and live.get("wal_writer_delay") != "10 ms"


def test_the_dataset_load_is_announced_in_a_log(kept_run) -> None:
    """stderr was not a terminal: the load said what it would do before it began, and
    how long it took when it ended (no shorter than the load record's own seconds, which
    leave out the server's restarts)."""
    run, _, stderr = kept_run
    lines = stderr.splitlines()
    assert "dataset: tpcb scale 1 (loaded unless one of that size is there to reuse)" in lines
    done = [float(m.group(1)) for line in lines
            if (m := re.fullmatch(r"dataset: tpcb scale 1, done in ([\d.,]+) s", line))]
    record = json.loads((run / "manifest.json").read_text())["dataset"]["load_record"]
    assert len(done) == 1 and done[0] >= record["seconds"] - 0.05, (done, record["seconds"])
