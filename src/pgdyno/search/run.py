"""``pgdyno tune --search``: the whole search, resumable, from options to report.

Order: the baselines (default, pgtune, tuned) as the first trials; searched trials drawn
by TPE until the budget (trials) or the time limit is spent; re-runs of the leading
candidates and the choice on their repeated measurements; the interleaved comparison of
the winner against pgtune and tuned; the winner's config files and the report. Each step
keeps its state in the search's directory (study.db, select.json, confirm.json), so the
same command run again after Ctrl-C or a crash goes on where it stopped.

With ``--allow-os-changes`` (root) the space holds OS knobs too (``os_knobs``): each searched
trial's OS values are applied through provision before its run and reverted right after it,
as are a candidate's around its re-runs and the winner's around its comparison and
validation runs; the baselines run with the host's values as they were. A search stopped
anywhere reverts what is applied before it ends, and one killed outright reverts it when
run again (or ``pgdyno provision revert STATE``: ``os-pending.json`` names the state file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from pgdyno import serde
from pgdyno.config.detect import detect_profile
from pgdyno.config.resolve import NAMED, resolve_config
from pgdyno.config.setting_specs import for_install
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import check_version, from_versioned, read_json_file
from pgdyno.results.names import check_dir_name
from pgdyno.results.rundir import write_json_atomic, write_text_atomic
from pgdyno.search import confirm as confirm_mod
from pgdyno.search import os_knobs
from pgdyno.search import study as study_mod
from pgdyno.search.noise import SearchNoise, search_noise
from pgdyno.search.objective import (
    TrialResult,
    first_line,
    headline_spec,
    measure,
    optuna_direction,
)
from pgdyno.search.select import (
    Candidate,
    Selection,
    load_selection,
    plan_selection,
    run_selection,
)
from pgdyno.search.space import SCHEMA_VERSION as SPACE_VERSION
from pgdyno.search.space import SearchSpace, build_space
from pgdyno.search.trial_blocks import (
    RUNS,
    TrialDesign,
    measure_against,
    reference_for,
    remove_sides,
    sides_root,
    trial_design,
)
from pgdyno.search.worker import start_local_workers, wait_for_workers
from pgdyno.targets import host_hardware, install_for, target_class
from pgdyno.workloads import registry

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SearchOptions:
    """What ``pgdyno tune --search`` was asked for, validated."""

    bench: BenchOptions
    """The bench options of every run (its config is replaced per trial)."""
    budget: int | None = None
    """Trials, the baselines included."""
    time_s: float | None = None
    """Wall time for the whole search, re-runs and comparison included."""
    knobs: tuple[str, ...] | None = None
    fixes: tuple[str, ...] = ()
    allow_unsafe: bool = False
    top: int = 3
    reruns: int = 2
    compare_pairs: int = 3
    compare_design: str = "auto"
    """How the final comparison runs: ``auto``, ``interleaved`` or ``duet`` (both servers
    up at once, in blocks: ``search.confirm``), or ``sequential`` (whole runs)."""
    compare_max_pairs: int | None = None
    """Rounds the final comparison may grow to while undecided (default: twice)."""
    trial_design: str = "auto"
    """How each trial is measured: ``auto`` or ``interleaved`` (against the incumbent, in
    blocks: ``search.trial_blocks``), or ``runs`` (one run each)."""
    validate_s: float = 0.0
    """--validate: each config's load in the long-window validation (0: none; the CLI's
    default is 30 min)."""
    validate_cycles: bool = True
    """Raise each long run to two checkpoint and two autovacuum cycles (False: as asked)."""
    validate_against: tuple[str, ...] = ("pgtune", "tuned")
    """The named configs the winner meets in the long-window validation (tuned always: the
    winner holds only by beating it)."""
    seed: int = 0
    name: str | None = None
    baselines: tuple[str, ...] = NAMED
    show_progress: bool = True
    storage: str | None = None
    """--storage: a shared PostgreSQL database (postgresql://...) holding the study, so that
    several workers run its trials at once; None: study.db in the search's directory."""
    study_name: str | None = None
    """--study-name: the study's name in the shared storage (default: the search's name)."""
    seed_from: str | None = None
    """--from: an earlier search (its directory or name) whose trials seed this one."""
    worker: bool = False
    """--worker: run trials only; the search's lead (a run without --worker) selects,
    compares and reports once every trial is done."""
    workers: int = 1
    """--workers N: this command and N-1 local copies of it (``argv``) as workers."""
    argv: tuple[str, ...] = ()
    """The command line these options came from (pgdyno's arguments), for --workers."""
    allow_os_changes: bool = False
    """--allow-os-changes: OS knobs in the space, applied around each trial (root)."""


@dataclass
class SearchRecord:
    """search.json: what the search is, checked when it is resumed."""

    name: str
    workload: str
    metric: str
    direction: int
    space: SearchSpace
    options: dict[str, Any]
    allow_unsafe: bool
    created_at: str
    schema_version: int = SCHEMA_VERSION
    trial_design: str = ""
    """How its trials are measured (``interleaved`` or ``runs``; empty in a record made
    before trials could run in blocks: runs)."""


def read_record(path: Path, advice: str = "") -> SearchRecord:
    """search.json, or one line naming it: damaged, or of a version this pgdyno does not
    read. The space inside carries a version of its own, checked as well."""
    data = check_version(read_json_file(path, "search record", advice), SCHEMA_VERSION, path,
                         "search record", advice)
    if isinstance(data.get("space"), dict):
        check_version(data["space"], SPACE_VERSION, path, "search space", advice)
    return from_versioned(SearchRecord, data, SCHEMA_VERSION, path, "search record", advice)


@dataclass
class SearchOutcome:
    search_dir: Path
    trials: int
    failed: int
    winner_label: str = ""
    winner_file: str = ""
    recommendation: str = ""
    verdicts: list[str] = field(default_factory=list)
    report: str = ""
    notes: list[str] = field(default_factory=list)
    noise: SearchNoise | None = None
    """What the comparison and the validation could tell apart (``search.noise``)."""


_TIME_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|min|m|s)")
_TIME_UNITS = {"h": 3600.0, "min": 60.0, "m": 60.0, "s": 1.0}


