"""TPROC-C runs: the generated scripts under real pgbench against a real server.

Each run is seconds long on W=1 or W=2. NOPM, rollbacks and consistency are checked
against counts the test reads from the database itself.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset
from pgdyno.workloads.tprocc import (
    LoadOptions,
    Mix,
    ScriptOptions,
    against_ideal,
    check_consistency,
    generate,
    ideal_nopm,
    load,
    snapshot,
    throughput,
)
from pgdyno.workloads.tprocc.scripts import INVALID_ITEM

DB = "tprocc_run"


@pytest.fixture(scope="module")
def target(server: LocalServer) -> Iterator[ConnectionInfo]:
    admin = server.admin_connection().conninfo("postgres")
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    info = dataset.scoped(server.connection().with_dbname(DB))
    load(info, LoadOptions(warehouses=2, workers=2))
    yield info
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(drop)


@pytest.fixture()
def conn(target: ConnectionInfo) -> Iterator[psycopg.Connection]:
    with psycopg.connect(target.conninfo(), autocommit=True) as c:
        yield c


def _pgbench(server: LocalServer, target: ConnectionInfo, script_dir: Path,
             options: ScriptOptions, args: list[str], pgoptions: str | None = None,
             background: bool = False):
    scripts = generate(options)
    cmd = [server.install.program("pgbench"), *target.client_args(), "-n",
           "-M", options.protocol, *scripts.pgbench_args(script_dir), *args, target.dbname]
    env = target.client_env()
    if pgoptions:
        env["PGOPTIONS"] = f"{env['PGOPTIONS']} {pgoptions}"
    if background:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _backends_gone(conn: psycopg.Connection, timeout_s: float = 10.0) -> None:
    """Wait until pgbench's server backends have exited: a backend flushes its statistics
    (xact_commit, xact_rollback) while exiting, after pgbench itself may have returned."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = _count(conn, "SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'pgbench'")
        if left == 0:
            return
        time.sleep(0.05)


def _per_script(output: str) -> list[int]:
    """Processed transactions per script, in script order, from pgbench's summary."""
    blocks = re.split(r"^SQL script \d+: ", output, flags=re.M)[1:]
    return [int(re.search(r"- (\d+) transactions", b).group(1)) for b in blocks]


def _count(conn: psycopg.Connection, query: str, params: tuple = ()):
    return conn.execute(query, params or None).fetchone()[0]


def _state(conn: psycopg.Connection) -> dict[str, int]:
    """The test's own reading of what New-Orders leave behind."""
    return {
        "next_o_id": _count(conn, "SELECT sum(d_next_o_id) FROM district"),
        "orders": _count(conn, "SELECT count(*) FROM orders"),
        "new_order": _count(conn, "SELECT count(*) FROM new_order"),
        "order_line": _count(conn, "SELECT count(*) FROM order_line"),
        "invalid_lines": _count(conn, "SELECT count(*) FROM order_line WHERE ol_i_id = %s",
                                (INVALID_ITEM,)),
    }


def test_nopm_rollbacks_and_consistency_after_a_default_run(server, target, conn,
                                                            tmp_path) -> None:
    before_state = _state(conn)
    began = _count(conn, "SELECT now()")
    start = snapshot(conn)
    # A fixed number of transactions per client (-t), not a time (-T): pgbench stops a
    # timed run with calls still in flight that the server then commits uncounted.
    out = _pgbench(server, target, tmp_path, ScriptOptions(warehouses=2, seed=5),
                   ["-t", "2500", "-c", "4", "-j", "2"])
    _backends_gone(conn)
    end = snapshot(conn)
    after_state = _state(conn)

    metrics = throughput(start, end, warehouses=2)
    own_delta = after_state["next_o_id"] - before_state["next_o_id"]
    assert metrics.new_orders == own_delta > 0
    assert metrics.nopm == pytest.approx(own_delta / ((end.time_s - start.time_s) / 60))
    # Every committed New-Order left exactly one order, and nothing else did.
    assert after_state["orders"] - before_state["orders"] == own_delta
    assert after_state["invalid_lines"] == 0

    committed, rolled_back, payment, order_status, delivery, stock_level = _per_script(out)
    assert committed == pytest.approx(own_delta, abs=4)  # clients cut at -T may be mid-call
    assert 0.002 < rolled_back / (committed + rolled_back) < 0.03
    assert min(payment, order_status, delivery, stock_level) > 0
    # The rollbacks are real: the server counted them.
    assert end.xact_rollback - start.xact_rollback >= rolled_back
    assert metrics.transactions >= committed + payment

    report = check_consistency(conn)
    assert report.passed, report.conditions
    _assert_inputs_as_specified(conn, began, committed, payment)


