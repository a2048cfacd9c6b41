"""sysbench 1.0.20's microbenchmarks as pgbench scripts, on the same sbtest tables.

Each microbenchmark is one of sysbench's Lua tests (``/usr/share/sysbench``), its
``event()`` written as one pgbench transaction with the statement groups of
``oltp_common.lua`` (``scripts.py`` writes each group, as the read-only and read-write
transactions use them):

================  ========================  ===============================================
workload          sysbench test             one transaction
================  ========================  ===============================================
oltp-point-select oltp_point_select         1 point select (no BEGIN/COMMIT)
oltp-random-points select_random_points     1 SELECT id, k, c, pad ... WHERE k IN (10 values)
oltp-random-ranges select_random_ranges     1 SELECT count(k) ... WHERE k BETWEEN v AND v +
                                            delta OR ... (10 ranges)
oltp-update-index oltp_update_index         1 UPDATE ... SET k = k + 1 (autocommit)
oltp-update-non-  oltp_update_non_index     1 UPDATE ... SET c = <fresh c> (autocommit)
index
oltp-insert       oltp_insert               1 INSERT of a new row, its id from the table's
                                            sequence (sysbench's SERIAL) (autocommit)
oltp-delete       oltp_delete               1 DELETE of a drawn id (autocommit)
oltp-write-only   oltp_write_only           BEGIN, index update, non-index update, delete
                                            and insert of one id, COMMIT (6 statements)
================  ========================  ===============================================

The transactions without BEGIN are single statements in autocommit, as sysbench's are.
``select_random_points`` and ``select_random_ranges`` read ``sbtest1`` only (sysbench
refuses them with more than one table); each client draws its values inside its own slice
of 1..table_size, as each sysbench thread does (``rlen = table_size / threads``, values
``sb_rand(rlen * tid, rlen * tid + rlen)``): the script is written for one client count
(``client_script_text``), with pgbench's ``:client_id`` as sysbench's thread id.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.errors import UsageError
from pgdyno.workloads.oltp import scripts
from pgdyno.workloads.oltp.schema import C_VALUE_SQL, PAD_VALUE_SQL, SPEC_ITER
from pgdyno.workloads.oltp.scripts import (
    _UNIFORM_SUM,
    PARETO_H,
    UNIFORM_DOUBLE,
    OltpScriptOptions,
    _double,
    _floor,
    id_draw,
    on_table,
    rand_description,
    table_draw,
)

RANDOM_POINTS = 10
"""select_random_points.lua's --random-points default: values in the IN list."""
NUMBER_OF_RANGES = 10
"""select_random_ranges.lua's --number-of-ranges default."""
DELTA = 5
"""select_random_ranges.lua's --delta default: each range is k BETWEEN v AND v + delta."""

GROUP_STATEMENTS: dict[str, tuple[str, int]] = {
    "point_select": ("read", 1),
    "random_points": ("read", 1),
    "random_ranges": ("read", 1),
    "index_update": ("write", 1),
    "non_index_update": ("write", 1),
    "delete_insert": ("write", 2),
    "delete": ("write", 1),
    "insert": ("write", 1),
}
"""A statement group: how sysbench counts its statements (SELECT: read; UPDATE, DELETE,
INSERT: write) and how many one group runs."""


@dataclass(frozen=True)
class Microbenchmark:
    name: str
    sysbench: str
    """sysbench's test of the same transaction (its Lua script's name)."""
    groups: tuple[str, ...]
    transaction: bool
    """BEGIN ... COMMIT around the groups (else: one statement in autocommit)."""
    one_table: bool = False
    """sysbench reads sbtest1 only (select_random_*)."""
    per_client: bool = False
    """Each client draws inside its own slice of the ids: one script per client count."""

    def statement_counts(self) -> dict[str, int]:
        """Statements per transaction as sysbench reports them: read, write, other, total."""
        counts = {"read": 0, "write": 0, "other": 2 if self.transaction else 0}
        for group in self.groups:
            kind, n = GROUP_STATEMENTS[group]
            counts[kind] += n
        return {**counts, "total": sum(counts.values())}