def parse_time_limit(text: str) -> float:
    """``--time``: 45m, 2h, 1h30m, 90s, 1.5h, as seconds."""
    cleaned = text.strip().lower().replace(" ", "")
    parts = _TIME_PART.findall(cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise UsageError(f"--time {text!r}: accepted: a duration such as 45m, 2h, 1h30m, 90s")
    return sum(float(n) * _TIME_UNITS[u] for n, u in parts)


def parse_knobs(text: str) -> tuple[str, ...]:
    """``--knobs``: setting names separated by commas, or ``all``; an empty value or name is
    refused (before, ``--knobs ''`` searched the default knobs)."""
    names = tuple(k.strip() for k in text.split(","))
    if not all(names):
        what = "an empty value" if not text.strip() else "an empty setting name"
        raise UsageError(f"--knobs {text!r}: {what}; accepted: setting names "
                         "separated by commas (e.g. shared_buffers,work_mem), or all (leave "
                         "--knobs out for the workload's default knobs)")
    return names


def validate(opts: SearchOptions) -> None:
    if opts.knobs is not None and not opts.knobs:
        raise UsageError("--knobs: no setting named; accepted: setting names separated by "
                         "commas, or all")
    if opts.name is not None:  # the search's directory is RESULTS/searches/NAME
        check_dir_name(opts.name, "--search-name", "tpcb-memory")
    if opts.budget is None and opts.time_s is None:
        raise UsageError("tune --search needs --budget N (trials) or --time 45m")
    if opts.budget is not None and opts.budget < 1:
        raise UsageError(f"--budget {opts.budget}: accepted: 1 or more trials")
    if opts.time_s is not None and opts.time_s <= 0:
        raise UsageError(f"--time {opts.time_s}: accepted: a positive duration, e.g. 45m")
    if not target_class(opts.bench.target).restartable:
        raise UsageError("tune --search restarts the server with each trial's settings; "
                         "--dsn servers are never reconfigured: use the embedded target or "
                         "--pg-bin")
    if not registry.get(opts.bench.workload).needs_server:
        raise UsageError(f"tune --search {opts.bench.workload}: the workload runs no "
                         "PostgreSQL server; accepted: a database workload")
    if opts.top < 1 or opts.reruns < 0:
        raise UsageError("--top must be 1 or more, --reruns 0 or more")
    if opts.worker and opts.storage is None:
        raise UsageError("--worker shares a study with other workers: it needs --storage "
                         "postgresql://user@host/db")
    if opts.workers < 1 or (opts.workers > 1 and (opts.storage is None or opts.worker)):
        raise UsageError(f"--workers {opts.workers}: accepted: 1 or more, more than 1 only "
                         "with --storage postgresql://user@host/db and without --worker")
    if opts.study_name is not None and opts.storage is None:
        raise UsageError("--study-name names the study in a shared storage: it needs "
                         "--storage postgresql://user@host/db")
    if opts.study_name is not None and not opts.study_name.strip():
        raise UsageError(f"--study-name {opts.study_name!r}: an empty name; accepted: the "
                         "study's name in --storage (leave it out for the search's name)")
    if opts.validate_s < 0:
        raise UsageError(f"--validate {opts.validate_s}: accepted: a duration such as 30m, "
                         "or 0 to skip the long validation")
    os_knobs.check_allowed(opts.allow_os_changes)
    if opts.allow_os_changes and (opts.bench.target.ssh or opts.workers > 1):
        raise UsageError("--allow-os-changes changes this host's kernel around one trial at "
                         "a time; accepted: a local server (no --ssh) and --workers 1")
    from pgdyno.compare.blocks import ALTERNATING, DESIGNS

    # The final comparison and the long validation read each side's maintenance debt and
    # latency, which the alternating design's pauses and shared telemetry do not keep apart.
    accepted = [d for d in DESIGNS if d != ALTERNATING]
    if opts.compare_design not in accepted:
        raise UsageError(f"--compare-design {opts.compare_design}: accepted values are "
                         f"{', '.join(accepted)}")
    from pgdyno.search.trial_blocks import TRIAL_DESIGNS

    if opts.trial_design not in TRIAL_DESIGNS:
        raise UsageError(f"--trial-design {opts.trial_design}: accepted values are "
                         f"{', '.join(TRIAL_DESIGNS)}")
    if opts.compare_pairs == 1 or opts.compare_pairs < 0:
        raise UsageError(f"--compare-pairs {opts.compare_pairs}: accepted: 2 or more runs "
                         "per side (an interval needs two)")


def search_name(opts: SearchOptions) -> str:
    """The same command names the same search (so running it again resumes it); the
    budget and time are left out, so a search can be given more of either."""
    if opts.name:
        return opts.name
    bench = serde.to_dict(dataclasses.replace(opts.bench, show_progress=False))
    parts = [bench, opts.knobs, opts.fixes, opts.allow_unsafe, opts.seed, opts.baselines]
    if opts.allow_os_changes:  # another space: another search (earlier names unchanged)
        parts.append("allow_os_changes")
    if opts.trial_design != "auto":  # trials measured otherwise: another search
        parts.append(f"trials:{opts.trial_design}")
    key = json.dumps(parts, sort_keys=True, default=str)
    return f"{opts.bench.workload}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def run_search(opts: SearchOptions, console: Console | None = None) -> SearchOutcome:
    validate(opts)
    console = console or Console(stderr=True)
    bench = dataclasses.replace(opts.bench, show_progress=False)
    name = search_name(opts)
    search_dir = bench.results_dir / "searches" / name
    study_mod.check_study_file(search_dir / study_mod.STUDY_FILE)  # before anything is written
    workload = registry.get(bench.workload)
    spec = headline_spec(bench.workload)
    install = install_for(bench.target)
    specs = for_install(install)
    # The memory budget is the database host's: the --ssh host's when the server runs there.
    hardware = host_hardware(bench.target) or detect_profile()
    host = os_knobs.read_host(hardware.ram_bytes, bench.target.workdir) \
        if opts.allow_os_changes else None
    space = build_space(hardware, specs, clients=max(bench.clients),
                        write_heavy=workload.tuning[1], knobs=list(opts.knobs or []) or None,
                        fixes=list(opts.fixes), allow_unsafe=opts.allow_unsafe,
                        disk_free_bytes=(_free_bytes(bench.target.workdir)
                                         if target_class(bench.target).is_local else None),
                        os_table=os_knobs.os_knobs(host) if host else None,
                        os_notes=host.notes if host else [])
    # Check first, create after: the storage and the earlier search are read before the
    # search's directory (or a study in the storage) exists.
    place = study_mod.StudyPlace(opts.storage, opts.study_name or name) if opts.storage \
        else study_mod.StudyPlace()
    study_mod.check_storage(place)
    seeds = seed_rows(opts.seed_from, bench, space, hardware, place) if opts.seed_from \
        else None
    os_run = _os_run(search_dir, bench, host, specs)
    with _nothing_left_applied(os_run, console):
        return _run_search(opts, console, bench, name, search_dir, spec, install, hardware,
                           space, os_run, place, seeds)


def _run_search(opts: SearchOptions, console: Console, bench: BenchOptions, name: str,
                search_dir: Path, spec, install, hardware, space: SearchSpace,
                os_run: OsRun, place: study_mod.StudyPlace,
                seeds: tuple[list, str] | None) -> SearchOutcome:
    design = trial_design(opts.trial_design, bench, os_changes=opts.allow_os_changes,
                          shared=place.shared or opts.workers > 1 or opts.worker)
    record = _open_record(search_dir, name, bench, space, spec, opts, design)
    space = record.space
    study, created = study_mod.open_or_create(
        search_dir, optuna_direction(spec), opts.seed,
        startup=len(opts.baselines) + space.random_start(), place=place)
    (search_dir / "trials").mkdir(exist_ok=True)
    notes = [design.sentence(), *space.notes]
    warm_start(study, created, place, opts, bench, space, install, hardware, notes, console,
               os_run, seeds)
    recovered = [] if place.shared else study_mod.recover_interrupted(study)
    if recovered:
        notes.append(f"resumed: trial(s) {', '.join(map(str, recovered))} were interrupted "
                     "and are run again")
        console.print(f"resuming search {name}: trial(s) {recovered} interrupted, run again")
    role = {"search": name}
    procs = start_local_workers(opts.argv, opts.workers - 1, name, place.name,
                                bench.target.workdir, search_dir / "workers") \
        if opts.workers > 1 else []
    _trials(opts, bench, study, space, search_dir, role, console, spec, os_run, design)
    if opts.worker:
        done = study_mod.own_rows(study)
        return SearchOutcome(search_dir=search_dir, trials=len(done),
                             failed=sum(r.status != "ok" for r in done), notes=notes,
                             recommendation="worker: trials done; the lead selects, "
                             "compares and reports")
    while place.shared and study_mod.running(study):
        time.sleep(study_mod.heartbeat_s())  # other workers' trials, or lost ones re-run
        _trials(opts, bench, study, space, search_dir, role, console, spec, os_run, design)
    if any(wait_for_workers(procs)):
        notes.append(f"a local worker failed: see {search_dir / 'workers'}")
    rows = study_mod.own_rows(study)
    for r in rows:  # a trial another host ran: its config file here too, for the re-runs
        if r.kind == "searched" and r.settings and not Path(r.config).exists():
            r.config = str(write_trial_file(search_dir, r.number, r.settings, space,
                                            os_values=os_run.applied_by(study).get(r.number)))
    ok_rows = [r for r in rows if r.status == "ok"]
    outcome = SearchOutcome(search_dir=search_dir, trials=len(rows),
                            failed=len(rows) - len(ok_rows), notes=notes)
    if not ok_rows:
        outcome.recommendation = ("No trial finished: nothing to select or compare; see the "
                                  "failed trials' reasons.")
        remove_sides(bench, name)
        _finish(outcome, study, record, None, None, search_dir, opts, install, hardware)
        return outcome
    os_of = os_run.applied_by(study)
    selection = _select(ok_rows, search_dir, bench, opts, spec.direction or 1, role, console,
                        os_run, os_of, design, rows)
    winner = selection.candidate(selection.winner)
    winner_os = os_of.get(int(winner.key), {}) if winner.key.isdigit() else {}
    winner_file = write_winner(search_dir, winner, rows, space, winner_os)
    around = os_run.around_label(winner_os)
    outcome.winner_label, outcome.winner_file = winner.label, str(winner_file)
    conf = None
    if opts.compare_pairs >= 2:
        conf = _confirm(search_dir, winner, winner_file, bench, opts, role, console, around,
                        winner_os, sides_root(bench, name))
        outcome.recommendation = conf.recommendation
        outcome.verdicts = [v.sentence() for v in conf.verdicts]
    else:
        outcome.recommendation = "No final comparison was run (--compare-pairs 0)."
    val = None
    if opts.validate_s > 0:
        from pgdyno.search.validate_long import validate_winner, validation_design

        val = validate_winner(search_dir, conf, winner, winner_file, bench, opts.validate_s,
                              opts.validate_cycles, {**role, "phase": "validate"}, console,
                              opts.show_progress, around, opts.validate_against,
                              validation_design(opts.compare_design, bench, bool(winner_os)),
                              sides_root(bench, name))
        outcome.recommendation = val.recommendation
        outcome.verdicts += [v.sentence() for v in val.verdicts]
    remove_sides(bench, name)  # the trials', the comparison's and the validation's clusters
    outcome.noise = search_noise(conf.noise if conf is not None else None,
                                 val.noise if val is not None else None)
    _finish(outcome, study, record, selection, conf, search_dir, opts, install, hardware)
    return outcome


# ----- OS knobs (--allow-os-changes) ----------------------------------------------------

@dataclass
class OsRun:
    """The search's OS changes: the host's OS facts (None: no OS knob) and where the
    changes are recorded."""

    place: os_knobs.OsPlace
    host: os_knobs.HostOs | None
    specs: Any

    @property
    def active(self) -> bool:
        return self.host is not None

    def host_values(self) -> dict[str, str]:
        return os_knobs.host_values(self.host) if self.host else {}

    def trial_settings(self, space: SearchSpace, trial, settings: dict[str, str]
                       ) -> dict[str, str]:
        """The trial's OS values as provision settings, recorded on the trial."""
        if not self.host or not space.os_knobs:
            return {}
        drawn = space.suggest_os(trial)
        applied = os_knobs.trial_settings(drawn, settings, self.specs, self.host)
        trial.set_user_attr("os", drawn)
        trial.set_user_attr("os_settings", applied)
        return applied

    def measure(self, bench: BenchOptions, config: str, role: dict, console: Console,
                os_settings: dict[str, str], origin: str) -> TrialResult:
        """``measure`` with ``os_settings`` applied around it; an apply the kernel refuses
        (huge pages it cannot reserve) is a failed trial, rolled back."""
        started = time.monotonic()
        try:
            with os_knobs.applied(os_settings, self.place, origin):
                return measure(bench, config, role, console)
        except os_knobs.ApplyRefused as exc:
            return TrialResult("failed", None, "", "OS settings not applied: "
                               + first_line(str(exc)), time.monotonic() - started)

    def applied_by(self, study) -> dict[int, dict[str, str]]:
        """Each searched trial's OS settings, by trial number."""
        return {t.number: dict(t.user_attrs["os_settings"])
                for t in study.get_trials(deepcopy=False) if t.user_attrs.get("os_settings")}

    def around_label(self, os_settings: dict[str, str]):
        """For the comparison and the validation: the winner's OS settings around its runs
        (its label is not a named config's), the host's around pgtune's and tuned's."""
        if not os_settings:
            return None

        def around(label: str) -> contextlib.AbstractContextManager:
            if label in NAMED:
                return contextlib.nullcontext()
            return os_knobs.applied(os_settings, self.place,
                                    f"search {self.place.search_dir.name} {label}")
        return around


def _os_run(search_dir: Path, bench: BenchOptions, host: os_knobs.HostOs | None,
            specs) -> OsRun:
    from pgdyno.runner.bench import context_of

    pending = (search_dir / os_knobs.PENDING_FILE).exists()
    context = context_of(bench) if host is not None or pending else ""
    place = os_knobs.OsPlace(search_dir=search_dir, results_dir=bench.results_dir,
                             context=context, workdir=bench.target.workdir,
                             data_device=host.data_device if host else None)
    return OsRun(place=place, host=host, specs=specs)


@contextlib.contextmanager
def _nothing_left_applied(os_run: OsRun, console: Console):
    """OS settings an earlier, killed search left applied reverted before anything runs;
    and, however this search ends (Ctrl-C, SIGTERM, an error), none left applied."""
    done = os_knobs.revert_pending(os_run.place)
    if done:
        console.print(f"search: reverted the OS settings an earlier run left applied ({done})")
    try:
        yield
    finally:
        os_knobs.revert_pending(os_run.place)


def _free_bytes(path: Path) -> int | None:
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


_RECORD_ADVICE = ("; move the search's directory away to start it afresh, or give another "
                  "--search-name")


def _open_record(search_dir: Path, name: str, bench: BenchOptions, space: SearchSpace, spec,
                 opts: SearchOptions, design: TrialDesign) -> SearchRecord:
    from pgdyno.results.rundir import utc_now

    path = search_dir / "search.json"
    record = SearchRecord(name=name, workload=bench.workload, metric=spec.name,
                          direction=spec.direction or 1, space=space,
                          options=serde.to_dict(bench), allow_unsafe=opts.allow_unsafe,
                          created_at=utc_now(), trial_design=design.design)
    if path.exists():
        old = read_record(path, _RECORD_ADVICE)
        old_space = old.space
        # The space it began with stays (free disk moves, and TPE needs the same ranges);
        # other knobs or pins make another search.
        if [k.name for k in old_space.knobs] != [k.name for k in space.knobs] or \
                old_space.fixed != space.fixed:
            raise UsageError(f"search {name}: its knobs or pins ({path}) differ from this "
                             "command's; accepted: the same --knobs and --fix, or a new "
                             "--search-name")
        if (old.trial_design or RUNS) != design.design:
            # Figures of trials measured alone and against an incumbent are on other scales.
            raise UsageError(f"search {name}: its trials were measured as "
                             f"{old.trial_design or RUNS} ({path}), this command's would be "
                             f"{design.design}; accepted: --trial-design "
                             f"{old.trial_design or RUNS}, or a new --search-name")
        record.created_at = old.created_at
        record.space = old_space
    search_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, serde.to_dict(record))
    return record


