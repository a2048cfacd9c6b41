"""Validation runs: cold cache, warming, warm, and right after a CHECKPOINT.

One bench run of three iterations on one freshly started server, so that the cache states
follow each other as they do in production and no restart empties shared_buffers between
them (every separate run restarts the server):

- cold: iteration 1, from its first second: shared_buffers empty after the start, and the
  OS page cache dropped first when pgdyno may (root); otherwise the report says so;
- warming: iteration 2, every second;
- after CHECKPOINT: iteration 3's first seconds: pgdyno starts every iteration with a
  CHECKPOINT, so these are the seconds of full-page writes that follow one;
- warm: iteration 3's measured window, after its warm-up.

Each state is a slice of the 1 s timeline saved in summary.json, so every figure can be
recomputed from it; ``validation.json`` beside the run names the slices.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from pgdyno import serde
from pgdyno.analysis.summary import TimelinePoint, load_summary
from pgdyno.errors import RunFailed, UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import write_json_atomic
from pgdyno.runner.bench import run_one
from pgdyno.targets import drop_os_cache, target_class

SCHEMA_VERSION = 1
"""Of the record this module writes beside its run (checked when it is read)."""

VALIDATION_FILE = "validation.json"


@dataclass
class CacheState:
    name: str
    description: str
    iteration: int
    first_s: int
    """Timeline slice [first_s, last_s) of summary.json iterations[iteration - 1]."""
    last_s: int
    seconds: int
    tps: float
    latency_avg_ms: float
    """Mean latency weighted by each second's transactions."""
    transactions: int
    failed: int


@dataclass
class ValidationResult:
    schema_version: int
    run_dir: str
    clients: int
    os_cache_dropped: bool
    states: list[CacheState] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def state(self, name: str) -> CacheState | None:
        return next((s for s in self.states if s.name == name), None)


def validation_options(base: BenchOptions) -> BenchOptions:
    if not target_class(base.target).restartable:
        raise UsageError("validate: the cold state restarts the server; with --dsn pgdyno "
                         "never does that")
    if base.warmup_s < 1:
        raise UsageError("validate: --warmup must be at least 1 s (it is the 'after "
                         "CHECKPOINT' window)")
    return dataclasses.replace(base, clients=(max(base.clients),), iterations=3, cache="warm")


def run_validation(base: BenchOptions, console: Console | None = None) -> ValidationResult:
    opts = validation_options(base)
    # The cold state's page cache: the database host's, dropped before its server starts.
    why = drop_os_cache(opts.target)
    run_dir = run_one(opts, {"label": f"validation ({opts.config})", "validation": True},
                      console)
    if run_dir is None:
        raise RunFailed("validation run failed; see the newest run directory of the context")
    result = analyse_validation(run_dir, not why)
    if why:
        result.notes.append(f"{why}: 'cold' means empty shared_buffers only (a fresh server), "
                            "not a cold page cache")
    write_json_atomic(run_dir / VALIDATION_FILE, serde.to_dict(result))
    return result


def analyse_validation(run_dir: Path, os_cache_dropped: bool) -> ValidationResult:
    summary = load_summary(run_dir / "summary.json")
    its = sorted(summary.iterations, key=lambda i: i.iteration)
    result = ValidationResult(schema_version=SCHEMA_VERSION, run_dir=str(run_dir),
                              clients=its[0].clients if its else 0,
                              os_cache_dropped=os_cache_dropped)
    if len(its) < 3:
        result.notes.append(f"only {len(its)} of 3 iterations finished")
    end = lambda it: int(round(it.warmup_s)) + it.duration_s  # noqa: E731 - trailing partial s
    slices = []
    if len(its) >= 1:
        slices.append(("cold", "fresh server, first second on", its[0], 0, end(its[0])))
    if len(its) >= 2:
        slices.append(("warming", "second iteration, every second", its[1], 0, end(its[1])))
    if len(its) >= 3:
        w = int(round(its[2].warmup_s))
        slices.append(("warm", "third iteration after its warm-up", its[2], w, end(its[2])))
        slices.append(("after CHECKPOINT", f"third iteration, the {w} s right after its "
                       "CHECKPOINT", its[2], 0, w))
    for name, text, it, first, last in slices:
        result.states.append(cache_state(name, text, it.iteration, it.timeline, first, last))
    return result


def cache_state(name: str, description: str, iteration: int, timeline: list[TimelinePoint],
                first: int, last: int) -> CacheState:
    points = [p for p in timeline if first <= p.t_s < last]
    n = sum(p.tps for p in points)
    lat = (sum(p.latency_mean_ms * p.tps for p in points if p.tps) / n) if n else math.nan
    return CacheState(name=name, description=description, iteration=iteration, first_s=first,
                      last_s=last, seconds=len(points),
                      tps=n / len(points) if points else math.nan, latency_avg_ms=lat,
                      transactions=int(n), failed=sum(p.failed for p in points))


def load_validation(run_dir: Path) -> ValidationResult | None:
    path = Path(run_dir) / VALIDATION_FILE
    if not path.is_file():
        return None
    return read_versioned(ValidationResult, path, SCHEMA_VERSION, "validation record")
