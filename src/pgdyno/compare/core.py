"""Baseline against candidate: every metric with its change, interval and verdict."""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.analysis.summary import IterationSummary
from pgdyno.analysis.telemetry import MIN_IOPS_FOR_CV, TelemetrySummary
from pgdyno.compare.alternate import ALTERNATING, pair_values
from pgdyno.compare.io_profile import group_label, group_prefix, io_profiles, role_devices
from pgdyno.compare.model import SCHEMA_VERSION, Comparison, DesignSummary, MetricComparison
from pgdyno.compare.paired import PAIRED_DIFF, paired_change
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import settings_diff
from pgdyno.compare.stats import (
    DEFAULT_CONFIDENCE,
    FLOORS,
    TOO_SMALL,
    UNDETERMINED,
    WELCH_DIFF,
    SampleStats,
    estimate_change,
    with_unit,
)
from pgdyno.errors import UsageError
from pgdyno.units import MIB
from pgdyno.workloads.base import MetricSpec, Workload, headline_metric

METHOD_NOTE = (
    "Each value is one iteration (a separate run of the load started after a CHECKPOINT). "
    "The interval is Welch's t-interval on the logarithms of the "
    "values (a {level:.0f}% interval of the ratio of geometric means, B/A − 1); 1 s intervals "
    "are not treated as independent samples because consecutive seconds move together. A "
    "verdict other than 'no significant difference' needs an interval that excludes 0; "
    "fewer than 2 values on a side gives 'undetermined'. A baseline mean below {floors} "
    "or of 0 is 'too small to compare': a percentage of almost nothing is noise. Noise: the "
    "typical spread of one value around its side's mean.")
DIFF_NOTE = (
    "Rows marked 'difference of means' had a value of 0 (or less) on a side, which has no "
    "logarithm: "
    "their interval is Welch's t-interval of mean(B) − mean(A), in % of A's mean, not an "
    "interval of a ratio (it can pass −100%), and the change chart leaves them out.")
IO_NOTE = (
    "I/O profile: per device (data + WAL when one device holds both), IOPS, MiB/s and "
    "utilisation are averages over the measured windows of each side's iterations, weighted "
    "by their length; the IOPS CV is σ/μ of all their 1 s samples pooled, left out below "
    "{min_iops:g} IOPS. These describe the runs and carry no interval.")


PAIRED_NOTE = (
    "Each value is one block (one iteration of its side's run); block i of A and block i of "
    "B form a pair, measured back to back (or together) under the same conditions of the "
    "machine. The interval is the signed-rank interval of the pairs' log ratios ln(B/A) "
    "around their Hodges-Lehmann estimate (or, marked on the method, the mean with a "
    "Newey-West variance), at the level the comparison's last look could spend (see How "
    "this was measured); a row's pair "
    "missing a value on a side is left out. A verdict other than 'no significant difference' "
    "needs an interval that excludes 0; fewer than 2 pairs gives 'undetermined'. A baseline "
    "mean below {floors} or of 0 is 'too small to compare'. Noise: the spread of one pair's "
    "log ratio.")


TURNS_NOTE = (
    "Each value is one second of one side's load (its turn): the headline in that second, "
    "from the side's per-second file; a second of A and the neighbouring second of B form "
    "a pair. The interval is the signed-rank interval of the pairs' log ratios ln(B/A) "
    "around their Hodges-Lehmann estimate (or, marked on the method, the mean with a "
    "Newey-West variance), at the level the comparison's last look could spend (see How "
    "this was measured); a pair with a second without transactions on a side is left out. "
    "A verdict other than 'no significant difference' needs an interval that excludes 0. "
    "Noise: the spread of one pair's log ratio.")


def method_note(confidence: float, metrics: list[MetricComparison], io: bool,
                paired: bool = False, *, turns: bool = False) -> str:
    """The Method paragraph: what every row's interval is, and the fallbacks the table uses."""
    floors = ", ".join(with_unit(f"{v:g}", u) for u, v in FLOORS.items())
    note = TURNS_NOTE if turns else PAIRED_NOTE if paired else METHOD_NOTE
    parts = [note.format(level=100 * confidence, floors=floors)]
    if any(m.method in (WELCH_DIFF, PAIRED_DIFF) for m in metrics):
        parts.append(DIFF_NOTE)
    if io:
        parts.append(IO_NOTE.format(min_iops=MIN_IOPS_FOR_CV))
    return " ".join(parts)


