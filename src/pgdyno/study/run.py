"""A study end to end: run the campaign's cells, then build and write the study report.

The report is always rebuilt from the journal and the run directories, after any run:
a study interrupted and started again resumes its cells, and its report is whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from pgdyno.campaign.pairs import PairDesign
from pgdyno.campaign.runner import CampaignOutcome, run_campaign
from pgdyno.campaign.spec import CampaignSpec, Cell, ConfigEntry, load_spec
from pgdyno.campaign.validation import run_validation
from pgdyno.errors import PgdynoError, UsageError
from pgdyno.provision.plan import PlanOptions, plan_for_config
from pgdyno.results.names import check_dir_name
from pgdyno.results.rundir import write_json_atomic
from pgdyno.study.build import PROVISION_DIR, build_study
from pgdyno.study.model import StudyRecord
from pgdyno.study.report import write_study_report
from pgdyno.study.spec import StudySpec, study_of
from pgdyno.workloads import registry

STUDY_DIR = "study"
"""The study's files, inside the campaign's directory (results/campaigns/NAME[--SIZE])."""


@dataclass
class StudyOutcome:
    campaign: CampaignOutcome
    record: StudyRecord | None = None
    report: Path | None = None


def run_campaign_or_study(spec: CampaignSpec, console: Console, show_progress: bool,
                          retry_failed: bool, allow_os_changes: bool) -> StudyOutcome:
    """The campaign's cells; then, when it states a question, its study report."""
    study = study_of(spec)  # checked before the first cell runs
    if study is not None and "context" in study.sections:
        record_provision_plans(spec)
    outcome = StudyOutcome(run_campaign(spec, console, show_progress=show_progress,
                                        retry_failed=retry_failed,
                                        allow_os_changes=allow_os_changes,
                                        pairs=pair_design(study)))
    if study is not None and study.cache_states:
        run_cache_states(spec, study, console, show_progress)
    if study is not None:
        outcome.record, outcome.report = write_study(spec)
    return outcome


def pair_design(study: StudySpec | None) -> PairDesign | None:
    """How the study's two sides are compared (None: no question, or one side only)."""
    if study is None or study.candidate is None:
        return None
    return PairDesign(baseline=study.baseline, candidate=study.candidate,
                      design=study.design, pairs=study.pairs, budget_s=study.budget_s,
                      precision_pct=study.precision_pct)


CACHE_STATES_FILE = "cache-states.json"
"""In the campaign's directory: the validation run the study made (or why it made none)."""


def run_cache_states(spec: CampaignSpec, study: StudySpec, console: Console,
                     show_progress: bool) -> None:
    """Validation runs: one run of the baseline on a fresh server, its iterations
    read as cold, warming, warm and after-CHECKPOINT states (``campaign.validation``). Its run
    joins the context, whose report (in the study's context section) tables the states. Made
    once: a resumed study keeps it."""
    marker = spec.journal_dir / CACHE_STATES_FILE
    if marker.exists():
        return
    entry = next(c for c in spec.configs if c.label == study.baseline)
    workload = study.validate.workload if study.validate is not None else next(
        (w for w in spec.workloads if registry.get(w).needs_server), None)
    record: dict = {"config": entry.label, "workload": workload}
    if workload is None or entry.os:
        record["note"] = ("no workload with a server" if workload is None else
                          f"config {entry.label} changes OS settings, which only the "
                          "campaign's cells apply")
    else:
        console.print(f"study: cache states of {entry.label} on {workload} (cold, warming, "
                      "warm, after CHECKPOINT)")
        opts = spec.options_for(Cell(1, workload, entry), show_progress)
        try:
            result = run_validation(opts, console)
            record["run_dir"] = result.run_dir
        except PgdynoError as exc:
            record["note"] = str(exc)
            console.print(f"study: no cache states: {exc}")
    write_json_atomic(marker, record)


def record_provision_plans(spec: CampaignSpec) -> None:
    """The provisioning plan of each config: what `pgdyno provision plan` would change
    on this host for it, read (never applied) before the first cell and kept in the
    campaign's directory. A resumed study keeps the plans of its first start."""
    folder = spec.journal_dir / PROVISION_DIR
    workload = next((w for w in spec.workloads if registry.get(w).needs_server),
                    spec.workloads[0])
    alike: dict[tuple, list[ConfigEntry]] = {}  # configs with one OS and server layer
    for entry in spec.configs:
        alike.setdefault((entry.config, entry.os, entry.sets), []).append(entry)
    for (config, os_settings, sets), entries in alike.items():
        path = folder / f"plan-{entries[0].label}.json"
        if path.exists():
            continue
        record: dict = {"label": ", ".join(e.label for e in entries), "config": config}
        overrides = tuple(f"{key}={value}" for key, value in os_settings) + tuple(sets)
        try:
            plan = plan_for_config(PlanOptions(config=config, workload=workload,
                                               overrides=overrides,
                                               tuning=registry.get(workload).tuning))
            record["plan"] = plan.to_dict()
        except PgdynoError as exc:
            record["note"] = str(exc)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)


def write_study(spec: CampaignSpec) -> tuple[StudyRecord, Path]:
    study = study_of(spec)
    if study is None:
        raise UsageError(f"campaign {spec.path} has no [study] table; accepted: a campaign "
                         "file with [study] question = \"...\"")
    out_dir = spec.journal_dir / STUDY_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    record = build_study(spec, study, out_dir)
    record.save(out_dir)
    return record, write_study_report(record, out_dir)


def rebuild_study(name: str, results_dir: Path, size: str | None = None
                  ) -> tuple[StudyRecord, Path]:
    """``pgdyno report --campaign NAME``: the study again, from the campaign's own copy of
    its file, its journal and its runs."""
    check_dir_name(name, "--campaign", "tuning-1")
    if size is not None:
        check_dir_name(size, "--size", "quick")
    folder = results_dir / "campaigns" / (name if size is None else f"{name}--{size}")
    copy = folder / "campaign.toml"
    if not copy.is_file():
        raise UsageError(f"--campaign {name}: no campaign ran under {folder} (no "
                         "campaign.toml there); accepted: a campaign's [campaign] name, with "
                         "--size when it ran at one, and --results-dir of its results")
    spec = load_spec(copy, results_dir, size)
    spec.name = name  # the copy's file name is not the campaign's
    return write_study(spec)
