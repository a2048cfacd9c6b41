"""Dataclasses that cross module boundaries for TPROC-C, each with to_dict/from_dict.

Serialisation is derived from the dataclass fields (never by listing them twice), so a
field added to a model is saved and loaded without touching this code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pgdyno.errors import UsageError
from pgdyno.results import load
from pgdyno.results.load import LoadRecord
from pgdyno.serde import Serialisable

SCHEMA_VERSION = 1

TRANSACTIONS = ("new_order", "payment", "order_status", "delivery", "stock_level")
"""The five TPC-C transaction types, in the order of the specification."""

IDEAL_NOPM_PER_WAREHOUSE = 12.86
"""New orders per minute per warehouse that 10 compliant terminals can reach at most."""


# ----- workload definition ----------------------------------------------------------------

@dataclass(frozen=True)
class Mix(Serialisable):
    """Share of each transaction type, in percent of all transactions (any positive sum)."""

    new_order: float = 45.0
    payment: float = 43.0
    order_status: float = 4.0
    delivery: float = 4.0
    stock_level: float = 4.0

    def __post_init__(self) -> None:
        shares = [getattr(self, name) for name in TRANSACTIONS]
        if any(s < 0 for s in shares) or sum(shares) <= 0:
            raise UsageError(f"--mix {self.describe()}: shares must be >= 0 with a positive sum")

    @classmethod
    def parse(cls, text: str) -> Mix:
        """``45,43,4,4,4`` (in TPC-C order) or ``new_order=45,payment=43,...``."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            if all("=" not in p for p in parts):
                if len(parts) != len(TRANSACTIONS):
                    raise ValueError
                return cls(*(float(p) for p in parts))
            given = {}
            for part in parts:
                key, _, value = part.partition("=")
                key = key.strip().replace("-", "_")
                if key not in TRANSACTIONS:
                    raise ValueError
                given[key] = float(value)
            return cls(**{name: given.get(name, 0.0) for name in TRANSACTIONS})
        except ValueError:
            raise UsageError(
                f"--mix {text}: expected five numbers (new_order,payment,order_status,"
                "delivery,stock_level) such as 45,43,4,4,4, or name=share pairs") from None

    def share(self, transaction: str) -> float:
        """Fraction (0..1) of all transactions."""
        total = sum(getattr(self, name) for name in TRANSACTIONS)
        return getattr(self, transaction) / total

    def describe(self) -> str:
        return "/".join(f"{getattr(self, name):g}" for name in TRANSACTIONS)


@dataclass(frozen=True)
class ScriptInfo(Serialisable):
    """One pgbench script of the workload; ``script_no`` is pgbench's 0-based number,
    the fourth column of its ``-l`` log."""

    script_no: int
    name: str
    transaction: str
    """One of TRANSACTIONS."""
    outcome: str
    """``commit``, or ``rollback`` for the 1% invalid-item New-Order variant."""
    weight: int
    """pgbench ``@weight`` (relative)."""
    file_name: str


@dataclass(frozen=True)
class NURandConstants(Serialisable):
    """The per-run constants C of NURand (TPC-C clause 2.1.6)."""

    c_last: int
    """For customer last names, NURand(255, 0, 999); obeys clause 2.1.6.1 against the
    load-time constant."""
    c_id: int
    """For customer ids, NURand(1023, 1, 3000)."""
    ol_i_id: int
    """For item ids, NURand(8191, 1, 100000)."""


@dataclass(frozen=True)
class ScriptOptions(Serialisable):
    """Everything that shapes the generated pgbench scripts."""

    warehouses: int
    mix: Mix = field(default_factory=Mix)
    all_warehouses: bool = False
    """Every transaction picks a random warehouse instead of the client's home one."""
    keying_thinking: bool = False
    """Compliant mode: keying and think times with ``\\sleep`` (10 clients per warehouse)."""
    time_scale: float = 1.0
    """Multiplies keying and think times (1.0 is the specification; tests use less)."""
    rollback_pct: float = 1.0
    """Percent of New-Orders with an invalid item, which roll back."""
    remote_line_pct: float = 1.0
    """Percent of order lines supplied by another warehouse."""
    remote_payment_pct: float = 15.0
    """Percent of Payments for a customer of another warehouse."""
    by_name_pct: float = 60.0
    """Percent of Payments and Order-Status that look the customer up by last name."""
    protocol: str = "simple"
    """pgbench ``-M`` mode the scripts are written for."""
    seed: int | None = None
    """Seed for the per-run NURand constants (None: random)."""
    run_s: int | None = None
    """pgbench's ``-T``: compliant sleeps end by it (None: they run their full length)."""

    def __post_init__(self) -> None:
        if self.warehouses < 1:
            raise UsageError(f"--warehouses {self.warehouses}: must be at least 1")
        if self.protocol not in ("simple", "extended", "prepared"):
            raise UsageError(f"protocol {self.protocol}: expected simple, extended or prepared")
        if self.time_scale <= 0:
            raise UsageError(f"time scale {self.time_scale}: must be positive")
        for name in ("rollback_pct", "remote_line_pct", "remote_payment_pct", "by_name_pct"):
            if not 0 <= getattr(self, name) <= 100:
                raise UsageError(f"{name} {getattr(self, name)}: must be within 0..100")