def _workload(runs: list[RunData]) -> Workload:
    """The runs' workload plugin (the first run's, when they differ)."""
    from pgdyno.workloads import registry

    return registry.get(runs[0].workload)


def _workload_metrics(runs: list[RunData]) -> tuple[MetricSpec, ...]:
    """The metrics the runs' workload declares."""
    return _workload(runs).metrics


def compare_runs(baseline: list[RunData], candidate: list[RunData], *,
                 confidence: float = DEFAULT_CONFIDENCE, baseline_label: str = "",
                 candidate_label: str = "", design: DesignSummary | None = None
                 ) -> Comparison:
    """Every metric of the runs compared. With a block ``design`` (one run a side, its
    iterations the blocks), iteration i of A is paired with iteration i of B and every row's
    interval is the paired one at the design's level; else Welch's on the iterations."""
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
    paired = design is not None and design.blocks is not None
    paired_level = design.level if paired and design is not None else None
    sample_of_rows = "block" if paired else "iteration"
    turns = design.blocks if design is not None and design.blocks is not None \
        and design.blocks.design == ALTERNATING else None
    if turns is not None:
        notes.append("alternating: each side's load was paused every other second, so its "
                     "run's latency figures include the pauses and its telemetry saw both "
                     "sides: only the headline is compared, second by second")
    declared = _workload_metrics(baseline)
    common = _common_clients(baseline, candidate)
    for clients in common:
        a_its = _ok_iterations(baseline, clients)
        b_its = _ok_iterations(candidate, clients)
        if paired and design is not None:
            a_its, b_its = _paired_iterations(a_its, b_its, design.pilot_pairs,
                                              set(design.check_pairs))
        for spec in declared:
            if turns is not None:
                if spec.name != headline_metric(declared).name:
                    continue
                a, b, _ = pair_values(turns.turns)
                metrics.append(compare_values(clients, spec.name, spec.unit, spec.direction,
                                              a, b, confidence, label=spec.label,
                                              sample="second", paired_level=paired_level))
                continue
            if paired:
                a, b = _per_iteration(spec.name, a_its, b_its)
                sample = "block"
            else:
                (a, b), sample = _values(spec.name, a_its, b_its)
            if a or b:
                metrics.append(compare_values(clients, spec.name, spec.unit, spec.direction,
                                              a, b, confidence, label=spec.label,
                                              sample=sample, paired_level=paired_level))
        for m in _telemetry_metrics(a_its, b_its) if turns is None else []:
            if paired:  # a block without telemetry leaves its pair out
                both = [(x, y) for i, j in zip(a_its, b_its, strict=True)
                        if (x := m.value(i.telemetry)) is not None
                        and (y := m.value(j.telemetry)) is not None]
                a, b = [x for x, _ in both], [y for _, y in both]
            else:
                a = [v for i in a_its if (v := m.value(i.telemetry)) is not None]
                b = [v for i in b_its if (v := m.value(i.telemetry)) is not None]
            if a or b:
                metrics.append(compare_values(clients, m.name, m.unit, 0, a, b, confidence,
                                              label=m.label, sample=sample_of_rows,
                                              paired_level=paired_level))
    if not any(m.metric == headline_metric(declared).name for m in metrics):
        notes.append("no client count was measured on both sides")
    # Under turns both sides' telemetry saw both loads: no side's own I/O to describe.
    profiles = io_profiles(baseline, candidate, common) if turns is None else []
    detail = (_workload(baseline).compare_detail([r.path for r in baseline],
                                                 [r.path for r in candidate])
              if len(workloads) == 1 else {})
    if design is not None and design.order is not None and not design.order.holds:
        _assumption_failed(metrics, headline_metric(declared).name, design.order.words,
                           "--design sequential (whole runs, each with its own server "
                           "start)", notes)
    if design is not None and design.duet is not None and not design.duet.holds:
        _assumption_failed(metrics, headline_metric(declared).name, design.duet.words,
                           "--design interleaved (each side alone in its blocks)", notes)
    return Comparison(
        schema_version=SCHEMA_VERSION,
        baseline_label=baseline_label or _label(baseline),
        candidate_label=candidate_label or _label(candidate),
        baseline_runs=[str(r.path) for r in baseline],
        candidate_runs=[str(r.path) for r in candidate], confidence=confidence,
        changes=settings_diff(baseline[-1].manifest, candidate[-1].manifest),
        metrics=metrics,
        method_note=method_note(confidence, metrics, bool(profiles), paired,
                                turns=turns is not None),
        notes=notes, io_profiles=profiles, headline_metric=headline_metric(declared).name,
        # Under turns the other process on the host is the other side: not contamination.
        contaminated=([] if turns is not None else
                      _contaminated("A", baseline, common) + _contaminated("B", candidate, common)),
        workload_detail=detail, design=design)