def _assert_inputs_as_specified(conn: psycopg.Connection, began, orders: int,
                                payments: int) -> None:
    """What the server-side draws left in the tables follows clauses 2.4.1 and 2.5.1: 5..15
    lines (mean 10), quantities 1..10, 1% of lines and 15% of payments remote; bounds of
    about 4 standard errors for the counts of a default run."""
    cnt, mean_cnt, lo, hi = conn.execute(
        "SELECT count(*), avg(o_ol_cnt), min(o_ol_cnt), max(o_ol_cnt) FROM orders "
        "WHERE o_entry_d >= %s", (began,)).fetchone()
    assert cnt == pytest.approx(orders, abs=4) and (lo, hi) == (5, 15)
    assert abs(float(mean_cnt) - 10) < 4 * 3.16 / cnt ** 0.5
    lines, remote, q_lo, q_hi, mixed = conn.execute(
        """SELECT count(*), count(*) FILTER (WHERE ol_supply_w_id <> ol_w_id),
                  min(ol_quantity), max(ol_quantity),
                  count(*) FILTER (WHERE o_all_local = 1 AND ol_supply_w_id <> ol_w_id)
           FROM orders JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id
                                      AND ol_o_id = o_id
           WHERE o_entry_d >= %s""", (began,)).fetchone()
    assert (q_lo, q_hi) == (1, 10) and mixed == 0  # o_all_local: no remote line
    assert abs(remote - 0.01 * lines) < 4 * (0.01 * 0.99 * lines) ** 0.5
    paid, remote_paid = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE h_c_w_id <> h_w_id) FROM history "
        "WHERE h_date >= %s", (began,)).fetchone()
    assert paid == pytest.approx(payments, abs=4)
    assert abs(remote_paid - 0.15 * paid) < 4 * (0.15 * 0.85 * paid) ** 0.5


def _nurand_probabilities(a: int, x: int, y: int, c: int) -> list[float]:
    """P(NURand(A, x, y) = v) for v in x..y, by enumerating every pair of draws."""
    counts = [0] * (y - x + 1)
    for r in range(a + 1):
        for u in range(x, y + 1):
            counts[((r | u) + c) % (y - x + 1)] += 1
    return [n / ((a + 1) * (y - x + 1)) for n in counts]


def test_server_side_draws_follow_nurand_and_the_rollback_rule(conn) -> None:
    """The draws pgbench no longer makes: NURand(255, 0, 999) against its exact
    distribution (a chi-square of 999 degrees of freedom stays under its mean + 6 sd,
    where a uniform draw would be far above), the New-Order draw's ranges, and the
    invalid last item of a rolled-back order."""
    draws, c = 200_000, 223
    seen = dict(conn.execute("SELECT v, count(*) FROM (SELECT tprocc_nurand(255, 0, 999, %s) "
                             "AS v FROM generate_series(1, %s)) AS d GROUP BY v",
                             (c, draws)).fetchall())
    assert set(seen) <= set(range(1000))

    def chi2(probabilities: list[float]) -> float:
        return sum((seen.get(v, 0) - draws * p) ** 2 / (draws * p)
                   for v, p in enumerate(probabilities))

    assert chi2(_nurand_probabilities(255, 0, 999, c)) < 999 + 6 * (2 * 999) ** 0.5
    assert chi2([1 / 1000] * 1000) > 5000
    rows = conn.execute(
        "SELECT d.* FROM generate_series(1, 2000) AS g, LATERAL tprocc_draw_new_order("
        "1 + 0 * g, 0, g % 2 = 0, 2, 5, 77, 50) AS d").fetchall()
    for d_id, c_id, ol_cnt, items, supply, qty in rows:
        assert 1 <= d_id <= 10 and 1 <= c_id <= 3000 and 5 <= ol_cnt <= 15
        assert len(items) == len(supply) == len(qty) == ol_cnt
        assert all(1 <= i <= INVALID_ITEM - 1 for i in items[:-1])
        assert set(supply) <= {1, 2} and set(qty) <= set(range(1, 11))
    last_items = [items[-1] for *_, items, _, _ in rows]
    assert last_items[1::2] == [INVALID_ITEM] * 1000  # g even: rolled back
    assert INVALID_ITEM not in last_items[0::2]
    assert {len(r[3]) for r in rows} == set(range(5, 16))
    assert 0.4 < sum(s == 2 for r in rows for s in r[4]) / sum(r[2] for r in rows) < 0.6


