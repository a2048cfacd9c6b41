"""A pgbench iteration second by second: the bounded raw data every run keeps.

pgbench's per-transaction log (``-l``) grows by ~35 bytes a transaction: at 280,000 TPS a
30-minute iteration is 17 GB. What a report needs fits in a few kilobytes a second: per
second and script, exact counts (successes, each kind of failure, skips, retries, late)
and exact latency sums, sum of squares, minimum and maximum, in ``seconds.csv``; and a
latency histogram per second and script (and one of the schedule lag under ``--rate``) in
``latency.hlog`` (``pgdyno.analysis.hdr``). The binner here turns parsed log rows into
both, whether it is fed live while pgbench writes (the engine's log tail) or afterwards
from kept logs (``pgbench_log``), so both routes give the same seconds.

Seconds are counted from the iteration's time origin (the epoch at which pgdyno launched
pgbench, so warm-up and window start on second boundaries); a transaction belongs to the
second in which it ended.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno.analysis import hdr
from pgdyno.errors import UsageError

# numpy and hdrh are imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np
    from hdrh.histogram import HdrHistogram

SECONDS_NAME = "seconds.csv"
# Codes substituted for the words pgbench writes in the latency column.
FAILED, SKIPPED, SERIALIZATION, DEADLOCK = -1, -2, -3, -4
LAG_TAG = "lag"


ALL_SCRIPTS = -1
"""The script number of pgbench's aggregate lines (--aggregate-interval): all scripts."""
AGGREGATE_COLUMNS = 15
"""pgbench 15-18's aggregate line: interval_start num_transactions sum_latency
sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag skipped retried
retries serialization_failures deadlock_failures (µs)."""


def script_tag(script: int) -> str:
    return f"script{script}"


@dataclass(frozen=True)
class LogLayout:
    """Which optional columns pgbench writes: the schedule lag (--rate), retries."""

    has_lag: bool
    has_retries: bool

    @property
    def columns(self) -> int:
        return 6 + int(self.has_lag) + int(self.has_retries)


@dataclass
class SecondRow:
    """One second of one script: exact counts and latency moments, in µs."""

    second: int
    script: int
    ok: int = 0
    failed: int = 0
    """All failures: errors, serialization failures and deadlocks."""
    serialization: int = 0
    deadlock: int = 0
    skipped: int = 0
    retried: int = 0
    retries: int = 0
    late: int = 0
    """Successful transactions slower than --latency-limit."""
    latency_sum_us: int = 0
    latency_sumsq_us: int = 0
    latency_min_us: int = -1
    """-1: no successful transaction in this second."""
    latency_max_us: int = -1
    lag_sum_us: int = 0
    lag_sumsq_us: int = 0
    lag_max_us: int = -1

    def merge(self, other: SecondRow) -> None:
        """Add another part of the same second (lines pgbench flushed late)."""
        for f in _SUMMED:
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.latency_min_us = _min_of(self.latency_min_us, other.latency_min_us)
        self.latency_max_us = max(self.latency_max_us, other.latency_max_us)
        self.lag_max_us = max(self.lag_max_us, other.lag_max_us)


_COLUMNS = [f.name for f in fields(SecondRow)]
_SUMMED = [c for c in _COLUMNS if c not in ("second", "script") and not c.endswith(("min_us",
                                                                                      "max_us"))]


def _sum_of_squares(values: np.ndarray) -> int:
    """In float64: squares of int64 µs overflow past 50 minutes; the sum is exact below
    2^53 (300,000 transactions of 100 ms in one second) and within 1e-16 beyond."""
    import numpy as np

    as_float = values.astype(np.float64)
    return round(float(np.square(as_float).sum()))  # not np.dot: no BLAS call in the reader


def _min_of(a: int, b: int) -> int:
    return b if a < 0 else a if b < 0 else min(a, b)


@dataclass
class _Open:
    """A second still being filled: its row and its histograms."""

    row: SecondRow
    latency: HdrHistogram = field(default_factory=hdr.new_histogram)
    lag: HdrHistogram | None = None