def _assumption_failed(metrics: list[MetricComparison], headline: str, words: str,
                       instead: str, notes: list[str]) -> None:
    """A block design whose assumption did not hold: the order inside a pair mattered (one
    side's block changed the next one's), or sharing the machine in a duet favoured one
    side. The headline's verdict says so instead of a difference the design may have
    made."""
    why = f"the design's assumption did not hold: {words}; compare with {instead}"
    notes.append(why)
    for m in metrics:
        if m.metric == headline and m.verdict != TOO_SMALL:
            m.verdict, m.reason = UNDETERMINED, why


def _contaminated(side: str, runs: list[RunData], clients: list[int]) -> list[str]:
    """The compared iterations that other load on the host disturbed, with the figure."""
    return [f"{side} {run.name}, {it.clients} clients #{it.iteration}: {it.contamination}"
            for run in runs for c in clients for it in run.iterations(c)
            if it.status == "ok" and it.contaminated]


def compare_values(clients: int, name: str, unit: str, direction: int, a: list[float],
                   b: list[float], confidence: float = DEFAULT_CONFIDENCE, *,
                   label: str = "", sample: str = "iteration",
                   paired_level: float | None = None) -> MetricComparison:
    """One metric's row: each side's values (one per iteration), change, interval, verdict.
    ``paired_level``: value i of each side is a pair (a block design), and the interval is
    the paired one at that level."""
    sa, sb = SampleStats.of(a), SampleStats.of(b)
    if paired_level is not None:
        est = paired_change(a, b, level=paired_level, direction=direction, unit=unit).change
    else:
        est = estimate_change(sa.values, sb.values, direction=direction,
                              confidence=confidence, unit=unit)
    return MetricComparison(
        clients=clients, metric=name, unit=unit, direction=direction, sample=sample,
        baseline_n=sa.n, baseline_mean=sa.mean, baseline_stddev=sa.stddev,
        candidate_n=sb.n, candidate_mean=sb.mean, candidate_stddev=sb.stddev,
        change_pct=est.change_pct, ci_low_pct=est.low_pct, ci_high_pct=est.high_pct,
        noise_pct=est.noise_pct, df=est.df, method=est.method, verdict=est.verdict,
        reason=est.reason, baseline_values=sa.values, candidate_values=sb.values,
        label=label or name)


def _values(name: str, a_its: list[IterationSummary], b_its: list[IterationSummary]
            ) -> tuple[tuple[list[float], list[float]], str]:
    """A metric's values on each side: the iterations' finer samples when every compared
    iteration has them (TPROC-H's per-stream geometric means), else one per iteration."""
    its = a_its + b_its
    if its and all(name in i.samples for i in its):
        return ([v for i in a_its for v in i.samples[name]],
                [v for i in b_its for v in i.samples[name]]), "stream"
    return ([i.metrics[name] for i in a_its if name in i.metrics],
            [i.metrics[name] for i in b_its if name in i.metrics]), "iteration"


def _paired_iterations(a_its: list[IterationSummary], b_its: list[IterationSummary],
                       pilot_pairs: int = 0, left_out: set[int] | None = None
                       ) -> tuple[list[IterationSummary], list[IterationSummary]]:
    """The blocks of both sides with the same iteration number (pair i), in order; the
    pilot's first pairs and ``left_out`` (a duet's check pairs) left out."""
    by_number = {i.iteration: i for i in b_its}
    skip = left_out or set()
    both = [(i, by_number[i.iteration]) for i in sorted(a_its, key=lambda i: i.iteration)
            if i.iteration in by_number and i.iteration > pilot_pairs
            and i.iteration not in skip]
    return [x for x, _ in both], [y for _, y in both]


