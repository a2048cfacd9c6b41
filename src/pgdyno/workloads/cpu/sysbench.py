"""``sysbench cpu`` as the engine of ``pgdyno bench cpu``: the host's CPU baseline.

This module only finds sysbench, builds its command line and reads its text output;
the plugin glue runs the process. Everything here targets sysbench 1.0.x (Debian's
1.0.20), whose output looks like::

    [ 1s ] thds: 1 eps: 1765.27 lat (ms,95%): 0.59      <- one per --report-interval
    Latency histogram (values are in milliseconds)      <- only with --histogram=on
           value  ------------- distribution ------------- count
           0.536 |**                                       179
    CPU speed:
        events per second:  1790.25
    General statistics:
        total time:                          3.0011s
        total number of events:              5374
    Latency (ms):
             min / avg / max / 95th percentile / sum    (ms)
    Threads fairness:
        events (avg/stddev):           5374.0000/0.00
        execution time (avg/stddev):   2.9988/0.00
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from pgdyno.errors import UsageError

INSTALL_HINT = ("sysbench is not installed: install it with `apt install sysbench` "
                "(Debian/Ubuntu) or `dnf install sysbench` (Fedora/EPEL)")

# sysbench prints floats with printf %f, which can also give nan or inf (e.g. a rate
# over an empty interval); float() reads all of these.
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|nan|inf)"
_VERSION = re.compile(r"^sysbench (?P<version>\d\S*)", re.MULTILINE)
_INTERVAL = re.compile(
    rf"^\[\s*(?P<t>{_NUM})s\s*\]\s+thds:\s*(?P<threads>\d+)\s+eps:\s*(?P<eps>{_NUM})"
    rf"\s+lat \(ms,(?P<pct>\d+)%\):\s*(?P<lat>{_NUM})\s*$")
_HISTOGRAM_ROW = re.compile(rf"^\s*(?P<value>{_NUM})\s*\|\**\s*(?P<count>\d+)\s*$")

# Section headings of the final report, in the order sysbench prints them.
_HISTOGRAM = "Latency histogram (values are in milliseconds)"
_CPU_SPEED = "CPU speed:"
_GENERAL = "General statistics:"
_LATENCY = "Latency (ms):"
_FAIRNESS = "Threads fairness:"
_HEADINGS = (_HISTOGRAM, _CPU_SPEED, _GENERAL, _LATENCY, _FAIRNESS)


def find_sysbench() -> str:
    """The path of ``sysbench`` on PATH; a one-line install hint when it is missing."""
    path = shutil.which("sysbench")
    if path is None:
        raise UsageError(INSTALL_HINT)
    return path


def sysbench_version(path: str) -> str:
    """The version ``sysbench --version`` prints, e.g. ``1.0.20``."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run `{path} --version`: {exc}") from exc
    match = _VERSION.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        raise UsageError(f"`{path} --version` did not print a sysbench version "
                         f"(exit {proc.returncode}): {said[0] if said else 'no output'}")
    return match["version"]


def cpu_command(sysbench: str, *, threads: int, max_prime: int, seconds: int,
                report_interval_s: int = 1, percentile: int = 95,
                histogram: bool = True) -> list[str]:
    """``sysbench cpu ... run`` for ``seconds`` at ``threads`` threads.

    ``percentile=0`` disables percentiles (sysbench's own convention). The histogram
    costs nothing measurable and lets a report show the latency distribution."""
    _check_at_least("threads", threads, 1)
    _check_at_least("max_prime", max_prime, 3)  # no prime below 3 to search for
    # --time=0 with --events=0 would never end: sysbench reads 0 as "no limit".
    _check_at_least("seconds", seconds, 1)
    _check_at_least("report_interval_s", report_interval_s, 0)
    if not 0 <= percentile <= 100:
        raise UsageError(f"sysbench cpu: percentile must be 0 (off) to 100, not {percentile}")
    return [
        sysbench, "cpu",
        f"--cpu-max-prime={max_prime}",
        f"--threads={threads}",
        f"--time={seconds}",
        # sysbench stops at whichever limit comes first; 0 leaves the time alone.
        "--events=0",
        f"--report-interval={report_interval_s}",
        f"--percentile={percentile}",
        f"--histogram={'on' if histogram else 'off'}",
        "run",
    ]


def _check_at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise UsageError(f"sysbench cpu: {name} must be at least {low}, not {value}")


@dataclass
class CpuInterval:
    """One ``--report-interval`` line: figures over the interval ending at ``t_s``."""

    t_s: float
    threads: int
    events_per_s: float
    latency_pct_ms: float
    """NaN when percentiles are disabled (sysbench then prints 0.00)."""


@dataclass
class HistogramBucket:
    """One latency histogram row; a dataclass, not a tuple, so serde keeps ``count`` an int."""

    latency_ms: float
    count: int


@dataclass
class CpuResult:
    sysbench_version: str
    threads: int
    max_prime: int
    events_per_s: float
    total_time_s: float
    total_events: int
    latency_min_ms: float
    latency_avg_ms: float
    latency_max_ms: float
    latency_pct: int
    """The percentile of ``latency_pct_ms``; 0 when disabled (``latency_pct_ms`` is NaN)."""
    latency_pct_ms: float
    latency_sum_ms: float
    fairness_events_avg: float
    fairness_events_stddev: float
    fairness_time_avg_s: float
    fairness_time_stddev_s: float
    intervals: list[CpuInterval] = field(default_factory=list)
    """sysbench often drops the last interval line of a run: they may not cover it all."""
    histogram: list[HistogramBucket] = field(default_factory=list)
    """Non-empty buckets, lowest first; empty without ``--histogram=on``."""


