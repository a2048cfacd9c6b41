"""Provision events for the context journal: one JSON line per apply, verify and revert in
``<results_dir>/provision/<context>/events.jsonl``.

Appended (never rewritten), one line per event, so the context journal can read them with
the run records and a crash mid-write costs at most the last line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgdyno.redact import redact
from pgdyno.results.manifest import check_version
from pgdyno.serde import Serialisable

EVENTS_SCHEMA_VERSION = 1


@dataclass
class ProvisionEvent(Serialisable):
    """One apply, verify or revert, as the context journal lists it."""

    time: str
    """UTC, ISO 8601."""
    action: str
    """apply, verify or revert."""
    exit_status: int
    summary: str
    """One line: what happened (``applied 6 changes``, ``2 of 9 settings drifted``)."""
    state_file: str = ""
    changed: int = 0
    """Settings changed (apply), restored (revert)."""
    drifted: int = 0
    """Settings not at the planned value (verify)."""
    config: str = ""
    hardware: str = ""
    host: str = ""
    schema_version: int = EVENTS_SCHEMA_VERSION


def events_path(results_dir: Path, context: str) -> Path:
    return Path(results_dir) / "provision" / context / "events.jsonl"


def record_event(results_dir: Path, context: str, action: str, *, exit_status: int,
                 summary: str, state_file: Path | str | None = None, changed: int = 0,
                 drifted: int = 0, config: str = "", hardware: str = "") -> Path:
    """Append one event; returns the events file."""
    import socket

    event = ProvisionEvent(time=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           action=action, exit_status=exit_status, summary=redact(summary),
                           state_file=str(state_file or ""), changed=changed, drifted=drifted,
                           config=config, hardware=hardware, host=socket.gethostname())
    path = events_path(results_dir, context)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(event.to_dict(), sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return path


def read_events(results_dir: Path, context: str) -> list[ProvisionEvent]:
    """The events of a context, oldest first; a damaged line is skipped, not fatal (a crash
    mid-write cuts the last one), but an event of a version this pgdyno does not read is
    refused in one line, since skipping it would hide an apply or a revert."""
    path = events_path(results_dir, context)
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict) or "schema_version" not in data:
            continue
        data = check_version(data, EVENTS_SCHEMA_VERSION, f"{path} line {number}",
                             "provision event")
        try:
            out.append(ProvisionEvent.from_dict(data))
        except (KeyError, TypeError, ValueError):  # serde.SchemaError is both
            continue
    return out
