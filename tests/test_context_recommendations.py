"""The context report's recommendations are computed by rule, as data, before any wording."""

from __future__ import annotations

from types import SimpleNamespace

from pgdyno.campaign.ranking import Finding
from pgdyno.campaign.recommendations import (
    HEADROOM,
    Recommendation,
    linear_verdict,
    recommend,
)
from pgdyno.campaign.scaling import ScalingCheck
from pgdyno.compare.model import MetricComparison
from pgdyno.compare.stats import FASTER, SLOWER
from pgdyno.serde import to_dict


def comparison(verdict: str, change_pct: float) -> MetricComparison:
    return MetricComparison(
        clients=8, metric="tps", unit="tps", direction=1, sample="iteration", baseline_n=3,
        baseline_mean=100.0, baseline_stddev=1.0, candidate_n=3, candidate_mean=110.0,
        candidate_stddev=1.0, change_pct=change_pct, ci_low_pct=change_pct - 2,
        ci_high_pct=change_pct + 2, noise_pct=1.0, df=4.0, method="welch-log",
        verdict=verdict, reason="", baseline_values=[], candidate_values=[], label="TPS")


class Validation:
    def __init__(self, cold_tps: float, warm_tps: float) -> None:
        self.tps = {"cold": cold_tps, "warm": warm_tps}

    def state(self, name: str) -> SimpleNamespace:
        return SimpleNamespace(tps=self.tps[name])


def scaling(efficiency: float, low: float | None, high: float | None) -> ScalingCheck:
    check = ScalingCheck(1, [1, 2], [], [1.0, 2.0], 4, None)
    check.efficiency, check.efficiency_low, check.efficiency_high = efficiency, low, high
    return check


def test_the_fastest_config_is_recommended_with_its_durability_warning() -> None:
    risky = Finding("tuned + fsync=off", comparison(FASTER, 20.0), headline=True)
    faster = Finding("pgtune", comparison(FASTER, 30.0), headline=True)
    slower = Finding("bad", comparison(SLOWER, -10.0), headline=True)
    recs = recommend([risky, slower, faster], [], None, None, None)
    assert [(r.kind, r.config) for r in recs] == [("use", "pgtune"), ("avoid", "bad")]
    recs = recommend([risky], [], None, None, None)
    assert [r.kind for r in recs] == ["use", "durability"]
    assert recs[1].settings == ["fsync"] and recs[1].corrupts
    assert [r.kind for r in recommend([Finding("x", comparison("no significant difference",
                                                                  1.0), headline=True)],
                                      [], None, None, None)] == ["keep"]


def test_headroom_prewarm_and_failed_runs_carry_their_figures() -> None:
    failed = SimpleNamespace(status="failed", number=3, label="tuned", root_cause="boom")
    recs = recommend([], [failed], 1000.0, Validation(50.0, 100.0), None)
    assert recs[0] == Recommendation("failed_run", config="tuned", run=3, reason="boom")
    assert recs[1].kind == "headroom" and recs[1].limit_tps == HEADROOM * 1000.0
    assert recs[2].kind == "prewarm" and recs[2].share == 0.5
    assert to_dict(recs)[1]["limit_tps"] == 800.0
    assert [r.kind for r in recommend([], [], None, Validation(90.0, 100.0), None)] == []


def test_the_linear_projection_verdict() -> None:
    assert linear_verdict(scaling(0.9, 0.86, 0.95)) == "holds"
    assert linear_verdict(scaling(0.8, 0.7, 0.84)) == "fails"
    assert linear_verdict(scaling(0.85, 0.7, 0.95)) == "undetermined"
    assert linear_verdict(scaling(0.9, None, None)) == "plausible"
    assert linear_verdict(scaling(0.5, None, None)) == "doubtful"
    kinds = {v: [r.kind for r in recommend([], [], None, None, scaling(*v))]
             for v in ((0.8, 0.7, 0.84), (0.85, 0.7, 0.95), (0.9, 0.86, 0.95))}
    assert kinds == {(0.8, 0.7, 0.84): ["sublinear"], (0.85, 0.7, 0.95): ["noisy_scaling"],
                     (0.9, 0.86, 0.95): []}
