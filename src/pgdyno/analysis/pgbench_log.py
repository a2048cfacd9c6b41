"""Streaming summary of pgbench per-transaction logs (``pgbench -l``).

Line format (pgbench 15-18): ``client_id transaction_no time script_no time_epoch time_us
[schedule_lag] [retries]``; ``time`` is the latency in µs, or ``failed`` / ``skipped``
(``serialization`` / ``deadlock`` with --failures-detailed). With ``-R`` the latency is
measured from the scheduled start, so it includes the schedule lag (no coordinated
omission).

Logs are read in chunks of a few MB and parsed by numpy, so memory stays bounded and
a log of millions of transactions summarises in seconds. Nothing here depends on how
the run was started: the measured window is derived from the log itself (the earliest
transaction start plus the warm-up), so every figure can be recomputed from raw files.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pgdyno.analysis.histogram import LatencyHistogram

CHUNK_BYTES = 8 << 20
# Codes substituted for the words pgbench writes in the latency column.
FAILED, SKIPPED, SERIALIZATION, DEADLOCK = -1, -2, -3, -4
_WORDS = {b"failed": FAILED, b"skipped": SKIPPED, b"serialization": SERIALIZATION,
          b"deadlock": DEADLOCK}
# Timeline bins for per-second approximate percentiles: log-spaced, 5% apart, 1 µs .. 1000 s.
_TIMELINE_EDGES = np.concatenate([[0.0], np.geomspace(1.0, 1e9, 426)])
HEAD_BYTES_FOR_START = 1 << 20
"""The first MB of each log holds every client's first transaction many times over."""


@dataclass(frozen=True)
class LogLayout:
    has_lag: bool
    has_retries: bool

    @property
    def columns(self) -> int:
        return 6 + int(self.has_lag) + int(self.has_retries)


@dataclass
class ScriptStats:
    """Everything counted for one script (or for all scripts together)."""

    histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    failed: int = 0
    serialization_failures: int = 0
    deadlock_failures: int = 0
    skipped: int = 0
    retried: int = 0
    retries: int = 0
    lag_histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    late: int = 0
    """Transactions above the --latency-limit (fixed-rate mode)."""


@dataclass
class LogStats:
    """A streamed summary of one pgbench run's logs over its measured window."""

    window_start: float
    """Epoch seconds: earliest transaction start + warm-up."""
    duration_s: int
    warmup_s: float
    overall: ScriptStats
    per_script: dict[int, ScriptStats]
    interval_ok: np.ndarray
    """Successful transactions per 1 s interval of the measured window."""
    timeline_start: float
    """Epoch seconds of the first transaction start (warm-up included)."""
    timeline_ok: np.ndarray
    timeline_failed: np.ndarray
    timeline_latency_sum_us: np.ndarray
    timeline_latency_max_us: np.ndarray
    timeline_bins: np.ndarray
    """(seconds × bins) counts on _TIMELINE_EDGES, for approximate per-second percentiles."""
    outside_window: int

    def timeline_percentile_us(self, p: float) -> np.ndarray:
        out = np.full(len(self.timeline_ok), math.nan)
        for i, row in enumerate(self.timeline_bins):
            n = row.sum()
            if n:
                idx = int(np.searchsorted(np.cumsum(row), math.ceil(p / 100 * n)))
                out[i] = _TIMELINE_EDGES[min(idx + 1, len(_TIMELINE_EDGES) - 1)]
        return out