@dataclass
class Flushed:
    row: SecondRow
    latency: HdrHistogram
    lag: HdrHistogram | None


class SecondBinner:
    """Parsed log rows in, finished seconds out (``flush``)."""

    def __init__(self, origin_epoch: float, layout: LogLayout,
                 latency_limit_ms: float | None) -> None:
        self.origin = origin_epoch
        self.layout = layout
        self.late_above_us = None if latency_limit_ms is None else latency_limit_ms * 1000
        self.open: dict[tuple[int, int], _Open] = {}
        self.clamped = 0
        self.newest_second = -1

    def seconds_of(self, rows: np.ndarray) -> np.ndarray:
        import numpy as np

        end = rows[:, 4] + rows[:, 5] / 1e6
        return np.floor(end - self.origin).astype(np.int64)

    def add(self, rows: np.ndarray) -> None:
        import numpy as np

        if rows.size == 0:
            return
        seconds = self.seconds_of(rows)
        self.newest_second = max(self.newest_second, int(seconds.max()))
        scripts = rows[:, 3].astype(np.int64)
        keys = seconds * 1024 + scripts  # pgbench allows at most 128 scripts
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        bounds = np.flatnonzero(np.diff(keys)) + 1
        starts = np.concatenate([[0], bounds]).tolist()
        for start, part in zip(starts, np.split(rows, bounds), strict=True):
            second, script = divmod(int(keys[start]), 1024)
            self._add_part((second, script), part)

    def _add_part(self, key: tuple[int, int], rows: np.ndarray) -> None:
        box = self.open.get(key)
        if box is None:
            box = self.open[key] = _Open(SecondRow(second=key[0], script=key[1]))
            if self.layout.has_lag:
                box.lag = hdr.new_histogram()
        row, lat = box.row, rows[:, 2]
        ok = lat >= 0
        good = lat[ok]
        row.ok += int(good.size)
        row.failed += int(((lat == FAILED) | (lat == SERIALIZATION) | (lat == DEADLOCK)).sum())
        row.serialization += int((lat == SERIALIZATION).sum())
        row.deadlock += int((lat == DEADLOCK).sum())
        row.skipped += int((lat == SKIPPED).sum())
        if self.layout.has_retries:
            retries = rows[:, -1]
            row.retried += int((retries > 0).sum())
            row.retries += int(retries.sum())
        if good.size:
            row.latency_sum_us += int(good.sum())
            row.latency_sumsq_us += _sum_of_squares(good)
            row.latency_min_us = _min_of(row.latency_min_us, int(good.min()))
            row.latency_max_us = max(row.latency_max_us, int(good.max()))
            if self.late_above_us is not None:
                row.late += int((good > self.late_above_us).sum())
            self.clamped += hdr.record(box.latency, good)
        if box.lag is not None and good.size:
            lag = rows[ok, 6]
            row.lag_sum_us += int(lag.sum())
            row.lag_sumsq_us += _sum_of_squares(lag)
            row.lag_max_us = max(row.lag_max_us, int(lag.max()))
            self.clamped += hdr.record(box.lag, lag)

    def flush(self, before_second: int | None = None) -> list[Flushed]:
        """Hand over (and forget) the seconds before ``before_second``; all when None."""
        done = sorted(k for k in self.open if before_second is None or k[0] < before_second)
        return [Flushed(box.row, box.latency, box.lag)
                for box in (self.open.pop(k) for k in done)]


