"""The size projection: one workload measured on several machines of the results tree
(``pgdyno fleet``, other instance sizes), TPS fitted against vCPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pgdyno.campaign.journal import headline
from pgdyno.campaign.ranking import best_config, describe_parameters, on_server, parameters_key
from pgdyno.compare.runs import RunData, context_runs


@dataclass
class MeasuredSize:
    """The same workload measured on another machine (a fleet host, another instance size):
    the best config's TPS in its own context, at its vCPUs."""

    context: str
    hardware: str
    """The context's machine name (``HARDWARE--workload``): an inventory host, a profile."""
    vcpus: int
    cpu_model: str
    tps: float
    run: str


@dataclass
class SizeScaling:
    """TPS against vCPUs measured on several machines with one CPU model, fitted as
    ``tps = coefficient × vcpus ** exponent`` (least squares on the logarithms; exponent 1 is
    linear scaling, below 1 sub-linear): measured, not assumed linear."""

    points: list[MeasuredSize] = field(default_factory=list)
    """Every machine measured (this one included), fitted or not."""
    fitted: list[str] = field(default_factory=list)
    """Contexts of the points in the fit: this host's CPU model, like-with-like options."""
    exponent: float | None = None
    coefficient: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def projection_exponent(self) -> float | None:
        """The exponent projections use: the fit's, at most 1. Super-linear growth between
        small sizes (a 1-vCPU machine also running the client) would not carry on, and
        extrapolated it would promise absurd figures."""
        return None if self.exponent is None else min(self.exponent, 1.0)

    def tps_at(self, vcpus: int) -> float | None:
        """TPS projected at ``vcpus`` through the fitted curve, anchored at the measured
        point nearest in size (so a measured size is projected as measured)."""
        b = self.projection_exponent
        fitted = [p for p in self.points if p.context in self.fitted]
        if b is None or not fitted:
            return None
        anchor = min(fitted, key=lambda p: (abs(math.log(p.vcpus / vcpus)), -p.vcpus))
        return anchor.tps * (vcpus / anchor.vcpus) ** b

    def extrapolated(self, vcpus: int) -> bool:
        sizes = [p.vcpus for p in self.points if p.context in self.fitted]
        return bool(sizes) and not min(sizes) <= vcpus <= max(sizes)


def fit_sizes(results_dir: Path, context: str, best: RunData | None,
                 best_tps: float | None) -> SizeScaling | None:
    """This workload's best config (``best``, its mean ``best_tps``) measured on the other
    machines of the results tree (contexts ``OTHER--WORKLOAD``, as `pgdyno fleet` names
    them), with like-with-like parameters; fitted against vCPUs over the machines with this
    host's CPU model. None when no other machine measured it (or the headline is not TPS)."""
    if best is None or best_tps is None or "--" not in context:
        return None
    _hardware, workload = context.split("--", 1)
    key = parameters_key(best)
    here = _measured_size(context, best, best_tps)
    out = SizeScaling(points=[here])
    for ctx_dir in sorted(results_dir.glob(f"*--{workload}")):
        if ctx_dir.name == context or not ctx_dir.is_dir():
            continue
        runs = [r for r in context_runs(results_dir, ctx_dir.name)
                if r.status == "ok" and on_server(r) and not r.role.get("validation")
                and not r.role.get("scaling_check")]
        alike = [r for r in runs if parameters_key(r) == key]
        there, _, value = best_config(alike)
        head = headline(there) if there is not None else None
        if there is None or head is None or not head.is_tps or value is None:
            if runs:
                out.notes.append(f"{ctx_dir.name}: no finished run at "
                                 f"{describe_parameters(best)}")
            continue
        out.points.append(_measured_size(ctx_dir.name, there, value))
    if len(out.points) < 2:
        return None
    same = [p for p in out.points if p.vcpus > 0 and same_cpu(p.cpu_model, here.cpu_model)]
    out.notes += [f"{p.context}: not in the fit (CPU {p.cpu_model or 'unknown'}, not this "
                  "host's)" for p in out.points if p not in same]
    if len({p.vcpus for p in same}) >= 2:
        slope, intercept = np.polyfit(np.log([p.vcpus for p in same]),
                                      np.log([p.tps for p in same]), 1)
        out.exponent, out.coefficient = float(slope), float(np.exp(intercept))
        out.fitted = [p.context for p in same]
    else:
        out.notes.append("one vCPU count with this host's CPU model: nothing to fit")
    return out


def _measured_size(context: str, run: RunData, tps: float) -> MeasuredSize:
    host = run.manifest.get("host") or {}
    vcpus = len(run.role["server_cpus"]) if run.role.get("server_cpus") else \
        int(host.get("cpu_count") or 0)
    return MeasuredSize(context=context, hardware=context.split("--")[0], vcpus=vcpus,
                        cpu_model=str(host.get("cpu_model") or ""), tps=tps, run=str(run.path))


def same_cpu(profile_model: str, host_model: str) -> bool:
    """Whether a profile's CPU model names this host's (a figure measured here then stands
    for the instance; an x86 VM does not measure a Graviton)."""
    a, b = profile_model.lower().strip(), host_model.lower().strip()
    return bool(a and b) and (a in b or b in a)
