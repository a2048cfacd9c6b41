"""Price/performance: the best config's TPS on each instance of the hardware catalogue,
measured where a machine of the results tree has its vCPUs and CPU, else projected (from
the size projection's fit, or linearly per vCPU), scaled by core speed where both sides
have a CPU baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgdyno.campaign.cpu_baseline import CpuBaseline, cpu_speed_ratio
from pgdyno.campaign.sizes import SizeScaling, same_cpu
from pgdyno.compare.runs import RunData


@dataclass
class PriceRow:
    instance: str
    vcpus: int
    tps: float
    tps_basis: str
    """``measured`` (this host), ``measured (this host is one)`` (same vCPUs and CPU model),
    ``measured on HOST`` (another machine of the results tree with those vCPUs and CPU),
    ``projected from measured sizes`` (the fit of ``SizeScaling``), ``projected, same core
    speed`` (per-core × vCPUs) or ``projected, CPU-adjusted`` (× the instance's events/s per
    core over this host's)."""
    price_month_usd: float | None
    spot_month_usd: float | None

    @property
    def tps_per_usd(self) -> float | None:
        return self.tps / self.price_month_usd if self.price_month_usd else None

    @property
    def spot_tps_per_usd(self) -> float | None:
        return self.tps / self.spot_month_usd if self.spot_month_usd else None


def price_rows(best: RunData | None, best_tps: float | None, per_core_tps: float | None,
               host_vcpus: int | None, hardware: Any | None, sizes: SizeScaling | None,
               baseline: CpuBaseline | None) -> list[PriceRow]:
    """This host measured first (no price), then each instance of ``hardware``'s family
    (every catalogue instance without one), smallest first."""
    if best is None or per_core_tps is None:
        return []
    measured = best_tps
    profiles = [hardware] if hardware is not None else []
    family = hardware.name.split(".")[0] if hardware is not None else None
    for p in _catalogue():
        if (family is None or p.name.startswith(family)) and \
                all(p.name != q.name for q in profiles):
            profiles.append(p)
    host = (best.manifest.get("host") or {})
    host_cpu = str(host.get("cpu_model") or "")
    # The figure measured here heads the table as what it is: this host, no price.
    rows = [PriceRow(instance=f"this host ({host_cpu or 'CPU unknown'})",
                     vcpus=host_vcpus or 0, tps=measured, tps_basis="measured",
                     price_month_usd=None, spot_month_usd=None)]
    for p in sorted(profiles, key=lambda p: p.vcpus):
        speed = cpu_speed_ratio(baseline, p.cpu_events_per_s_per_core)
        there = next((m for m in (sizes.points if sizes else []) if m.vcpus == p.vcpus
                      and same_cpu(p.cpu_model, m.cpu_model)), None)
        fitted = sizes.tps_at(p.vcpus) if sizes is not None else None
        if p.vcpus == host_vcpus and same_cpu(p.cpu_model, host_cpu):
            tps, basis = measured, "measured (this host is one)"
        elif there is not None:
            tps, basis = there.tps, f"measured on {there.hardware}"
        elif fitted is not None and sizes is not None:
            tps = fitted * (speed or 1.0)
            basis = ("extrapolated" if sizes.extrapolated(p.vcpus) else "projected") + \
                " from measured sizes" + (", CPU-adjusted" if speed else "")
        else:
            tps = per_core_tps * p.vcpus * (speed or 1.0)
            basis = "projected, CPU-adjusted" if speed else "projected, same core speed"
        rows.append(PriceRow(instance=p.name, vcpus=p.vcpus, tps=tps, tps_basis=basis,
                             price_month_usd=p.price_month_usd,
                             spot_month_usd=p.spot_price_month_usd))
    return rows


def _catalogue() -> list[Any]:
    from pgdyno.config import load_hardware
    from pgdyno.config.profiles import catalogue_names

    return [load_hardware(n) for n in catalogue_names()]