# ----- loading -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadOptions(Serialisable):
    warehouses: int
    workers: int | None = None
    """Parallel loader connections; None: one per CPU core."""
    order_line_partitions: int | None = None
    """Hash partitions of order_line by warehouse; None: automatic (see schema), 0: none."""
    force: bool = False
    """Load even when the database holds tables pgdyno did not create."""
    rebuild: bool = False
    """Rebuild even when a dataset of the same size is already loaded."""
    maintenance_work_mem: str | None = "256MB"
    """Session setting of the loader connections for key and index builds (None: server's)."""
    checkpoint_at_end: bool = False
    """End with a CHECKPOINT, timed as the load's last phase (a load with spaced
    checkpoints: ``workloads.bulkload``)."""

    @property
    def size_key(self) -> str:
        return f"warehouses={self.warehouses}"


LOAD_WAL_PER_WAREHOUSE = 130 * 2**20
"""WAL a warehouse's load writes when no checkpoint falls inside it: the data (about 96 MB,
the data phase's WAL at W=100 in bench/tprocc_load.py) and its keys' index pages."""


@dataclass(frozen=True)
class LoadProgress(Serialisable):
    """Handed to the progress callback after each loaded unit of work."""

    phase: str
    """``data``, ``keys``, ``vacuum`` or ``done``."""
    warehouses_done: int
    warehouses_total: int
    rows: int
    elapsed_s: float
    steps_done: int = 0
    """Keys/indexes or tables vacuumed so far in the current phase."""
    steps_total: int = 0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True)
class LoadResult(Serialisable):
    schema_version: int
    warehouses: int
    reused: bool
    """The dataset was already there and nothing was loaded."""
    workers: int
    order_line_partitions: int
    rows: int
    seconds: float
    phase_seconds: dict[str, float]
    """Wall time of data, keys and vacuum."""
    load_c_last: int
    """The NURand constant last names were loaded with (runs pick theirs against it)."""
    recorded_seconds: float | None = None
    """Reused: the seconds its build took, as the dataset registry recorded them."""

    @property
    def warehouses_per_minute(self) -> float:
        return self.warehouses / self.seconds * 60 if self.seconds > 0 else 0.0

    def load_record(self) -> LoadRecord:
        """The load in the shape every workload records it (``results.load``)."""
        if self.reused:
            return load.reused(self.recorded_seconds)
        return load.built(self.rows, self.seconds, self.phase_seconds)


# ----- measuring ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Snapshot(Serialisable):
    """Counters read from the database at one instant (one statement)."""

    time_s: float
    """Server clock, seconds since the epoch."""
    sum_next_o_id: int
    """sum(d_next_o_id) over all districts: grows by one per committed New-Order."""
    xact_commit: int
    xact_rollback: int


@dataclass(frozen=True)
class ThroughputMetrics(Serialisable):
    """NOPM, TPM and efficiency over the window between two snapshots."""

    warehouses: int
    duration_s: float
    new_orders: int
    transactions: int
    """Committed plus rolled-back transactions in the database (pg_stat_database)."""
    nopm: float
    tpm: float
    efficiency: float
    """NOPM / (12.86 x warehouses): 1.0 is the most a compliant run at the specification's
    keying and think times can reach. Reports show ``metrics.efficiency(nopm, W,
    time_scale)`` of compliant runs only."""


@dataclass(frozen=True)
class IdealComparison(Serialisable):
    """A compliant run against the ideal line ("real / ideal")."""

    warehouses: int
    nopm: float
    ideal_nopm: float
    """What 10 terminals per warehouse reach with zero response time."""
    ratio: float
    saturated: bool
    """ratio below the threshold (0.9 by default): the system no longer keeps up."""


@dataclass(frozen=True)
class ConditionResult(Serialisable):
    """One TPC-C consistency condition (clause 3.3.2)."""

    number: int
    description: str
    passed: bool
    checked: int
    """Warehouses (condition 1) or districts (2-4) checked."""
    violations: int
    examples: tuple[str, ...] = ()
    """A few offending keys with their numbers."""


@dataclass(frozen=True)
class ConsistencyReport(Serialisable):
    schema_version: int
    conditions: tuple[ConditionResult, ...]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.conditions)


_SIZE_RE = re.compile(r"^\s*(\d+)\s*$")


MAX_WAREHOUSES = 100_000
"""HammerDB's own ceiling; ~100 MB a warehouse makes it about 10 TB."""


def parse_warehouses(text: str) -> list[int]:
    """``10`` or ``10,20,30`` (a sweep) into positive warehouse counts."""
    values = []
    for part in text.split(","):
        match = _SIZE_RE.match(part)
        if not match or int(match.group(1)) < 1:
            raise UsageError(f"--warehouses {text}: expected positive integers such as 10,20,30")
        if int(match.group(1)) > MAX_WAREHOUSES:
            raise UsageError(f"--warehouses {text}: at most {MAX_WAREHOUSES:,} (about "
                             f"{MAX_WAREHOUSES // 10:,} GB of data)")
        values.append(int(match.group(1)))
    return values
