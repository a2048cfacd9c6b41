"""``pgdyno report RUN``: a run's summary, plots and reports rebuilt from its raw files.

The workload that made the run summarises its raw files (``summarise``) and brings its own
report sections; ``pgdyno.reports`` draws and writes them. A sweep directory's report is
rebuilt from its runs, each of them first rebuilt when it has no summary yet.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.analysis.summary import RunSummary
from pgdyno.errors import UsageError
from pgdyno.reports.document import RunView
from pgdyno.reports.run_report import write_run_report
from pgdyno.results.manifest import load_manifest, manifest_to_dict
from pgdyno.results.rundir import RunDirectory
from pgdyno.results.sweepdir import SWEEP_FILE, SweepRecord
from pgdyno.runner.outcome import describe_fit
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_metric


def build_reports(path: Path) -> RunSummary:
    run_dir = RunDirectory(Path(path))
    if not (run_dir.raw / "run.json").is_file():
        raise UsageError(f"{path}: not a pgdyno run directory (raw/run.json is missing)")
    manifest = registry.typed_manifest(load_manifest(run_dir.path))
    plan = run_dir.load_plan()
    workload = registry.get(plan.workload)
    opts = manifest.options
    cpu_count = int(manifest.host.get("cpu_count") or 1)
    summary = workload.summarise(run_dir, plan, opts, manifest.status, cpu_count)
    spec = headline_metric(workload.metrics)
    fit = describe_fit(manifest.dataset or {})
    view = RunView(manifest=manifest_to_dict(manifest), plan=plan, opts=opts,
                   dataset=workload.describe_dataset(opts) + (f"; {fit}" if fit else ""))
    write_run_report(summary, view, run_dir,
                     workload.report_sections(summary, run_dir, plan, opts),
                     transactions=workload.common_report(),
                     headline=(spec.name, spec.label))
    return summary


def is_sweep(path: Path) -> bool:
    return (Path(path) / SWEEP_FILE).is_file()


def build_sweep_reports(sweep_dir: Path) -> None:
    """Each run of the sweep that lacks its summary, then the sweep's own report."""
    record = SweepRecord.load(sweep_dir)
    for step in record.steps:
        run = sweep_dir.parent / step.run if step.run else None
        if run is not None and (run / "raw" / "run.json").is_file() \
                and not (run / "summary.json").is_file():
            build_reports(run)
    registry.get(record.workload).build_sweep_report(sweep_dir)


def rebuild(path: Path) -> Path:
    """A run's or a sweep's report; returns the report.md written."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: no such run directory")
    if is_sweep(path):
        build_sweep_reports(path)
    else:
        build_reports(path)
    return path / "report.md"