def open_log(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def iter_rows(path: Path, columns: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """Parsed rows (float64, ``columns`` wide) in chunks, words replaced by negative codes."""
    rest = b""
    with open_log(path) as fh:
        while True:
            block = fh.read(chunk_bytes)
            if not block and not rest:
                return
            data = rest + block
            if block:
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            else:
                rest = b""
            if not data.strip():
                if not block:
                    return
                continue
            for word, code in _WORDS.items():
                if word in data:
                    data = data.replace(word, str(code).encode())
            values = np.fromstring(data, dtype=np.float64, sep=" ")  # noqa: NPY201 - text mode
            if values.size % columns:
                # A torn last line (interrupted run): drop what does not form a whole row.
                values = values[: values.size - values.size % columns]
            yield values.reshape(-1, columns)
            if not block:
                return


def first_start(paths: list[Path], columns: int) -> float:
    """Earliest transaction start (end minus latency) among the first lines of each log."""
    earliest = math.inf
    for path in paths:
        for head in iter_rows(path, columns, HEAD_BYTES_FOR_START):
            ends = head[:, 4] + head[:, 5] / 1e6
            lat = np.where(head[:, 2] >= 0, head[:, 2], 0.0) / 1e6
            if head.size:
                earliest = min(earliest, float((ends - lat).min()))
            break
    return earliest


def summarise_logs(paths: list[Path], *, warmup_s: float, duration_s: int,
                   has_lag: bool, has_retries: bool, latency_limit_ms: float | None = None
                   ) -> LogStats:
    """Stream the logs of one pgbench run into a LogStats for its measured window."""
    layout = LogLayout(has_lag=has_lag, has_retries=has_retries)
    cols = layout.columns
    start = first_start(paths, cols)
    if math.isinf(start):
        start = 0.0
    window_start = start + warmup_s
    span = int(math.ceil(warmup_s + duration_s)) + 5
    acc = _Accumulator(window_start, duration_s, start, span, layout, latency_limit_ms)
    for path in paths:
        for rows in iter_rows(path, cols):
            acc.add(rows)
    return acc.result(warmup_s)


@dataclass
class _Accumulator:
    window_start: float
    duration_s: int
    timeline_start: float
    span_s: int
    layout: LogLayout
    latency_limit_ms: float | None
    overall: ScriptStats = field(default_factory=ScriptStats)
    per_script: dict[int, ScriptStats] = field(default_factory=dict)
    outside: int = 0

    def __post_init__(self) -> None:
        self.interval_ok = np.zeros(self.duration_s, dtype=np.int64)
        n = self.span_s
        self.tl_ok = np.zeros(n, dtype=np.int64)
        self.tl_failed = np.zeros(n, dtype=np.int64)
        self.tl_sum = np.zeros(n, dtype=np.float64)
        self.tl_max = np.zeros(n, dtype=np.float64)
        self.tl_bins = np.zeros((n, len(_TIMELINE_EDGES) - 1), dtype=np.int64)

    def add(self, rows: np.ndarray) -> None:
        end = rows[:, 4] + rows[:, 5] / 1e6
        self._add_timeline(rows, end)
        offset = end - self.window_start
        inside = (offset >= 0) & (offset < self.duration_s)
        self.outside += int((~inside).sum())
        rows, offset = rows[inside], offset[inside]
        lat = rows[:, 2]
        ok = lat >= 0
        self.interval_ok += np.bincount(offset[ok].astype(np.int64),
                                        minlength=self.duration_s)[: self.duration_s]
        self._count(self.overall, rows)
        for script in np.unique(rows[:, 3]).astype(int).tolist():
            stats = self.per_script.setdefault(script, ScriptStats())
            self._count(stats, rows[rows[:, 3] == script])

    def _add_timeline(self, rows: np.ndarray, end: np.ndarray) -> None:
        sec = np.floor(end - self.timeline_start).astype(np.int64)
        keep = (sec >= 0) & (sec < self.span_s)
        sec, lat = sec[keep], rows[keep, 2]
        ok = lat >= 0
        n = self.span_s
        self.tl_ok += np.bincount(sec[ok], minlength=n)[:n]
        self.tl_failed += np.bincount(sec[(lat == FAILED) | (lat <= SERIALIZATION)],
                                      minlength=n)[:n]
        self.tl_sum += np.bincount(sec[ok], weights=lat[ok], minlength=n)[:n]
        np.maximum.at(self.tl_max, sec[ok], lat[ok])
        bins = np.clip(np.searchsorted(_TIMELINE_EDGES, lat[ok], side="right") - 1,
                       0, self.tl_bins.shape[1] - 1)
        np.add.at(self.tl_bins, (sec[ok], bins), 1)

    def _count(self, stats: ScriptStats, rows: np.ndarray) -> None:
        lat = rows[:, 2]
        ok = lat >= 0
        stats.histogram.add_array(lat[ok])
        stats.failed += int(((lat == FAILED) | (lat == SERIALIZATION) | (lat == DEADLOCK)).sum())
        stats.serialization_failures += int((lat == SERIALIZATION).sum())
        stats.deadlock_failures += int((lat == DEADLOCK).sum())
        stats.skipped += int((lat == SKIPPED).sum())
        if self.layout.has_retries:
            retries = rows[:, -1]
            stats.retried += int((retries > 0).sum())
            stats.retries += int(retries.sum())
        if self.layout.has_lag:
            stats.lag_histogram.add_array(rows[ok, 6])
        if self.latency_limit_ms is not None:
            stats.late += int((lat[ok] > self.latency_limit_ms * 1000).sum())

    def result(self, warmup_s: float) -> LogStats:
        return LogStats(
            window_start=self.window_start, duration_s=self.duration_s, warmup_s=warmup_s,
            overall=self.overall, per_script=dict(sorted(self.per_script.items())),
            interval_ok=self.interval_ok, timeline_start=self.timeline_start,
            timeline_ok=self.tl_ok, timeline_failed=self.tl_failed,
            timeline_latency_sum_us=self.tl_sum, timeline_latency_max_us=self.tl_max,
            timeline_bins=self.tl_bins, outside_window=self.outside,
        )
