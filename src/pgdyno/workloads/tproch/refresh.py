"""The refresh functions RF1 (insert new orders) and RF2 (delete old orders), made by pgdyno.

tpchgen-cli generates no refresh data (dbgen's ``-U`` update sets have no counterpart in
it), so pgdyno makes each pair itself, deterministically from (scale factor, pair number,
seed) and the dataset; the run report says so (ROWS_SOURCE), and each pair's rows are kept
gzip'd in the run directory (RefreshSet.save):

- Keys. dbgen's order keys are sparse: the order of 1-based index j gets key
  ``((j >> 3) << 5) | (j & 7)``, so in every block of 32 keys only the 8 whose bits 3-4
  are zero are used. RF1 takes the free ones (bits 3-4 non-zero) in order, with one
  counter over all pairs: pair k uses free slots ``(k-1)n .. kn-1`` (n = orders_per_pair),
  so pairs never collide with each other nor with the original population.
- Deletions. RF2 of pair k deletes the original orders of indexes ``(k-1)n .. kn-1``,
  with their lineitems; once every original order has been deleted (pair k > N // n), it
  deletes the orders inserted by pair k - N // n instead, so pairs never run out.
- Cardinalities. The j-th new order of pair k gets as many lineitems as the j-th order RF2
  of pair k deletes has (read when the pair is prepared, untimed): after RF1 + RF2 the
  counts of orders and lineitem are those of the original population again.
- Values follow the specification's rules for the population (clause 4.2.3): customers
  that exist and whose key is not a multiple of 3 (dbgen never gives those orders), order
  dates from STARTDATE to ENDDATE - 151 days, l_suppkey among the part's four suppliers
  (the partsupp formula), prices from the part's retail price with dbgen's integer
  arithmetic, flags and statuses consistent with the dates and CURRENTDATE.

The pairs applied are recorded in the table ``tproch_refresh`` (part of the recorded
dataset), each in the same transaction as the change it records: a reused dataset never
re-inserts keys that exist nor deletes orders already deleted, whatever happened to the
run before.
"""

from __future__ import annotations

import csv
import io
import random
from datetime import date, timedelta
from typing import TYPE_CHECKING

from pgdyno.errors import RunFailed, UsageError
from pgdyno.workloads.tproch import schema
from pgdyno.workloads.tproch.model import RefreshSet

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

ROWS_SOURCE = ("RF1's new orders and lineitems come from pgdyno's own generator (seeded "
               "by scale factor, pair and seed, following the specification's rules for "
               "the population), not from the specification's: tpchgen-cli generates no "
               "refresh data. RF2 deletes the original orders in key order. Each pair's "
               "rows and keys are kept gzip'd beside the timings "
               "(refresh/refresh-NNNN-*.csv.gz).")
"""What the run report says about the refresh pairs' rows."""

ORDERS_PER_PAIR_PER_SF = 1_500
"""RF1 inserts, and RF2 deletes, SF x 0.1% of the orders (clause 2.5.2)."""

START_DATE = date(1992, 1, 1)
CURRENT_DATE = date(1995, 6, 17)
END_DATE = date(1998, 12, 31)
LAST_ORDER_DATE = END_DATE - timedelta(days=151)

FREE_PER_BLOCK = 24
"""Keys of each block of 32 that dbgen leaves free (bits 3-4 non-zero)."""

CUSTOMER_MORTALITY = 3
"""dbgen gives no orders to customers whose key is a multiple of 3."""

SUPPLIERS_PER_PART = 4

PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")

