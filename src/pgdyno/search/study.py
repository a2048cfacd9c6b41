"""The optimiser's state: an Optuna study kept in the search's directory.

Optuna's ``RDBStorage`` on a SQLite file (``study.db``) holds every trial as it finishes,
so a search stopped by Ctrl-C or a crash resumes where it was: finished trials are never
run again, and a trial that was running when it stopped is marked failed ("interrupted")
and its settings are queued to be the next trial.

The sampler is Optuna's TPE (Tree-structured Parzen Estimator): it handles integer,
log-scaled, real and categorical parameters together, and the conditional choice of a
special value beside a range, which CMA-ES does not (CMA-ES is continuous-only).
The three baselines (default, pgtune, tuned) are trials too, with their settings as a point
of the space (``SearchSpace.params_for``: clipped to the knobs' ranges, stock values where a
config leaves a setting alone): they are queued first (``enqueue_trial``), so TPE's model
starts from them, and the random start is only as long as the space needs
(``SearchSpace.random_start``). An earlier search of the same hardware and workload may seed
the study with its finished trials (``seed_from``), marked ``seeded``.

With a shared storage (``--storage postgresql://...``, Optuna's ``RDBStorage`` on that
server) several workers run trials of one study at once: each asks for a trial, runs it and
tells its value; Optuna hands a queued trial to one worker only. A worker's trial keeps a
heartbeat; a trial whose heartbeat stops (the host lost, the worker killed) is failed by the
next worker that asks after the grace period and queued again (Optuna's
``RetryHeartbeatStaleTrialCallback``), and left out of the trials (it never finished).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from pgdyno.errors import UsageError
from pgdyno.redact import redact

STUDY_FILE = "study.db"
STUDY_NAME = "search"
INTERRUPTED = "interrupted (Ctrl-C or a crash): its settings are run again"
SURPLUS = "not run: the budget was taken by other workers' trials"
BASELINES_ATTR = "baselines_queued"
"""Study user attribute set once the baselines are queued (they run once per study)."""
CONNECT_TIMEOUT_S = 5
"""How long --storage's server may take to answer the check before the search starts."""
HEARTBEAT_ENV = "PGDYNO_SEARCH_HEARTBEAT_S"
HEARTBEAT_S = 10
"""Seconds between a running trial's heartbeats in a shared storage; a trial silent for
GRACE_FACTOR times as long is failed and run again elsewhere."""
GRACE_FACTOR = 3

optuna.logging.set_verbosity(logging.WARNING)
# Heartbeats and their retry callback are "experimental" in Optuna, and meant for
# Study.optimize: pgdyno asks and tells itself and runs Optuna's heartbeat thread around
# each trial (``heartbeat``), which is what optimize does.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")


@dataclass
class TrialRow:
    """A finished trial as the report and the selection read it."""

    number: int
    kind: str
    """baseline or searched."""
    label: str
    """default, pgtune, tuned or ``trial N``."""
    config: str
    """What ``--config`` ran: a named config or the trial's file."""
    status: str
    value: float | None
    run_dir: str
    reason: str
    seconds: float
    settings: dict[str, str]
    started: float | None = None
    ended: float | None = None
    """When the trial started and finished (epoch seconds, Optuna's own record; None for a
    trial recorded without them)."""
    raw_value: float | None = None
    """The figure before the debt penalty (None for a trial recorded without it)."""
    against: dict[str, Any] | None = None
    """Measured in blocks against another trial: which, and the change
    (``search.trial_blocks.against_record``)."""


_ADVICE = ("; move it away to start this search afresh (its trials' run directories are "
           "kept), or give another --search-name")


def check_study_file(path: Path, advice: str = _ADVICE, need_study: bool = False) -> None:
    """A study file SQLite cannot read (a bad header, a truncated or garbled file) or that
    is not an Optuna study, refused in one line naming it, before anything is written; an
    absent or empty file is a new study (``need_study``: refused too, as an earlier search's
    study that ``--from`` reads must hold one). Opening it as Optuna does (read-write) lets
    SQLite roll back a transaction a crash left in its journal, as a resumed search needs.
    ``advice`` ends the line of a damaged file (the way out of it)."""
    if not path.exists() and not path.is_symlink():
        if need_study:
            raise UsageError(f"{path}: missing; no search's study there")
        return
    if path.is_dir():
        raise UsageError(f"{path}: a directory is where the search's study (a SQLite "
                         f"file) should be{advice}")
    try:
        if path.stat().st_size == 0:
            if need_study:
                raise UsageError(f"{path}: empty; no search's study there")
            return
        with contextlib.closing(sqlite3.connect(path)) as conn:
            problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:  # "file is not a database", "... is malformed"
        raise UsageError(f"{path}: the search's study is damaged: {_sqlite_words(exc)}"
                         f"{advice}") from None
    except (OSError, sqlite3.Error) as exc:
        raise UsageError(f"{path}: cannot read the search's study ({exc})") from None
    if problems != ["ok"]:
        raise UsageError(f"{path}: the search's study is damaged: SQLite's check says "
                         f"{'; '.join(problems[:2])}{advice}")
    if (tables or need_study) and "studies" not in tables:
        raise UsageError(f"{path}: a SQLite database, but not an Optuna study (no table "
                         f"'studies'){advice}")


