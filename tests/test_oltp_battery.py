"""Each sbtest microbenchmark runs sysbench's transaction: the statements the server executed
per transaction, and their mix, against sysbench 1.0.20's own Lua scripts.

The oracle is read from /usr/share/sysbench: the option defaults of oltp_common.lua (and a
script's own, such as oltp_point_select's point_selects=1), its statement definitions, and
what each script's ``event()`` calls. The server's side is pg_stat_statements on a real
PostgreSQL: each workload's pgbench script (as the plugin writes it) runs a fixed number of
transactions with the real pgbench (simple protocol: pg_stat_statements counts a prepared
BEGIN or COMMIT once per session, not once per execution), and every statement the server
executed is counted by its shape (verb, columns, predicate): that count divided by the
transactions must be the Lua script's. The read/write/other counts each plugin reports
(its QPS) are checked against the same oracle.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset, registry
from pgdyno.workloads.oltp import restore, schema
from pgdyno.workloads.oltp.battery import BATTERY
from pgdyno.workloads.oltp.micro import BatteryOptions, Microbench
from pgdyno.workloads.oltp.plugin import OltpOptions

LUA = Path("/usr/share/sysbench")
TABLES, TABLE_SIZE = 2, 3000
TRANSACTIONS = 20
"""Per client (pgbench -t)."""

SYSBENCH_TEST = {"oltp-read-only": "oltp_read_only", "oltp-read-write": "oltp_read_write",
                 **{name: bench.sysbench for name, bench in BATTERY.items()},
                 "oltp-random-ranges-100": "select_random_ranges",
                 "oltp-random-ranges-1000": "select_random_ranges"}


# ----- the oracle: sysbench's Lua ----------------------------------------------------------

def _lua(name: str) -> str:
    path = LUA / f"{name}.lua"
    if not path.is_file():
        pytest.skip(f"sysbench's Lua scripts are not in {LUA} (setup.sh installs sysbench)")
    return path.read_text()


def _strings(text: str) -> str:
    """The Lua string literals of ``text`` joined (``"a" .. "b"`` and ``[[...]]``)."""
    return "".join(m.group(1) or m.group(2) or "" for m in
                   re.finditer(r'"((?:[^"\\]|\\.)*)"|\[\[(.*?)\]\]', text, re.DOTALL))


def lua_defaults(text: str) -> dict[str, object]:
    """Option defaults: ``name = {"help" .. "help", default}``."""
    out: dict[str, object] = {}
    for m in re.finditer(r'(\w+)\s*=\s*\{\s*"(?:[^"]|"\s*\.\.\s*")*",\s*(\w+)\s*\}', text):
        value = m.group(2)
        out[m.group(1)] = {"true": True, "false": False}.get(value, value)
        if value.isdigit():
            out[m.group(1)] = int(value)
    return out


def lua_statements() -> dict[str, str]:
    """oltp_common.lua's stmt_defs: key -> SQL."""
    common = _lua("oltp_common")
    block = common[common.index("local stmt_defs = {"):common.index("function prepare_begin")]
    return {m.group(1): m.group(2) for m in re.finditer(r'(\w+) = \{\s*"([^"]+)"', block)}


def _event(text: str) -> str:
    start = text.index("function event()")
    return text[start:text.index("\nend", start)]