_WORDS = (
    "foxes", "ideas", "theodolites", "pinto", "beans", "instructions", "dependencies", "excuses",
    "platelets", "asymptotes", "courts", "dolphins", "multipliers", "sauternes", "warthogs",
    "frets", "dinos", "attainments", "somas", "Tiresias", "patterns", "forges", "braids", "hockey",
    "players", "frays", "warhorses", "dugouts", "notornis", "epitaphs", "pearls", "tithes",
    "waters", "orbits", "gifts", "sheaves", "depths", "sentiments", "decoys", "realms", "pains",
    "grouches", "escapades", "packages", "requests", "accounts", "deposits", "sleep", "wake",
    "are", "cajole", "haggle", "nag", "use", "boost", "affix", "detect", "integrate", "maintain",
    "nod", "was", "lose", "sublate", "solve", "thrash", "promise", "engage", "hinder", "print",
    "x-ray", "breach", "eat", "grow", "impress", "mold", "poach", "serve", "run", "dazzle",
    "snooze", "doze", "unwind", "kindle", "play", "hang", "believe", "doubt", "furious", "sly",
    "special", "pending", "unusual", "express", "careful", "blithe", "quick", "fluffy", "slow",
    "quiet", "ruthless", "thin", "close", "dogged",
    "daring", "brave", "stealthy", "permanent", "enticing", "idle", "busy", "regular", "final",
    "ironic", "even", "bold", "silent", "furiously", "slyly", "carefully", "blithely", "quickly",
    "fluffily", "slowly", "quietly", "ruthlessly", "thinly", "closely", "doggedly", "daringly",
    "bravely", "stealthily", "permanently", "enticingly", "idly", "busily", "regularly", "finally",
    "ironically", "evenly", "boldly", "silently", "about", "above", "according", "to", "across",
    "after", "against", "along", "alongside", "of", "among", "around", "at", "atop", "before",
    "behind", "beneath", "beside", "besides", "between", "beyond", "by", "despite", "during",
    "except", "for", "from", "in", "place", "of", "inside", "instead", "of", "into", "near", "of",
    "on", "outside", "over", "past", "since", "through", "throughout", "to", "toward", "under",
    "until", "up", "upon", "without", "with", "within",
)
"""The vocabulary of dbgen's comment grammar (clause 4.2.2.10), for comments of the
specification's lengths; the queries only look for a few of these words."""


# ----- keys --------------------------------------------------------------------------------

def orders_per_pair(sf: float) -> int:
    """Orders RF1 inserts and RF2 deletes: SF x 1,500, rounded, at least one."""
    return max(1, round(schema.check_scale_factor(sf) * ORDERS_PER_PAIR_PER_SF))


def original_order_key(index: int) -> int:
    """Key of the order of 0-based ``index`` in the population dbgen and tpchgen-cli make."""
    j = index + 1
    return ((j >> 3) << 5) | (j & 7)


def free_order_key(slot: int) -> int:
    """The ``slot``-th key (0-based) that no original order can have."""
    block, offset = divmod(slot, FREE_PER_BLOCK)
    return (block << 5) | (8 + offset)


def new_order_keys(sf: float, pair: int) -> list[int]:
    """The keys RF1 of ``pair`` (1-based) inserts."""
    n = orders_per_pair(sf)
    first = (_check_pair(pair) - 1) * n
    return [free_order_key(slot) for slot in range(first, first + n)]


def deleted_order_keys(sf: float, pair: int) -> list[int]:
    """The keys RF2 of ``pair`` deletes: original orders, then (once they are all gone)
    the orders of the pair that inserted them N // n pairs earlier."""
    n = orders_per_pair(sf)
    cycle = schema.expected_rows(sf)["orders"] // n
    if _check_pair(pair) > cycle:
        return new_order_keys(sf, pair - cycle)
    first = (pair - 1) * n
    return [original_order_key(index) for index in range(first, first + n)]


def _check_pair(pair: int) -> int:
    if pair < 1:
        raise UsageError(f"refresh pair {pair}: pairs are numbered from 1")
    return pair


# ----- bookkeeping -------------------------------------------------------------------------

def next_pair(conn: psycopg.Connection) -> int:
    """The first pair no run has used on this dataset."""
    from psycopg import sql

    row = conn.execute(sql.SQL("SELECT coalesce(max(pair), 0) + 1 FROM {}").format(
        sql.Identifier(schema.REFRESH_TABLE))).fetchone()
    return int(row[0])


def unfinished_pairs(conn: psycopg.Connection) -> list[int]:
    """Pairs whose RF1 was committed but not their RF2 (a run that stopped in between):
    until their RF2 is applied the dataset has more orders than its scale factor says."""
    from psycopg import sql

    return [row[0] for row in conn.execute(sql.SQL(
        "SELECT pair FROM {} WHERE rf1_at IS NOT NULL AND rf2_at IS NULL ORDER BY pair"
    ).format(sql.Identifier(schema.REFRESH_TABLE)))]


def _pair_state(conn: psycopg.Connection, pair: int) -> tuple[bool, bool]:
    from psycopg import sql

    row = conn.execute(sql.SQL(
        "SELECT rf1_at IS NOT NULL, rf2_at IS NOT NULL FROM {} WHERE pair = %s"
    ).format(sql.Identifier(schema.REFRESH_TABLE)), (pair,)).fetchone()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


