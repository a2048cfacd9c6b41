"""Reading the raw telemetry files: damaged parts are skipped, never fatal (telemetry is
context, and a report without it is still a report)."""

from __future__ import annotations

import json
from pathlib import Path

from pgdyno.results.rawfiles import read_csv


def load_json(path: Path) -> dict:
    """A telemetry JSON file's object; {} when absent or damaged (binary, cut short, not an
    object): telemetry is context, and a report without it is still a report."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # ValueError: undecodable bytes, bad JSON
        return {}
    return data if isinstance(data, dict) else {}


def csv_rows(path: Path, number: str, *columns: str) -> list[dict[str, str]]:
    """The rows of a telemetry CSV that hold every column named and a number in
    ``number``: a damaged row (or a file of garbage) is skipped, as ``read_jsonl`` skips
    a damaged line, and every whole sample stays usable."""
    rows = []
    for row in read_csv(path):
        if any(row.get(c) is None for c in (number, *columns)):
            continue
        try:
            float(row[number])
        except ValueError:
            continue
        rows.append(row)
    return rows



def in_window(t: float, start: float, end: float, slack: float) -> bool:
    return start - slack <= t <= end + slack

def delta(before: dict, after: dict, key: str) -> float | None:
    """after[key] - before[key]: how much a counter moved, None when either side lacks it."""
    if before.get(key) is None or after.get(key) is None:
        return None
    return float(after[key]) - float(before[key])

