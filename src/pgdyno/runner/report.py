"""``pgdyno report RUN``: a run's summary, plots and reports rebuilt from its raw files.

The workload that made the run summarises its raw files (``summarise``) and brings its own
report sections; ``pgdyno.reports`` draws and writes them. A sweep directory's report is
rebuilt from its runs, each of them first rebuilt when it has no summary yet.

Also the run's row in the index of runs (``index_row``), made the same way by ``pgdyno
bench``, by ``pgdyno runs --reindex``, which rebuilds the index from the run directories, and
by ``pgdyno runs --sync-to``, which pushes them into a shared results database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.analysis.summary import load_summary
from pgdyno.config.units import settings_with_stock
from pgdyno.errors import UsageError
from pgdyno.redact import redact_values
from pgdyno.reports.document import RunView
from pgdyno.reports.run_report import write_run_report
from pgdyno.results.index import RunIndex, RunRow, find_run, run_manifests
from pgdyno.results.load import record_of
from pgdyno.results.manifest import Manifest, load_manifest, manifest_to_dict
from pgdyno.results.rundir import RunDirectory
from pgdyno.results.store import RecordingIndex, RunStore
from pgdyno.results.sweepdir import SWEEP_FILE, SweepRecord
from pgdyno.runner.outcome import Built, answer_rows, describe_fit, outcome_of
from pgdyno.workloads import registry
from pgdyno.workloads.base import HIGHER, LOWER, Headline, Workload, headline_metric, headline_of

DIRECTIONS = {HIGHER: "higher", LOWER: "lower"}


def build_reports(path: Path) -> Built:
    """summary.json, the plots and the reports of a run, from its raw files; returns the
    summary and the outcome computed for the report's first section (``pgdyno bench``
    prints that same outcome)."""
    run_dir = RunDirectory(Path(path))
    manifest, workload = _read_manifest(run_dir.path)
    plan = run_dir.load_plan()
    if plan.workload != manifest.workload:
        raise UsageError(f"{run_dir.raw / 'run.json'}: damaged run record (workload "
                         f"{plan.workload!r}, but the manifest says {manifest.workload!r})")
    opts = manifest.options
    # The verdicts weigh the database host's CPUs: on an --ssh run, not this client's.
    cpu_count = int((manifest.database_host or manifest.host).get("cpu_count") or 1)
    summary = workload.summarise(run_dir, plan, opts, manifest.status, cpu_count)
    spec = headline_metric(workload.metrics)
    fit = describe_fit(manifest.dataset or {})
    head = headline_of(summary, workload.metrics)
    outcome = (outcome_of(summary, head, fit, dataset_record=manifest.dataset,
                          direction=spec.direction or HIGHER,
                          describe_clients=lambda c: workload.describe_clients(opts, c))
               if head is not None else None)
    view = RunView(manifest=manifest_to_dict(manifest), plan=plan, opts=opts,
                   dataset=workload.describe_dataset(opts) + (f"; {fit}" if fit else ""),
                   answer=([(row.item, row.text) for row in answer_rows(outcome)]
                           if outcome is not None else []),
                   load=record_of(manifest.dataset), clients_label=workload.clients_label,
                   clients={c: workload.describe_clients(opts, c) for c in opts.clients},
                   by_clients=outcome.by_clients if outcome is not None else [],
                   headline=(spec.label, spec.unit))
    write_run_report(summary, view, run_dir,
                     workload.report_sections(summary, run_dir, plan, opts),
                     transactions=workload.common_report(opts),
                     headline=(spec.name, spec.label))
    return Built(summary=summary, headline=head, outcome=outcome)


def _read_manifest(run_dir: Path) -> tuple[Manifest, Workload]:
    """The manifest with its workload's options typed, and that workload; a manifest that
    names an unknown workload or holds options it does not take is damaged, and named."""
    manifest = load_manifest(run_dir)
    path = run_dir / "manifest.json"
    try:
        workload = registry.get(manifest.workload)
        return registry.typed_manifest(manifest), workload
    except UsageError as exc:
        raise UsageError(f"{path}: damaged run manifest ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: damaged run manifest (options: {type(exc).__name__}: "
                         f"{exc})") from None


def is_sweep(path: Path) -> bool:
    """A sweep directory: its record is there (damaged or not: reading it says which)."""
    return (Path(path) / SWEEP_FILE).exists()


def build_sweep_reports(sweep_dir: Path) -> None:
    """Each run of the sweep that lacks its summary, then the sweep's own report."""
    record = SweepRecord.load(sweep_dir)
    for step in record.steps:
        run = sweep_dir.parent / step.run if step.run else None
        if run is not None and (run / "raw" / "run.json").is_file() \
                and not (run / "summary.json").is_file():
            build_reports(run)
    registry.get(record.workload).build_sweep_report(sweep_dir)


def report_target(ref: str, results_dir: Path) -> Path:
    """What ``pgdyno report REF`` rebuilds: a sweep directory, or a run (a directory, or an
    id ``pgdyno runs`` prints)."""
    path = Path(ref)
    if path.is_dir() and not (path / "raw").exists() and not is_sweep(path) \
            and not (path / "manifest.json").exists():
        raise UsageError(f"{path}: neither a pgdyno run directory ({path / 'manifest.json'} "
                         f"is missing) nor a sweep directory ({path / SWEEP_FILE} is missing)")
    return path if is_sweep(path) else find_run(ref, results_dir)


