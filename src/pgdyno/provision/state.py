"""State files: everything a revert needs, under ``<workdir>/provision/state-<UTC>.json``.

Written before the first change (with the previous value of every step the apply will
touch), then rewritten, atomically and fsynced, twice per step: before its write (the step
``started``, with the old value read again: the write-ahead record) and after it (``done``).
A crash or a kill mid-apply leaves a file that names every step that may have changed the
machine, including one cut short between its write and its record, and
`pgdyno provision revert` restores all of them.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from datetime import UTC, datetime
from pathlib import Path

from pgdyno import __version__
from pgdyno.errors import UsageError
from pgdyno.provision.kinds import handler
from pgdyno.provision.model import SCHEMA_VERSION, AppliedStep, ProvisionPlan, ProvisionState
from pgdyno.results.manifest import check_version, read_json_file, read_versioned

STATE_DIR = "provision"


def state_dir(workdir: Path) -> Path:
    return Path(workdir) / STATE_DIR


def new_state(plan: ProvisionPlan, workdir: Path) -> ProvisionState:
    """The state of an apply about to start: what each step will replace, read now."""
    now = datetime.now(UTC)
    steps = [AppliedStep(step=step, previous=handler(step).save(step)) for step in plan.ordered()]
    state = ProvisionState(created=now.strftime("%Y-%m-%dT%H:%M:%SZ"), host=socket.gethostname(),
                           kernel=platform.release(), config=plan.config,
                           hardware=plan.hardware, steps=steps, pgdyno_version=__version__)
    state.path = str(_free_name(state_dir(workdir), now.strftime("%Y%m%dT%H%M%SZ")))
    return state


def _free_name(directory: Path, stamp: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"state-{stamp}.json"
    n = 2
    while path.exists():
        path = directory / f"state-{stamp}-{n}.json"
        n += 1
    return path


def write_state(state: ProvisionState) -> None:
    """Replace the state file whole (a temporary beside it, fsynced, then renamed, and the
    rename fsynced through the directory): once this returns, the record survives a kill or
    a power cut."""
    path = Path(state.path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as handle:
        json.dump(state.to_dict(), handle, indent=2)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


STATE_WHAT = "provision state file"


def load_state(path: Path) -> ProvisionState:
    """A state file, or one line naming it and what is wrong (damaged, or of a version this
    pgdyno does not read)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"provision revert {path}: no such state file")
    state = read_versioned(ProvisionState, path, SCHEMA_VERSION, STATE_WHAT)
    state.path = str(path)
    return state


def latest_state(workdir: Path) -> Path:
    """The newest state file still in effect (applied, or an apply that was cut short)."""
    directory = state_dir(workdir)
    files = sorted(directory.glob("state-*.json"), key=lambda p: p.stat().st_mtime,
                   reverse=True) if directory.is_dir() else []
    for path in files:
        try:
            data = read_json_file(path, STATE_WHAT)
        except UsageError:
            continue  # a damaged file records no apply in effect
        if not isinstance(data, dict):
            continue
        # A newer pgdyno's file is refused, not passed over: reverting an older apply in
        # its place would restore values that are no longer the machine's.
        status = check_version(data, SCHEMA_VERSION, path, STATE_WHAT).get("status")
        if status in ("applied", "applying", "revert incomplete", "rollback incomplete"):
            return path
    raise UsageError(f"provision revert: no applied state file in {directory}; accepted: "
                     "a STATE file path")