# ----- trials ----------------------------------------------------------------------------

def _trials(opts: SearchOptions, bench: BenchOptions, study, space: SearchSpace,
            search_dir: Path, role: dict, console: Console, spec, os_run: OsRun,
            design: TrialDesign) -> None:
    """Trials until the budget or time is spent: the queued ones first (the baselines, a
    lost worker's trial), then TPE's. A baseline runs its named config; the parameters it
    was queued with are its point of the space. A searched trial's OS values are applied
    around its run (recorded on the trial: ``os``, in the knobs' units, and
    ``os_settings``, as provision applied them); a baseline records the host's."""
    started = time.monotonic()
    with _progress(opts, console) as progress:
        task = progress.add_task("trials", total=_planned(opts, study), best="")
        _update(progress, task, study, opts, spec)
        while True:
            study_mod.fail_lost_trials(study)
            if not _room_for_trial(opts, study, time.monotonic() - started):
                return
            trial = study_mod.ask_within(study, opts.budget)
            if trial is None:
                return
            settings = space.suggest(trial)
            baseline = trial.user_attrs.get("label") \
                if trial.user_attrs.get("kind") == "baseline" else None
            os_settings = {} if baseline else os_run.trial_settings(space, trial, settings)
            config = baseline or str(write_trial_file(search_dir, trial.number, settings,
                                                      space, os_values=os_settings))
            label = baseline or f"trial {trial.number}"
            progress.update(task, description=f"trial: {label}")
            extra = {"baseline": baseline} if baseline else {"trial": trial.number}
            if os_run.active and baseline:
                trial.set_user_attr("os", os_run.host_values())
                trial.set_user_attr("os_host", True)
            run_role = {**role, "label": f"search {role['search']}: {label}", "phase": "trial",
                        **extra, **({"os": os_settings} if os_settings else {})}
            reference = (reference_for(study_mod.own_rows(study), spec.direction or 1)
                         if design.in_blocks else None)
            with study_mod.heartbeat(study, trial):
                if reference is not None:
                    result = measure_against(bench, design, reference, config, label,
                                             run_role, search_dir / "trials"
                                             / f"blocks-{trial.number}", role["search"],
                                             console)
                else:
                    result = os_run.measure(bench, config, run_role, console, os_settings,
                                            f"search {role['search']} {label}")
            study_mod.record_searched(study, trial, config, {} if baseline else settings,
                                      result)
            _update(progress, task, study, opts, spec)


