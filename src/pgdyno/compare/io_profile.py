"""The I/O profile of a comparison: what the disks did on each side, and how steadily.

Per client count and per device (a device holding both the data directory and the WAL is
one entry, "data + WAL (vda)"), each side's figures come from the telemetry summaries of its
finished iterations (summary.json, recomputed from the raw samples by
:mod:`pgdyno.analysis.telemetry`):

- IOPS, bandwidth (MiB/s) and utilisation are averages over the measured windows, each iteration
  weighted by its length (so: total I/Os ÷ total seconds);
- the IOPS coefficients of variation are σ/μ of every 1 s sample of those windows pooled,
  left out below MIN_IOPS_FOR_CV IOPS ("too little activity"), as in the run report.

It describes the runs; whether a difference is more than noise is the metrics table's job
(it has intervals over iterations), so the changes here carry no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from pgdyno.analysis.telemetry import (
    MIN_IOPS_FOR_CV,
    DeviceSummary,
    TelemetrySummary,
    coefficient_of_variation,
)
from pgdyno.compare.runs import RunData
from pgdyno.compare.stats import TOO_SMALL, floor_for

ROLE_ORDER = ("data", "wal")
ROLE_WORDS = {"data": "data", "wal": "WAL"}
TOO_LITTLE = "too little activity"
NO_DATA = "no data on one side"


# ----- device groups ----------------------------------------------------------------------

def group_key(roles: list[str]) -> tuple[str, ...]:
    """The roles of one device in a fixed order: ("data",), ("wal",), ("data", "wal")."""
    known = [r for r in ROLE_ORDER if r in roles]
    return tuple(known + sorted(r for r in roles if r not in ROLE_ORDER))


def group_words(key: tuple[str, ...]) -> str:
    """"data + WAL" for a device that holds both."""
    return " + ".join(ROLE_WORDS.get(r, r) for r in key)


def group_prefix(key: tuple[str, ...]) -> str:
    """The metric-name prefix of a group: data, wal, data_wal."""
    return "_".join(key)


def group_label(key: tuple[str, ...], devices: list[str]) -> str:
    """"data + WAL (vda)"; both names when the sides used different devices."""
    names = list(dict.fromkeys(devices))
    return f"{group_words(key)} ({'/'.join(names) or '?'})"


def role_devices(t: TelemetrySummary) -> dict[tuple[str, ...], DeviceSummary]:
    """The devices that hold a role of the run, by their group of roles."""
    return {group_key(d.roles): d for d in t.devices if d.roles}


# ----- the profile as data ----------------------------------------------------------------

@dataclass
class IoSide:
    """One side's I/O on one device group, over its measured windows."""

    iterations: int = 0
    seconds: float = 0.0
    devices: list[str] = field(default_factory=list)
    samples: int = 0
    """1 s samples pooled for the coefficients of variation."""
    read_iops: float | None = None
    write_iops: float | None = None
    read_mb_s: float | None = None
    """MiB/s (2**20 bytes), the devices' ``rmb_s``; the name is the one saved."""
    write_mb_s: float | None = None
    """MiB/s (2**20 bytes)."""
    util_pct: float | None = None
    read_iops_cv: float | None = None
    """σ/μ of the 1 s read IOPS samples (a fraction); None below MIN_IOPS_FOR_CV."""
    write_iops_cv: float | None = None


@dataclass
class IoFigure:
    """One row of the profile table."""

    label: str
    unit: str
    baseline: float | None
    candidate: float | None
    change: float | None
    change_unit: str
    """``%`` (B/A - 1) for rates, ``pts`` (B - A) for percentages."""
    change_note: str = ""
    """Why there is no change: too small to compare, too little activity, no data."""
    baseline_missing: str = ""
    """Why the baseline value is absent ("too little activity" for a CV below the floor)."""
    candidate_missing: str = ""


@dataclass
class IoTrace:
    """Write IOPS of one iteration, second by second, for the overlay plot."""

    side: str
    """A (baseline) or B (candidate)."""
    run: str
    iteration: int
    device: str
    seconds: list[float]
    """Seconds since the measured window's start, at the end of each 1 s sample."""
    write_iops: list[float]


@dataclass
class IoProfile:
    clients: int
    group: str
    """"data + WAL (vda)"."""
    roles: list[str]
    baseline: IoSide
    candidate: IoSide
    figures: list[IoFigure]
    traces: list[IoTrace] = field(default_factory=list)


# ----- computing it -----------------------------------------------------------------------

@dataclass
class _Observation:
    run: str
    iteration: int
    window_start: float
    telemetry: TelemetrySummary
    device: DeviceSummary


def io_profiles(baseline: list[RunData], candidate: list[RunData],
                clients: list[int]) -> list[IoProfile]:
    """The profile of every client count and device group that has telemetry."""
    out = []
    for count in clients:
        a, b = _observations(baseline, count), _observations(candidate, count)
        for key in dict.fromkeys([*a, *b]):
            a_obs, b_obs = a.get(key, []), b.get(key, [])
            sa, sb = _side(a_obs), _side(b_obs)
            out.append(IoProfile(
                clients=count, group=group_label(key, sa.devices + sb.devices),
                roles=list(key), baseline=sa, candidate=sb, figures=io_figures(sa, sb),
                traces=[*_traces("A", a_obs), *_traces("B", b_obs)]))
    return out