_RECORD_RF1 = """
INSERT INTO {} (pair, seed, orders, rf1_at) VALUES (%s, %s, %s, now())
ON CONFLICT (pair) DO UPDATE SET rf1_at = now(), seed = EXCLUDED.seed,
    orders = EXCLUDED.orders"""

_RECORD_RF2 = """
INSERT INTO {} (pair, seed, orders, rf2_at) VALUES (%s, %s, %s, now())
ON CONFLICT (pair) DO UPDATE SET rf2_at = now()"""


def _on_refresh_table(statement: str) -> sql.Composed:
    """``statement`` with the refresh table's name in its ``{}``."""
    from psycopg import sql

    return sql.SQL(statement).format(sql.Identifier(schema.REFRESH_TABLE))


# ----- preparing a pair (untimed) ----------------------------------------------------------

def prepare_pair(conn: psycopg.Connection, sf: float, pair: int, seed: int) -> RefreshSet:
    """Generate pair ``pair``'s rows and read what RF2 will delete; nothing is changed.

    Refuses (one line) a pair already applied, or whose orders to delete are gone."""
    rf1_done, rf2_done = _pair_state(conn, _check_pair(pair))
    if rf2_done:
        raise UsageError(f"refresh pair {pair} was already applied to this dataset; "
                         f"the next unused pair is {next_pair(conn)}")
    new_keys = new_order_keys(sf, pair)
    delete_keys = deleted_order_keys(sf, pair)
    if not rf1_done and _existing(conn, new_keys):
        raise UsageError(f"refresh pair {pair}: orders with its new keys already exist "
                         "(RF1 applied without bookkeeping?); reload the dataset")
    lines = _lineitem_counts(conn, delete_keys)
    missing = [key for key in delete_keys if key not in lines]
    if missing:
        raise UsageError(f"refresh pair {pair}: {len(missing)} of the orders RF2 deletes "
                         f"are gone (e.g. key {missing[0]}); reload the dataset")
    counts = [lines[key] for key in delete_keys]
    orders, lineitems = _Generator(sf, pair, seed).rows(new_keys, counts)
    return RefreshSet(pair=pair, scale_factor=sf, seed=seed, orders_csv=_csv(orders),
                      lineitem_csv=_csv(lineitems), new_orders=len(orders),
                      new_lineitems=len(lineitems), delete_keys=tuple(delete_keys),
                      delete_lineitems=sum(counts), rf1_applied=rf1_done)


def _existing(conn: psycopg.Connection, keys: list[int]) -> int:
    return conn.execute("SELECT count(*) FROM orders WHERE o_orderkey = ANY(%s::bigint[])",
                        (keys,)).fetchone()[0]


def _lineitem_counts(conn: psycopg.Connection, keys: list[int]) -> dict[int, int]:
    """Lineitems per order, for the orders that exist (an order always has one or more)."""
    return dict(conn.execute(
        "SELECT l_orderkey, count(*) FROM lineitem WHERE l_orderkey = ANY(%s::bigint[]) "
        "GROUP BY l_orderkey", (keys,)).fetchall())