def rebuild(path: Path) -> Path:
    """A run's or a sweep's report; returns the report.md written."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: no such run directory")
    try:
        if is_sweep(path):
            build_sweep_reports(path)
        else:
            build_reports(path)
    except OSError as exc:  # a directory where summary.json goes, a full disk, ...
        where = exc.filename2 or exc.filename or path
        if isinstance(exc, IsADirectoryError):
            raise UsageError(f"{where}: a directory is where the report's file should be; "
                             "move it away and run `pgdyno report` again") from None
        raise UsageError(f"{where}: {exc.strerror or exc} (rebuilding the report of "
                         f"{path})") from None
    return path / "report.md"


# ----- the index of runs ------------------------------------------------------------------

def index_row(index: RunIndex | RecordingIndex, run_dir: Path, manifest: Manifest,
              workload: Workload, head: Headline | None, verdict: str | None = None) -> RunRow:
    """The run's row in the index: its headline and verdict once it has them (None while
    running)."""
    spec = headline_metric(workload.metrics)
    server = manifest.server or {}
    settings = server.get("non_default_settings")
    if settings is None and workload.needs_server:  # no server facts: what the config set
        settings = manifest.config.get("pg_settings")
    return RunRow(
        run_id=index.run_id_for(run_dir), context=run_dir.parent.name,
        workload=manifest.workload, status=manifest.status,
        started_at=manifest.started_at, ended_at=manifest.ended_at,
        config=manifest.config_name if workload.needs_server else None,
        clients=",".join(str(c) for c in manifest.options.clients),
        headline_metric=head.label if head else spec.label,
        headline=head.value if head else None,
        headline_unit=head.unit if head else spec.unit,
        p99_ms=head.p99_ms if head else None,
        dataset=workload.describe_dataset(manifest.options),
        pg_version=server.get("version"), host=manifest.host.get("hostname"),
        headline_direction=DIRECTIONS.get(spec.direction), verdict=verdict,
        settings=(settings_with_stock({str(k): str(v) for k, v in redact_values(settings).items()},
                                      server.get("stock_settings"))
                  if isinstance(settings, dict) else None))


@dataclass
class Reindexed:
    index: Path
    runs: int
    damaged_index: Path | None
    """Where the old index was moved, when it was damaged (None: absent or whole)."""
    problems: list[str] = field(default_factory=list)
    """One line per run directory not indexed, or indexed without its headline."""


def reindex(results_dir: Path) -> Reindexed:
    """The index rebuilt from every ``CONTEXT/RUN/manifest.json`` under ``results_dir``.

    A run whose manifest cannot be read is left out, one whose summary cannot be read is
    indexed without its headline; each is one line of ``problems``. Nothing is changed
    until every run has been read."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UsageError(f"--results-dir {results_dir}: no such directory")
    index = RunIndex(results_dir)
    rows, problems = rows_from_run_dirs(index)
    moved = index.rebuild(rows)
    return Reindexed(index=index.path, runs=len(rows), damaged_index=moved, problems=problems)


def rows_from_run_dirs(index: RunIndex) -> tuple[list[RunRow], list[str]]:
    """The row of every ``CONTEXT/RUN/manifest.json`` under the index's results directory,
    and one line per run left out (unreadable manifest) or without its headline."""
    rows: list[RunRow] = []
    problems: list[str] = []
    for manifest_path in run_manifests(index.root):
        run_dir = manifest_path.parent
        try:
            manifest, workload = _read_manifest(run_dir)
        except UsageError as exc:
            problems.append(f"{exc}; not indexed")
            continue
        head, verdict = None, None
        if (run_dir / "summary.json").exists():
            try:
                summary = load_summary(run_dir / "summary.json")
                head = headline_of(summary, workload.metrics)
                verdict = outcome_of(summary, head, "").verdict if head is not None else None
            except UsageError as exc:
                problems.append(f"{exc}; indexed without its headline")
        rows.append(index_row(index, run_dir, manifest, workload, head, verdict))
    return rows, problems


@dataclass
class Pushed:
    store: str
    """The database pushed to (redacted)."""
    runs: int
    problems: list[str] = field(default_factory=list)


def push_runs(results_dir: Path, store: RunStore, workload: str | None = None,
              context: str | None = None, status: str | None = None) -> Pushed:
    """The runs under ``results_dir`` (read from their directories, as ``--reindex`` reads
    them: a fleet's fetched runs need no local index), matching the filters, written into
    ``store`` in one transaction; runs already there are updated."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UsageError(f"--results-dir {results_dir}: no such directory")
    rows, problems = rows_from_run_dirs(RunIndex(results_dir))
    wanted = [r for r in rows if (workload is None or r.workload == workload)
              and (context is None or r.context == context)
              and (status is None or r.status == status)]
    return Pushed(store=store.location, runs=store.upsert_many(wanted), problems=problems)
