"""The live view of a running iteration: once a second, the last seconds at one glance.

What it shows comes from files the run already writes while it runs; it adds no sampler
of its own (no query, no /proc read):

- TPS of the newest finished second and p99 latency over the last ``P99_WINDOW_S``
  seconds: ``seconds.csv`` and ``latency.hlog``, which the engine's log tail
  (``workloads.engine.txtail``) appends as seconds finish (pgbench workloads only);
- CPU busy % of the host: the newest row of the telemetry's ``cpu.csv``;
- the leading wait class of the active sessions over the last ``WAIT_WINDOW_S`` seconds
  (``CPU`` for an active session that waits on nothing): ``waits.jsonl``;
- with ``--drivers``, where no per-second file grows here until the iteration ends: TPS
  summed over the drivers for the newest second every driver reported, and the highest of
  the drivers' mean latencies of that second (pgbench's ``-P 1`` gives a mean, not a
  percentile: the worst-served driver's mean, labelled so), from
  ``drivers_progress.jsonl``, which the drivers' connections feed as the seconds end.

A thread follows the four files, reading only what each grew by since its last look, once
a second, at the low priority of the log tail: a few hundred bytes of CSV and JSON a second
and the merge of five histograms. ``LiveWatch`` hands each second's ``LiveFigures`` to its
caller, which renders them (``runner.iterations``).

Seconds are labelled as pgbench's ``-P 1`` labels its lines: ``12 s`` is the second that
ends 12 s after pgbench started (the per-second files' second 11).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hdrh.histogram import HdrHistogram

from pgdyno.analysis import hdr
from pgdyno.analysis.merge import PROGRESS_NAME
from pgdyno.analysis.per_second import SECONDS_NAME
from pgdyno.analysis.telemetry.server import classify_wait

REFRESH_S = 1.0
P99_WINDOW_S = 5
"""Seconds the p99 spans: one second holds too few slow transactions at low rates."""
WAIT_WINDOW_S = 5.0
"""Seconds of wait samples (10 a second) the leading wait class is counted over."""
NICE = 10
LIVE_LOG_ENV = "PGDYNO_LIVE_LOG"
"""Set (to anything but "" or "0"), every iteration's live lines are also appended to
``live.log`` in its raw directory, whether or not they are shown."""
LIVE_LOG_NAME = "live.log"
KEPT_SECONDS = 60
"""Seconds of TPS kept: a late part of a second (a slow thread's log) still merges."""


@dataclass(frozen=True)
class LiveFigures:
    """The last seconds of an iteration; None where the run has no such data (yet)."""

    elapsed_s: int | None
    """End of the second ``tps`` is of, in seconds since the engine started (pgbench -P)."""
    tps: float | None
    """Successful transactions that ended in that second."""
    p99_ms: float | None
    """Nearest-rank p99 latency over the last ``p99_seconds`` seconds with transactions."""
    p99_seconds: int
    cpu_busy_pct: float | None
    """Host CPU busy (100 - idle - iowait), percent of all CPUs, over the newest interval."""
    wait_class: str | None
    """The class most active sessions were in over the last WAIT_WINDOW_S (CPU: none)."""
    wait_share_pct: float | None
    """Its share of the active sessions sampled."""
    drivers: int = 0
    """--drivers: how many drivers' seconds ``tps`` sums (0: a run from this host)."""
    worst_mean_ms: float | None = None
    """--drivers: the highest of the drivers' mean latencies in that second."""

    @property
    def empty(self) -> bool:
        """Nothing of the iteration's own seconds yet (wait samples alone come first)."""
        return self.tps is None and self.cpu_busy_pct is None


def recording_requested() -> bool:
    return os.environ.get(LIVE_LOG_ENV, "").strip() not in ("", "0")


class _Follower:
    """New complete lines of a file being appended to (which may not exist yet)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh: BinaryIO | None = None
        self.rest = b""

    def lines(self) -> list[str]:
        if self.fh is None:
            try:
                self.fh = self.path.open("rb")
            except OSError:
                return []
        data = self.rest + self.fh.read()
        cut = data.rfind(b"\n") + 1  # a line being written is read at the next look
        self.rest = data[cut:]
        return data[:cut].decode(errors="replace").splitlines()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


class _CsvFollower(_Follower):
    """Rows of a growing CSV file as dicts, by the header's names."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.header: list[str] | None = None

    def rows(self) -> list[dict[str, str]]:
        out = []
        for values in csv.reader(self.lines()):
            if self.header is None:
                self.header = values
            elif len(values) == len(self.header):
                out.append(dict(zip(self.header, values, strict=True)))
        return out


class LiveModel:
    """The recent seconds of one iteration, kept from its files (``update`` reads on)."""

    def __init__(self, it_dir: Path, last_second: int | None = None) -> None:
        """``it_dir``: the iteration's raw directory; ``last_second``: its final planned
        second (warm-up + duration - 1): pgbench's stop leaves a sliver of the next."""
        self.last_second = last_second
        self.seconds = _CsvFollower(it_dir / SECONDS_NAME)
        self.hlog = _Follower(it_dir / hdr.HLOG_NAME)
        self.cpu = _CsvFollower(it_dir / "telemetry" / "cpu.csv")
        self.waits = _Follower(it_dir / "telemetry" / "waits.jsonl")
        self.progress = _Follower(it_dir / PROGRESS_NAME)
        self.by_driver: dict[int, dict[str, tuple[float, float]]] = {}
        """--drivers: second -> driver -> (its TPS, its mean latency in ms)."""
        self.drivers = 0
        """How many drivers the iteration has (each second waits for all of them)."""
        self.ok: dict[int, int] = {}
        self.latency: dict[int, HdrHistogram] = {}
        self.busy: float | None = None
        self.samples: deque[tuple[float, dict[str, int]]] = deque()

    def update(self) -> LiveFigures:
        self._read_seconds()
        self._read_histograms()
        for row in self.cpu.rows():
            with contextlib.suppress(KeyError, ValueError):
                self.busy = float(row["busy"])
        self._read_waits()
        self._read_driver_progress()
        return self.figures()

    def close(self) -> None:
        for follower in (self.seconds, self.hlog, self.cpu, self.waits, self.progress):
            follower.close()

    def _read_driver_progress(self) -> None:
        for line in self.progress.lines():
            try:
                entry = json.loads(line)
                second = round(float(entry["t"])) - 1  # -P's label is the second's end
                name, tps, lat = str(entry["driver"]), float(entry["tps"]), float(entry["lat_ms"])
                drivers = int(entry["of"])
            except (ValueError, KeyError, TypeError):
                continue
            if self._wanted(second):
                self.drivers = max(self.drivers, drivers)
                self.by_driver.setdefault(second, {})[name] = (tps, lat)
        for second in sorted(self.by_driver)[:-KEPT_SECONDS]:
            del self.by_driver[second]

    def _drivers_figures(self) -> tuple[int, float, float] | None:
        """(second, TPS summed, worst mean latency) of the newest second every driver
        reported; None before the first."""
        whole = [s for s, seen in self.by_driver.items() if len(seen) >= self.drivers]
        if not whole:
            return None
        newest = max(whole)
        seen = self.by_driver[newest].values()
        return newest, sum(tps for tps, _ in seen), max(lat for _, lat in seen)

    def _wanted(self, second: int) -> bool:
        return self.last_second is None or second <= self.last_second

    def _read_seconds(self) -> None:
        for row in self.seconds.rows():
            try:
                second, ok = int(row["second"]), int(row["ok"])
            except (KeyError, ValueError):
                continue
            if self._wanted(second):  # parts of one second (scripts, late lines) add up
                self.ok[second] = self.ok.get(second, 0) + ok
        for second in sorted(self.ok)[:-KEPT_SECONDS]:
            del self.ok[second]

    def _read_histograms(self) -> None:
        for line in self.hlog.lines():
            if not line.startswith("Tag=script"):  # the schedule lag ("Tag=lag") is not latency
                continue
            try:
                _tag, start, _length, _max, payload = line[4:].split(",")
                second = int(float(start))
                part = HdrHistogram.decode(payload)
            except Exception:  # noqa: BLE001 - a line the view cannot read is skipped
                continue
            if not self._wanted(second):
                continue
            if second in self.latency:
                self.latency[second].add(part)
            else:
                self.latency[second] = part
        for second in sorted(self.latency)[:-P99_WINDOW_S]:
            del self.latency[second]

    def _read_waits(self) -> None:
        for line in self.waits.lines():
            try:
                tick = json.loads(line)
                t, rows = float(tick["t"]), tick.get("rows", [])
            except (ValueError, KeyError, TypeError):
                continue
            classes: dict[str, int] = {}
            for backend_type, state, wtype, wevent, count in rows:
                # As the report counts them: active sessions; io workers are not sessions.
                if state == "active" and backend_type != "io worker":
                    name = classify_wait(wtype, wevent)[0]
                    classes[name] = classes.get(name, 0) + int(count)
            self.samples.append((t, classes))
        while self.samples and self.samples[0][0] < self.samples[-1][0] - WAIT_WINDOW_S:
            self.samples.popleft()

    def figures(self) -> LiveFigures:
        newest = max(self.ok) if self.ok else None
        p99, spanned = self._p99(newest)
        wait_class, share = self._leading_wait()
        drivers = self._drivers_figures() if newest is None else None
        if drivers is not None:
            second, tps, worst = drivers
            return LiveFigures(
                elapsed_s=second + 1, tps=tps, p99_ms=None, p99_seconds=0,
                cpu_busy_pct=self.busy, wait_class=wait_class, wait_share_pct=share,
                drivers=self.drivers, worst_mean_ms=worst)
        return LiveFigures(
            elapsed_s=newest + 1 if newest is not None else None,
            tps=float(self.ok[newest]) if newest is not None else None,
            p99_ms=p99, p99_seconds=spanned, cpu_busy_pct=self.busy,
            wait_class=wait_class, wait_share_pct=share)

    def _p99(self, newest: int | None) -> tuple[float | None, int]:
        if newest is None:
            return None, 0
        window = [h for s, h in self.latency.items() if newest - P99_WINDOW_S < s <= newest]
        if not window:
            return None, 0
        merged = hdr.new_histogram()
        for part in window:
            merged.add(part)
        if not merged.get_total_count():
            return None, 0
        return hdr.value_at_percentile(merged, 99.0) / 1000.0, len(window)

    def _leading_wait(self) -> tuple[str | None, float | None]:
        totals: dict[str, int] = {}
        for _t, classes in self.samples:
            for name, count in classes.items():
                totals[name] = totals.get(name, 0) + count
        active = sum(totals.values())
        if not active:
            return None, None
        name = max(sorted(totals), key=lambda c: totals[c])
        return name, 100.0 * totals[name] / active


class LiveWatch:
    """A thread that updates a LiveModel once a second and hands its figures on."""

    def __init__(self, model: LiveModel, on_figures: Callable[[LiveFigures], None],
                 period_s: float = REFRESH_S) -> None:
        self.model = model
        self.on_figures = on_figures
        self.period_s = period_s
        self.ticks = 0
        self.cpu_s = 0.0
        """CPU time of the thread (its cost: reading, merging, handing on)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgdyno-live-view", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()
        self.model.close()

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # the view waits for the measurement, never it
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        try:
            while not self._stop.wait(self.period_s):
                self._look()
            self._look()  # the seconds the iteration's end brought
        finally:
            self.cpu_s = time.thread_time()

    def _look(self) -> None:
        self.ticks += 1
        with contextlib.suppress(Exception):  # a view, never a reason to stop a run
            self.on_figures(self.model.update())
