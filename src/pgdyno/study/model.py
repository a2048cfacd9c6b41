"""A study's record: what was run, what each comparison found, and every conclusion's inputs.

``study.json`` in the campaign's directory holds one ``StudyRecord``: the comparisons (the
same typed ``Comparison`` that ``pgdyno compare`` saves), each workload's measured figures
per side, the findings (conclusions as data: a kind, the figures they rest on and the
section they come from) and the threats to validity. The report only words and lays out
what is here; ``pgdyno report --campaign NAME`` rebuilds all of it from the runs' files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.compare.model import Comparison
from pgdyno.provision.model import ProvisionPlan
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import write_json_atomic
from pgdyno.study.versions_model import VersionReport

SCHEMA_VERSION = 1
RECORD_FILE = "study.json"


@dataclass
class Validation:
    """The status line: the measured headline against the sizing math's target
    (vCPUs × a per-core figure the file states or a hardware profile holds)."""

    workload: str
    metric: str
    side: str
    measured: float
    vcpus: int
    per_core: float
    source: str
    """Where ``per_core`` comes from: "the study file", "hardware profile r8g.xlarge"."""
    band_low: float
    band_high: float

    @property
    def target(self) -> float:
        return self.vcpus * self.per_core

    @property
    def ratio(self) -> float:
        return self.measured / self.target if self.target else float("nan")

    @property
    def status(self) -> str:
        if not self.target:
            return "UNDETERMINED"
        if self.ratio < self.band_low:
            return "BELOW TARGET"
        return "VALIDATED" if self.ratio <= self.band_high else "ABOVE TARGET"


@dataclass
class MetricFigure:
    """One metric of a workload on one side: its per-iteration values and their mean."""

    name: str
    label: str
    unit: str
    direction: int
    mean: float
    stddev: float
    n: int
    values: list[float] = field(default_factory=list)


@dataclass
class Side:
    """One config's runs of one workload."""

    label: str
    runs: list[str]
    """Run (or sweep) directories, as the journal recorded them."""
    clients: int | None
    """The client count the figures are at (the highest measured on every run)."""
    figures: list[MetricFigure] = field(default_factory=list)
    bottleneck: str | None = None
    """The median bottleneck verdict over the iterations at ``clients`` (None: none)."""
    bottleneck_votes: dict[str, int] = field(default_factory=dict)
    dataset_fit: str = ""
    """Where the dataset lived: in shared_buffers, in page cache, larger than memory."""
    dataset_bytes: int | None = None
    memory_bytes: int | None = None
    window_s: float | None = None
    """The shortest measured window of an iteration (s)."""
    contaminated: list[str] = field(default_factory=list)
    smart: dict[str, float] = field(default_factory=dict)
    """SMART/NVMe figures before and after (``temperature_c_before``, ...), when read."""
    endurance: str = ""
    """The device's endurance projection at this side's write rate, when SMART was read."""
    smart_note: str = ""
    """Why no SMART figure was read (a virtual disk, no permission), when none was."""
    by_clients: dict[str, float] = field(default_factory=dict)
    """The headline metric's mean per client count (keys: the count, as text): scaling."""
    took_turns: bool = False
    """Its load took turns of one second with the other side's (the alternating design):
    its figure is the headline of its turns, and it has no latency or verdict of its own."""

    def figure(self, name: str) -> MetricFigure | None:
        return next((f for f in self.figures if f.name == name), None)


@dataclass
class StepComparison:
    """A sweep step (warehouses, scale...) compared side against side."""

    size: int
    comparison: Comparison


@dataclass
class WorkloadResult:
    workload: str
    description: str
    headline: str
    """The workload's headline metric (tps, nopm, geomean_s, events_per_s...)."""
    anchor: str
    """The report section this workload's figures live in."""
    sides: list[Side]
    comparison: Comparison | None = None
    """Baseline against candidate (None: the workload ran under one config only)."""
    compare_dir: str | None = None
    """The full compare report, relative to the study directory."""
    steps: list[StepComparison] = field(default_factory=list)
    """Sweep cells: one comparison per size measured on both sides."""
    sweep_compare_dir: str | None = None
    """Sweep cells: the workload's own sweep-against-sweep report (TPROC-C's real against
    ideal NOPM, saturation, memory), relative to the study directory."""
    size_unit: str = ""
    chart_metrics: list[str] = field(default_factory=list)
    """The headline first, then the metrics its plugin charts beside it."""

    def side(self, label: str) -> Side | None:
        return next((s for s in self.sides if s.label == label), None)