def _observations(runs: list[RunData],
                  clients: int) -> dict[tuple[str, ...], list[_Observation]]:
    found: dict[tuple[str, ...], list[_Observation]] = {}
    for run, it in _iterations(runs, clients):
        t = it.telemetry
        start = t.window_start if t.window_start is not None else it.window_start_epoch
        for key, dev in role_devices(t).items():
            found.setdefault(key, []).append(
                _Observation(run.path.name, it.iteration, start, t, dev))
    return found


def _iterations(runs: list[RunData], clients: int) -> Iterator:
    for run in runs:
        for it in run.iterations(clients):
            if it.status == "ok" and it.telemetry is not None and it.telemetry.duration_s > 0:
                yield run, it


def _side(obs: list[_Observation]) -> IoSide:
    side = IoSide(iterations=len(obs), seconds=sum(o.telemetry.duration_s for o in obs),
                  devices=list(dict.fromkeys(o.device.device for o in obs)))
    if not obs:
        return side
    for attr, stat in (("read_iops", "r_s"), ("write_iops", "w_s"), ("read_mb_s", "rmb_s"),
                       ("write_mb_s", "wmb_s"), ("util_pct", "util_pct")):
        setattr(side, attr, _weighted(obs, stat))
    reads, writes = [], []
    for o in obs:
        _times, w, r = _window_series(o)
        writes += w
        reads += r
    side.samples = len(writes)
    side.write_iops_cv = coefficient_of_variation(writes, MIN_IOPS_FOR_CV)
    side.read_iops_cv = coefficient_of_variation(reads, MIN_IOPS_FOR_CV)
    return side


def _weighted(obs: list[_Observation], stat: str) -> float | None:
    """The window-length-weighted mean of a device figure's averages (ratio of totals)."""
    pairs = [(getattr(o.device, stat).avg, o.telemetry.duration_s) for o in obs]
    pairs = [(v, w) for v, w in pairs if v is not None]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def io_figures(a: IoSide, b: IoSide) -> list[IoFigure]:
    rows = [_rate("Read IOPS", "IOPS", a.read_iops, b.read_iops),
            _rate("Read bandwidth", "MiB/s", a.read_mb_s, b.read_mb_s),
            _rate("Write IOPS", "IOPS", a.write_iops, b.write_iops),
            _rate("Write bandwidth", "MiB/s", a.write_mb_s, b.write_mb_s),
            _points("Device utilisation (%)", a.util_pct, b.util_pct)]
    for label, attr in (("Write IOPS CV (%)", "write_iops_cv"),
                        ("Read IOPS CV (%)", "read_iops_cv")):
        row = _points(label, _as_pct(getattr(a, attr)), _as_pct(getattr(b, attr)))
        # No CV with samples means the mean was below the floor; without, no data at all.
        row.baseline_missing = TOO_LITTLE if a.samples else NO_DATA
        row.candidate_missing = TOO_LITTLE if b.samples else NO_DATA
        if row.change is None:
            row.change_note = TOO_LITTLE if a.samples and b.samples else NO_DATA
        rows.append(row)
    return rows


def _rate(label: str, unit: str, a: float | None, b: float | None) -> IoFigure:
    if a is None or b is None:
        return IoFigure(label, unit, a, b, None, "%", NO_DATA)
    if a < floor_for(unit):
        return IoFigure(label, unit, a, b, None, "%", TOO_SMALL)
    return IoFigure(label, unit, a, b, 100.0 * (b / a - 1.0), "%")


def _points(label: str, a: float | None, b: float | None) -> IoFigure:
    if a is None or b is None:
        return IoFigure(label, "%", a, b, None, "pts", NO_DATA)
    return IoFigure(label, "%", a, b, b - a, "pts")


def _as_pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100.0 * fraction


def _traces(side: str, obs: list[_Observation]) -> list[IoTrace]:
    out = []
    for o in obs:
        times, values, _r = _window_series(o)
        out.append(IoTrace(side=side, run=o.run, iteration=o.iteration, device=o.device.device,
                           seconds=[t - o.window_start for t in times], write_iops=list(values)))
    return out


def _window_series(o: _Observation) -> tuple[list[float], list[float], list[float]]:
    """The device's per-second write and read rates inside the measured window (the series
    start with the warm-up, for the run report's plots)."""
    t = o.telemetry
    series = t.series
    w = series.disk_w_s.get(o.device.device, [])
    r = series.disk_r_s.get(o.device.device, [])
    start = t.window_start if t.window_start is not None else -math.inf
    end = t.window_end if t.window_end is not None else math.inf
    # A sample ends at host_t; half a second of slack matches the window's own edge ticks.
    keep = [i for i, at in enumerate(series.host_t[:len(w)]) if start + 0.5 <= at <= end + 0.5]
    return ([series.host_t[i] for i in keep], [w[i] for i in keep],
            [r[i] for i in keep if i < len(r)])