def test_invalid_item_new_orders_roll_back_and_leave_nothing(server, target, conn,
                                                             tmp_path) -> None:
    """A mix of only invalid-item New-Orders: pgbench keeps going, the database is unchanged."""
    before = _state(conn)
    start = snapshot(conn)
    out = _pgbench(server, target, tmp_path,
                   ScriptOptions(warehouses=2, mix=Mix(100, 0, 0, 0, 0), rollback_pct=100),
                   ["-T", "2", "-c", "2"])
    time.sleep(1.1)  # backends flush their statistics at most once a second
    end = snapshot(conn)
    processed = _per_script(out)[1]
    assert processed > 20
    assert "number of failed transactions: 0" in out
    assert _state(conn) == before
    assert end.xact_rollback - start.xact_rollback >= processed


def test_invalid_item_returns_zero_and_the_caller_rolls_back(conn) -> None:
    conn.execute("BEGIN")
    o_id = _count(conn, "SELECT tprocc_new_order(1, 1, 1, 2, ARRAY[1, %s], "
                        "ARRAY[1, 1], ARRAY[1, 1])", (INVALID_ITEM,))
    assert o_id == 0
    conn.execute("ROLLBACK")
    valid = _count(conn, "SELECT tprocc_new_order(1, 1, 1, 2, ARRAY[5, 3], ARRAY[1, 2], "
                         "ARRAY[2, 3])")
    assert valid > 3000
    lines = conn.execute("""SELECT ol_number, ol_i_id, ol_supply_w_id, ol_quantity FROM order_line
                            WHERE ol_w_id = 1 AND ol_d_id = 1 AND ol_o_id = %s
                            ORDER BY ol_number""", (valid,)).fetchall()
    assert lines == [(1, 5, 1, 2), (2, 3, 2, 3)]
    assert _count(conn, "SELECT o_all_local FROM orders WHERE o_w_id = 1 AND o_d_id = 1 "
                        "AND o_id = %s", (valid,)) == 0


def test_prepared_protocol_runs(server, target, conn, tmp_path) -> None:
    out = _pgbench(server, target, tmp_path, ScriptOptions(warehouses=2, protocol="prepared",
                                                           rollback_pct=10),
                   ["-T", "2", "-c", "2"])
    assert "number of failed transactions: 0" in out
    assert _per_script(out)[1] > 0
    assert check_consistency(conn).passed


def test_serialization_failures_escape_and_max_tries_retries_them(server, target, conn,
                                                                  tmp_path) -> None:
    """REPEATABLE READ and 8 clients on one warehouse: 40001 must reach pgbench."""
    out = _pgbench(server, target, tmp_path, ScriptOptions(warehouses=1, seed=2),
                   ["-T", "4", "-c", "8", "-j", "2", "--max-tries", "20",
                    "--failures-detailed"],
                   pgoptions="-c default_transaction_isolation=repeatable\\ read")
    retried = int(re.search(r"^number of transactions retried: (\d+)", out, re.M).group(1))
    retries = int(re.search(r"^total number of retries: (\d+)", out, re.M).group(1))
    assert retried > 0 and retries >= retried
    assert "aborted" not in out
    assert check_consistency(conn).passed


def test_compliant_mode_stays_near_the_ideal_line(server, target, conn, tmp_path) -> None:
    """10 terminals on W=1 with keying and think times scaled by 1/200 (so a 30 s cycle
    becomes 150 ms): the measured NOPM must sit close to the ideal NOPM of that scale."""
    scale = 0.005
    options = ScriptOptions(warehouses=1, keying_thinking=True, time_scale=scale, seed=3)
    clients = generate(options).clients
    assert clients == 10
    proc = _pgbench(server, target, tmp_path, options,
                    ["-T", "11", "-c", str(clients), "-j", "2"], background=True)
    try:
        time.sleep(1.5)  # ramp-up: every terminal is into its cycles
        start = snapshot(conn)
        time.sleep(8.0)
        end = snapshot(conn)
    finally:
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    metrics = throughput(start, end, warehouses=1)
    compared = against_ideal(metrics, options.mix, scale)
    assert compared.ideal_nopm == pytest.approx(12.86 / scale, rel=0.001)
    assert ideal_nopm(1, options.mix, scale) == compared.ideal_nopm
    # 1% of New-Orders roll back and response times add to the cycle: slightly under 1.
    assert 0.75 < compared.ratio < 1.12, compared
    assert check_consistency(conn).passed


