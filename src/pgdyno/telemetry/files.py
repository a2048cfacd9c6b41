"""Append-only writers for the raw telemetry files, flushed line by line.

Each line is flushed as it is written so that a crash or a Ctrl-C leaves every sample
taken so far readable; a half-written last line is skipped by the readers
(:mod:`pgdyno.results.rawfiles`).
"""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path
from typing import IO, Any


class _AppendFile:
    """A file opened for appending that several sampler threads write whole lines to;
    writes after ``close`` are dropped (a sampler may outlive the recorder by a tick)."""

    def __init__(self, path: Path, newline: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fh: IO[str] | None = path.open("a", newline=newline)

    def _emit(self, write) -> None:
        with self._lock:
            if self._fh is None:
                return
            write(self._fh)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class CsvWriter(_AppendFile):
    def __init__(self, path: Path, columns: list[str]) -> None:
        new = not path.exists() or path.stat().st_size == 0
        super().__init__(path, newline="")
        self.columns = columns
        assert self._fh is not None
        self._writer = csv.writer(self._fh)
        if new:
            self._emit(lambda _: self._writer.writerow(columns))

    def write(self, row: list[Any]) -> None:
        self._emit(lambda _: self._writer.writerow([_cell(v) for v in row]))


class JsonlWriter(_AppendFile):
    def write(self, obj: dict) -> None:
        line = json.dumps(obj, separators=(",", ":"), default=str)
        self._emit(lambda fh: fh.write(line + "\n"))


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.3f}"
    return "" if value is None else value

