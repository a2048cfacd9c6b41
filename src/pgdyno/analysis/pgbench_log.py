"""pgbench's per-transaction logs (``pgbench -l``) and the summary of one iteration.

Line format (pgbench 15-18): ``client_id transaction_no time script_no time_epoch time_us
[schedule_lag] [retries]``; ``time`` is the latency in µs, or ``failed`` / ``skipped``
(``serialization`` / ``deadlock`` with --failures-detailed). With ``-R`` the latency is
measured from the scheduled start, so it includes the schedule lag (no coordinated
omission).

An iteration is summarised from its per-second data (``per_second``): counts, TPS over
time and the timeline always; latency percentiles exactly from the per-transaction logs
when they were kept, else from the per-second HdrHistograms (3 significant digits). Logs
are read in chunks of a few MB and parsed by numpy, so memory stays bounded. The measured
window is the seconds ``warmup_s`` to ``warmup_s + duration_s`` after the iteration's
time origin (pgdyno's launch of pgbench; for runs recorded before it kept one, the
earliest transaction start in the logs), so every figure is recomputable from raw files.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno.analysis import hdr
from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.per_second import (
    ALL_SCRIPTS,
    LAG_TAG,
    SECONDS_NAME,
    LogLayout,
    SecondBinner,
    SecondRow,
    read_seconds,
    script_tag,
    total,
)
from pgdyno.errors import UsageError

# numpy is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np

CHUNK_BYTES = 8 << 20
PROGRESS_LINE = re.compile(
    r"^progress: (?P<t>[\d.]+) s, (?P<tps>[\d.]+) tps, lat (?P<lat>[\d.]+) ms")
"""A line of pgbench's ``-P`` report: the end of its interval (seconds since pgbench
started, or an epoch with --progress-timestamp), that interval's TPS and mean latency."""
_WORDS = {b"failed": b"-1", b"skipped": b"-2", b"serialization": b"-3", b"deadlock": b"-4"}
"""The words pgbench writes in the latency column, as the codes of ``per_second``."""
HEAD_BYTES_FOR_START = 1 << 20
"""The first MB of each log holds every client's first transaction many times over."""
EXACT = "the per-transaction logs (exact)"
HISTOGRAM = ("the per-second HdrHistograms (3 significant digits: at most 0.1% above the "
             "exact value; the logs were not kept)")
AGGREGATE = ("pgbench's per-second aggregates (--tx-logs aggregate): average, stddev, min "
             "and max are exact; no percentiles")
"""Where an iteration's latency percentiles come from."""


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
    """One pgbench iteration over its measured window, and second by second."""

    window_start: float
    """Epoch seconds: the time origin + warm-up."""
    duration_s: int
    warmup_s: float
    overall: ScriptStats
    per_script: dict[int, ScriptStats]
    interval_ok: np.ndarray
    """Successful transactions per 1 s interval of the measured window."""
    timeline_start: float
    """Epoch seconds of the time origin (second 0 of the timeline)."""
    timeline_ok: np.ndarray
    timeline_failed: np.ndarray
    timeline_latency_sum_us: np.ndarray
    timeline_latency_max_us: np.ndarray
    timeline_p99_us: np.ndarray
    """Each second's p99 from its histogram (NaN for a second without transactions)."""
    outside_window: int
    latency_source: str = EXACT


