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


def read_jsonl(path: Path) -> Iterator[dict]:
    """Every complete JSON line; a torn last line (crash) is skipped."""
    if not path.exists():
        return
    with path.open() as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
