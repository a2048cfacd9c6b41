"""NOPM, TPM and efficiency, measured in the database rather than by the driver.

A snapshot reads sum(d_next_o_id) (one more per committed New-Order, transactionally
exact) and the database's xact_commit + xact_rollback in a single statement; two
snapshots bracket the measured window. pg_stat_database lags by up to a second per
busy backend (statistics are flushed at most once a second), which is negligible over
a window of minutes; NOPM has no such lag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pgdyno.workloads.tprocc.model import (
    IDEAL_NOPM_PER_WAREHOUSE,
    IdealComparison,
    Mix,
    Snapshot,
    ThroughputMetrics,
)
from pgdyno.workloads.tprocc.scripts import ideal_nopm

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

SATURATION_RATIO = 0.9
"""Real/ideal below this marks saturation (reference: below ~90%)."""

_SNAPSHOT = """
SELECT extract(epoch FROM clock_timestamp())::float8,
       (SELECT coalesce(sum(d_next_o_id), 0) FROM district)::bigint,
       xact_commit, xact_rollback
FROM pg_stat_database
WHERE datname = current_database()
"""


def snapshot(conn: psycopg.Connection) -> Snapshot:
    """Read the counters now. ``conn`` must be in autocommit mode, so that the cached
    statistics snapshot of an open transaction is never reused."""
    with conn.transaction():  # one transaction per snapshot: TPM subtracts them exactly
        conn.execute("SELECT pg_stat_clear_snapshot()")
        time_s, next_o_id, commits, rollbacks = conn.execute(_SNAPSHOT).fetchone()
    return Snapshot(time_s=time_s, sum_next_o_id=next_o_id, xact_commit=commits,
                    xact_rollback=rollbacks)


def throughput(start: Snapshot, end: Snapshot, warehouses: int,
               own_transactions: int = 0) -> ThroughputMetrics:
    """NOPM = new orders / minutes, TPM = transactions / minutes, over start..end.

    ``own_transactions``: the snapshots' own transactions inside the window, left out of
    TPM (they matter only at compliant rates of a few transactions a second)."""
    duration_s = end.time_s - start.time_s
    if duration_s <= 0:
        raise ValueError("the end snapshot must be later than the start snapshot")
    minutes = duration_s / 60
    new_orders = end.sum_next_o_id - start.sum_next_o_id
    transactions = (end.xact_commit + end.xact_rollback) - (start.xact_commit
                                                            + start.xact_rollback)
    transactions = max(0, transactions - own_transactions)
    nopm = new_orders / minutes
    return ThroughputMetrics(
        warehouses=warehouses, duration_s=duration_s, new_orders=new_orders,
        transactions=transactions, nopm=nopm, tpm=transactions / minutes,
        efficiency=efficiency(nopm, warehouses))


def new_order_rate(figures: dict[str, float]) -> tuple[str, float] | None:
    """TPROC-C's unit of work and its rate in an iteration: New-Orders a second (NOPM ÷ 60,
    from the database's snapshots), for the CPU each side spent per New-Order."""
    nopm = figures.get("nopm")
    return ("New-Order", nopm / 60) if nopm else None


def efficiency(nopm: float, warehouses: int, time_scale: float = 1.0) -> float:
    """NOPM against the compliant ceiling of 12.86 per warehouse, which keying and think
    times ``time_scale`` times the specification's raise to 12.86 ÷ ``time_scale``. Only a
    compliant run has a ceiling: without keying and think times the figure means nothing."""
    return nopm / (IDEAL_NOPM_PER_WAREHOUSE * warehouses / time_scale)


def interval_series(snapshots: Sequence[Snapshot], warehouses: int) -> list[ThroughputMetrics]:
    """NOPM/TPM per interval from snapshots sampled during a run (NOPM over time)."""
    return [throughput(a, b, warehouses)
            for a, b in zip(snapshots[:-1], snapshots[1:], strict=True)]


def against_ideal(metrics: ThroughputMetrics, mix: Mix | None = None, time_scale: float = 1.0,
                  threshold: float = SATURATION_RATIO) -> IdealComparison:
    """Real NOPM of a compliant (keying/thinking) run against its ideal line."""
    ideal = ideal_nopm(metrics.warehouses, mix, time_scale)
    ratio = metrics.nopm / ideal
    return IdealComparison(warehouses=metrics.warehouses, nopm=metrics.nopm,
                           ideal_nopm=ideal, ratio=ratio, saturated=ratio < threshold)