def parse_interval_line(line: str) -> CpuInterval | None:
    """A live ``[ 1s ] thds: 2 eps: 2345.12 lat (ms,95%): 0.87`` line, None for any other."""
    match = _INTERVAL.match(line.strip())
    if match is None:
        return None
    latency = float(match["lat"]) if int(match["pct"]) > 0 else math.nan
    return CpuInterval(t_s=float(match["t"]), threads=int(match["threads"]),
                       events_per_s=float(match["eps"]), latency_pct_ms=latency)


def parse_cpu_output(text: str) -> CpuResult:
    """The full stdout of ``sysbench cpu ... run``; ValueError names what is missing."""
    lines = text.splitlines()
    preamble, sections = _split_sections(lines)
    for heading in (_CPU_SPEED, _GENERAL, _LATENCY, _FAIRNESS):
        if heading not in sections:
            raise ValueError(f"sysbench cpu output has no '{heading.rstrip(':')}' section "
                             "(truncated, or sysbench failed before its report)")
    version = _VERSION.search("\n".join(preamble))
    if version is None:
        raise ValueError("sysbench cpu output has no 'sysbench <version>' line")
    threads = _preamble_int(preamble, "Number of threads")
    max_prime = _preamble_int(preamble, "Prime numbers limit")
    speed, general, latency, fairness = (
        sections[h] for h in (_CPU_SPEED, _GENERAL, _LATENCY, _FAIRNESS))
    pct, pct_ms = _percentile(latency)
    events_avg, events_stddev = _pair(fairness, _FAIRNESS, "events (avg/stddev)")
    time_avg, time_stddev = _pair(fairness, _FAIRNESS, "execution time (avg/stddev)")
    return CpuResult(
        sysbench_version=version["version"],
        threads=threads,
        max_prime=max_prime,
        events_per_s=_value(speed, _CPU_SPEED, "events per second"),
        total_time_s=_value(general, _GENERAL, "total time", unit="s"),
        total_events=int(_value(general, _GENERAL, "total number of events", number=r"\d+")),
        latency_min_ms=_value(latency, _LATENCY, "min"),
        latency_avg_ms=_value(latency, _LATENCY, "avg"),
        latency_max_ms=_value(latency, _LATENCY, "max"),
        latency_pct=pct,
        latency_pct_ms=pct_ms,
        latency_sum_ms=_value(latency, _LATENCY, "sum"),
        fairness_events_avg=events_avg,
        fairness_events_stddev=events_stddev,
        fairness_time_avg_s=time_avg,
        fairness_time_stddev_s=time_stddev,
        intervals=[i for i in map(parse_interval_line, preamble) if i is not None],
        histogram=_histogram(sections.get(_HISTOGRAM, [])),
    )


def _split_sections(lines: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Lines before the first report heading (options, interval lines), then each section."""
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current = preamble
    for line in lines:
        heading = line.strip()
        if heading in _HEADINGS:
            current = sections.setdefault(heading, [])
        else:
            current.append(line)
    return preamble, sections


def _preamble_int(preamble: list[str], label: str) -> int:
    pattern = re.compile(rf"^{re.escape(label)}:\s*(\d+)\s*$")
    for line in preamble:
        if match := pattern.match(line.strip()):
            return int(match[1])
    raise ValueError(f"sysbench cpu output has no '{label}:' line before its report "
                     "(not the output of `sysbench cpu ... run`?)")


def _value(section: list[str], heading: str, label: str, *, number: str = _NUM,
           unit: str = "") -> float:
    pattern = re.compile(rf"^{re.escape(label)}:\s*({number}){unit}\s*$")
    for line in section:
        if match := pattern.match(line.strip()):
            return float(match[1])
    raise ValueError(_missing(heading, label))


def _pair(section: list[str], heading: str, label: str) -> tuple[float, float]:
    pattern = re.compile(rf"^{re.escape(label)}:\s*({_NUM})/({_NUM})\s*$")
    for line in section:
        if match := pattern.match(line.strip()):
            return float(match[1]), float(match[2])
    raise ValueError(_missing(heading, label))


def _percentile(latency: list[str]) -> tuple[int, float]:
    """``95th percentile: 0.58`` or, with ``--percentile=0``, ``percentile stats: disabled``."""
    pattern = re.compile(rf"^(\d+)th percentile:\s*({_NUM})\s*$")
    for line in latency:
        stripped = line.strip()
        if match := pattern.match(stripped):
            return int(match[1]), float(match[2])
        if re.match(r"^percentile stats:\s*disabled$", stripped):
            return 0, math.nan
    raise ValueError(_missing(_LATENCY, "Nth percentile"))


def _missing(heading: str, label: str) -> str:
    return (f"sysbench cpu output: the '{heading.rstrip(':')}' section has no '{label}' line "
            "(truncated?)")


def _histogram(section: list[str]) -> list[HistogramBucket]:
    """Rows ``value |*** count``; the column header and blank lines are skipped."""
    buckets = []
    for line in section:
        if match := _HISTOGRAM_ROW.match(line):
            buckets.append(HistogramBucket(latency_ms=float(match["value"]),
                                           count=int(match["count"])))
    return buckets