def _sqlite_words(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text:
        return "not a SQLite database (its header is not SQLite's)"
    if "malformed" in text:
        return "truncated or corrupt (SQLite: database disk image is malformed)"
    return f"SQLite: {text}"


@dataclass(frozen=True)
class StudyPlace:
    """Where a search's study is: the SQLite file in its directory (``url`` None), or a
    shared PostgreSQL database (``--storage``) under ``name``."""

    url: str | None = None
    name: str = STUDY_NAME

    @property
    def shared(self) -> bool:
        return self.url is not None

    def describe(self) -> str:
        """For messages and the report: the URL without its password."""
        if not self.url:
            return "study.db"
        return f"study {self.name} in {self.describe_url()}"

    def describe_url(self) -> str:
        """The storage's URL as the user gave it, without its password."""
        return redact((self.url or "").replace("+psycopg://", "://", 1))


def storage_url(text: str, option: str = "--storage") -> str:
    """``--storage``: a postgresql:// URI, as SQLAlchemy needs it (the psycopg driver)."""
    from pgdyno.results.store import check_dsn

    check_dsn(text, option)
    value = text.strip()
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("postgresql", "postgres"):
        raise UsageError(f"{option} {redact(value)}: accepted: a URI, "
                         "postgresql://user@host:5432/dbname (the password in ~/.pgpass or "
                         "PGPASSWORD, not on the command line)")
    return "postgresql+psycopg://" + rest


def check_storage(place: StudyPlace) -> None:
    """--storage reachable, with the password it takes, before the search creates anything
    (its directory, a study in the storage): one line naming the option and the reason."""
    if not place.shared:
        return
    engine = sqlalchemy.create_engine(place.url, connect_args={
        "connect_timeout": CONNECT_TIMEOUT_S})
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise UsageError(f"--storage {place.describe_url()}: cannot connect "
                         f"({_first_line(exc)})") from None
    finally:
        engine.dispose()


def earlier_rows(search_dir: Path, place: StudyPlace) -> list[TrialRow]:
    """The finished trials of an earlier search (``--from``), read without creating
    anything: neither Optuna's tables nor a study, in its study.db or in a shared storage.
    A study that is missing, damaged or not there is one line naming it (the caller adds
    the option)."""
    if place.shared:
        url, where = place.url, place.describe()
    else:
        check_study_file(search_dir / STUDY_FILE, advice="", need_study=True)
        url, where = f"sqlite:///{search_dir / STUDY_FILE}", str(search_dir / STUDY_FILE)
    try:
        storage = optuna.storages.RDBStorage(url, skip_table_creation=True)
        return rows(optuna.load_study(study_name=place.name, storage=storage))
    except KeyError:
        raise UsageError(f"{where}: no study named {place.name!r} in it") from None
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError) as exc:  # RuntimeError: Optuna's
        raise UsageError(f"{where}: cannot read the search's study "  # schema version
                         f"({_first_line(exc)})") from None


def _first_line(exc: Exception) -> str:
    """The driver's own reason (psycopg's, SQLite's), first line, without a password."""
    reason = getattr(exc, "orig", None) or exc
    text = redact(str(reason)).strip()
    return text.splitlines()[0] if text else type(reason).__name__


def heartbeat_s() -> int:
    raw = os.environ.get(HEARTBEAT_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else HEARTBEAT_S


def _storage(search_dir: Path, place: StudyPlace) -> optuna.storages.RDBStorage:
    if not place.shared:
        return optuna.storages.RDBStorage(f"sqlite:///{search_dir / STUDY_FILE}")
    beat = heartbeat_s()
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3)
    # Workers starting at once may both create Optuna's tables: the loser tries again.
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(
                place.url, heartbeat_interval=beat, grace_period=GRACE_FACTOR * beat,
                heartbeat_stale_trial_callback=retry, engine_kwargs={"pool_pre_ping": True})
        except sqlalchemy.exc.IntegrityError:
            if attempt == 4:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def open_study(search_dir: Path, direction: str, seed: int, startup: int = 8,
               place: StudyPlace = StudyPlace()) -> optuna.Study:
    """The search's study, created or loaded (see ``open_or_create``)."""
    return open_or_create(search_dir, direction, seed, startup, place)[0]


