"""The record of a sweep over a workload's dataset size: ``sweep.json`` beside the runs.

A sweep is one ordinary run per size (TPROC-C's ``--warehouses 10,20,30``). The sweep
directory holds no measurements of its own: each step names the run directory (a sibling)
that measured it and how that run ended; the workload's sweep report reads the runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno import serde
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import write_json_atomic

SWEEP_FILE = "sweep.json"
SCHEMA_VERSION = 2


@dataclass
class SweepStep:
    size: int
    """The dataset size this step runs at, in the record's ``size_unit``."""
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
    config: str
    workload: str
    """The workload whose plugin builds the sweep report."""
    size_unit: str
    """What a step's size counts ("warehouses")."""
    workload_options: dict[str, Any] = field(default_factory=dict)
    """The workload's options common to every step (serialised), for the sweep report."""
    steps: list[SweepStep] = field(default_factory=list)

    def save(self, sweep_dir: Path) -> None:
        write_json_atomic(sweep_dir / SWEEP_FILE, serde.to_dict(self))

    @classmethod
    def load(cls, sweep_dir: Path) -> SweepRecord:
        return read_versioned(cls, Path(sweep_dir) / SWEEP_FILE, SCHEMA_VERSION,
                              "sweep record", older={1: _from_v1})


V1_SWEEPS = ("tprocc", "warehouses", ("keying_thinking", "time_scale"))
"""What every version-1 record was: the only sweeps that version could record, TPROC-C's
--warehouses, with the step's size under the unit's name and two of its options inline.
A file format's history, not a workload's hook: current records name their own workload,
unit and options, and no new workload needs a line here."""


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    workload, unit, inline = V1_SWEEPS
    options = {k: data.pop(k) for k in inline if k in data}
    steps = [{**{k: v for k, v in s.items() if k != unit}, "size": s[unit]}
             for s in data.get("steps", []) if isinstance(s, dict) and unit in s]
    return {**data, "schema_version": SCHEMA_VERSION, "workload": data.get("workload", workload),
            "size_unit": unit, "workload_options": options, "steps": steps}