def _csv(rows: list[tuple]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def retail_price_cents(partkey: int) -> int:
    """p_retailprice of a part, in cents (clause 4.2.3)."""
    return 90_000 + (partkey // 10) % 20_001 + 100 * (partkey % 1_000)


class _Generator:
    """The rows of one pair, from a random stream seeded by (SF, pair, seed)."""

    def __init__(self, sf: float, pair: int, seed: int) -> None:
        self.rng = random.Random(f"tproch-refresh:{sf:g}:{pair}:{seed}")
        rows = schema.expected_rows(sf)
        self.customers = rows["customer"]
        self.parts = rows["part"]
        self.suppliers = rows["supplier"]
        self.clerks = max(1, int(sf * 1_000))

    def rows(self, keys: list[int], line_counts: list[int]) -> tuple[list[tuple], list[tuple]]:
        orders: list[tuple] = []
        lineitems: list[tuple] = []
        for key, count in zip(keys, line_counts, strict=True):
            order, lines = self._order(key, count)
            orders.append(order)
            lineitems += lines
        return orders, lineitems

    def _order(self, key: int, count: int) -> tuple[tuple, list[tuple]]:
        rng = self.rng
        order_date = START_DATE + timedelta(
            days=rng.randint(0, (LAST_ORDER_DATE - START_DATE).days))
        lines = [self._lineitem(key, number, order_date) for number in range(1, count + 1)]
        total = sum(cents for _, cents in lines)
        statuses = {line[9] for line, _ in lines}
        status = statuses.pop() if len(statuses) == 1 else "P"
        order = (key, self._customer(), status, _money(total), order_date.isoformat(),
                 rng.choice(PRIORITIES), f"Clerk#{rng.randint(1, self.clerks):09d}", 0,
                 self._text(19, 78))
        return order, [line for line, _ in lines]

    def _customer(self) -> int:
        while True:
            key = self.rng.randint(1, self.customers)
            if key % CUSTOMER_MORTALITY:
                return key

    def _lineitem(self, key: int, number: int, order_date: date) -> tuple[tuple, int]:
        """A lineitem and its share of o_totalprice in cents (dbgen's integer formula)."""
        rng = self.rng
        partkey = rng.randint(1, self.parts)
        suppkey = schema.supplier_of(partkey, rng.randrange(SUPPLIERS_PER_PART), self.suppliers)
        quantity = rng.randint(1, 50)
        extended = quantity * retail_price_cents(partkey)
        discount = rng.randint(0, 10)
        tax = rng.randint(0, 8)
        ship = order_date + timedelta(days=rng.randint(1, 121))
        commit = order_date + timedelta(days=rng.randint(30, 90))
        receipt = ship + timedelta(days=rng.randint(1, 30))
        flag = rng.choice("RA") if receipt <= CURRENT_DATE else "N"
        status = "O" if ship > CURRENT_DATE else "F"
        line = (key, partkey, suppkey, number, quantity, _money(extended), _money(discount),
                _money(tax), flag, status, ship.isoformat(), commit.isoformat(),
                receipt.isoformat(), rng.choice(INSTRUCTIONS), rng.choice(MODES),
                self._text(10, 43))
        charged = extended * (100 - discount) // 100 * (100 + tax) // 100
        return line, charged

    def _text(self, shortest: int, longest: int) -> str:
        """Words of the grammar's vocabulary cut to a length drawn in [shortest, longest]."""
        length = self.rng.randint(shortest, longest)
        words: list[str] = []
        while sum(len(w) + 1 for w in words) <= length:
            words.append(self.rng.choice(_WORDS))
        return " ".join(words)[:length].rstrip() or "x" * shortest


# ----- the refresh functions (timed by the caller) -----------------------------------------

def rf1(conn: psycopg.Connection, rs: RefreshSet) -> int:
    """Insert the pair's new orders and lineitems in one transaction; returns the orders
    inserted. Give it an autocommit connection (it opens and commits the transaction).
    Database errors (a statement timeout, a lost connection) reach the caller as they are:
    the transaction is rolled back and the caller decides what a failed RF1 means."""
    if rs.rf1_applied:
        raise UsageError(f"refresh pair {rs.pair}: RF1 was already applied by an earlier run; "
                         "only its RF2 remains")
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY orders FROM STDIN (FORMAT csv)") as copy:
            copy.write(rs.orders_csv)
        inserted = cur.rowcount
        with cur.copy("COPY lineitem FROM STDIN (FORMAT csv)") as copy:
            copy.write(rs.lineitem_csv)
        cur.execute(_on_refresh_table(_RECORD_RF1), (rs.pair, rs.seed, rs.new_orders))
    return inserted


def rf2(conn: psycopg.Connection, rs: RefreshSet) -> int:
    """Delete the pair's old orders and their lineitems in one transaction; returns the
    orders deleted. All of them or none: an order found missing rolls the deletion back
    (RunFailed: the dataset was changed behind pgdyno's back)."""
    keys = list(rs.delete_keys)
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("DELETE FROM lineitem WHERE l_orderkey = ANY(%s::bigint[])", (keys,))
            cur.execute("DELETE FROM orders WHERE o_orderkey = ANY(%s::bigint[])", (keys,))
            deleted = cur.rowcount
            if deleted != len(keys):
                raise _Incomplete(deleted)
            cur.execute(_on_refresh_table(_RECORD_RF2), (rs.pair, rs.seed, len(keys)))
    except _Incomplete as exc:
        raise RunFailed(f"RF2 of refresh pair {rs.pair} found {exc.args[0]} of its "
                        f"{len(keys)} orders; nothing was deleted") from None
    return deleted


class _Incomplete(Exception):
    pass