BATTERY: dict[str, Microbenchmark] = {m.name: m for m in (
    Microbenchmark("oltp-point-select", "oltp_point_select", ("point_select",), False),
    Microbenchmark("oltp-random-points", "select_random_points", ("random_points",), False,
                   one_table=True, per_client=True),
    Microbenchmark("oltp-random-ranges", "select_random_ranges", ("random_ranges",), False,
                   one_table=True, per_client=True),
    Microbenchmark("oltp-update-index", "oltp_update_index", ("index_update",), False),
    Microbenchmark("oltp-update-non-index", "oltp_update_non_index", ("non_index_update",),
                   False),
    Microbenchmark("oltp-insert", "oltp_insert", ("insert",), False),
    Microbenchmark("oltp-delete", "oltp_delete", ("delete",), False),
    Microbenchmark("oltp-write-only", "oltp_write_only",
                   ("index_update", "non_index_update", "delete_insert"), True),
)}
"""The microbenchmarks besides oltp-read-only and oltp-read-write (``scripts.py``)."""


@dataclass(frozen=True)
class BatteryScriptOptions:
    ids: OltpScriptOptions
    """Tables, table size and the id distribution (``--rand-type``), as the OLTP scripts'."""
    delta: int = DELTA
    random_points: int = RANDOM_POINTS
    number_of_ranges: int = NUMBER_OF_RANGES

    def __post_init__(self) -> None:
        if self.delta < 0:
            raise UsageError("oltp-random-ranges: --delta must be 0 or more")


def script_text(bench: Microbenchmark, opts: BatteryScriptOptions, clients: int = 1) -> str:
    """The pgbench script of one transaction of ``bench`` (``clients``: the client count
    the per-client slices are cut for; the other microbenchmarks ignore it)."""
    counts = bench.statement_counts()
    ids = opts.ids
    lines = [f"-- sysbench 1.0.20 {bench.sysbench} as a pgbench script (pgdyno)",
             f"-- tables={ids.tables} table_size={ids.table_size} "
             f"rand-type={rand_description(ids)}"
             + (f" clients={clients}" if bench.per_client else ""),
             f"-- {counts['total']} statements: {counts['read']} read, {counts['write']} "
             f"write, {counts['other']} other"]
    if bench.transaction:
        lines.append("BEGIN;")
    for group in bench.groups:
        lines += _GROUPS[group](opts, clients)
    if bench.transaction:
        lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def _point_select(opts: BatteryScriptOptions, clients: int) -> list[str]:
    one = OltpScriptOptions(read_write=False, tables=opts.ids.tables,
                            table_size=opts.ids.table_size, point_selects=1,
                            rand_type=opts.ids.rand_type)
    return scripts.point_selects(one)


def _index_update(opts: BatteryScriptOptions, clients: int) -> list[str]:
    return scripts.index_update(opts.ids)


def _non_index_update(opts: BatteryScriptOptions, clients: int) -> list[str]:
    return scripts.non_index_update(opts.ids)


def _delete_insert(opts: BatteryScriptOptions, clients: int) -> list[str]:
    return scripts.delete_insert(opts.ids)


def _delete(opts: BatteryScriptOptions, clients: int) -> list[str]:
    """oltp_delete.lua: a table, an id, its DELETE (a deleted id deletes nothing later)."""
    return ["-- delete one drawn id", *table_draw(opts.ids), *id_draw(opts.ids, "id"),
            *on_table(opts.ids, "DELETE FROM {t} WHERE id = :id;")]


def _insert(opts: BatteryScriptOptions, clients: int) -> list[str]:
    """oltp_insert.lua with the pgsql driver and --auto-inc (its default): the id comes
    from the table's sequence, k is drawn, c and pad are fresh."""
    return ["-- insert a new row: id from the table's sequence, as sysbench's SERIAL",
            *table_draw(opts.ids), *id_draw(opts.ids, "k"),
            *on_table(opts.ids, f"INSERT INTO {{t}} (k, c, pad) VALUES (:k, {C_VALUE_SQL}, "
                                f"{PAD_VALUE_SQL});")]