def warm_start(study, created: bool, place, opts: SearchOptions, bench: BenchOptions,
               space: SearchSpace, install, hardware, notes: list[str],
               console: Console, os_run: OsRun | None = None,
               seeds: tuple[list, str] | None = None) -> None:
    """The baselines queued with their settings as points of the space (OS knobs at the
    host's values, which they run with); the trials of ``--from`` (``seeds``: its rows and
    name, read by ``seed_rows`` before anything was created) added as measured points
    (once per study)."""
    points = {}
    host = os_run.host_values() if os_run is not None and os_run.active else {}
    for label in opts.baselines:
        points[label] = space.params_for({**baseline_settings(label, bench, install, hardware),
                                          **host})
    study_mod.queue_baselines(study, points, created, place.shared)
    if seeds is not None:
        earlier, source = seeds
        count = study_mod.seed_from(study, earlier, source, space.params_for,
                                    space.distributions())
        if count:
            console.print(f"search seeded with {count} trial(s) of {source}")
    if study.user_attrs.get("seeded_from"):
        seeded = sum(r.kind == "seeded" for r in study_mod.rows(study))
        notes.append(f"seeded with {seeded} trial(s) of search {study.user_attrs['seeded_from']}"
                     " (--from): TPE learned from them; they are not run, counted nor chosen")
    if place.shared:
        notes.append(f"trials shared through {place.describe()}")


