"""Readers of the raw telemetry files of a run directory (the writers are in
:mod:`pgdyno.telemetry.files`).

The writers flush line by line, so a crash or a Ctrl-C can leave a half-written last line:
the readers skip it rather than fail, and every complete sample stays usable.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from pgdyno.errors import UsageError


def read_jsonl(path: Path) -> Iterator[dict]:
    """Every complete JSON object line; a torn last line (crash) or a damaged one is
    skipped (undecodable bytes included): each sample stands alone."""
    if not _readable(path):
        return
    with path.open(errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                sample = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(sample, dict):
                yield sample


def read_csv(path: Path) -> list[dict[str, str]]:
    if not _readable(path):
        return []
    with path.open(newline="", errors="replace") as fh:
        return list(csv.DictReader(fh))


def _readable(path: Path) -> bool:
    """False when absent (a sampler that did not run); a directory in its place is damage."""
    if path.is_dir():
        raise UsageError(f"{path}: cannot read the telemetry: a directory is where the file "
                         "should be")
    return path.exists()
