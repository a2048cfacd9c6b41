"""How a comparison was measured, and whether its design's assumptions held: the data the
report's "How this was measured" section words.

A block design assumes that the two sides, sharing one machine, differ only in what is
compared. What could break that, and what is checked here:

- one side's block changing the next one's (a cache it warmed, writes it left): the two
  orders inside a pair compared (``compare.paired.order_check``);
- neighbouring pairs moving together (a level of the machine lasting several pairs): the
  lag-1 autocorrelation of the pairs' differences, which the interval allows for;
- in a duet, sharing the machine favouring one side (a config that needs more than half the
  CPU loses more when both run at once): the check pairs, each side alone, compared with the
  duet pairs (``compare.paired.duet_check``);
- the two servers competing for memory (each side's dataset and shared_buffers against the
  memory available) or sharing a device (both data directories on one disk): listed, as
  they hit both sides alike only when the sides are alike.
"""

from __future__ import annotations

import math
import statistics

from pgdyno.compare.alternate import ALTERNATING, TURN_S, pair_values
from pgdyno.compare.blocks import BlockRecord
from pgdyno.compare.model import DesignSummary
from pgdyno.compare.paired import (
    duet_check,
    order_check,
    pair_up,
    paired_change,
    seconds_for_precision,
)
from pgdyno.compare.runs import RunData


def block_design_summary(record: BlockRecord, baseline: RunData,
                         candidate: RunData) -> DesignSummary:
    """The block design's figures and checks, from its record and the two runs."""
    a, b, a_first = _pairs(record)
    est = paired_change(a, b, level=record.final_level)
    pair_s = _pair_seconds(record)
    duet = record.design == "duet"
    return DesignSummary(
        design=record.design, why=record.why, level=record.final_level, method=est.change.method,
        pairs=len(a), stop=record.stop, pair_seconds=pair_s,
        autocorrelation=est.autocorrelation, lags=est.lags, noise_pct=est.change.noise_pct,
        seconds_for_1pct=seconds_for_precision(est.half_width_pct, record.measuring_s, 1.0),
        order=order_check(a, b, a_first) if not duet else None,
        duet=duet_check((a, b), _pairs(record, checks=True)[:2]) if duet else None,
        check_pairs=record.check_pairs(),
        shared=shared_resources(baseline, candidate), blocks=record,
        pilot_pairs=record.pilot_pairs)


def sequential_summary(why: str, confidence: float) -> DesignSummary:
    return DesignSummary(design="sequential", why=why, level=confidence)


def _pairs(record: BlockRecord, *, checks: bool = False
           ) -> tuple[list[float], list[float], list[bool]]:
    """Each pair's headline of A and of B (NaN when missing), and whether A ran first: of
    the pairs that count, or (``checks``) of a duet's check pairs; an alternating
    comparison's pairs are its turns."""
    if record.design == ALTERNATING:
        return pair_values(record.turns) if not checks else ([], [], [])
    return pair_up((b.pair, b.side, b.headline, b.position) for b in record.blocks
                   if not b.pilot and b.check == checks)


def _pair_seconds(record: BlockRecord) -> float:
    """Median wall time of a pair (its blocks one after the other, or together in a duet;
    two turns in the alternating design)."""
    if record.design == ALTERNATING:
        return 2.0 * TURN_S
    per_pair: dict[int, list[float]] = {}
    for block in record.blocks:
        if not block.pilot and not block.check:
            per_pair.setdefault(block.pair, []).append(block.seconds)
    if not per_pair:
        return math.nan
    combine = max if record.design == "duet" else sum
    return statistics.median(combine(v) for v in per_pair.values())


def shared_resources(baseline: RunData, candidate: RunData) -> list[str]:
    """What the two servers shared on this machine, in words, from their manifests."""
    out = []
    sizes = [(r.manifest.get("dataset") or {}) for r in (baseline, candidate)]
    need = sum(int(s.get("size_bytes") or 0) + int(s.get("shared_buffers_bytes") or 0)
               for s in sizes)
    available = min((int(s["available_bytes"]) for s in sizes if s.get("available_bytes")),
                    default=0)
    if need and available:
        fits = need <= available
        out.append(f"memory: both datasets and both shared_buffers take "
                   f"{need / 2**30:.2f} GiB of the {available / 2**30:.1f} GiB available"
                   + ("" if fits else ": they do not fit, so the sides evict each other's "
                      "cached pages and the side that runs second in a pair reads more "
                      "from disk"))
    devices = [_data_device(r) for r in (baseline, candidate)]
    if devices[0] and devices[0] == devices[1]:
        out.append(f"storage: both data directories are on {devices[0]}: each side's "
                   "background writes (checkpoints, autovacuum) may fall in the other's "
                   "blocks; each block starts after its own CHECKPOINT")
    return out


def _data_device(run: RunData) -> str:
    storage = (run.manifest.get("host") or {}).get("storage") or []
    for entry in storage if isinstance(storage, list) else []:
        if isinstance(entry, dict) and entry.get("role") == "data":
            return str(entry.get("device") or "")
    return ""