@dataclass
class Finding:
    """A conclusion, as data: ``kind`` picks the sentence, ``values`` and ``words`` fill it.
    Only measured figures enter ``values``: a finding whose figure was not measured is
    never made."""

    kind: str
    """change, no_difference, undetermined, bottleneck, envelope, write_cv, smart,
    endurance, cpu_baseline, peak, step_change."""
    workload: str
    section: str
    """The anchor of the section the figure comes from."""
    values: dict[str, float] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)
    summary: bool = False
    """Part of the executive summary (the answer), not only of the conclusions."""


@dataclass
class Threat:
    kind: str
    """failed_cell, interrupted_cell, contaminated, noise, short_window, dataset_fit,
    single_sample, left_out_run."""
    detail: str
    """The figure or the cell, in words (a cell key, a contamination figure)."""
    workload: str = ""
    values: dict[str, float] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)
    """What the sentence names besides ``detail`` (left_out_run: the run directory in
    ``detail``, its ``cell`` and the ``reason`` here)."""


DAMAGED = "damaged"
"""A cell's status when it ended ok but a file of its run cannot be read: the run is left
out of the figures (``StudyRecord.left_out`` says which and why)."""


@dataclass
class LeftOutRun:
    """A run the study could not read (a truncated summary.json or manifest.json, a missing
    summary), left out of every figure and comparison rather than silently dropped."""

    cell: str
    workload: str
    run_dir: str
    """The run (or sweep) directory, as the study found it."""
    reason: str
    """The reader's one line: the damaged file's path and what is wrong with it."""


@dataclass
class SmartPhase:
    """The device's SMART log at one moment of the study: a drive report's "before fio, after
    OLTP, after analytics" columns. Traffic and throttle counts are the study's own, summed
    from its first reading; temperature, wear and errors are the device's absolute values."""

    label: str
    """"before fio", "after tprocc": the reading that opened the study or closed a workload's
    last cell."""
    device: str
    temperature_c: float | None = None
    peak_temperature_c: float | None = None
    """The highest temperature read so far in the study."""
    percent_used: float | None = None
    media_errors: float | None = None
    written_bytes: float | None = None
    read_bytes: float | None = None
    throttle_events: float | None = None


@dataclass
class ProvisionRecord:
    """The provisioning plan of one config: what `pgdyno provision plan` would change
    on the measured host, read once, before the study's first cell (a rebuild shows the host
    as it was then, not as it is now)."""

    label: str
    config: str
    plan: ProvisionPlan | None = None
    note: str = ""
    """Why there is no plan (the config engine refused the host), when there is none."""


@dataclass
class CellState:
    key: str
    status: str
    reason: str = ""
    run_dir: str | None = None


@dataclass
class StudyRecord:
    schema_version: int
    name: str
    campaign: str
    size: str
    """The campaign's size: ``default`` or a [size.NAME] (quick...)."""
    question: str
    title: str
    hardware: str
    """The host the runs measured, in words (vCPUs, RAM, CPU model)."""
    started_at: str
    ended_at: str
    baseline: str
    candidate: str | None
    sections: list[str]
    cells: list[CellState]
    workloads: list[WorkloadResult]
    findings: list[Finding] = field(default_factory=list)
    threats: list[Threat] = field(default_factory=list)
    settings: list[dict[str, str]] = field(default_factory=list)
    """Baseline → candidate settings (layer, name, before, after, rationale)."""
    wall_seconds: float | None = None
    """The campaign's measured run time (the journal's run-end seconds, summed)."""
    validation: Validation | None = None
    vcpus: int | None = None
    """The measured host's vCPUs (the projection's starting point)."""
    smart_phases: list[SmartPhase] = field(default_factory=list)
    smart_note: str = ""
    """Why the study has no SMART phases (a virtual disk has no SMART log), when it has none."""
    provision: list[ProvisionRecord] = field(default_factory=list)
    left_out: list[LeftOutRun] = field(default_factory=list)
    """Runs of cells that ended ok but could not be read, with why (their cells read
    ``damaged``)."""
    versions: VersionReport | None = None
    """The configs ran different PostgreSQL builds: which each ran, and every workload
    under each build against the baseline's (None: one build for all)."""

    def workload(self, name: str) -> WorkloadResult | None:
        return next((w for w in self.workloads if w.workload == name), None)

    def save(self, directory: Path) -> Path:
        path = directory / RECORD_FILE
        write_json_atomic(path, serde.to_dict(self))
        return path

    @classmethod
    def load(cls, directory: Path) -> StudyRecord:
        return read_versioned(cls, directory / RECORD_FILE, SCHEMA_VERSION, "study record",
                              "; rebuild it with `pgdyno report --campaign NAME`")
