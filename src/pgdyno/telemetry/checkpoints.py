"""Checkpoint events from the server log (log_checkpoints = on).

pgdyno's embedded servers log with ``log_line_prefix = '%m [%p] '`` in UTC, so each line
starts with ``2026-01-05 12:00:00.123 UTC [1234]``; that timestamp is wall-clock time and
shares the time axis of every other series. Lines with another prefix are kept in the raw
copy but cannot be placed in time and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

PREFIX_RE = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?) (?P<tz>[A-Z]{2,5}|[+-]\d{2})\b"
)
START_RE = re.compile(r"(?P<kind>checkpoint|restartpoint) starting: (?P<reason>.*)$")
COMPLETE_RE = re.compile(
    r"(?P<kind>checkpoint|restartpoint) complete: .*?wrote (?P<buffers>\d+) buffers"
    r".*?write=(?P<write>[\d.]+) s, sync=(?P<sync>[\d.]+) s, total=(?P<total>[\d.]+) s"
    r"(?:.*?distance=(?P<distance>\d+) kB, estimate=(?P<estimate>\d+) kB)?"
)
TOO_FREQUENT_RE = re.compile(r"checkpoints are occurring too frequently \((?P<secs>\d+) second")
MAX_COPY_BYTES = 64 * 1024 * 1024  # a runaway log must not fill the run directory


@dataclass
class CheckpointLogEvent:
    t: float
    """Epoch seconds from the log line's timestamp."""
    event: str
    """``start``, ``complete`` or ``too_frequent``."""
    reason: str = ""
    """For ``start``: the flags PostgreSQL prints (``time``, ``wal``, ``immediate force wait``)."""
    buffers: int | None = None
    write_s: float | None = None
    sync_s: float | None = None
    total_s: float | None = None
    distance_kb: int | None = None
    estimate_kb: int | None = None
    apart_s: int | None = None
    """For ``too_frequent``: seconds since the previous checkpoint."""


def line_time(line: str) -> float | None:
    match = PREFIX_RE.match(line)
    if match is None:
        return None
    tz = match.group("tz")
    if tz not in ("UTC", "GMT", "+00"):
        return None  # pgdyno sets log_timezone = UTC; anything else is not ours to guess
    text = match.group("ts")
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()


def parse_line(line: str) -> CheckpointLogEvent | None:
    if "checkpoint" not in line and "restartpoint" not in line:
        return None
    t = line_time(line)
    if t is None:
        return None
    if (m := START_RE.search(line)) is not None:
        return CheckpointLogEvent(t=t, event="start", reason=m.group("reason").strip())
    if (m := COMPLETE_RE.search(line)) is not None:
        dist, est = m.group("distance"), m.group("estimate")
        return CheckpointLogEvent(
            t=t, event="complete", buffers=int(m.group("buffers")),
            write_s=float(m.group("write")), sync_s=float(m.group("sync")),
            total_s=float(m.group("total")),
            distance_kb=int(dist) if dist else None, estimate_kb=int(est) if est else None,
        )
    if (m := TOO_FREQUENT_RE.search(line)) is not None:
        return CheckpointLogEvent(t=t, event="too_frequent", apart_s=int(m.group("secs")))
    return None


def read_checkpoint_lines(log_path: Path, offset: int) -> list[str]:
    """Lines of the log from ``offset`` that mention checkpoints (the raw copy kept)."""
    with log_path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read(MAX_COPY_BYTES)
    text = data.decode("utf-8", errors="replace")
    return [line for line in text.splitlines()
            if "checkpoint" in line or "restartpoint" in line]


def parse_lines(lines: list[str]) -> list[CheckpointLogEvent]:
    return [ev for ev in (parse_line(line) for line in lines) if ev is not None]
