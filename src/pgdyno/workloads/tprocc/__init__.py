"""TPROC-C: a TPC-C-derived OLTP workload driven by pgbench through PL/pgSQL functions.

Public API (everything the CLI, runner and reports need):

- load(target, LoadOptions, progress) -> LoadResult: build or reuse the dataset;
- generate(ScriptOptions) -> ScriptSet: the weighted pgbench scripts; script_no maps to
  SCRIPT_ORDER / ScriptSet.scripts (transaction type and commit/rollback outcome);
- snapshot(conn) and throughput(start, end, W) -> ThroughputMetrics: NOPM, TPM, efficiency;
- check_consistency(conn) -> ConsistencyReport: TPC-C clause 3.3.2 conditions 1-4;
- interval_series(snapshots, W): NOPM/TPM per interval from snapshots sampled during a run;
- ideal_nopm(W, mix, time_scale) and against_ideal(metrics, ...): the compliant-mode
  ceiling and real/ideal (a perfect compliant run reaches about 0.99: the 1% of
  New-Orders that roll back are in the 12.86 but not in NOPM).
"""

from pgdyno.workloads.tprocc.consistency import check as check_consistency
from pgdyno.workloads.tprocc.loader import default_workers, load
from pgdyno.workloads.tprocc.metrics import (
    SATURATION_RATIO,
    against_ideal,
    efficiency,
    interval_series,
    snapshot,
    throughput,
)
from pgdyno.workloads.tprocc.model import (
    IDEAL_NOPM_PER_WAREHOUSE,
    TRANSACTIONS,
    ConditionResult,
    ConsistencyReport,
    IdealComparison,
    LoadOptions,
    LoadProgress,
    LoadResult,
    Mix,
    NURandConstants,
    ScriptInfo,
    ScriptOptions,
    Snapshot,
    ThroughputMetrics,
    parse_warehouses,
)
from pgdyno.workloads.tprocc.schema import TABLES, WORKLOAD, expected_rows, install_functions
from pgdyno.workloads.tprocc.scripts import (
    KEYING_S,
    SCRIPT_ORDER,
    TERMINALS_PER_WAREHOUSE,
    THINK_MEAN_S,
    ScriptSet,
    generate,
    ideal_nopm,
    script_for,
)

__all__ = [
    "ConditionResult", "ConsistencyReport", "IDEAL_NOPM_PER_WAREHOUSE", "IdealComparison",
    "KEYING_S", "LoadOptions", "LoadProgress", "LoadResult", "Mix", "NURandConstants",
    "SATURATION_RATIO", "SCRIPT_ORDER", "ScriptInfo", "ScriptOptions", "ScriptSet", "Snapshot",
    "TABLES", "TERMINALS_PER_WAREHOUSE", "THINK_MEAN_S", "TRANSACTIONS", "ThroughputMetrics",
    "WORKLOAD", "against_ideal", "check_consistency", "default_workers", "efficiency",
    "expected_rows", "generate", "ideal_nopm", "install_functions", "interval_series", "load",
    "parse_warehouses", "script_for", "snapshot", "throughput",
]
