"""Summaries of the telemetry of one run, recomputed from the raw files only.

Every figure is recomputed from ``host_raw.jsonl``, ``waits.jsonl``, ``pg_stats.jsonl``,
``checkpoints.csv`` and ``smart.json`` (see :mod:`pgdyno.telemetry` for their layout):

- ``model``: the summary's dataclasses (``TelemetrySummary`` and its parts);
- ``host``: CPU, devices, memory, other load on the host, SMART;
- ``server``: wait events, the statistics views (database, WAL, I/O, checkpointer) and the
  checkpoints of the server log;
- ``limits``: CPU, devices, memory and connections against their limits;
- ``analyse``: the entry point, ``analyse_telemetry``, over one window;
- ``raw``: reading the raw files, a damaged part skipped.
"""

from pgdyno.analysis.telemetry.analyse import analyse_telemetry
from pgdyno.analysis.telemetry.host import (
    MIN_IOPS_FOR_CV,
    OTHER_MIN_CORES,
    OTHER_SHARE_PCT,
    coefficient_of_variation,
    contamination,
    cpu_per_unit,
)
from pgdyno.analysis.telemetry.model import (
    SCHEMA_VERSION,
    CheckpointEvent,
    CheckpointSummary,
    Contamination,
    CpuPerUnit,
    CpuSummary,
    DatabaseSummary,
    DeviceSummary,
    HardwareLimit,
    IoRow,
    Mark,
    MemorySummary,
    RoleInfo,
    Series,
    SmartChange,
    Stat,
    TelemetryGap,
    TelemetrySummary,
    WaitShare,
    WaitSummary,
    WalSummary,
)
from pgdyno.analysis.telemetry.server import classify_wait

__all__ = ["MIN_IOPS_FOR_CV", "OTHER_MIN_CORES", "OTHER_SHARE_PCT", "SCHEMA_VERSION",
           "CheckpointEvent", "CheckpointSummary", "Contamination", "CpuPerUnit", "CpuSummary",
           "DatabaseSummary", "DeviceSummary", "HardwareLimit", "IoRow", "Mark", "MemorySummary",
           "RoleInfo", "Series", "SmartChange", "Stat", "TelemetryGap", "TelemetrySummary",
           "WaitShare", "WaitSummary", "WalSummary", "analyse_telemetry", "classify_wait",
           "coefficient_of_variation", "contamination", "cpu_per_unit"]