def sysbench_transaction(test: str, delta: int | None = None) -> Counter:
    """Statement shape -> how many one event() of sysbench's ``test`` executes, with its
    defaults (skip_trx false, range_selects true, auto_inc true with the pgsql driver)."""
    text = _lua(test)
    opts = lua_defaults(_lua("oltp_common")) | lua_defaults(text)
    for m in re.finditer(r"sysbench\.opt\.(\w+)\s*=\s*(\d+)", text):  # a script's own
        opts[m.group(1)] = int(m.group(2))
    assert opts["skip_trx"] is False and opts["range_selects"] is True
    stmts = lua_statements()
    event = _event(text)
    out: Counter = Counter()
    for call in re.findall(r"\b(begin|commit|execute_\w+)\(", event):
        if call in ("begin", "commit"):
            out[call.upper()] += 1
        elif call == "execute_delete_inserts":
            out[shape(stmts["deletes"])] += opts["delete_inserts"]
            out[shape(stmts["inserts"])] += opts["delete_inserts"]
        else:
            key = call.removeprefix("execute_")
            out[shape(stmts[key])] += opts[key]
    if "stmt[tnum].deletes:execute()" in event:  # oltp_delete
        out[shape(stmts["deletes"])] += 1
    if 'drv:name() == "pgsql" and sysbench.opt.auto_inc' in event:  # oltp_insert's branch
        query = event[event.index("con:query(string.format(", event.index("pgsql")):]
        out[shape(_strings(query[:query.index("table_name")]).replace("%s", "sbtest1"))] += 1
    if re.search(r"^\s*stmt:execute\(\)", event, re.MULTILINE):  # select_random_*
        prepared = text[text.index("con:prepare(string.format("):]
        sql = _strings(prepared[:prepared.index("]]") + 2])
        if "random_points" in opts:
            values = "?, " * (opts["random_points"] - 1) + "?"
        else:
            values = ("k BETWEEN ? AND ? OR " * (opts["number_of_ranges"] - 1)
                      + "k BETWEEN ? AND ?")
        out[shape(sql % values)] += 1
    return out


def sysbench_kinds(transaction: Counter) -> dict[str, int]:
    """sysbench's own read/write/other split of a transaction's statements."""
    kinds = Counter()
    for statement, n in transaction.items():
        verb = statement.split()[0]
        kinds["read" if verb == "SELECT" else "write" if verb in (
            "INSERT", "UPDATE", "DELETE") else "other"] += n
    return {k: kinds[k] for k in ("read", "write", "other")} | {"total": sum(kinds.values())}


def shape(sql: str) -> str:
    """A statement's shape, the same for sysbench's Lua text and what pg_stat_statements
    shows: the verb, the table (any sbtest), the columns read or written and the predicate
    with every value a ``?`` (a parameter, a constant, ``v + delta``, an expression)."""
    s = re.sub(r"/\*.*?\*/", "", sql)
    s = " ".join(s.replace(";", " ").split())
    s = re.sub(r"sbtest(\d+|%u)", "sbtestN", s)
    verb = s.split()[0].upper()
    if verb in ("BEGIN", "COMMIT"):
        return verb
    where = s.split(" WHERE ", 1)[1] if " WHERE " in s else ""
    where = re.sub(r"\s*ON CONFLICT.*$", "", where)
    where = re.sub(r"\$\d+|\?|\b\d+\b", "?", where)
    where = re.sub(r"\?\s*\+\s*\?", "?", where)
    where = re.sub(r"\s*=\s*", "=", where)
    where = re.sub(r"IN \([^)]*\)", "IN (...)", where)
    if verb == "SELECT":
        head = s[len("SELECT "):s.index(" FROM ")]
    elif verb == "UPDATE":
        head = "SET " + re.match(r"UPDATE \S+ SET (\w+)", s).group(1)
    elif verb == "INSERT":
        head = re.match(r"INSERT INTO \S+ ?(\([^)]*\))", s).group(1).replace(" ", "")
    else:
        head = ""
    return f"{verb} {head} sbtestN WHERE {where}".replace("  ", " ").strip()


# ----- the server: pg_stat_statements over real pgbench runs -------------------------------

@pytest.fixture(scope="module")
def sbtest(workdir: Path) -> Iterator[LocalServer]:
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="sbtest-statements")
    srv.prepare()
    srv.write_settings({"shared_preload_libraries": "pg_stat_statements",
                        "pg_stat_statements.track_utility": "on"})
    srv.start()
    conn = srv.connection()
    # After the build: the extension's views would count as a user's tables.
    schema.load(conn, schema.LoadOptions(tables=TABLES, table_size=TABLE_SIZE, workers=2))
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    yield srv
    srv.stop()


def _options(plugin):  # noqa: ANN001, ANN202 - a registry plugin -> its options
    if isinstance(plugin, Microbench):
        return BatteryOptions(tables=TABLES, table_size=TABLE_SIZE, delta=plugin.default_delta)
    return OltpOptions(tables=TABLES, table_size=TABLE_SIZE)


