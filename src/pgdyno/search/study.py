"""The optimiser's state: an Optuna study kept in the search's directory.

Optuna's ``RDBStorage`` on a SQLite file (``study.db``) holds every trial as it finishes,
so a search stopped by Ctrl-C or a crash resumes where it was: finished trials are never
run again, and a trial that was running when it stopped is marked failed ("interrupted")
and its settings are queued to be the next trial.

The sampler is Optuna's TPE (Tree-structured Parzen Estimator): it handles integer,
log-scaled, real and categorical parameters together, and the conditional choice of a
special value beside a range, which CMA-ES does not (CMA-ES is continuous-only).
The three baselines (default, pgtune, tuned) are trials too, without parameters: they are
named configs, not points of the space, so TPE learns from the searched trials only.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from pgdyno.errors import UsageError

STUDY_FILE = "study.db"
STUDY_NAME = "search"
INTERRUPTED = "interrupted (Ctrl-C or a crash): its settings are run again"

optuna.logging.set_verbosity(logging.WARNING)


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


_ADVICE = ("; move it away to start this search afresh (its trials' run directories are "
           "kept), or give another --search-name")


def check_study_file(path: Path) -> None:
    """A study file SQLite cannot read (a bad header, a truncated or garbled file) or that
    is not an Optuna study, refused in one line naming it, before anything is written; an
    absent or empty file is a new study. Opening it as Optuna does (read-write) lets SQLite
    roll back a transaction a crash left in its journal, as a resumed search needs."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_dir():
        raise UsageError(f"{path}: a directory is where the search's study (a SQLite "
                         f"file) should be{_ADVICE}")
    try:
        if path.stat().st_size == 0:
            return
        with contextlib.closing(sqlite3.connect(path)) as conn:
            problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:  # "file is not a database", "... is malformed"
        raise UsageError(f"{path}: the search's study is damaged: {_sqlite_words(exc)}"
                         f"{_ADVICE}") from None
    except (OSError, sqlite3.Error) as exc:
        raise UsageError(f"{path}: cannot read the search's study ({exc})") from None
    if problems != ["ok"]:
        raise UsageError(f"{path}: the search's study is damaged: SQLite's check says "
                         f"{'; '.join(problems[:2])}{_ADVICE}")
    if tables and "studies" not in tables:
        raise UsageError(f"{path}: a SQLite database, but not an Optuna study (no table "
                         f"'studies'){_ADVICE}")


def _sqlite_words(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "not a database" in text:
        return "not a SQLite database (its header is not SQLite's)"
    if "malformed" in text:
        return "truncated or corrupt (SQLite: database disk image is malformed)"
    return f"SQLite: {text}"


def open_study(search_dir: Path, direction: str, seed: int) -> optuna.Study:
    """The search's study, created or loaded; the sampler's seed moves on with each
    finished trial so a resumed search does not replay the same random draws."""
    path = search_dir / STUDY_FILE
    check_study_file(path)
    try:
        storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
        existing = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
        done = 0
        if STUDY_NAME in existing:
            done = len(optuna.load_study(study_name=STUDY_NAME, storage=storage).trials)
        sampler = optuna.samplers.TPESampler(seed=seed + done, n_startup_trials=8)
        return optuna.create_study(study_name=STUDY_NAME, storage=storage,
                                   direction=direction, sampler=sampler, load_if_exists=True)
    except sqlalchemy.exc.SQLAlchemyError as exc:  # what the check above cannot see
        reason = getattr(exc, "orig", None) or exc
        raise UsageError(f"{path}: cannot open the search's study "
                         f"({type(reason).__name__}: {reason}){_ADVICE}") from None


def recover_interrupted(study: optuna.Study) -> list[int]:
    """Trials left running by a stopped process: failed as interrupted, their settings
    queued again. Returns their numbers."""
    stale = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for trial in stale:
        study._storage.set_trial_user_attr(trial._trial_id, "reason", INTERRUPTED)  # noqa: SLF001
        study.tell(trial.number, state=TrialState.FAIL)
        if trial.params:
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
    return [t.number for t in stale]


def record_baseline(study: optuna.Study, name: str, config: str, result: Any) -> None:
    """A baseline's measurement as a finished trial without parameters."""
    attrs = _attrs(result) | {"kind": "baseline", "label": name, "config": config}
    ok = result.status == "ok"
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE if ok else TrialState.FAIL,
        value=result.value if ok else None, user_attrs=attrs))


def record_searched(study: optuna.Study, trial: optuna.Trial, config: str,
                    settings: dict[str, str], result: Any) -> None:
    for key, value in (_attrs(result) | {"kind": "searched", "label": f"trial {trial.number}",
                                         "config": config, "settings": settings}).items():
        trial.set_user_attr(key, value)
    if result.status == "ok":
        study.tell(trial, result.value)
    else:
        study.tell(trial, state=TrialState.FAIL)


def _attrs(result: Any) -> dict[str, Any]:
    return {"status": result.status, "run_dir": result.run_dir, "reason": result.reason,
            "seconds": result.seconds}


def rows(study: optuna.Study) -> list[TrialRow]:
    """Every finished trial in order (interrupted ones left out: they are run again)."""
    out = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (TrialState.COMPLETE, TrialState.FAIL):
            continue
        if t.user_attrs.get("reason") == INTERRUPTED:
            continue
        out.append(_row(t))
    return out


def _row(t: FrozenTrial) -> TrialRow:
    a = t.user_attrs
    ok = t.state == TrialState.COMPLETE
    return TrialRow(number=t.number, kind=a.get("kind", "searched"),
                    label=a.get("label", f"trial {t.number}"), config=a.get("config", ""),
                    status="ok" if ok else "failed", value=t.value if ok else None,
                    run_dir=a.get("run_dir", ""), reason=a.get("reason", ""),
                    seconds=float(a.get("seconds", 0.0)), settings=dict(a.get("settings", {})))


def baselines_done(study: optuna.Study) -> set[str]:
    return {r.label for r in rows(study) if r.kind == "baseline"}
