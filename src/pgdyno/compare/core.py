"""Baseline against candidate: every metric with its change, interval and verdict."""

from __future__ import annotations

from pgdyno import serde
from pgdyno.analysis.summary import IterationSummary
from pgdyno.compare.model import SCHEMA_VERSION, Comparison, MetricComparison
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import settings_diff
from pgdyno.compare.stats import DEFAULT_CONFIDENCE, SampleStats, estimate_change
from pgdyno.errors import UsageError
from pgdyno.workloads.base import MetricSpec, headline_metric

METHOD_NOTE = (
    "Each value is one iteration (a separate run of the load started after a CHECKPOINT). "
    "The interval is Welch's t-interval on the logarithms of the "
    "values (a {level:.0f}% interval of the ratio of geometric means, B/A − 1); 1 s intervals "
    "are not treated as independent samples because consecutive seconds move together. A "
    "verdict other than 'no significant difference' needs an interval that excludes 0; "
    "fewer than 2 values on a side gives 'undetermined'. Noise: the typical spread of one "
    "value around its side's mean.")

def _workload_metrics(runs: list[RunData]) -> tuple[MetricSpec, ...]:
    """The metrics the runs' workload declares (the first run's, when they differ)."""
    from pgdyno.workloads import registry

    return registry.get(runs[0].workload).metrics


def compare_runs(baseline: list[RunData], candidate: list[RunData], *,
                 confidence: float = DEFAULT_CONFIDENCE, baseline_label: str = "",
                 candidate_label: str = "") -> Comparison:
    if not baseline or not candidate:
        raise UsageError("compare: needs at least one run on each side")
    if not 0.5 <= confidence < 1.0:
        raise UsageError(f"--confidence {confidence}: accepted values are 0.5 to 0.999")
    notes = []
    for side in (baseline, candidate):
        for run in side:
            if run.summary is None:
                notes.append(f"{run.name}: no summary.json (status {run.status}); ignored")
            elif run.status != "ok":
                notes.append(f"{run.name}: status {run.status}; only its finished iterations "
                             "are used")
    workloads = {r.workload for r in baseline + candidate}
    if len(workloads) > 1:
        notes.append("the runs are of different workloads: " + ", ".join(sorted(workloads)))
    metrics: list[MetricComparison] = []
    declared = _workload_metrics(baseline)
    for clients in _common_clients(baseline, candidate):
        a_its = _ok_iterations(baseline, clients)
        b_its = _ok_iterations(candidate, clients)
        for spec in declared:
            a = [i.metrics[spec.name] for i in a_its if spec.name in i.metrics]
            b = [i.metrics[spec.name] for i in b_its if spec.name in i.metrics]
            if a or b:
                metrics.append(_compare(clients, spec.name, spec.unit, spec.direction,
                                        "iteration", a, b, confidence))
        if any(i.telemetry is not None for i in a_its + b_its):
            for name, unit, direction in _TELEMETRY_METRICS:
                a = [v for i in a_its if (v := _iteration_metric(i, name)) is not None]
                b = [v for i in b_its if (v := _iteration_metric(i, name)) is not None]
                if a or b:
                    metrics.append(_compare(clients, name, unit, direction, "iteration", a, b,
                                            confidence))
    if not any(m.metric == headline_metric(declared).name for m in metrics):
        notes.append("no client count was measured on both sides")
    return Comparison(
        schema_version=SCHEMA_VERSION,
        baseline_label=baseline_label or _label(baseline),
        candidate_label=candidate_label or _label(candidate),
        baseline_runs=[str(r.path) for r in baseline],
        candidate_runs=[str(r.path) for r in candidate], confidence=confidence,
        changes=settings_diff(baseline[-1].manifest, candidate[-1].manifest),
        metrics=metrics, method_note=METHOD_NOTE.format(level=100 * confidence), notes=notes)


def _compare(clients: int, name: str, unit: str, direction: int, sample: str,
             a: list[float], b: list[float], confidence: float) -> MetricComparison:
    sa, sb = SampleStats.of(a), SampleStats.of(b)
    est = estimate_change(sa.values, sb.values, direction=direction, confidence=confidence)
    return MetricComparison(
        clients=clients, metric=name, unit=unit, direction=direction, sample=sample,
        baseline_n=sa.n, baseline_mean=sa.mean, baseline_stddev=sa.stddev,
        candidate_n=sb.n, candidate_mean=sb.mean, candidate_stddev=sb.stddev,
        change_pct=est.change_pct, ci_low_pct=est.low_pct, ci_high_pct=est.high_pct,
        noise_pct=est.noise_pct, df=est.df, method=est.method, verdict=est.verdict,
        reason=est.reason, baseline_values=sa.values, candidate_values=sb.values)


def _common_clients(a: list[RunData], b: list[RunData]) -> list[int]:
    def counts(runs: list[RunData]) -> set[int]:
        return {c.clients for r in runs if r.summary for c in r.summary.per_clients}
    return sorted(counts(a) & counts(b))


def _ok_iterations(runs: list[RunData], clients: int) -> list[IterationSummary]:
    return [it for r in runs for it in r.iterations(clients) if it.status == "ok"]


def _label(runs: list[RunData]) -> str:
    labels = sorted({r.label for r in runs})
    return " / ".join(labels)


# ----- telemetry metrics, per iteration -----------------------------------------------

_TELEMETRY_METRICS = (("cpu_busy_pct", "%", 0), ("data_write_iops", "IOPS", 0),
                      ("data_read_iops", "IOPS", 0), ("wal_write_iops", "IOPS", 0),
                      ("wal_mb_s", "MB/s", 0))


def _iteration_metric(it: IterationSummary, name: str) -> float | None:
    if it.telemetry is None:
        return None
    return telemetry_metric(serde.to_dict(it.telemetry), name)


def run_metric(run: RunData, name: str) -> float | None:
    """A telemetry figure of the run's headline iteration."""
    return telemetry_metric(run.telemetry or {}, name)


def telemetry_metric(t: dict, name: str) -> float | None:
    """cpu_busy_pct, wal_mb_s, data/wal read/write IOPS from a telemetry summary dict."""
    if not t:
        return None
    if name == "cpu_busy_pct":
        return _dig(t, "cpu", "busy", "avg")
    if name == "wal_mb_s":
        value = _dig(t, "wal", "bytes_per_s")
        return value / 2**20 if value is not None else None
    role, _, kind = name.partition("_")
    field = {"write_iops": "w_s", "read_iops": "r_s"}.get(kind)
    device = _role_device(t, role)
    if field is None or device is None:
        return None
    return _dig(device, field, "avg")


def _role_device(t: dict, role: str) -> dict | None:
    for info in t.get("roles") or []:
        if info.get("role") == role and info.get("device"):
            for dev in t.get("devices") or []:
                if dev.get("device") == info["device"]:
                    return dev
    return None


def _dig(data: dict, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return float(data) if isinstance(data, int | float) else None