def executed(srv: LocalServer, name: str, tmp_path: Path) -> tuple[Counter, int]:
    """(shape -> calls, transactions) of one pgbench run of ``name``'s script."""
    plugin = registry.get(name)
    bench = BATTERY.get(name)
    clients = 2 if bench is not None and bench.per_client else 1
    conn = dataset.scoped(srv.connection())
    restore.restore_rows(conn, TABLES, TABLE_SIZE)
    if bench is not None and "insert" in bench.groups:
        restore.ensure_sequences(conn, TABLES, TABLE_SIZE)
    script = tmp_path / f"{name}.pgbench"
    script.write_text(plugin.script_text(_options(plugin), clients))
    with psycopg.connect(srv.connection().conninfo(), autocommit=True) as db:
        db.execute("SELECT pg_stat_statements_reset()")
    out = subprocess.run([srv.install.program("pgbench"), *conn.client_args(), "-n",
                          "-M", "simple", "-c", str(clients), "-t", str(TRANSACTIONS),
                          "-f", str(script), conn.dbname], env=conn.client_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    with psycopg.connect(srv.connection().conninfo(), autocommit=True) as db:
        rows = db.execute(
            "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON "
            "d.oid = s.dbid WHERE d.datname = current_database() AND query NOT ILIKE "
            "'%pg_stat_statements%'").fetchall()
    calls: Counter = Counter()
    for query, n in rows:
        calls[shape(query)] += n
    return calls, clients * TRANSACTIONS


@pytest.mark.server
@pytest.mark.parametrize("name", list(SYSBENCH_TEST))
def test_statements_per_transaction_are_sysbenchs(sbtest: LocalServer, name: str,
                                                  tmp_path: Path) -> None:
    oracle = sysbench_transaction(SYSBENCH_TEST[name])
    calls, transactions = executed(sbtest, name, tmp_path)
    per_transaction = {s: n / transactions for s, n in calls.items()}
    assert per_transaction == {s: float(n) for s, n in oracle.items()}
    # The counts behind the run's QPS, reads/s and writes/s are sysbench's.
    assert registry.get(name).statement_counts() == sysbench_kinds(oracle)


@pytest.mark.server
def test_restore_gives_back_ids_one_to_table_size(sbtest: LocalServer, tmp_path: Path) -> None:
    """After a delete run (holes) and an insert run (rows past table_size), each table holds
    ids 1..table_size again, every one once."""
    conn = dataset.scoped(sbtest.connection())
    executed(sbtest, "oltp-delete", tmp_path)
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        holes = TABLES * TABLE_SIZE - sum(
            db.execute(f"SELECT count(*) FROM sbtest{n}").fetchone()[0]
            for n in range(1, TABLES + 1))
    assert holes > 0  # the delete run removed rows for good, as sysbench's does
    executed(sbtest, "oltp-insert", tmp_path)  # restores the holes first, then inserts
    done = restore.restore_rows(conn, TABLES, TABLE_SIZE)
    assert done.removed == TRANSACTIONS  # one client, one new row a transaction
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        for n in range(1, TABLES + 1):
            count, low, high = db.execute(
                f"SELECT count(DISTINCT id), min(id), max(id) FROM sbtest{n}").fetchone()
            assert (count, low, high) == (TABLE_SIZE, 1, TABLE_SIZE)


def test_the_oracle_reads_sysbenchs_scripts() -> None:
    """The Lua reading itself: oltp_read_write's 20 statements as sysbench documents them."""
    rw = sysbench_transaction("oltp_read_write")
    assert sysbench_kinds(rw) == {"read": 14, "write": 4, "other": 2, "total": 20}
    assert rw["SELECT c sbtestN WHERE id=?"] == 10
    assert sysbench_kinds(sysbench_transaction("oltp_point_select"))["total"] == 1
    ranges = sysbench_transaction("select_random_ranges")
    assert list(ranges) == ["SELECT count(k) sbtestN WHERE "
                            + " OR ".join(["k BETWEEN ? AND ?"] * 10)]