def open_or_create(search_dir: Path, direction: str, seed: int, startup: int = 8,
                   place: StudyPlace = StudyPlace()) -> tuple[optuna.Study, bool]:
    """The search's study, and whether this call created it. The sampler's seed moves on
    with each finished trial so a resumed search does not replay the same random draws;
    ``startup``: TPE's random trials, the measured points already in the study included.
    Workers sharing a study lie to TPE about each other's running trials (constant liar),
    so two workers do not draw the same point."""
    path = search_dir / STUDY_FILE
    if not place.shared:
        check_study_file(path)
    where = place.describe() if place.shared else str(path)
    try:
        storage = _storage(search_dir, place)
        done = 0
        with contextlib.suppress(KeyError):
            done = len(optuna.load_study(study_name=place.name, storage=storage).trials)
        sampler = optuna.samplers.TPESampler(seed=seed + done, n_startup_trials=startup,
                                             constant_liar=place.shared)
        try:
            study = optuna.create_study(study_name=place.name, storage=storage,
                                        direction=direction, sampler=sampler)
            return study, True
        except optuna.exceptions.DuplicatedStudyError:
            return optuna.load_study(study_name=place.name, storage=storage,
                                     sampler=sampler), False
    except sqlalchemy.exc.SQLAlchemyError as exc:  # what the check above cannot see
        reason = redact(str(getattr(exc, "orig", None) or exc)).splitlines()[0]
        advice = "" if place.shared else _ADVICE
        raise UsageError(f"{where}: cannot open the search's study "
                         f"({type(getattr(exc, 'orig', None) or exc).__name__}: {reason})"
                         f"{advice}") from None


def queue_baselines(study: optuna.Study, points: dict[str, dict[str, Any]], created: bool,
                    shared: bool, wait_s: float = 30.0) -> list[str]:
    """The baselines (label -> their point of the space) queued as the study's first trials,
    once per study: by the worker that created it; a worker that finds a study without
    them (its creator stopped before queueing) waits for them a while, then queues the
    ones missing. Returns the labels queued."""
    if not created and shared:
        deadline = time.monotonic() + wait_s
        while not study.user_attrs.get(BASELINES_ATTR) and time.monotonic() < deadline:
            time.sleep(1.0)
    if study.user_attrs.get(BASELINES_ATTR) and not created:
        return []
    have = {t.user_attrs.get("label") for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get("kind") == "baseline"}
    queued = []
    for label, params in points.items():
        if label in have:
            continue
        study.enqueue_trial(params, user_attrs={"kind": "baseline", "label": label,
                                                "config": label}, skip_if_exists=False)
        queued.append(label)
    study.set_user_attr(BASELINES_ATTR, True)
    return queued


def fail_lost_trials(study: optuna.Study) -> None:
    """Running trials whose heartbeat stopped failed and queued again (shared storage)."""
    with warnings.catch_warnings():  # "experimental" in Optuna; see the filters above
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def heartbeat(study: optuna.Study, trial: optuna.Trial) -> contextlib.AbstractContextManager:
    """Optuna's own heartbeat thread for a trial asked outside ``study.optimize`` (a no-op
    without a shared storage)."""
    from optuna.storages._heartbeat import get_heartbeat_thread

    return get_heartbeat_thread(trial._trial_id, study._storage)  # noqa: SLF001


def worker_id() -> str:
    """Who runs a trial: host and process, recorded on the trial as ``worker``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def ask_within(study: optuna.Study, budget: int | None) -> optuna.Trial | None:
    """The next trial (a queued one first), or None when the budget is spent. Workers
    asking at once may take one trial too many each: counted after the ask, the trials
    beyond the budget are the newest running ones, and each worker that holds one gives it
    back (failed, left out of the trials), so the study ends with exactly the budget."""
    trial = study.ask()
    trial.set_user_attr("worker", worker_id())
    if budget is None:
        return trial
    trials = study.get_trials(deepcopy=False)
    running = sorted(t.number for t in trials if t.state == TrialState.RUNNING)
    spent = [t for t in _finished(trials) if t.user_attrs.get("kind") != "seeded"]
    surplus = len(spent) + len(running) - budget
    if surplus > 0 and trial.number in running[-surplus:]:
        trial.set_user_attr("reason", SURPLUS)
        study.tell(trial, state=TrialState.FAIL)
        return None
    return trial


def running(study: optuna.Study) -> int:
    """Trials running now (other workers', in a shared storage)."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING)


def recover_interrupted(study: optuna.Study) -> list[int]:
    """Trials left running by a stopped process: failed as interrupted, their settings
    queued again. Returns their numbers."""
    stale = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for trial in stale:
        study._storage.set_trial_user_attr(trial._trial_id, "reason", INTERRUPTED)  # noqa: SLF001
        study.tell(trial.number, state=TrialState.FAIL)
        if trial.params:
            kept = {k: v for k, v in trial.user_attrs.items() if k in ("kind", "label", "config")}
            study.enqueue_trial(trial.params, user_attrs={**kept, "retry_of": trial.number})
    return [t.number for t in stale]


def record_baseline(study: optuna.Study, name: str, config: str, result: Any) -> None:
    """A baseline's measurement as a finished trial without parameters (a study made before
    baselines were queued with their points)."""
    attrs = _attrs(result) | {"kind": "baseline", "label": name, "config": config}
    ok = result.status == "ok"
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE if ok else TrialState.FAIL,
        value=result.value if ok else None, user_attrs=attrs))


