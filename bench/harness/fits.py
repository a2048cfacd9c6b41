"""Straight-line fits (a load's seconds over its size) and the interval of pair ratios."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pgdyno.analysis.tdist import t_quantile


@dataclass(frozen=True)
class LineFit:
    """y = intercept + slope × x, by least squares over ``points`` points."""

    intercept: float
    slope: float
    r2: float
    """The share of y's variance the line explains (1.0 when y does not vary)."""
    points: int

    def at(self, x: float) -> float:
        """The line's y at ``x``: a projection, not a measurement, outside the sizes fitted."""
        return self.intercept + self.slope * x


def line_fit(xs: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """The least-squares line through (xs, ys); None with fewer than two distinct xs."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values against {len(ys)} y values")
    if len(set(xs)) < 2:
        return None
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - intercept - slope * x) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    return LineFit(intercept=float(intercept), slope=float(slope),
                   r2=1.0 - residual / total if total else 1.0, points=len(xs))


def ratio_interval(ratios: Sequence[float], confidence: float = 0.95
                   ) -> tuple[float, float | None, float | None]:
    """(geometric mean, low, high) of pair ratios: the mean of their logarithms with a
    t-interval, back to a ratio (no interval from fewer than two pairs)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    half = (t_quantile((1 + confidence) / 2, len(logs) - 1)
            * statistics.stdev(logs) / math.sqrt(len(logs)))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