def _random_points(opts: BatteryScriptOptions, clients: int) -> list[str]:
    lines = ["-- random points: values of k in this client's slice of the ids",
             *_slice(opts, clients)]
    names = [f"p{n}" for n in range(1, opts.random_points + 1)]
    for name in names:
        lines += slice_draw(opts.ids, name)
    values = ", ".join(f":{name}" for name in names)
    return [*lines, f"SELECT id, k, c, pad FROM sbtest1 WHERE k IN ({values});"]


def _random_ranges(opts: BatteryScriptOptions, clients: int) -> list[str]:
    lines = [f"-- random ranges: k BETWEEN v AND v + {opts.delta}, v in this client's slice",
             *_slice(opts, clients)]
    names = [f"r{n}" for n in range(1, opts.number_of_ranges + 1)]
    for name in names:
        lines += slice_draw(opts.ids, name)
    ranges = " OR ".join(f"k BETWEEN :{name} AND :{name} + {opts.delta}" for name in names)
    return [*lines, f"SELECT count(k) FROM sbtest1 WHERE {ranges};"]


_GROUPS = {"point_select": _point_select, "index_update": _index_update,
           "non_index_update": _non_index_update, "delete_insert": _delete_insert,
           "delete": _delete, "insert": _insert, "random_points": _random_points,
           "random_ranges": _random_ranges}


def _slice(opts: BatteryScriptOptions, clients: int) -> list[str]:
    """This client's slice [lo, hi]: sysbench's rmin = rlen * tid and rmax = rmin + rlen
    (doubles), passed to sb_rand's uint32 bounds (truncated)."""
    rlen = opts.ids.table_size / max(clients, 1)
    return [f"\\set rmin {_double(rlen)} * :client_id",
            f"\\set lo {_floor('rmin')}",
            f"\\set rmax :rmin + {_double(rlen)}",
            f"\\set hi {_floor('rmax')}",
            "\\set span :hi - :lo"]


def slice_draw(opts: OltpScriptOptions, var: str) -> list[str]:
    """``var`` = sb_rand(lo, hi) (``sysbench.rand.default``: the --rand-type distribution)
    over the client's slice, with sb_rand.c's arithmetic for a = lo, t = hi - lo. The
    constants ``scripts.id_draw`` folds for 1..table_size are computed here from ``:span``
    at run time, in the same order (see ``schema.SpecialRand``)."""
    if opts.rand_type == "uniform":
        return [f"\\set {var} random(:lo, :hi)"]
    if opts.rand_type == "gaussian":
        return [f"\\set x {_UNIFORM_SUM} * (:span + 1) * {_double(1.0 / SPEC_ITER)}",
                f"\\set {var} :lo + {_floor('x')}"]
    if opts.rand_type == "pareto":
        return [f"\\set x (:span + 1) * pow({UNIFORM_DOUBLE}, "
                f"ln({_double(PARETO_H)}) / ln({_double(1 - PARETO_H)}))",
                f"\\set {var} :lo + {_floor('x')}"]
    res_mult = 100.0 / (100.0 - opts.rand_spec_res)
    pct = opts.rand_spec_pct
    return [
        f"\\set u {UNIFORM_DOUBLE}",
        f"\\set x CASE WHEN :u * (:span * {_double(res_mult)}) < :span"
        f" THEN :lo + {_UNIFORM_SUM} * :span * {_double(1.0 / SPEC_ITER)}"
        f" ELSE :lo + (:u * (:span * {_double(pct / 100.0)} + 1)"
        f" + (:span / 2.0 - :span * {_double(pct / 200.0)})) END",
        f"\\set {var} {_floor('x')}",
    ]
