"""An independent recomputation of a run's statistics from its raw pgbench logs.

Deliberately written without pgdyno's parser: plain line splitting, plain sorting.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np


@dataclass
class Recomputed:
    transactions: int
    failed: int
    interval_tps: list[int]
    latencies_ms: np.ndarray
    per_script: dict[int, int]

    def percentile(self, p: float) -> float:
        ordered = np.sort(self.latencies_ms)
        rank = math.ceil(Fraction(str(p)) * len(ordered) / 100)
        return float(ordered[rank - 1])


def origin_of(run: Path, clients: int, iteration: int) -> float:
    """The iteration's time origin (pgbench's launch) as run.json recorded it."""
    plan = json.loads((run / "raw" / "run.json").read_text())
    return next(r["origin_epoch"] for r in plan["records"]
                if r["clients"] == clients and r["iteration"] == iteration)


def recompute_iteration(run: Path, it: dict, warmup_s: float, duration_s: int) -> Recomputed:
    """``recompute`` of a summary's iteration, with its logs and origin."""
    return recompute([run / f for f in it["log_files"]], warmup_s, duration_s,
                     origin_of(run, it["clients"], it["iteration"]))


def recompute(log_files: list[Path], warmup_s: float, duration_s: int,
              origin: float | None = None) -> Recomputed:
    """The measured window starts ``warmup_s`` after ``origin`` (pgbench's launch), or after
    the earliest transaction start when no origin is given."""
    rows = []
    for path in log_files:
        with gzip.open(path, "rt") as fh:
            # A torn last line (pgbench killed while writing it) is dropped, as pgdyno does.
            rows += [f for line in fh if len(f := line.split()) >= 6 and line.endswith("\n")]
    ends, lats, scripts = [], [], []
    for r in rows:
        ends.append(int(r[4]) + int(r[5]) / 1e6)
        lats.append(int(r[2]) if r[2].isdigit() else None)
        scripts.append(int(r[3]))
    start = origin if origin is not None else min(
        e - (lat or 0) / 1e6 for e, lat in zip(ends, lats, strict=True))
    window = start + warmup_s
    interval = [0] * duration_s
    kept, failed, per_script = [], 0, {}
    for end, lat, script in zip(ends, lats, scripts, strict=True):
        offset = end - window
        if not 0 <= offset < duration_s:
            continue
        if lat is None:
            failed += 1
            continue
        interval[int(offset)] += 1
        kept.append(lat / 1000.0)
        per_script[script] = per_script.get(script, 0) + 1
    return Recomputed(len(kept), failed, interval, np.array(kept), per_script)
