"""How long a drive lasts: the endurance projection, from two SMART readings.

Pure arithmetic on ``SmartReading.to_dict()`` readings (``pgdyno.telemetry.smart``), used by
every run's drive-health section and by the fio report.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.units import format_bytes

HOURS_PER_YEAR = 24 * 365.25


@dataclass
class EnduranceProjection:
    """How long the drive lasts, from its own wear estimate and what was written to it.

    NVMe's "percentage used" is the vendor's estimate of the rated endurance consumed; it
    moves in whole percents. Assuming wear proportional to host writes, the drive's rated
    endurance is ``written ÷ (used / 100)`` and what remains is that minus ``written``;
    at the lifetime average write rate (written ÷ power-on hours) the drive's whole service
    life is ``power-on hours ÷ (used / 100)``; at the run's rate, the remaining bytes last
    ``remaining ÷ (bytes written during the run ÷ run hours)``.
    """

    percent_used: float | None
    power_on_hours: float | None
    written_bytes: float | None
    run_write_bytes_per_h: float | None = None
    lifetime_write_bytes_per_h: float | None = None
    rated_bytes: float | None = None
    """Endurance implied by percentage used (a lower bound when it reads 0)."""
    remaining_bytes: float | None = None
    service_life_h: float | None = None
    """Whole service life at the lifetime average write rate."""
    remaining_h_lifetime_rate: float | None = None
    remaining_h_run_rate: float | None = None
    lower_bound: bool = False
    """Percentage used is 0 (below 1%): the figures are at least these."""
    text: str = ""


def endurance_projection(before: dict, after: dict, run_hours: float) -> EnduranceProjection:
    """From two SMART readings (``SmartReading.to_dict()``) taken ``run_hours`` apart."""
    used = after.get("percent_used")
    hours = after.get("power_on_hours")
    written = after.get("host_written_bytes")
    out = EnduranceProjection(percent_used=used, power_on_hours=hours, written_bytes=written)
    if before.get("host_written_bytes") is not None and written is not None and run_hours > 0:
        out.run_write_bytes_per_h = (written - before["host_written_bytes"]) / run_hours
    if written is not None and hours:
        out.lifetime_write_bytes_per_h = written / hours
    if used is None or written is None or not hours:
        missing = [n for n, v in (("percentage used", used), ("host writes", written),
                                  ("power-on hours", hours)) if v is None or v == 0]
        out.text = f"no endurance projection: the drive does not report {', '.join(missing)}."
        return out
    # 0% means "below 1%": project from 1% and say the result is a lower bound.
    share = max(float(used), 1.0) / 100.0
    out.lower_bound = float(used) < 1.0
    out.rated_bytes = written / share
    out.remaining_bytes = out.rated_bytes - written
    out.service_life_h = hours / share
    out.remaining_h_lifetime_rate = out.service_life_h - hours
    if out.run_write_bytes_per_h:
        out.remaining_h_run_rate = out.remaining_bytes / out.run_write_bytes_per_h
    out.text = _endurance_text(out)
    return out


def _endurance_text(p: EnduranceProjection) -> str:
    at_least = "at least " if p.lower_bound else ""
    used = "below 1%" if p.lower_bound else f"{p.percent_used:g}%"
    text = (f"{used} of the rated endurance used after {p.power_on_hours:,.0f} power-on hours "
            f"and {format_bytes(p.written_bytes or 0)} written: a service life of "
            f"{at_least}{p.service_life_h:,.0f} hours ({p.service_life_h / HOURS_PER_YEAR:,.1f} "
            f"years) at the lifetime average of "
            f"{format_bytes(p.lifetime_write_bytes_per_h or 0)}/h")
    if p.remaining_h_run_rate is not None:
        text += (f"; at this run's {format_bytes(p.run_write_bytes_per_h or 0)}/h the "
                 f"remaining {format_bytes(p.remaining_bytes or 0)} last {at_least}"
                 f"{p.remaining_h_run_rate:,.0f} hours "
                 f"({p.remaining_h_run_rate / HOURS_PER_YEAR:,.1f} years)")
    else:
        text += "; this run wrote too little to project its own rate"
    return text + "."
