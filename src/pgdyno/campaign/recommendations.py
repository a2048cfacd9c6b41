"""The context report's recommendations, by rule, as data: the report words them.

The rules: use the config that beat the baseline most on the headline (with a warning when
it turns crash safety off), avoid those that lost, keep the baseline when none won; do not
reuse a failed run's changes; size for ``HEADROOM`` of the best config's mean TPS; pre-warm
when a cold cache runs below ``COLD_FLOOR`` of warm; distrust the linear projection when the
scaling check falls below ``LINEAR``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.campaign.journal import JournalEntry
from pgdyno.campaign.ranking import Finding
from pgdyno.campaign.scaling import ScalingCheck
from pgdyno.campaign.validation import ValidationResult
from pgdyno.compare.stats import FASTER, SLOWER

DURABILITY = ("fsync", "synchronous_commit", "full_page_writes")
"""Settings that, turned off, trade crash safety for speed: recommending such a config
carries a warning."""
CORRUPTING = ("fsync", "full_page_writes")
"""Of those, the ones whose loss can corrupt data, not only lose committed transactions."""
LINEAR = 0.85
"""Scaling efficiency from which the linear projection is called plausible."""
HEADROOM = 0.8
"""Recommend a size while sustained load stays under 80% of its measured TPS."""
COLD_FLOOR = 0.85
"""A cold cache below this share of the warm TPS calls for pre-warming."""

USE, DURABILITY_RISK, AVOID, KEEP = "use", "durability", "avoid", "keep"
FAILED_RUN, SIZE_HEADROOM, PREWARM = "failed_run", "headroom", "prewarm"
SUBLINEAR, NOISY_SCALING = "sublinear", "noisy_scaling"


@dataclass
class Recommendation:
    """One recommendation and the figures it rests on."""

    kind: str
    """``use`` (the config that beat the baseline most), ``durability`` (that config turns
    crash safety off), ``avoid`` (a config that lost), ``keep`` (none beat the baseline),
    ``failed_run``, ``headroom`` (the load this size sustains), ``prewarm`` (cold cache far
    below warm), ``sublinear`` and ``noisy_scaling`` (the scaling check)."""
    config: str = ""
    """The config it is about (use, durability, avoid, failed_run)."""
    finding: Finding | None = None
    """use, avoid: the headline comparison against the baseline."""
    settings: list[str] = field(default_factory=list)
    """durability: the settings turned off."""
    corrupts: bool = False
    """durability: one of them can corrupt data (fsync, full_page_writes)."""
    run: int | None = None
    """failed_run: its number in the journal."""
    reason: str = ""
    """failed_run: its root cause."""
    tps: float | None = None
    """headroom: the best config's mean TPS."""
    limit_tps: float | None = None
    """headroom: the sustained load to stay under (``HEADROOM`` of ``tps``)."""
    share: float | None = None
    """headroom: ``HEADROOM``; prewarm: the cold cache's TPS over the warm one's."""


def recommend(findings: list[Finding], journal: list[JournalEntry], best_tps: float | None,
              validation: ValidationResult | None,
              scaling: ScalingCheck | None) -> list[Recommendation]:
    """The recommendations of a context, in the report's order."""
    recs: list[Recommendation] = []
    heads = [f for f in findings if f.headline]
    faster = [f for f in heads if f.comparison.verdict == FASTER]
    slower = [f for f in heads if f.comparison.verdict == SLOWER]
    for f in sorted(faster,
                    key=lambda f: -(f.comparison.direction or 1) * f.comparison.change_pct)[:1]:
        recs.append(Recommendation(USE, config=f.config, finding=f))
        risky = [k for k in DURABILITY if f"{k}=off" in f.config.replace(" ", "")]
        if risky:
            recs.append(Recommendation(DURABILITY_RISK, config=f.config, settings=risky,
                                       corrupts=any(k in CORRUPTING for k in risky)))
    recs += [Recommendation(AVOID, config=f.config, finding=f) for f in slower]
    if not faster and findings:
        recs.append(Recommendation(KEEP))
    recs += [Recommendation(FAILED_RUN, config=e.label, run=e.number, reason=e.root_cause)
             for e in journal if e.status == "failed"]
    if best_tps is not None:
        recs.append(Recommendation(SIZE_HEADROOM, tps=best_tps, limit_tps=HEADROOM * best_tps,
                                   share=HEADROOM))
    v = validation
    if v and v.state("cold") and v.state("warm") and v.state("warm").tps:
        ratio = v.state("cold").tps / v.state("warm").tps
        if ratio < COLD_FLOOR:
            recs.append(Recommendation(PREWARM, share=ratio))
    verdict = linear_verdict(scaling) if scaling is not None else None
    if verdict in ("fails", "doubtful"):
        recs.append(Recommendation(SUBLINEAR))
    elif verdict == "undetermined":
        recs.append(Recommendation(NOISY_SCALING))
    return recs


def linear_verdict(check: ScalingCheck) -> str | None:
    """Whether the scaling check supports the linear projection: with an interval ``holds``
    (all of it at ``LINEAR`` or above), ``fails`` (all of it below) or ``undetermined``;
    with one run per core count ``plausible`` or ``doubtful``; None without an efficiency."""
    if check.efficiency is None:
        return None
    if check.efficiency_low is None or check.efficiency_high is None:
        return "plausible" if check.efficiency >= LINEAR else "doubtful"
    if check.efficiency_low >= LINEAR:
        return "holds"
    if check.efficiency_high < LINEAR:
        return "fails"
    return "undetermined"
