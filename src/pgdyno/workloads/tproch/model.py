"""Dataclasses of the TPROC-H data layer (loading and refresh pairs).

The load models serialise through pgdyno.serde (fields are listed once, in the class);
a RefreshSet is raw data of a run, saved as CSV files instead (see RefreshSet.save).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.results import load
from pgdyno.results.load import LoadRecord
from pgdyno.serde import Serialisable
from pgdyno.workloads.tproch import schema

SCHEMA_VERSION = 1


# ----- loading -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadOptions(Serialisable):
    scale_factor: float
    workers: int | None = None
    """Parallel loader connections (and generators); None: one per CPU core."""
    split_share: float | None = None
    """A table is generated and copied in parts when it holds more than this share of one
    worker's data (None: the loader's tuned default, see loader.plan_parts). A table left
    whole is copied with FREEZE in the transaction that truncates it, which spares the
    VACUUM a pass over it; parts copy in parallel but leave the table to be vacuumed."""
    force: bool = False
    """Load even when the database holds tables pgdyno did not create."""
    rebuild: bool = False
    """Rebuild even when a dataset of the same size is already loaded."""
    maintenance_work_mem: str | None = "512MB"
    """Session setting of the key and index builds (None: the server's). At SF 1 the sorts
    of lineitem's two indexes need 290 and 340 MB: 512MB keeps both in memory (the primary
    key's spills to disk at 256MB, about 0.5-1 s slower); bigger scale factors spill
    anyway. It is a ceiling, not an allocation: the small tables' builds use little."""
    max_parallel_maintenance_workers: int | None = 0
    """Session setting of the key and index builds (None: the server's). The builds already
    run in parallel over the loader's connections, one per core; extra workers per build
    only compete with them, except for the last build, which ends alone (see
    last_build_workers)."""
    last_build_parallel: bool = True
    """The last index build (lineitem's, which ends alone) gets one parallel worker per
    other loader connection, so the cores the other builds leave idle help it. Only when
    max_parallel_maintenance_workers is 0 (pgdyno's default)."""

    def __post_init__(self) -> None:
        schema.check_scale_factor(self.scale_factor)
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--load-workers {self.workers}: must be at least 1")
        if self.split_share is not None and self.split_share <= 0:
            raise UsageError(f"split share {self.split_share}: must be positive")

    @property
    def size_key(self) -> str:
        return schema.size_key(self.scale_factor)

    def last_build_workers(self, workers: int) -> int | None:
        """Parallel workers of the last index build (None: as the others)."""
        if not self.last_build_parallel or self.max_parallel_maintenance_workers != 0:
            return None
        return workers - 1 or None


@dataclass(frozen=True)
class LoadProgress(Serialisable):
    """Handed to the progress callback during the load (from the caller's thread)."""

    phase: str
    """``data``, ``keys``, ``vacuum`` or ``done``."""
    rows: int
    """Rows copied so far (all of them once the data phase is over)."""
    rows_total: int
    """Rows expected (lineitem estimated at 4 per order)."""
    elapsed_s: float
    steps_done: int = 0
    """Parts copied, keys built or tables vacuumed so far in the current phase."""
    steps_total: int = 0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(frozen=True)
class LoadResult(Serialisable):
    schema_version: int
    scale_factor: float
    reused: bool
    """The dataset was already there and nothing was loaded."""
    workers: int
    rows: dict[str, int]
    """Rows copied per table (empty when reused)."""
    seconds: float
    phase_seconds: dict[str, float]
    """Wall time of data, keys and vacuum."""
    rows_per_s: float
    """All rows over the whole load (data, keys and vacuum)."""
    parts: dict[str, int] = field(default_factory=dict)
    """Parts each table was generated and copied in (1: whole, with FREEZE)."""
    wal_level: str = ""
    """The server's wal_level during the load (empty when reused). ``minimal``: the COPYs
    into tables truncated in their own transaction and the index builds wrote no WAL (the
    loader never changes it; a config or --set does, on a server pgdyno owns)."""
    recorded_seconds: float | None = None
    """Reused: the seconds its build took, as the dataset registry recorded them."""

    def load_record(self) -> LoadRecord:
        """The load in the shape every workload records it (``results.load``)."""
        if self.reused:
            return load.reused(self.recorded_seconds)
        return load.built(sum(self.rows.values()), self.seconds, self.phase_seconds)


# ----- refresh functions -------------------------------------------------------------------

ORDER_COLUMNS = tuple(name for name, _ in schema.COLUMNS["orders"])
LINEITEM_COLUMNS = tuple(name for name, _ in schema.COLUMNS["lineitem"])


@dataclass(frozen=True)
class RefreshSet:
    """One refresh pair, ready to apply: what RF1 inserts and what RF2 deletes.

    The rows are kept as the exact CSV text COPY receives, so the files ``save`` writes
    are byte for byte what the database got."""

    pair: int
    scale_factor: float
    seed: int
    orders_csv: str
    """The new orders, one CSV line each in ORDER_COLUMNS order (no header)."""
    lineitem_csv: str
    """Their lineitems, in LINEITEM_COLUMNS order (no header)."""
    new_orders: int
    new_lineitems: int
    delete_keys: tuple[int, ...]
    """Order keys RF2 deletes, with their lineitems."""
    delete_lineitems: int
    """Lineitems of those orders (read when the pair was prepared)."""
    rf1_applied: bool = False
    """RF1 of this pair was committed by an earlier run that did not get to its RF2: only
    rf2 may be applied (the rows are regenerated identically, for the record)."""

    def save(self, directory: Path) -> list[Path]:
        """Write the pair's raw data as gzip'd CSV files with headers; returns the paths.

        A pair holds SF x 0.1% of the orders with their lineitems (about 1 MB of CSV per
        SF): gzip at level 1 keeps 38% of it (level 6: 32%, for 5 times the CPU, about
        4 s per pair at SF 100, spent before the tests start)."""
        directory.mkdir(parents=True, exist_ok=True)
        stem = f"refresh-{self.pair:04d}"
        files = {
            directory / f"{stem}-rf1-orders.csv.gz": ",".join(ORDER_COLUMNS) + "\n"
            + self.orders_csv,
            directory / f"{stem}-rf1-lineitem.csv.gz": ",".join(LINEITEM_COLUMNS) + "\n"
            + self.lineitem_csv,
            directory / f"{stem}-rf2-orderkeys.csv.gz": "o_orderkey\n"
            + "".join(f"{key}\n" for key in self.delete_keys),
        }
        for path, text in files.items():
            # mtime 0: the same pair gives the same bytes, whenever it is saved.
            path.write_bytes(gzip.compress(text.encode(), compresslevel=1, mtime=0))
        return list(files)