def seed_from(study: optuna.Study, earlier: list[TrialRow], source: str,
              params_for: Any, distributions: dict[str, Any]) -> int:
    """An earlier search's finished searched trials as measured points of this study
    (``params_for``: settings -> this space's parameters), kind ``seeded``: TPE learns from
    them, the budget, the selection and the comparison leave them out. Once per study."""
    if study.user_attrs.get("seeded_from"):
        return 0
    count = 0
    for row in earlier:
        if row.kind != "searched" or row.status != "ok" or not row.settings:
            continue
        study.add_trial(optuna.trial.create_trial(
            params=params_for(row.settings), distributions=distributions, value=row.value,
            user_attrs={"kind": "seeded", "label": f"seeded: {source} trial {row.number}",
                        "config": row.config, "status": "ok", "run_dir": row.run_dir,
                        "reason": "", "seconds": 0.0, "settings": row.settings}))
        count += 1
    study.set_user_attr("seeded_from", source)
    return count


def record_searched(study: optuna.Study, trial: optuna.Trial, config: str,
                    settings: dict[str, str], result: Any) -> None:
    """A trial asked from the study, measured: a queued baseline keeps its kind and label."""
    queued = trial.user_attrs
    own = ({"kind": "baseline", "label": queued["label"]} if queued.get("kind") == "baseline"
           else {"kind": "searched", "label": f"trial {trial.number}"})
    for key, value in (_attrs(result) | own | {"config": config,
                                               "settings": settings}).items():
        trial.set_user_attr(key, value)
    if result.status == "ok":
        study.tell(trial, result.value)
    else:
        study.tell(trial, state=TrialState.FAIL)


def _attrs(result: Any) -> dict[str, Any]:
    extra = {key: getattr(result, key) for key in ("raw_value", "against")
             if getattr(result, key, None) is not None}
    return {"status": result.status, "run_dir": result.run_dir, "reason": result.reason,
            "seconds": result.seconds, **extra}


def rows(study: optuna.Study) -> list[TrialRow]:
    """Every finished trial in order; left out: interrupted ones and ones whose worker was
    lost (they are run again) and a worker's surplus ask (see ``ask_within``)."""
    return [_row(t) for t in _finished(study.get_trials(deepcopy=False))]


def _finished(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    out = []
    for t in trials:
        if t.state not in (TrialState.COMPLETE, TrialState.FAIL):
            continue
        if t.user_attrs.get("reason") in (INTERRUPTED, SURPLUS):
            continue
        if t.state == TrialState.FAIL and "status" not in t.user_attrs:
            continue  # failed by the heartbeat check: never finished, run again
        out.append(t)
    return out


def _row(t: FrozenTrial) -> TrialRow:
    a = t.user_attrs
    ok = t.state == TrialState.COMPLETE
    return TrialRow(number=t.number, kind=a.get("kind", "searched"),
                    label=a.get("label", f"trial {t.number}"), config=a.get("config", ""),
                    status="ok" if ok else "failed", value=t.value if ok else None,
                    run_dir=a.get("run_dir", ""), reason=a.get("reason", ""),
                    seconds=float(a.get("seconds", 0.0)), settings=dict(a.get("settings", {})),
                    started=t.datetime_start.timestamp() if t.datetime_start else None,
                    ended=t.datetime_complete.timestamp() if t.datetime_complete else None,
                    raw_value=a.get("raw_value") if ok else None, against=a.get("against"))


def wall_seconds(rows: list[TrialRow]) -> float:
    """The wall time the trials took: the union of their intervals, so that trials run at
    once on several hosts count once and the pause of a search stopped and resumed not at
    all; a trial without its times counts its own seconds."""
    spans = sorted((r.started, r.ended) for r in rows
                   if r.started is not None and r.ended is not None)
    total = sum(r.seconds for r in rows if r.started is None or r.ended is None)
    reach = float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def baselines_done(study: optuna.Study) -> set[str]:
    return {r.label for r in rows(study) if r.kind == "baseline"}


def own_rows(study: optuna.Study) -> list[TrialRow]:
    """The trials this search ran (seeded ones left out): what its budget counts."""
    return [r for r in rows(study) if r.kind != "seeded"]