def baseline_settings(label: str, bench: BenchOptions, install, hardware) -> dict[str, str]:
    """The PostgreSQL settings a named config gives on this host, as its run applies them."""
    workload = registry.get(bench.workload)
    resolved = resolve_config(label, [], install=install, workload=bench.workload,
                              hardware=hardware, connections=max(bench.clients),
                              dataset_bytes=workload.dataset_bytes(bench) or 0,
                              tuning=workload.tuning)
    return dict(resolved.pg_settings)


def seed_rows(source: str, bench: BenchOptions, space: SearchSpace, hardware,
              place) -> tuple[list, str]:
    """``--from``: an earlier search's trials (a directory, or a name under
    RESULTS/searches), refused when its workload or hardware differs from this one's."""
    path = Path(source)
    if not (path / "search.json").exists():
        path = bench.results_dir / "searches" / source
    record_path = path / "search.json"
    if not record_path.exists():
        raise UsageError(f"--from {source}: no search there (no {record_path}); accepted: a "
                         "search's directory or its name under RESULTS/searches")
    try:
        old = read_record(record_path)
    except UsageError as exc:
        raise UsageError(f"--from {source}: {exc}") from None
    old_space, old_workload = old.space, old.workload
    ram = hardware.ram_bytes
    if old_workload != bench.workload or old_space.ram_bytes != ram:
        raise UsageError(
            f"--from {source}: searched {old_workload} on {old_space.ram_bytes / 2**30:.1f} GiB "
            f"of RAM, this search is {bench.workload} on {ram / 2**30:.1f} GiB; accepted: a "
            "search of the same workload on the same hardware")
    study_file = path / study_mod.STUDY_FILE
    local = study_file.exists() or study_file.is_symlink()
    if not local and not place.shared:
        raise UsageError(f"--from {source}: {path} has no study.db (its study is in a "
                         "shared storage: give that --storage)")
    # Read only: an earlier search's study (in its study.db, else in the shared storage
    # under its name) is never created nor changed by the search it seeds.
    where = study_mod.StudyPlace() if local \
        else study_mod.StudyPlace(place.url, old.name or path.name)
    try:
        earlier = study_mod.earlier_rows(path, where)
    except UsageError as exc:
        raise UsageError(f"--from {source}: {exc}") from None
    return earlier, old.name or path.name


