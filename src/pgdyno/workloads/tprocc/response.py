"""Response times per transaction type in compliant mode, measured by the server.

With keying and think times, pgbench's latency of a transaction is keying + response +
think (the sleeps are part of the script), so it cannot give the response time. The
server can: pgbench's sessions are started with ``log_min_duration_statement = 0``
(through PGOPTIONS, for pgbench's connections only), and every call of a TPROC-C
function leaves a line such as

    2026-11-22 12:00:01.234 UTC [4711] LOG:  duration: 3.180 ms  execute P_0: SELECT
    tprocc_new_order($1, ...   (one line in the log)

After each iteration those lines are copied from the server log into
``response_times.tsv.gz`` (end time, backend pid, transaction type, milliseconds), the
raw file every response-time figure of the report is computed from. The duration is
the server's time for the statement (in simple mode, the whole query string, so the
rolled-back New-Order includes its BEGIN and ROLLBACK); it excludes the network, which
over a local socket is tens of microseconds. Only targets whose log pgdyno reads
(embedded and ``--pg-bin``) have it; superuser rights are needed to set the parameter.

The TPC-C limits (clause 5.2.5.3): the 90th percentile response time must be at most
5 s for New-Order, Payment, Order-Status and Delivery (its queued part), 20 s for
Stock-Level.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.errors import UsageError
from pgdyno.telemetry.checkpoints import line_time
from pgdyno.workloads.tprocc.model import TRANSACTIONS

# numpy is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.

SESSION_OPTIONS = "-c log_min_duration_statement=0 -c log_parameter_max_length=0"
"""PGOPTIONS for pgbench's sessions: log every statement with its duration (parameters
left out: only the timing and the transaction's function name are read back)."""

LIMIT_P90_S = {"new_order": 5.0, "payment": 5.0, "order_status": 5.0, "delivery": 5.0,
               "stock_level": 20.0}
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
RAW_FILE = "response_times.tsv.gz"

_LINE = re.compile(
    r"^\S+ \S+ \S+ \[(?P<pid>\d+)\] "
    r"LOG:  duration: (?P<ms>[\d.]+) ms  (?P<step>statement|bind|execute)[^:]*: (?P<sql>.*)$")
"""A duration line after the ``'%m [%p] '`` prefix, whose time ``line_time`` reads."""
_FUNCTION = re.compile(r"\btprocc_(new_order|payment|order_status|delivery|stock_level)\(")


@dataclass(frozen=True)
class ResponseSample:
    end_epoch: float
    """When the statement finished (the log line's time stamp, in ms)."""
    pid: int
    transaction: str
    ms: float


@dataclass(frozen=True)
class ResponseStats:
    transaction: str
    count: int
    mean_ms: float
    percentiles_ms: dict[str, float]
    max_ms: float
    limit_p90_s: float

    @property
    def p90_ms(self) -> float:
        return self.percentiles_ms["p90"]

    @property
    def within_limit(self) -> bool:
        return self.p90_ms <= self.limit_p90_s * 1000


def parse_log_lines(lines: Iterable[str]) -> Iterator[ResponseSample]:
    """Duration lines of TPROC-C calls in a server log with prefix ``'%m [%p] '`` (UTC).

    Simple protocol: one ``statement`` line per call. Extended and prepared: a ``bind``
    line then an ``execute`` line from the same backend; their sum is the response time
    (parse happens once per session with prepared statements and is left out)."""
    bound: dict[int, float] = {}
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            continue
        function = _FUNCTION.search(match.group("sql"))
        if function is None:
            continue
        pid, ms = int(match.group("pid")), float(match.group("ms"))
        if match.group("step") == "bind":
            bound[pid] = ms
            continue
        end_epoch = line_time(line)
        if end_epoch is None:
            raise ValueError(f"server log line {line[:40]!r}: not in UTC; pgdyno sets "
                             "log_timezone = 'UTC'")
        yield ResponseSample(end_epoch=end_epoch, pid=pid, transaction=function.group(1),
                             ms=ms + bound.pop(pid, 0.0))


def extract(server_log: Path, offset: int, out: Path) -> int:
    """Copy the duration lines written since ``offset`` into ``out`` (TSV, gzip); count."""
    with server_log.open("r", errors="replace") as log:
        log.seek(offset)
        return write_samples(log, out)


def write_samples(log_lines: Iterable[str], out: Path) -> int:
    """The duration lines among ``log_lines`` (a server log's, from any source) into
    ``out`` (TSV, gzip); their count."""
    count = 0
    with gzip.open(out, "wt", compresslevel=3) as dst:
        dst.write("end_epoch\tpid\ttransaction\tms\n")
        for sample in parse_log_lines(log_lines):
            dst.write(f"{sample.end_epoch:.3f}\t{sample.pid}\t{sample.transaction}\t"
                      f"{sample.ms:.3f}\n")
            count += 1
    return count


def read_samples(path: Path) -> list[ResponseSample]:
    """Every timed call of the file; a damaged file (a gzip stream cut short or corrupt, a
    line that is not four fields) is one line naming it, never an EOFError (which the
    command line would take for Ctrl-C)."""
    try:
        with gzip.open(path, "rt") as src:
            next(src, None)
            lines = [line.rstrip("\n").split("\t") for line in src if line.strip()]
    except EOFError:
        raise UsageError(f"{path}: the file is truncated (its gzip stream ends "
                         "early)") from None
    except (gzip.BadGzipFile, zlib.error, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: damaged response-time file ({exc})") from None
    try:
        return [ResponseSample(end_epoch=float(e), pid=int(p), transaction=t, ms=float(m))
                for e, p, t, m in lines]
    except ValueError:
        raise UsageError(f"{path}: damaged response-time file (a line that is not "
                         "end_epoch, pid, transaction, ms)") from None


def stats_by_type(samples: Iterable[ResponseSample], window: tuple[float, float] | None = None
                  ) -> list[ResponseStats]:
    """Count, mean, nearest-rank percentiles and max per type, for statements that
    finished inside ``window`` (epoch seconds; None: all)."""
    import numpy as np

    by_type: dict[str, list[float]] = {t: [] for t in TRANSACTIONS}
    for s in samples:
        if window is None or window[0] <= s.end_epoch < window[1]:
            by_type.setdefault(s.transaction, []).append(s.ms)
    out = []
    for transaction, values in by_type.items():
        if not values:
            continue
        # The log prints microseconds (3 decimals of ms): whole µs, as pgbench latencies.
        histogram = LatencyHistogram()
        histogram.add_array(np.rint(np.asarray(values) * 1000))
        out.append(ResponseStats(
            transaction=transaction, count=histogram.n, mean_ms=histogram.mean_us / 1000,
            percentiles_ms={f"p{p:g}": us / 1000
                            for p, us in histogram.percentiles_us(PERCENTILES).items()},
            max_ms=histogram.max_us / 1000, limit_p90_s=LIMIT_P90_S[transaction]))
    return out