def aggregate_rows(data: bytes, first_interval: int | None) -> tuple[list[SecondRow], int]:
    """pgbench's per-second aggregate lines of one thread as SecondRows (all scripts
    together), and the thread's first interval start: its second 0. pgbench starts a
    thread's intervals when the thread starts (a few ms after the launch) and prints every
    interval, empty ones too, so line k of a thread's log is its second k."""
    import numpy as np

    values = np.fromstring(data, dtype=np.float64, sep=" ")  # noqa: NPY201 - text mode
    values = values[: values.size - values.size % AGGREGATE_COLUMNS].reshape(
        -1, AGGREGATE_COLUMNS)
    if not len(values):
        return [], first_interval if first_interval is not None else 0
    first = int(values[0, 0]) if first_interval is None else first_interval
    rows = []
    for v in values.tolist():
        ok = round(v[1])
        serialization, deadlock = round(v[13]), round(v[14])
        rows.append(SecondRow(
            second=round(v[0]) - first, script=ALL_SCRIPTS, ok=ok,
            failed=serialization + deadlock, serialization=serialization, deadlock=deadlock,
            skipped=round(v[10]), retried=round(v[11]), retries=round(v[12]),
            latency_sum_us=round(v[2]), latency_sumsq_us=round(v[3]),
            latency_min_us=round(v[4]) if ok else -1, latency_max_us=round(v[5]) if ok else -1,
            lag_sum_us=round(v[6]), lag_sumsq_us=round(v[7]),
            lag_max_us=round(v[9]) if ok and v[6] else -1))
    return rows, first


# ----- the files --------------------------------------------------------------------------

class SecondsWriter:
    """``seconds.csv`` and ``latency.hlog`` of one iteration, appended as seconds finish."""

    def __init__(self, directory: Path, origin_epoch: float) -> None:
        self.csv_path = directory / SECONDS_NAME
        self.hlog_path = directory / hdr.HLOG_NAME
        self.csv_fh = self.csv_path.open("w", newline="")
        self.csv = csv.writer(self.csv_fh)
        self.csv.writerow(_COLUMNS)
        self.hlog = hdr.HlogWriter(self.hlog_path, origin_epoch)

    def write(self, seconds: list[Flushed]) -> None:
        for part in seconds:
            row = part.row
            self.csv.writerow([getattr(row, c) for c in _COLUMNS])
            if row.ok:
                self.hlog.write(script_tag(row.script), row.second, part.latency)
            if part.lag is not None and row.ok:
                self.hlog.write(LAG_TAG, row.second, part.lag)

    def write_rows(self, rows: list[SecondRow]) -> None:
        """Seconds without histograms (pgbench's aggregates)."""
        for row in rows:
            self.csv.writerow([getattr(row, c) for c in _COLUMNS])

    def flush(self) -> None:
        self.csv_fh.flush()
        self.hlog.flush()

    def close(self) -> None:
        self.csv_fh.close()
        self.hlog.close()


def read_seconds(path: Path) -> dict[tuple[int, int], SecondRow]:
    """``seconds.csv`` merged by (second, script); a damaged file (empty, binary, a line
    cut short or not of integers) is one line naming it."""
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: binary data, not a pgdyno seconds file (CSV text)") from None
    if not text:
        raise UsageError(f"{path}: not a pgdyno seconds file: the file is empty")
    out: dict[tuple[int, int], SecondRow] = {}
    lines = text.splitlines(keepends=True)
    reader = csv.reader(lines)
    header = next(reader, None)
    if header != _COLUMNS:
        cut = ",".join(_COLUMNS).startswith(text)  # the beginning of the header only
        raise UsageError(f"{path}: " + ("the file is truncated (it ends inside its header)"
                                        if cut else "not a pgdyno seconds file (expected the "
                                        f"header {','.join(_COLUMNS[:4])},...)"))
    if not text.endswith("\n"):  # every line ends with one: the last was cut short
        raise UsageError(f"{path}: the file is truncated (it ends inside line {len(lines)})")
    for number, values in enumerate(reader, 2):
        try:
            row = SecondRow(**{c: int(v) for c, v in zip(_COLUMNS, values, strict=True)})
        except (ValueError, TypeError):
            raise UsageError(f"{path}: line {number} is damaged ({len(values)} fields; "
                             f"expected {len(_COLUMNS)} integers)") from None
        key = (row.second, row.script)
        if key in out:
            out[key].merge(row)
        else:
            out[key] = row
    return out


def total(rows: list[SecondRow]) -> SecondRow:
    """Many rows summed into one (second and script of the first)."""
    acc = SecondRow(second=rows[0].second if rows else 0, script=rows[0].script if rows else 0)
    for row in rows:
        acc.merge(row)
    return acc