def _planned(opts: SearchOptions, study) -> int | None:
    return opts.budget


def _update(progress: Progress, task: Any, study, opts: SearchOptions, spec) -> None:
    rows = study_mod.own_rows(study)
    ok = [r for r in rows if r.status == "ok"]
    best = ""
    if ok:
        top = max(ok, key=lambda r: (spec.direction or 1) * r.value)
        best = f"best so far {top.value:,.1f} {spec.unit} ({top.label})"
    total = opts.budget
    if total is None and opts.time_s:
        mean = statistics.fmean(r.seconds for r in rows) if rows else 60.0
        total = len(rows) + max(0, int((opts.time_s - _spent(rows)) / max(mean, 1.0)))
    progress.update(task, completed=len(rows), total=total, best=best)


def _spent(rows: list) -> float:
    """Wall time, not the trials' sum: `--time` bounds the search as a clock would, with
    any number of workers."""
    return study_mod.wall_seconds(rows)


def _room_for_trial(opts: SearchOptions, study, _elapsed: float = 0.0) -> bool:
    rows = study_mod.own_rows(study)
    if opts.budget is not None and len(rows) + study_mod.running(study) >= opts.budget:
        return False
    if opts.time_s is not None:
        mean = statistics.fmean(r.seconds for r in rows) if rows else 0.0
        # Keep time for the re-runs and the final comparison, each a trial's length.
        reserve = mean * (opts.top * opts.reruns + 3 * opts.compare_pairs)
        if rows and _spent(rows) + mean + reserve > opts.time_s:
            return False
    return True


