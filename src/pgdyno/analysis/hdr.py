"""Per-second latency histograms: HdrHistogram (the ``hdrhistogram`` package) in µs.

A long run cannot keep every transaction's latency, so every run keeps one histogram per
second (and per script) in HdrHistogram's standard interval-log format (``latency.hlog``,
readable by HdrHistogram's own tools), from which percentiles over any span of seconds
are recomputed by merging. Three significant digits: latencies below 2,048 µs are kept
exactly; above, each recorded value stands for a range of at most 1/1,024 of itself
(under 0.1%). Reported percentiles are the top of the range holding the exact
nearest-rank value, so they never understate a latency and overstate it by < 0.1%.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno.analysis.histogram import nearest_rank
from pgdyno.errors import UsageError

# numpy and hdrh are imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np
    from hdrh.histogram import HdrHistogram

SIGNIFICANT_DIGITS = 3
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
"""One hour: a transaction slower than that is recorded as one hour (and said so)."""
RELATIVE_PRECISION = 1 / 1024
"""The widest range one recorded value stands for, relative to the value (3 digits)."""
LOG_FORMAT = "1.3"
HLOG_NAME = "latency.hlog"


def new_histogram() -> HdrHistogram:
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record(hist: HdrHistogram, latencies_us: np.ndarray) -> int:
    """Record whole-µs latencies; returns how many were above HIGHEST_US (clamped)."""
    import numpy as np

    if latencies_us.size == 0:
        return 0
    values = np.maximum(latencies_us.astype(np.int64, copy=False), 0)
    clamped = int((values > HIGHEST_US).sum())
    if clamped:
        values = np.minimum(values, HIGHEST_US)
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    added = np.bincount(counts_indexes(hist, values), minlength=hist.counts_len)
    counts += added.astype(counts.dtype)
    # The tracking values the library's record_value keeps (encode and min/max read them).
    hist.total_count += int(values.size)
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))
    return clamped


def counts_indexes(hist: HdrHistogram, values: np.ndarray) -> np.ndarray:
    """HdrHistogram's counts-array index of each value, vectorised.

    The library computes it per value in Python (``_counts_index_for``, a microsecond
    each: a third of the log reader's time); this is the same arithmetic on arrays, and a
    test holds it equal to the library's over the whole range."""
    import numpy as np

    # Bit length of (value | sub_bucket_mask): frexp's exponent, exact below 2**53.
    bit_length = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))[1]
    bucket = bit_length.astype(np.int64) - hist.unit_magnitude - (
        hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values >> (bucket + hist.unit_magnitude)
    return (((bucket + 1) << hist.sub_bucket_half_count_magnitude)
            + (sub_bucket - hist.sub_bucket_half_count))


def bucket_counts(hist: HdrHistogram) -> tuple[np.ndarray, np.ndarray]:
    """(value, count) of every populated bucket, ascending; each value is the top of its
    bucket (HdrHistogram's highest equivalent value)."""
    import numpy as np

    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    index = np.flatnonzero(counts)
    values = np.fromiter((hist.get_highest_equivalent_value(hist.get_value_from_index(int(i)))
                          for i in index), dtype=np.int64, count=index.size)
    return values, counts[index].astype(np.int64)


def top_of_bucket(value_us: float) -> int:
    """The value an exact latency is reported as (for tests and the precision note)."""
    return int(new_histogram().get_highest_equivalent_value(int(value_us)))


# ----- the interval log ---------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """One histogram line of a log: ``tag`` ("script0", "lag"), second offset, payload."""

    tag: str
    second: int
    payload: str


class HlogWriter:
    """Appends interval histograms to ``latency.hlog``: HdrHistogram log format with tags,
    timestamps in seconds relative to the BaseTime (the run's time origin)."""

    def __init__(self, path: Path, origin_epoch: float) -> None:
        self.path = path
        self.fh = path.open("w")
        self.fh.write(f"#[Histogram log format version {LOG_FORMAT}]\n"
                      f"#[StartTime: {origin_epoch:.3f} (seconds since epoch)]\n"
                      f"#[BaseTime: {origin_epoch:.3f} (seconds since epoch)]\n"
                      "#[Values in microseconds; one interval per second and tag]\n"
                      '"StartTimestamp","Interval_Length","Interval_Max",'
                      '"Interval_Compressed_Histogram"\n')

    def write(self, tag: str, second: int, hist: HdrHistogram) -> None:
        payload = hist.encode().decode("ascii")
        self.fh.write(f"Tag={tag},{second:.3f},1.000,{hist.get_max_value() / 1000:.3f},"
                      f"{payload}\n")

    def flush(self) -> None:
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def read_intervals(path: Path) -> Iterator[Interval]:
    """Every interval line of a log; a damaged log (empty, binary, a line cut short or a
    histogram that does not decode) is refused in one line naming the file and the line."""
    number = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            where = f"{path}: line {number}"
            try:
                line = raw.decode()
            except UnicodeDecodeError:
                raise UsageError(f"{where} is binary data, not a line of a histogram "
                                 "log") from None
            if number == 1 and not line.startswith(_HEADER):
                raise UsageError(f"{path}: not a pgdyno latency histogram log (expected "
                                 f"its first line {_HEADER} {LOG_FORMAT}]...)")
            if not line.startswith("Tag="):
                continue
            try:
                tag, start, _length, _max, payload = line[4:].rstrip("\n").split(",")
                second = math.floor(float(start))
                problem = _payload_problem(payload)
            except (ValueError, OverflowError):
                problem = "not an interval histogram (Tag=NAME,start,length,max,payload)"
            if not raw.endswith(b"\n"):  # every line ends with one: the last was cut short
                raise UsageError(f"{path}: the file is truncated (it ends inside line "
                                 f"{number}, an interval histogram cut short)")
            if problem is not None:
                raise UsageError(f"{where} is damaged: {problem}")
            yield Interval(tag, second, payload)
    if number == 0:
        raise UsageError(f"{path}: not a pgdyno latency histogram log: the file is empty")


_HEADER = "#[Histogram log format version"


def _payload_problem(payload: str) -> str | None:
    """What keeps an encoded histogram from decoding (None: it decodes). HdrHistogram's
    own decoder checks the base64, the header's cookie and length, and the zlib data: a
    few microseconds, against a millisecond for the merge that follows."""
    from hdrh.codec import (
        HdrCookieException,
        HdrHistogramEncoder,
        HdrHistogramSettingsException,
        HdrLengthException,
    )

    try:
        HdrHistogramEncoder.decode(payload)
    except (ValueError, TypeError, zlib.error, HdrCookieException, HdrLengthException,
            HdrHistogramSettingsException) as exc:
        return f"its histogram does not decode ({exc or type(exc).__name__})"
    return None


def merge(intervals: Iterable[Interval], tag: str, seconds: range | None = None
          ) -> HdrHistogram:
    """One histogram of every interval of ``tag`` in ``seconds`` (all when None)."""
    merged = new_histogram()
    for interval in intervals:
        if interval.tag == tag and (seconds is None or interval.second in seconds):
            merged.decode_and_add(interval.payload)
    return merged


def value_at_percentile(hist: HdrHistogram, p: float) -> float:
    """Nearest-rank percentile (as ``histogram.nearest_rank``), as a bucket top; NaN when
    empty. Vectorised over the counts array: the library's own walks it in Python."""
    import numpy as np

    total_count = hist.get_total_count()
    if not total_count:
        return math.nan
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    index = int(np.searchsorted(np.cumsum(counts), nearest_rank(p, total_count)))
    return float(hist.get_highest_equivalent_value(hist.get_value_from_index(index)))