def test_payment_by_last_name_pays_the_middle_customer(conn) -> None:
    name_no = 371  # customers 1..1000 carry every name; NURand ones may add more
    name = _count(conn, "SELECT tprocc_last_name(%s)", (name_no,))
    ids = [r[0] for r in conn.execute(
        "SELECT c_id FROM customer WHERE c_w_id = 2 AND c_d_id = 3 AND c_last = %s "
        "ORDER BY c_first", (name,))]
    chosen = ids[(len(ids) + 1) // 2 - 1]
    before = conn.execute("""SELECT c_balance, c_payment_cnt FROM customer
                             WHERE c_w_id = 2 AND c_d_id = 3 AND c_id = %s""",
                          (chosen,)).fetchone()
    w_ytd = _count(conn, "SELECT w_ytd FROM warehouse WHERE w_id = 1")
    history = _count(conn, "SELECT count(*) FROM history")
    paid = _count(conn, "SELECT tprocc_payment(1, 4, 2, 3, 0, %s, 12345)", (name_no,))
    assert paid == chosen
    after = conn.execute("""SELECT c_balance, c_payment_cnt FROM customer
                            WHERE c_w_id = 2 AND c_d_id = 3 AND c_id = %s""",
                         (chosen,)).fetchone()
    assert after[0] == before[0] - Decimal("123.45") and after[1] == before[1] + 1
    assert _count(conn, "SELECT w_ytd FROM warehouse WHERE w_id = 1") == w_ytd + Decimal(
        "123.45")
    assert _count(conn, "SELECT count(*) FROM history") == history + 1
    assert check_consistency(conn).conditions[0].passed


def test_order_status_reads_the_last_order_of_the_customer(conn) -> None:
    o_id, lines = conn.execute("""SELECT o_id, o_ol_cnt FROM orders
                                  WHERE o_w_id = 2 AND o_d_id = 5 AND o_c_id = 17
                                  ORDER BY o_id DESC LIMIT 1""").fetchone()
    assert _count(conn, "SELECT tprocc_order_status(2, 5, 17, 0)") == lines


def test_delivery_delivers_the_oldest_order_of_every_district(conn) -> None:
    oldest = dict(conn.execute("""SELECT no_d_id, min(no_o_id) FROM new_order
                                  WHERE no_w_id = 2 GROUP BY no_d_id"""))
    assert len(oldest) == 10
    d1_customer, d1_amount = conn.execute(
        """SELECT o_c_id, (SELECT sum(ol_amount) FROM order_line WHERE ol_w_id = 2
                           AND ol_d_id = 1 AND ol_o_id = o_id)
           FROM orders WHERE o_w_id = 2 AND o_d_id = 1 AND o_id = %s""",
        (oldest[1],)).fetchone()
    balance_sql = "SELECT c_balance FROM customer WHERE c_w_id = 2 AND c_d_id = 1 AND c_id = %s"
    balance = _count(conn, balance_sql, (d1_customer,))
    assert _count(conn, "SELECT tprocc_delivery(2, 7)") == 10
    for d_id, o_id in oldest.items():
        key = (d_id, o_id)
        assert _count(conn, "SELECT count(*) FROM new_order WHERE no_w_id = 2 "
                            "AND no_d_id = %s AND no_o_id = %s", key) == 0
        assert _count(conn, "SELECT o_carrier_id FROM orders WHERE o_w_id = 2 "
                            "AND o_d_id = %s AND o_id = %s", key) == 7
        assert _count(conn, "SELECT count(*) FROM order_line WHERE ol_w_id = 2 "
                            "AND ol_d_id = %s AND ol_o_id = %s "
                            "AND ol_delivery_d IS NULL", key) == 0
    assert _count(conn, balance_sql, (d1_customer,)) == balance + d1_amount
    assert check_consistency(conn).passed


def test_stock_level_counts_distinct_low_stock_items_of_the_last_20_orders(conn) -> None:
    expected = _count(conn, """
        SELECT count(DISTINCT s_i_id) FROM district
        JOIN order_line ON ol_w_id = d_w_id AND ol_d_id = d_id
             AND ol_o_id BETWEEN d_next_o_id - 20 AND d_next_o_id - 1
        JOIN stock ON s_w_id = d_w_id AND s_i_id = ol_i_id
        WHERE d_w_id = 1 AND d_id = 2 AND s_quantity < 60""")
    assert expected > 0
    assert _count(conn, "SELECT tprocc_stock_level(1, 2, 60)") == expected
