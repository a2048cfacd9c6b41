"""From a campaign's journal and run directories to a ``StudyRecord``.

Everything here is read from files: the journal says which run each cell made, the runs'
summaries and manifests give the figures, ``compare_runs`` makes each comparison. Nothing
is measured or remembered in between, so a rebuild gives the same record. A run that cannot
be read (a truncated summary.json or manifest.json) is not dropped quietly: it is left out
of the figures, its cell reads ``damaged`` and the record's ``left_out`` names the file and
why, which the report's threats to validity say.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgdyno.analysis.summary import IterationSummary
from pgdyno.analysis.telemetry.model import SmartChange
from pgdyno.campaign.pairs import BLOCKS_EVENT, DESIGN_EVENT
from pgdyno.campaign.runner import journal_path, read_journal, run_path
from pgdyno.campaign.spec import CampaignSpec, Cell
from pgdyno.compare.alternate import ALTERNATING, Turn
from pgdyno.compare.blocks import read_block_record
from pgdyno.compare.core import compare_runs
from pgdyno.compare.design import block_design_summary, sequential_summary
from pgdyno.compare.model import Comparison, DesignSummary
from pgdyno.compare.render import write_comparison
from pgdyno.compare.runs import RunData, load_run
from pgdyno.compare.stats import DEFAULT_CONFIDENCE
from pgdyno.config.units import human_bytes
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.provision.model import ProvisionPlan
from pgdyno.results.sweepdir import SweepRecord
from pgdyno.study import conclusions
from pgdyno.study.model import (
    DAMAGED,
    SCHEMA_VERSION,
    CellState,
    LeftOutRun,
    MetricFigure,
    ProvisionRecord,
    Side,
    SmartPhase,
    StepComparison,
    StudyRecord,
    Validation,
    WorkloadResult,
)
from pgdyno.study.spec import StudySpec
from pgdyno.study.versions import build_versions
from pgdyno.workloads import registry


def build_study(spec: CampaignSpec, study: StudySpec, out_dir: Path) -> StudyRecord:
    """The study of ``spec``'s campaign as its journal and runs stand now; each comparison's
    full report is written under ``out_dir`` (``compare-<workload>/``)."""
    events = read_journal(journal_path(spec))
    cells = _cell_states(spec.cells(), events, spec.results_dir)
    by_key = {c.key: c for c in cells}
    left_out: dict[str, LeftOutRun] = {}
    designs = Designs.of(events, spec)
    results = [_workload_result(spec, study, w, by_key, out_dir, left_out, designs)
               for w in spec.workloads]
    _mark_damaged(by_key, list(left_out.values()))
    record = StudyRecord(
        schema_version=SCHEMA_VERSION, name=study.title, campaign=spec.name,
        size=spec.size or "default", question=study.question, title=study.title,
        hardware=_hardware(results), started_at=_first(events, "at"),
        ended_at=_last(events, "at"), baseline=study.baseline, candidate=study.candidate,
        sections=list(study.sections), cells=cells, workloads=results,
        settings=_settings(results), wall_seconds=_wall_seconds(events))
    record.vcpus = next((n for r in results for side in r.sides
                         if (n := _vcpus(side)) is not None), None)
    record.validation = _validation(study, record)
    record.smart_phases, record.smart_note = smart_phases(_smart_readings(spec, results))
    record.provision = read_provision_plans(spec.journal_dir)
    record.left_out = list(left_out.values())
    record.versions = build_versions(spec, study.baseline, {
        r.workload: r.comparison for r in results if r.comparison is not None},
        study.candidate)
    record.findings = conclusions.findings(record)
    record.threats = conclusions.threats(record)
    return record


# ----- cells and runs ---------------------------------------------------------------------------

def _cell_states(cells: list[Cell], events: list[dict], results_dir: Path) -> list[CellState]:
    last: dict[str, dict] = {}
    for ev in events:
        if ev.get("event") == "run-end" and isinstance(ev.get("cell"), str):
            last[ev["cell"]] = ev
    out = []
    for cell in cells:
        ev = last.get(cell.key)
        if ev is None:
            out.append(CellState(cell.key, "pending"))
            continue
        recorded = ev.get("run_dir")
        run_dir = str(run_path(results_dir, str(recorded))) if recorded else None
        status = str(ev.get("status", "?"))
        # An ok cell without a run of its own was measured in its workload's blocks.
        if status == "ok" and run_dir is not None and not Path(run_dir).is_dir():
            status, ev = "missing", {**ev, "reason": f"its run directory {run_dir} is gone"}
        out.append(CellState(cell.key, status, str(ev.get("reason") or ""), run_dir))
    return out


def _mark_damaged(cells: dict[str, CellState], left_out: list[LeftOutRun]) -> None:
    """A cell that ended ok whose run could not be read does not read ``ok``."""
    for run in left_out:
        cell = cells.get(run.cell)
        if cell is not None and cell.status == "ok":
            cell.status, cell.reason = DAMAGED, run.reason


CellRun = tuple[str, Path]
"""(a cell's key, its run or sweep directory)."""


def _ok_dirs(spec: CampaignSpec, workload: str, label: str,
             cells: dict[str, CellState]) -> list[CellRun]:
    keys = [c.key for c in spec.cells() if c.workload == workload and c.config.label == label]
    return [(k, Path(cells[k].run_dir)) for k in keys
            if cells[k].status == "ok" and cells[k].run_dir]


def _labels_run(spec: CampaignSpec, study: StudySpec, workload: str) -> list[str]:
    """The sides a workload has: baseline and candidate, or the one config it ran under."""
    ran = {c.config.label for c in spec.cells() if c.workload == workload}
    wanted = [x for x in (study.baseline, study.candidate) if x is not None and x in ran]
    return wanted or sorted(ran, key=[c.label for c in spec.configs].index)[:1]


@dataclass
class Designs:
    """How the journal says each workload's sides were compared: the block comparisons'
    records by (workload, sweep step or None), and why a workload ran in whole runs."""

    blocks: dict[tuple[str, int | None], Path]
    sequential: dict[str, str]

    @classmethod
    def of(cls, events: list[dict], spec: CampaignSpec) -> Designs:
        blocks: dict[tuple[str, int | None], Path] = {}
        sequential: dict[str, str] = {}
        for ev in events:
            workload = ev.get("workload")
            if not isinstance(workload, str):
                continue
            if ev.get("event") == BLOCKS_EVENT and isinstance(ev.get("record"), str):
                size = ev.get("size")
                blocks[(workload, size if isinstance(size, int) else None)] = (
                    spec.journal_dir / ev["record"])
            elif ev.get("event") == DESIGN_EVENT and ev.get("design") == "sequential":
                sequential[workload] = str(ev.get("why") or "")
        return cls(blocks, sequential)

    def of_runs(self, workload: str, size: int | None, a: list[RunData], b: list[RunData],
                left_out: dict[str, LeftOutRun]) -> DesignSummary | None:
        """The design the two sides' runs were measured in: a block comparison's (its
        record read, the runs its sides), or the whole runs' with the journal's reason."""
        path = self.blocks.get((workload, size))
        if path is not None and len(a) == 1 and len(b) == 1:
            try:
                record = read_block_record(path)
            except PgdynoError as exc:
                left_out.setdefault(str(path), LeftOutRun(
                    cell="", workload=workload, run_dir=str(path.parent),
                    reason=" ".join(str(exc).split())))
                return None
            return block_design_summary(record, a[0], b[0])
        if workload in self.sequential:
            return sequential_summary(self.sequential[workload], DEFAULT_CONFIDENCE)
        return None


def _workload_result(spec: CampaignSpec, study: StudySpec, workload: str,
                     cells: dict[str, CellState], out_dir: Path,
                     left_out: dict[str, LeftOutRun], designs: Designs) -> WorkloadResult:
    """One workload's sides and comparisons; every run it cannot read goes to ``left_out``
    (by directory) instead of silently out of the figures."""
    plugin = registry.get(workload)
    labels = _labels_run(spec, study, workload)
    cell_runs = {label: _ok_dirs(spec, workload, label, cells) for label in labels}
    reader = RunReader(workload, left_out)
    result = WorkloadResult(workload=workload, description=plugin.description,
                            headline=_headline(plugin), anchor=f"workload-{workload}",
                            sides=[], size_unit=plugin.size_unit,
                            chart_metrics=[_headline(plugin), *plugin.chart_metrics])
    sweeps = any(_is_sweep(path) for runs in cell_runs.values() for _, path in runs)
    size: int | None = None
    if sweeps:
        step_runs = {label: reader.steps(runs) for label, runs in cell_runs.items()}
        size = _largest_common(step_runs, labels)
        runs = {label: step_runs[label].get(size, []) for label in labels}
    else:
        runs = {label: reader.runs(found) for label, found in cell_runs.items()}
    dirs = {label: [p for _, p in found if str(p) not in left_out or _is_sweep(p)]
            for label, found in cell_runs.items()}
    clients = _common_clients([r for rs in runs.values() for r in rs])
    result.sides = [_side(label, [str(p) for p in dirs[label]], runs[label], clients, plugin)
                    for label in labels]
    if len(labels) == 2 and all(runs[label] for label in labels):
        a, b = labels
        design = designs.of_runs(workload, size, runs[a], runs[b], left_out)
        if design is not None and design.blocks is not None \
                and design.blocks.design == ALTERNATING:
            for side, key in zip(result.sides, ("A", "B"), strict=True):
                _in_turns(side, design.blocks.turns, key, plugin)
        result.comparison = _compare(runs[a], runs[b], a, b, design)
        if result.comparison is not None:
            target = out_dir / f"compare-{workload}"
            with contextlib.suppress(PgdynoError, OSError, ValueError):
                write_comparison(result.comparison, runs[a], runs[b], target)
                result.compare_dir = target.name
        if sweeps:
            result.steps = _step_comparisons(
                step_runs, a, b, lambda size, x, y: designs.of_runs(workload, size, x, y,
                                                                    left_out))
            result.sweep_compare_dir = _sweep_comparison(dirs[a], dirs[b], workload, out_dir)
    return result


def _sweep_comparison(a: list[Path], b: list[Path], workload: str,
                      out_dir: Path) -> str | None:
    """The workload's own comparison of the last sweep of each side (the chart of
    real against ideal throughput and its memory summary)."""
    from pgdyno.compare.sweeps import compare_sweeps, is_sweep_dir, write_sweep_comparison

    a_dirs, b_dirs = [p for p in a if is_sweep_dir(p)], [p for p in b if is_sweep_dir(p)]
    if not a_dirs or not b_dirs:
        return None
    target = out_dir / f"sweeps-{workload}"
    try:
        write_sweep_comparison(compare_sweeps(a_dirs[-1], b_dirs[-1]), target)
    except (PgdynoError, OSError, ValueError):
        return None
    return target.name


def _headline(plugin) -> str:  # noqa: ANN001 - a registry plugin
    return next((m.name for m in plugin.metrics if m.headline), plugin.metrics[0].name)


def _is_sweep(path: Path) -> bool:
    return (path / "sweep.json").is_file()


def read_study_run(path: Path) -> RunData:
    """A run as a study uses it, or UsageError naming the file that keeps it out: a damaged
    or unknown-version manifest.json or summary.json, or no summary.json at all (its report
    was never built)."""
    run = load_run(path)
    if run.summary is None:
        raise UsageError(f"{path / 'summary.json'}: missing (the run's report was never "
                         "built); rebuild it with `pgdyno report RUN_DIR`")
    return run


@dataclass
class RunReader:
    """Reads one workload's runs; a run it cannot read is recorded in ``left_out`` with the
    reader's one line, so that the study says which run it left out and why."""

    workload: str
    left_out: dict[str, LeftOutRun]

    def runs(self, found: list[CellRun]) -> list[RunData]:
        out = []
        for key, path in found:
            try:
                out.append(read_study_run(path))
            except (PgdynoError, OSError) as exc:
                self.leave_out(key, path, exc)
        return out

    def steps(self, found: list[CellRun]) -> dict[int, list[RunData]]:
        """Sweep cells' runs by size (plain runs among them are not steps: left aside)."""
        out: dict[int, list[RunData]] = {}
        for key, path in found:
            if not _is_sweep(path):
                continue
            try:
                record = SweepRecord.load(path)
            except PgdynoError as exc:
                self.leave_out(key, path, exc)
                continue
            for step in record.steps:
                # A step whose run is left out does not count as measured at its size.
                if step.status == "ok" and step.run and (
                        run := self.runs([(key, _step_run_path(path, step.run))])):
                    out.setdefault(step.size, []).extend(run)
        return out

    def leave_out(self, key: str, path: Path, exc: Exception) -> None:
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line, always
        self.left_out.setdefault(str(path), LeftOutRun(cell=key, workload=self.workload,
                                                       run_dir=str(path), reason=reason))


def _largest_common(step_runs: dict[str, dict[int, list[RunData]]],
                    labels: list[str]) -> int | None:
    """The largest sweep size every side measured: what the side figures describe."""
    common = set.intersection(*(set(step_runs[x]) for x in labels)) if labels else set()
    return max(common) if common else None


def _step_comparisons(step_runs: dict[str, dict[int, list[RunData]]], a: str, b: str,
                      design_of: Callable[[int, list[RunData], list[RunData]],
                                          DesignSummary | None]) -> list[StepComparison]:
    out = []
    for size in sorted(set(step_runs[a]) & set(step_runs[b])):
        x, y = step_runs[a][size], step_runs[b][size]
        cmp = _compare(x, y, a, b, design_of(size, x, y))
        if cmp is not None:
            out.append(StepComparison(size, cmp))
    return out


def _compare(a: list[RunData], b: list[RunData], a_label: str, b_label: str,
             design: DesignSummary | None = None) -> Comparison | None:
    try:
        return compare_runs(a, b, baseline_label=a_label, candidate_label=b_label,
                            design=design)
    except PgdynoError:
        return None


def _common_clients(runs: list[RunData]) -> int | None:
    """The highest client count every run measured (what the figures compare at)."""
    counts = [set(r.summary.client_counts) for r in runs if r.summary is not None]
    common = set.intersection(*counts) if counts else set()
    return max(common) if common else None


def _iterations(runs: list[RunData], clients: int | None) -> list[IterationSummary]:
    return [it for r in runs if r.summary is not None for it in r.summary.iterations
            if it.status == "ok" and (clients is None or it.clients == clients)]


def _side(label: str, dirs: list[str], runs: list[RunData], clients: int | None,
          plugin) -> Side:  # noqa: ANN001 - a registry plugin
    its = _iterations(runs, clients)
    side = Side(label=label, runs=dirs, clients=clients)
    for spec in plugin.metrics:
        values = [it.metrics[spec.name] for it in its if spec.name in it.metrics]
        values = [v for v in values if v == v]  # NaN: not measured
        if not values:
            continue
        side.figures.append(MetricFigure(
            name=spec.name, label=spec.label, unit=spec.unit, direction=spec.direction,
            mean=statistics.fmean(values),
            stddev=statistics.stdev(values) if len(values) > 1 else 0.0,
            n=len(values), values=values))
    votes = Counter(it.verdict.label for it in its if it.verdict is not None)
    side.bottleneck_votes = dict(votes)
    side.bottleneck = votes.most_common(1)[0][0] if votes else None
    side.window_s = min((float(it.duration_s) for it in its), default=None)
    side.contaminated = [f"{r.name}, {it.clients} clients #{it.iteration}: {it.contamination}"
                         for r in runs if r.summary is not None for it in r.summary.iterations
                         if it.contaminated and (clients is None or it.clients == clients)]
    dataset = next((r.manifest.get("dataset") for r in runs if r.manifest.get("dataset")), None)
    if dataset:
        side.dataset_fit = str(dataset.get("fits") or "")
        side.dataset_bytes = dataset.get("size_bytes")
        side.memory_bytes = dataset.get("available_bytes")
    side.smart, side.endurance, side.smart_note = _smart(its)
    head = _headline(plugin)
    for count in sorted({it.clients for it in _iterations(runs, None)}):
        values = [it.metrics[head] for it in _iterations(runs, count) if head in it.metrics]
        if values:
            side.by_clients[str(count)] = statistics.fmean(values)
    return side


def _in_turns(side: Side, turns: list[Turn], key: str,
              plugin) -> None:  # noqa: ANN001 - a registry plugin
    """A side whose load took turns of one second with the other's: its headline is what
    its turns measured (its runs' own figures count the paused seconds too), one value per
    block; its latency, bottleneck verdict and contamination are left out, because the
    pauses are in its latencies and its telemetry saw both loads."""
    head = next(m for m in plugin.metrics if m.name == _headline(plugin))
    per_block: dict[int, list[float]] = {}
    for turn in turns:
        if turn.side == key and turn.value is not None:
            per_block.setdefault(turn.block, []).append(turn.value)
    values = [statistics.fmean(v) for _, v in sorted(per_block.items())]
    side.took_turns = True
    side.figures = [MetricFigure(
        name=head.name, label=head.label, unit=head.unit, direction=head.direction,
        mean=statistics.fmean(values), n=len(values), values=values,
        stddev=statistics.stdev(values) if len(values) > 1 else 0.0)] if values else []
    side.bottleneck, side.bottleneck_votes, side.contaminated = None, {}, []
    side.by_clients = ({str(side.clients): side.figures[0].mean}
                       if side.figures and side.clients is not None else {})


def _smart(its: list[IterationSummary]) -> tuple[dict[str, float], str, str]:
    """The first and last SMART readings of the side's iterations (one device: the first
    that reported), when the device reports them."""
    readings = [c for it in its if it.telemetry is not None for c in it.telemetry.smart]
    changes = [c for c in readings if c.available]
    if not changes:
        reasons = sorted({c.reason for c in readings if c.reason})
        return {}, "", "; ".join(reasons) or "no SMART reading was taken"
    first, last = changes[0], changes[-1]
    out = {"temperature_c_before": first.temperature_before_c,
           "temperature_c_after": max((c.temperature_after_c or 0) for c in changes),
           "written_bytes": sum(c.written_bytes or 0 for c in changes),
           "read_bytes": sum(c.read_bytes or 0 for c in changes),
           "percent_used_before": first.percent_used_before,
           "percent_used_after": last.percent_used_after,
           "media_errors_after": last.media_errors_after,
           "throttle_events": sum(c.throttle_events or 0 for c in changes)}
    return {k: float(v) for k, v in out.items() if v is not None}, last.endurance, ""


# ----- SMART across the study ------------------------------------------------------------------

SmartReading = tuple[float, str, SmartChange]
"""(the iteration's start, epoch s; its workload; one device's SMART change over it)."""


def _smart_readings(spec: CampaignSpec, results: list[WorkloadResult]) -> list[SmartReading]:
    """Every SMART change of every measured iteration of the study, in time order."""
    out: list[SmartReading] = []
    for result in results:
        for run_dir in dict.fromkeys(d for side in result.sides for d in side.runs):
            with contextlib.suppress(PgdynoError, OSError):
                run = load_run(Path(run_dir))
                for it in _iterations([run], None):
                    if it.telemetry is not None:
                        out += [(it.window_start_epoch, result.workload, c)
                                for c in it.telemetry.smart]
    return sorted(out, key=lambda r: r[0])


def smart_phases(readings: list[SmartReading]) -> tuple[list[SmartPhase], str]:
    """The device's SMART log before the study's first cell and after each workload's last
    cell (a drive report's phases), or why there is none. One device: the first that reported;
    traffic and throttling summed over every reading up to the phase."""
    available = [r for r in readings if r[2].available]
    if not available:
        reasons = sorted({r[2].reason for r in readings if r[2].reason})
        return [], "; ".join(reasons) or "no SMART reading was taken"
    device = available[0][2].device
    ours = [r for r in available if r[2].device == device]
    first = ours[0][2]
    phases = [SmartPhase(f"before {ours[0][1]}", device, temperature_c=first.temperature_before_c,
                         peak_temperature_c=first.temperature_before_c,
                         percent_used=first.percent_used_before,
                         media_errors=_float(first.media_errors_before), written_bytes=0.0,
                         read_bytes=0.0, throttle_events=0.0)]
    last_of = {workload: i for i, (_, workload, _) in enumerate(ours)}
    for workload, i in sorted(last_of.items(), key=lambda kv: kv[1]):
        upto = [c for _, _, c in ours[:i + 1]]
        temps = [t for c in upto for t in (c.temperature_before_c, c.temperature_after_c)
                 if t is not None]
        last = upto[-1]
        phases.append(SmartPhase(
            f"after {workload}", device, temperature_c=last.temperature_after_c,
            peak_temperature_c=max(temps) if temps else None,
            percent_used=last.percent_used_after, media_errors=_float(last.media_errors_after),
            written_bytes=_sum(c.written_bytes for c in upto),
            read_bytes=_sum(c.read_bytes for c in upto),
            throttle_events=_sum(c.throttle_events for c in upto)))
    return phases, ""


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def _sum(values) -> float | None:  # noqa: ANN001 - an iterable of optional numbers
    """The sum of the values the device reported (None: it reported none of them)."""
    known = [float(v) for v in values if v is not None]
    return sum(known) if known else None


# ----- the provisioning plan ---------------------------------------------------------------------

PROVISION_DIR = "provision"
"""Inside the campaign's directory: plan-<config label>.json, one per config of a study
with a context section."""


def read_provision_plans(journal_dir: Path) -> list[ProvisionRecord]:
    """The plans recorded before the study's first cell (``study.run``), in the order they
    were made (the campaign's configs)."""
    out = []
    for path in sorted((journal_dir / PROVISION_DIR).glob("plan-*.json"),
                       key=lambda p: p.stat().st_mtime_ns):
        try:
            data = json.loads(path.read_text())
            plan = data.get("plan")
            out.append(ProvisionRecord(
                label=str(data["label"]), config=str(data["config"]),
                plan=ProvisionPlan.from_dict(plan) if plan else None,
                note=str(data.get("note", ""))))
        except (PgdynoError, OSError, ValueError, KeyError, TypeError) as exc:
            out.append(ProvisionRecord(label=path.stem.removeprefix("plan-"), config="?",
                                       note=f"{path}: unreadable ({exc})"))
    return out


# ----- the record's other parts ------------------------------------------------------------------

def _validation(study: StudySpec, record: StudyRecord) -> Validation | None:
    v = study.validate
    result = record.workload(v.workload) if v is not None else None
    side = result.side(v.side) if result is not None and v is not None else None
    if v is None or result is None or side is None:
        return None
    fig = side.figure(v.metric or result.headline)
    vcpus = _vcpus(side)
    if fig is None or vcpus is None:
        return None
    return Validation(workload=v.workload, metric=fig.label, side=v.side, measured=fig.mean,
                      vcpus=vcpus, per_core=v.per_core, source=v.source,
                      band_low=v.band[0], band_high=v.band[1])


def _vcpus(side: Side) -> int | None:
    for host in _hosts(side):
        if host.get("cpu_count"):
            return int(host["cpu_count"])
    return None


def _hardware(results: list[WorkloadResult]) -> str:
    for result in results:
        for side in result.sides:
            for host in _hosts(side):
                return (f"{host.get('cpu_count', '?')} vCPU "
                        f"({host.get('cpu_model', 'unknown CPU')}), "
                        f"{human_bytes(host.get('ram_bytes') or 0)} RAM, "
                        f"{host.get('os', '')}, kernel {host.get('kernel', '?')}")
    return "no run finished"


def _hosts(side: Side) -> Iterator[dict]:
    """The host record of each of the side's runs (a sweep cell's: of its steps' runs)."""
    for cell_dir in side.runs:
        for run_dir in _plain_runs(Path(cell_dir)):
            with contextlib.suppress(PgdynoError, OSError):
                host = load_run(run_dir).manifest.get("host") or {}
                if host:
                    yield host


def _plain_runs(path: Path) -> list[Path]:
    """A run directory as itself; a sweep directory as its ok steps' runs."""
    if not (path / "sweep.json").is_file():
        return [path]
    try:
        record = SweepRecord.load(path)
    except PgdynoError:
        return []
    return [_step_run_path(path, step.run) for step in record.steps
            if step.status == "ok" and step.run]


def _step_run_path(sweep_dir: Path, run: str) -> Path:
    """A step's run sits beside the sweep directory, in the same context."""
    return Path(run) if Path(run).is_absolute() else sweep_dir.parent / run


def _settings(results: list[WorkloadResult]) -> list[dict[str, str]]:
    for result in results:
        if result.comparison is not None and result.comparison.changes:
            return [{"layer": c.layer, "name": c.name, "before": c.before, "after": c.after,
                     "rationale": c.rationale} for c in result.comparison.changes]
    return []


def _first(events: list[dict], key: str) -> str:
    return str(events[0].get(key, "")) if events else datetime.now(UTC).isoformat()


def _last(events: list[dict], key: str) -> str:
    return str(events[-1].get(key, "")) if events else datetime.now(UTC).isoformat()


def _wall_seconds(events: list[dict]) -> float | None:
    seconds = [float(ev["seconds"]) for ev in events
               if ev.get("event") == "run-end" and ev.get("seconds") is not None
               and not ev.get("shared_time")]
    return sum(seconds) if seconds else None