def _progress(opts: SearchOptions, console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[best]}"), TimeRemainingColumn(),
                    console=console, disable=not opts.show_progress)


def write_trial_file(search_dir: Path, number: int, settings: dict[str, str],
                     space: SearchSpace, title: str = "",
                     os_values: dict[str, str] | None = None) -> Path:
    """The trial's settings as a config file ``--config FILE`` reads (base: default); its
    OS values (a config file holds PostgreSQL settings only) as comments, in the form
    ``pgdyno provision apply --set`` takes."""
    path = search_dir / "trials" / f"trial-{number:04d}.toml"
    lines = [f"# {title or f'pgdyno tune --search: trial {number}'}",
             f"# worst-case memory {space.memory_bytes(settings) / 2**30:.2f} GiB of a "
             f"{space.budget_bytes / 2**30:.2f} GiB budget"]
    if os_values:
        lines += ["# OS settings of this trial (applied by the search around its runs):",
                  *[f"#   {key}={value}" for key, value in os_values.items()]]
    lines += ["[config]", f'name = "{path.stem}"', 'base = "default"', "", "[postgresql]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in settings.items()]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def _toml_value(value: str) -> str:
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    return json.dumps(text)


# ----- selection and comparison -----------------------------------------------------------

def _select(ok_rows: list, search_dir: Path, bench: BenchOptions, opts: SearchOptions,
            direction: int, role: dict, console: Console, os_run: OsRun,
            os_of: dict[int, dict[str, str]], design: TrialDesign, rows: list) -> Selection:
    path = search_dir / "select.json"
    selection = load_selection(path)
    if selection is None:
        cands = [Candidate(key=str(r.number), label=r.label, config=r.config,
                           values=[r.value], run_dirs=[r.run_dir]) for r in ok_rows]
        selection = plan_selection(cands, opts.top, opts.reruns, direction)

    def one(cand: Candidate) -> tuple[float | None, str, str]:
        if opts.show_progress:
            console.print(f"re-run of {cand.label}")
        os_settings = os_of.get(int(cand.key), {})
        run_role = {**role, "label": f"search {role['search']}: {cand.label} (re-run)",
                    "phase": "select", "trial": int(cand.key),
                    **({"os": os_settings} if os_settings else {})}
        # A re-run in blocks: against the best other trial (never itself).
        reference = (reference_for(rows, direction, leaving_out=int(cand.key))
                     if design.in_blocks else None)
        if reference is not None:
            result = measure_against(bench, design, reference, cand.config,
                                     f"{cand.label} (re-run)", run_role,
                                     _rerun_dir(search_dir, cand.key), role["search"], console)
        else:
            result = os_run.measure(bench, cand.config, run_role, console, os_settings,
                                    f"search {role['search']} {cand.label} (re-run)")
        return result.value, result.run_dir, result.reason

    run_selection(selection, one, lambda s: write_json_atomic(path, s.to_dict()))
    return selection


def _rerun_dir(search_dir: Path, key: str) -> Path:
    """A new directory for a re-run's blocks: blocks-N-rerun-K."""
    k = 1
    while (search_dir / "trials" / f"blocks-{key}-rerun-{k}").exists():
        k += 1
    return search_dir / "trials" / f"blocks-{key}-rerun-{k}"


def _confirm(search_dir: Path, winner: Candidate, winner_file: Path, bench: BenchOptions,
             opts: SearchOptions, role: dict, console: Console, around=None,
             winner_os: dict | None = None, sides: Path | None = None):
    path = search_dir / "confirm.json"
    conf = confirm_mod.load_confirmation(path)
    if conf is None:
        is_named = winner.config in NAMED
        label = winner.label if is_named else f"search winner ({winner.label})"
        design, why = confirm_mod.confirmation_design(opts.compare_design, bench,
                                                      bool(winner_os))
        conf = confirm_mod.plan_confirmation(label, winner.config if is_named
                                             else str(winner_file), opts.compare_pairs,
                                             opts.compare_max_pairs, design, why)
        if opts.show_progress:
            console.print(f"final comparison: {design} ({why})")

    def on_run(label: str) -> None:
        if opts.show_progress:
            console.print(f"final comparison: run {conf.done}/{len(conf.order)} ({label})")

    return confirm_mod.run_confirmation(
        conf, bench, search_dir, {**role, "phase": "compare"}, console,
        lambda c: write_json_atomic(path, c.to_dict()), on_run, around, sides)


def write_winner(search_dir: Path, winner: Candidate, rows: list, space: SearchSpace,
                 os_values: dict[str, str] | None = None) -> Path:
    """winner.toml: the winning settings as a config file for ``--config FILE``."""
    path = search_dir / "winner.toml"
    if winner.config in NAMED:
        text = (f"# pgdyno tune --search: the winner is the named config {winner.config}\n"
                f'[config]\nname = "search-winner"\nbase = "{winner.config}"\n')
        write_text_atomic(path, text)
        return path
    row = next(r for r in rows if str(r.number) == winner.key)
    trial_file = write_trial_file(search_dir, row.number, row.settings, space,
                                  f"pgdyno tune --search: winner, trial {row.number}",
                                  os_values=os_values)
    text = trial_file.read_text().replace(f'name = "{trial_file.stem}"', 'name = "search-winner"')
    write_text_atomic(path, text)
    return path


WINNER_FORMAT_FILES = {"md": "winner-config.md", "script": "winner.sh"}
"""The winner in a `pgdyno tune --format`, where the name is not ``winner.FORMAT``."""


def winner_path(search_dir: Path | str, fmt: str) -> Path:
    """Where a search writes its winner in the ``pgdyno tune --format`` ``fmt``."""
    return Path(search_dir) / WINNER_FORMAT_FILES.get(fmt, f"winner.{fmt}")


def write_winner_formats(search_dir: Path, winner_file: Path, bench: BenchOptions,
                         install) -> list[Path]:  # noqa: ANN001 - a PgInstall
    """The winner in every ``pgdyno tune --format`` (conf, sql, env, md, sysctl, script)."""
    from pgdyno.config.render import RENDERERS
    from pgdyno.provision.script import script_for

    workload = registry.get(bench.workload)
    resolved = resolve_config(str(winner_file), [], install=install, workload=bench.workload,
                              connections=max(bench.clients),
                              dataset_bytes=workload.dataset_bytes(bench) or 0,
                              tuning=workload.tuning)
    written = []
    for fmt, render in [*RENDERERS.items(), ("script", script_for)]:
        out = winner_path(search_dir, fmt)
        write_text_atomic(out, render(resolved))
        written.append(out)
    return written


def _finish(outcome: SearchOutcome, study, record: SearchRecord, selection, conf,
            search_dir: Path, opts: SearchOptions, install, hardware) -> None:
    from pgdyno.search.report import write_search_report
    from pgdyno.search.report_data import build_search_report

    if outcome.winner_file:
        try:
            write_winner_formats(search_dir, Path(outcome.winner_file), opts.bench, install)
        except UsageError as exc:
            outcome.notes.append(f"winner formats not written: {exc}")
    data = build_search_report(record, study, selection, conf, opts, hardware, install,
                               outcome.notes, search_dir=search_dir)
    outcome.report = str(write_search_report(data, search_dir))
    write_json_atomic(search_dir / "result.json", serde.to_dict(outcome))