def _per_iteration(name: str, a_its: list[IterationSummary], b_its: list[IterationSummary]
                   ) -> tuple[list[float], list[float]]:
    """One value per paired block; a pair missing the metric on either side counts as NaN
    on both (the paired interval leaves it out)."""
    nan = float("nan")
    a, b = [], []
    for i, j in zip(a_its, b_its, strict=True):
        x, y = i.metrics.get(name), j.metrics.get(name)
        if x is None and y is None:
            continue
        a.append(nan if x is None or y is None else x)
        b.append(nan if x is None or y is None else y)
    return a, b


def _common_clients(a: list[RunData], b: list[RunData]) -> list[int]:
    # From the iterations, not per_clients: workloads without a pooled row (fio) still
    # have client counts whose iterations carry metrics.
    def counts(runs: list[RunData]) -> set[int]:
        return {it.clients for r in runs if r.summary for it in r.summary.iterations}
    return sorted(counts(a) & counts(b))


def _ok_iterations(runs: list[RunData], clients: int) -> list[IterationSummary]:
    return [it for r in runs for it in r.iterations(clients) if it.status == "ok"]


def _label(runs: list[RunData]) -> str:
    labels = sorted({r.label for r in runs})
    return " / ".join(labels)


# ----- telemetry metrics, per iteration -----------------------------------------------

@dataclass(frozen=True)
class TelemetryMetric:
    name: str
    """Key in compare.json: cpu_busy_pct, data_wal_write_iops, wal_mb_s (kept as saved
    comparisons name it; its unit is MiB/s, 2**20 bytes)."""
    label: str
    unit: str
    group: tuple[str, ...] = ()
    """The device group of a device figure (the roles its device holds)."""
    stat: str = ""
    """The DeviceSummary figure: w_s or r_s, or write_iops_cv (a fraction, shown in %)."""

    def value(self, t: TelemetrySummary | None) -> float | None:
        if t is None:
            return None
        if self.name == "cpu_busy_pct":
            return t.cpu.busy.avg
        if self.name == "wal_mb_s":
            return t.wal.bytes_per_s / MIB if t.wal.bytes_per_s is not None else None
        device = role_devices(t).get(self.group)
        if device is None:
            return None
        figure = getattr(device, self.stat)
        if self.stat.endswith("_cv"):  # None below the IOPS floor: no CV worth comparing
            return None if figure is None else 100.0 * figure
        return figure.avg


WRITE_CV_SUFFIX = "_write_iops_cv"
"""The metric name's end of a device's write-IOPS coefficient of variation (σ/μ of its 1 s
samples, per iteration, in %)."""


def _telemetry_metrics(a_its: list[IterationSummary],
                       b_its: list[IterationSummary]) -> list[TelemetryMetric]:
    """CPU, then read and write IOPS per device (one row for a device that holds both the
    data directory and the WAL: the same disk counted twice would be two identical rows),
    then the WAL the server wrote."""
    observed = [i.telemetry for i in a_its + b_its if i.telemetry is not None]
    if not observed:
        return []
    devices: dict[tuple[str, ...], list[str]] = {}
    for t in observed:
        for key, dev in role_devices(t).items():
            devices.setdefault(key, []).append(dev.device)
    out = [TelemetryMetric("cpu_busy_pct", "CPU busy", "%")]
    for key, names in devices.items():
        where = group_label(key, names)
        where = where[0].upper() + where[1:]
        out += [TelemetryMetric(f"{group_prefix(key)}_write_iops", f"{where} write IOPS",
                                "IOPS", key, "w_s"),
                TelemetryMetric(f"{group_prefix(key)}_read_iops", f"{where} read IOPS",
                                "IOPS", key, "r_s"),
                # How bursty the writes were (checkpoint storms), one value an iteration,
                # so that "burstier" is a verdict with an interval, not two numbers.
                TelemetryMetric(f"{group_prefix(key)}{WRITE_CV_SUFFIX}",
                                f"{where} write IOPS CV", "%", key, "write_iops_cv")]
    out.append(TelemetryMetric("wal_mb_s", "WAL written", "MiB/s"))
    return out