def open_log(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def parse_block(data: bytes, columns: int) -> np.ndarray:
    """Whole log lines into int64 rows ``columns`` wide, words replaced by their codes.

    A torn last line (an interrupted run) is dropped: what does not form a whole row."""
    import numpy as np

    for word, code in _WORDS.items():
        if word in data:
            data = data.replace(word, code)
    values = np.fromstring(data, dtype=np.int64, sep=" ")  # noqa: NPY201 - text mode
    if values.size % columns:
        values = values[: values.size - values.size % columns]
    return values.reshape(-1, columns)


def iter_rows(path: Path, columns: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """Parsed rows in chunks of whole lines; a damaged log is one line naming it."""
    rest = b""
    if path.suffix == ".gz" and path.is_file() and path.stat().st_size == 0:
        raise UsageError(f"{path}: damaged per-transaction log: the file is empty (a gzip "
                         f"file holds at least its header){_LOG_ADVICE}")
    with open_log(path) as fh:
        while True:
            block = _read_block(fh, path, chunk_bytes)
            data = rest + block
            if block:
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            else:
                # What follows the last newline is a line pgbench was writing when it was
                # stopped: cut anywhere, even inside a number, so never a transaction.
                data = b""
            if data.strip():
                yield parse_block(data, columns)
            if not block:
                return


_LOG_ADVICE = ("; move it out of the run directory (its iteration's per-second files "
               "then give the percentiles) and run `pgdyno report` again")


def _read_block(fh, path: Path, size: int) -> bytes:  # noqa: ANN001 - a binary file object
    """``size`` bytes of a log; a gzip stream cut short (a full disk, a copy interrupted)
    or corrupt is refused in one line naming the file, never raised as EOFError (which the
    command line would take for Ctrl-C)."""
    try:
        return fh.read(size)
    except EOFError:
        raise UsageError(f"{path}: damaged per-transaction log: the file is truncated (its "
                         f"gzip stream ends early){_LOG_ADVICE}") from None
    except gzip.BadGzipFile as exc:
        what = ("not a gzip file" if str(exc).startswith("Not a gzipped file")
                else f"its gzip data is corrupt ({exc})")
        raise UsageError(f"{path}: damaged per-transaction log: {what}{_LOG_ADVICE}") from None
    except zlib.error as exc:
        raise UsageError(f"{path}: damaged per-transaction log: its gzip data is corrupt "
                         f"({exc}){_LOG_ADVICE}") from None


def first_start(paths: list[Path], columns: int) -> float:
    """Earliest transaction start (end minus latency) among the first lines of each log:
    the time origin of runs recorded before pgdyno kept the launch time."""
    import numpy as np

    earliest = math.inf
    for path in paths:
        for head in iter_rows(path, columns, HEAD_BYTES_FOR_START):
            ends = head[:, 4] + head[:, 5] / 1e6
            lat = np.where(head[:, 2] >= 0, head[:, 2], 0) / 1e6
            if head.size:
                earliest = min(earliest, float((ends - lat).min()))
            break
    return 0.0 if math.isinf(earliest) else earliest


# ----- binning logs into seconds ----------------------------------------------------------

@dataclass
class Seconds:
    """An iteration's per-second data, however it was obtained."""

    origin_epoch: float
    rows: dict[tuple[int, int], SecondRow]
    intervals: list[hdr.Interval]


@dataclass
class _ExactWindow:
    """Exact latency histograms of the measured window, per script and of the lag."""

    window: range
    per_script: dict[int, LatencyHistogram] = field(default_factory=dict)
    lag: LatencyHistogram = field(default_factory=LatencyHistogram)

    def add(self, rows: np.ndarray, seconds: np.ndarray, has_lag: bool) -> None:
        import numpy as np

        inside = (seconds >= self.window.start) & (seconds < self.window.stop)
        rows = rows[inside & (rows[:, 2] >= 0)]
        for script in np.unique(rows[:, 3]).tolist():
            mine = rows[rows[:, 3] == script]
            self.per_script.setdefault(int(script), LatencyHistogram()).add_array(mine[:, 2])
        if has_lag:
            self.lag.add_array(rows[:, 6])


def bin_logs(paths: list[Path], origin_epoch: float, layout: LogLayout,
             latency_limit_ms: float | None, window: range | None = None
             ) -> tuple[Seconds, _ExactWindow | None]:
    """Every transaction of the logs into seconds (as the live tail does), and the exact
    window histograms when ``window`` is given."""
    binner = SecondBinner(origin_epoch, layout, latency_limit_ms)
    exact = _ExactWindow(window) if window is not None else None
    seconds = Seconds(origin_epoch, {}, [])
    for path in paths:
        for rows in iter_rows(path, layout.columns):
            binner.add(rows)
            if exact is not None:
                exact.add(rows, binner.seconds_of(rows), layout.has_lag)
    for part in binner.flush():
        seconds.rows[(part.row.second, part.row.script)] = part.row
        if part.row.ok:
            seconds.intervals.append(_interval(script_tag(part.row.script), part.row.second,
                                               part.latency))
        if part.lag is not None and part.row.ok:
            seconds.intervals.append(_interval(LAG_TAG, part.row.second, part.lag))
    return seconds, exact


def _interval(tag: str, second: int, hist) -> hdr.Interval:
    return hdr.Interval(tag, second, hist.encode().decode("ascii"))


def read_kept_seconds(directory: Path, origin_epoch: float) -> Seconds:
    """The per-second files an iteration kept (``seconds.csv``, ``latency.hlog``)."""
    return Seconds(origin_epoch, read_seconds(directory / SECONDS_NAME),
                   list(hdr.read_intervals(directory / hdr.HLOG_NAME)))


# ----- one iteration's statistics ---------------------------------------------------------

def summarise_logs(paths: list[Path], *, warmup_s: int, duration_s: int,
                   has_lag: bool, has_retries: bool, latency_limit_ms: float | None = None,
                   origin_epoch: float | None = None) -> LogStats:
    """An iteration from its complete per-transaction logs: exact percentiles."""
    layout = LogLayout(has_lag=has_lag, has_retries=has_retries)
    if origin_epoch is None:
        origin_epoch = first_start(paths, layout.columns)
    window = range(int(warmup_s), int(warmup_s) + duration_s)
    seconds, exact = bin_logs(paths, origin_epoch, layout, latency_limit_ms, window)
    return stats_of(seconds, warmup_s=warmup_s, duration_s=duration_s, exact=exact)


def stats_of(seconds: Seconds, *, warmup_s: int, duration_s: int,
             exact: _ExactWindow | None = None) -> LogStats:
    """LogStats from per-second data; percentiles from ``exact`` when given, else from the
    per-second histograms of the window merged."""
    import numpy as np

    window = range(int(warmup_s), int(warmup_s) + duration_s)
    in_window = [r for k, r in seconds.rows.items() if k[0] in window]
    scripts = sorted({r.script for r in seconds.rows.values() if r.script != ALL_SCRIPTS})
    per_script = {s: _script_stats([r for r in in_window if r.script == s], seconds, window,
                                   script_tag(s), exact.per_script.get(s) if exact else None)
                  for s in scripts}
    overall = _script_stats(in_window, seconds, window, None,
                            _merged_exact(exact) if exact else None)
    lag_rows = [r for r in in_window if r.lag_max_us >= 0]
    if lag_rows:
        overall.lag_histogram = (exact.lag if exact else _hdr_latency(
            hdr.merge(seconds.intervals, LAG_TAG, window), lag_rows, lag=True))
    interval_ok = np.zeros(duration_s, dtype=np.int64)
    for row in in_window:
        interval_ok[row.second - window.start] += row.ok
    outside = sum(r.ok + r.failed + r.skipped for k, r in seconds.rows.items()
                  if k[0] not in window)
    return LogStats(
        window_start=seconds.origin_epoch + window.start, duration_s=duration_s,
        warmup_s=warmup_s, overall=overall, per_script=per_script, interval_ok=interval_ok,
        timeline_start=seconds.origin_epoch, outside_window=outside,
        latency_source=(EXACT if exact is not None else HISTOGRAM if seconds.intervals
                        else AGGREGATE), **_timeline(seconds))


def _merged_exact(exact: _ExactWindow) -> LatencyHistogram:
    merged = LatencyHistogram()
    for hist in exact.per_script.values():
        merged.merge(hist)
    return merged


def _script_stats(rows: list[SecondRow], seconds: Seconds, window: range, tag: str | None,
                  exact: LatencyHistogram | None) -> ScriptStats:
    summed = total(rows)
    if exact is not None:
        histogram = exact
    else:
        tags = [tag] if tag else sorted({i.tag for i in seconds.intervals if i.tag != LAG_TAG})
        merged = hdr.new_histogram()
        for t in tags:
            merged.add(hdr.merge(seconds.intervals, t, window))
        histogram = _hdr_latency(merged, rows, lag=False)
    return ScriptStats(
        histogram=histogram, failed=summed.failed,
        serialization_failures=summed.serialization, deadlock_failures=summed.deadlock,
        skipped=summed.skipped, retried=summed.retried, retries=summed.retries,
        late=summed.late)


def _hdr_latency(hist, rows: list[SecondRow], *, lag: bool) -> LatencyHistogram:
    """A LatencyHistogram of bucket tops, with the exact count, moments, min and max."""
    summed = total(rows)
    values, counts = hdr.bucket_counts(hist)
    out = LatencyHistogram(bucketed=True)
    out.counts.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))
    out.n = summed.ok
    if lag:
        out.total_us, out.total_sq_us = float(summed.lag_sum_us), float(summed.lag_sumsq_us)
        out.exact_max_us = float(summed.lag_max_us)  # the minimum lag is not kept
    else:
        out.total_us = float(summed.latency_sum_us)
        out.total_sq_us = float(summed.latency_sumsq_us)
        out.exact_min_us = float(summed.latency_min_us)
        out.exact_max_us = float(summed.latency_max_us)
    return out


def _timeline(seconds: Seconds) -> dict[str, np.ndarray]:
    import numpy as np

    last = max((k[0] for k in seconds.rows), default=-1)
    n = last + 1
    ok, failed = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    lat_sum, lat_max = np.zeros(n), np.zeros(n)
    for (second, _script), row in seconds.rows.items():
        if second < 0:
            continue
        ok[second] += row.ok
        failed[second] += row.failed
        lat_sum[second] += row.latency_sum_us
        lat_max[second] = max(lat_max[second], row.latency_max_us)
    p99 = np.full(n, math.nan)
    per_second: dict[int, list[hdr.Interval]] = {}
    for interval in seconds.intervals:
        if interval.tag != LAG_TAG and 0 <= interval.second < n:
            per_second.setdefault(interval.second, []).append(interval)
    for second, intervals in per_second.items():
        merged = hdr.new_histogram()
        for interval in intervals:
            merged.decode_and_add(interval.payload)
        p99[second] = hdr.value_at_percentile(merged, 99.0)
    return {"timeline_ok": ok, "timeline_failed": failed, "timeline_latency_sum_us": lat_sum,
            "timeline_latency_max_us": lat_max, "timeline_p99_us": p99}
