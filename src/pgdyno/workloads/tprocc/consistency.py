"""The four TPC-C consistency conditions (clause 3.3.2.1-4), checked after a run.

Each query returns the number of warehouses or districts checked, how many violate
the condition, and a few examples with their numbers, so a failure can be explained.
Condition 4 reads all of orders and order_line: at large warehouse counts it takes as
long as a sequential scan of both.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pgdyno.workloads.tprocc.model import SCHEMA_VERSION, ConditionResult, ConsistencyReport

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

EXAMPLES = 5

# Every query yields (key, detail, ok) rows, one per warehouse or district.
_CONDITIONS: tuple[tuple[int, str, str], ...] = (
    (1, "w_ytd = sum(d_ytd) per warehouse", """
        SELECT 'w=' || w.w_id, w.w_ytd || ' vs ' || d.ytd, w.w_ytd = d.ytd
        FROM warehouse w
        JOIN (SELECT d_w_id, sum(d_ytd) AS ytd FROM district GROUP BY d_w_id) d
          ON d.d_w_id = w.w_id"""),
    (2, "d_next_o_id - 1 = max(o_id) = max(no_o_id) per district", """
        SELECT 'w=' || d.d_w_id || ' d=' || d.d_id,
               (d.d_next_o_id - 1) || ' / ' || coalesce(o.max_o::text, '-') || ' / '
                   || coalesce(n.max_no::text, '-'),
               d.d_next_o_id - 1 = o.max_o
                   AND (n.max_no IS NULL OR n.max_no = o.max_o)
        FROM district d
        LEFT JOIN (SELECT o_w_id, o_d_id, max(o_id) AS max_o FROM orders
                   GROUP BY o_w_id, o_d_id) o ON (o.o_w_id, o.o_d_id) = (d.d_w_id, d.d_id)
        LEFT JOIN (SELECT no_w_id, no_d_id, max(no_o_id) AS max_no FROM new_order
                   GROUP BY no_w_id, no_d_id) n ON (n.no_w_id, n.no_d_id) = (d.d_w_id, d.d_id)
        """),
    (3, "max(no_o_id) - min(no_o_id) + 1 = rows in new_order per district", """
        SELECT 'w=' || no_w_id || ' d=' || no_d_id,
               (max(no_o_id) - min(no_o_id) + 1) || ' vs ' || count(*),
               max(no_o_id) - min(no_o_id) + 1 = count(*)
        FROM new_order GROUP BY no_w_id, no_d_id"""),
    (4, "sum(o_ol_cnt) = rows in order_line per district", """
        SELECT 'w=' || o.o_w_id || ' d=' || o.o_d_id,
               o.lines || ' vs ' || coalesce(l.n, 0),
               o.lines = coalesce(l.n, 0)
        FROM (SELECT o_w_id, o_d_id, sum(o_ol_cnt) AS lines FROM orders
              GROUP BY o_w_id, o_d_id) o
        LEFT JOIN (SELECT ol_w_id, ol_d_id, count(*) AS n FROM order_line
                   GROUP BY ol_w_id, ol_d_id) l
          ON (l.ol_w_id, l.ol_d_id) = (o.o_w_id, o.o_d_id)"""),
)


def check(conn: psycopg.Connection) -> ConsistencyReport:
    """Run the four checks in one REPEATABLE READ snapshot, so that they see the same
    state even if a straggling transaction commits meanwhile (``conn`` in autocommit)."""
    started = time.monotonic()
    results = []
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for number, description, query in _CONDITIONS:
            results.append(_condition(conn, number, description, query))
    return ConsistencyReport(schema_version=SCHEMA_VERSION, conditions=tuple(results),
                             seconds=time.monotonic() - started)


def _condition(conn: psycopg.Connection, number: int, description: str,
               query: str) -> ConditionResult:
    checked = violations = 0
    examples: list[str] = []
    for key, detail, ok in conn.execute(query):
        checked += 1
        if not ok:
            violations += 1
            if len(examples) < EXAMPLES:
                examples.append(f"{key}: {detail}")
    return ConditionResult(number=number, description=description,
                           passed=violations == 0, checked=checked,
                           violations=violations, examples=tuple(examples))
