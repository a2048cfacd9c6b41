"""The record of a warehouse sweep: ``sweep.json`` in its directory beside the runs.

The sweep directory holds no measurements of its own: each step names the run directory
(a sibling) that measured it and how that run ended; the sweep report reads the runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import write_json_atomic

SWEEP_FILE = "sweep.json"
SCHEMA_VERSION = 1


@dataclass
class SweepStep:
    warehouses: int
    clients: list[int]
    run: str | None = None
    """The run directory's name; it sits beside the sweep directory."""
    status: str = "pending"
    reason: str = ""


@dataclass
class SweepRecord:
    schema_version: int
    context: str
    status: str
    started_at: str
    ended_at: str | None
    keying_thinking: bool
    time_scale: float
    config: str
    steps: list[SweepStep] = field(default_factory=list)
    workload: str = "tprocc"
    """The workload whose plugin builds the sweep report (sweeps vary its dataset size)."""

    def save(self, sweep_dir: Path) -> None:
        write_json_atomic(sweep_dir / SWEEP_FILE, serde.to_dict(self))

    @classmethod
    def load(cls, sweep_dir: Path) -> SweepRecord:
        path = sweep_dir / SWEEP_FILE
        if not path.is_file():
            raise UsageError(f"{sweep_dir}: not a pgdyno sweep directory ({SWEEP_FILE} missing)")
        return read_versioned(cls, path, SCHEMA_VERSION, "sweep record")
