"""The sysbench OLTP transactions as pgbench scripts: statement counts, table chains, ids.

No server here: the scripts are parsed as pgbench reads them (meta-commands start with a
backslash, lines starting with -- are comments, every SQL statement is one line ending
with a semicolon). test_oltp_schema.py runs them with the real pgbench.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from pgdyno.errors import UsageError
from pgdyno.workloads.oltp.schema import C_VALUE_SQL, PAD_VALUE_SQL, special_rand
from pgdyno.workloads.oltp.scripts import (
    OltpScriptOptions,
    id_draw,
    rand_description,
    script_text,
    statement_counts,
)


@dataclass
class Chain:
    """One \\if ... \\endif: the SQL statements of each branch."""

    branches: list[list[str]] = field(default_factory=list)


@dataclass
class Parsed:
    unconditional: list[str] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    meta: list[str] = field(default_factory=list)


def parse(text: str) -> Parsed:
    parsed = Parsed()
    chain: Chain | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("--"):
            continue
        if line.startswith("\\"):
            parsed.meta.append(line)
            word = line.split()[0]
            if word == "\\if":
                assert chain is None, "nested \\if"
                chain = Chain([[]])
            elif word in ("\\elif", "\\else"):
                assert chain is not None
                chain.branches.append([])
            elif word == "\\endif":
                assert chain is not None
                parsed.chains.append(chain)
                chain = None
            else:
                assert word == "\\set", line
            continue
        assert line.endswith(";"), f"SQL not on one line: {line[:60]}"
        assert line.count(";") == 1, line[:60]
        (chain.branches[-1] if chain else parsed.unconditional).append(line)
    assert chain is None, "unterminated \\if"
    return parsed


def classify(statement: str) -> str:
    """As sysbench does: by the first word."""
    word = statement.split()[0].upper()
    if word == "SELECT":
        return "read"
    if word in ("INSERT", "UPDATE", "DELETE"):
        return "write"
    return "other"


def executed(parsed: Parsed, branch: int) -> list[str]:
    """The statements one transaction runs when every chain takes branch ``branch``."""
    # Chains and unconditional statements interleave; order does not matter for counts.
    return parsed.unconditional + [c.branches[branch][0] for c in parsed.chains]


# ----- statement counts ---------------------------------------------------------------------

def test_statement_counts_are_sysbenchs() -> None:
    assert statement_counts(False) == {"read": 14, "write": 0, "other": 2, "total": 16}
    assert statement_counts(True) == {"read": 14, "write": 4, "other": 2, "total": 20}
    assert statement_counts(True, point_selects=1) == {"read": 5, "write": 4, "other": 2,
                                                       "total": 11}


@pytest.mark.parametrize("read_write", [False, True])
def test_one_table_gives_a_flat_script_of_exactly_16_or_20_statements(read_write: bool) -> None:
    text = script_text(OltpScriptOptions(read_write=read_write, tables=1, table_size=1000))
    parsed = parse(text)
    assert "\\if" not in text and "tnum" not in text
    assert not parsed.chains
    statements = parsed.unconditional
    counts = statement_counts(read_write)
    assert len(statements) == counts["total"] == (20 if read_write else 16)
    assert statements[0] == "BEGIN;" and statements[-1] == "COMMIT;"
    for kind in ("read", "write", "other"):
        assert sum(classify(s) == kind for s in statements) == counts[kind], kind
    assert all("sbtest1 " in s for s in statements[1:-1])


@pytest.mark.parametrize("read_write", [False, True])
def test_several_tables_run_one_statement_per_chain(read_write: bool) -> None:
    tables = 4
    parsed = parse(script_text(OltpScriptOptions(read_write=read_write, tables=tables,
                                                 table_size=1000)))
    counts = statement_counts(read_write)
    assert parsed.unconditional == ["BEGIN;", "COMMIT;"]
    assert len(parsed.chains) + len(parsed.unconditional) == counts["total"]
    for chain in parsed.chains:
        assert len(chain.branches) == tables
        assert all(len(branch) == 1 for branch in chain.branches)
        # Branch n names table n, and the branches differ only by the table.
        for n, (statement,) in enumerate(chain.branches, 1):
            assert re.search(rf"\bsbtest{n}\b", statement), statement
            assert statement.replace(f"sbtest{n}", "sbtestN") == \
                chain.branches[0][0].replace("sbtest1", "sbtestN")
    for branch in range(tables):
        statements = executed(parsed, branch)
        for kind in ("read", "write", "other"):
            assert sum(classify(s) == kind for s in statements) == counts[kind]


def test_tables_are_drawn_once_per_group_as_in_oltp_common() -> None:
    """get_table_num() runs once per execute_* group: 5 groups read-only, 8 read-write."""
    for read_write, groups in ((False, 5), (True, 8)):
        text = script_text(OltpScriptOptions(read_write=read_write, tables=3, table_size=10))
        draws = [line for line in text.splitlines() if line.startswith("\\set tnum")]
        assert draws == ["\\set tnum random(1, 3)"] * groups
        # The chains test tnum against every table: 1, 2, else.
        assert "\\if :tnum = 1" in text and "\\elif :tnum = 2" in text and "\\else" in text


def test_sql_is_sysbenchs() -> None:
    opts = OltpScriptOptions(read_write=True, tables=1, table_size=1000, range_size=50)
    statements = parse(script_text(opts)).unconditional
    assert statements[1:11] == ["SELECT c FROM sbtest1 WHERE id = :id;"] * 10
    assert statements[11:15] == [
        "SELECT c FROM sbtest1 WHERE id BETWEEN :id_start AND :id_end;",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN :id_start AND :id_end;",
        "SELECT c FROM sbtest1 WHERE id BETWEEN :id_start AND :id_end ORDER BY c;",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN :id_start AND :id_end ORDER BY c;",
    ]
    assert statements[15] == "UPDATE sbtest1 SET k = k + 1 WHERE id = :id;"
    assert statements[16] == f"UPDATE sbtest1 SET c = {C_VALUE_SQL} WHERE id = :id;"
    assert statements[17] == "DELETE FROM sbtest1 WHERE id = :id;"
    assert statements[18] == (f"INSERT INTO sbtest1 (id, k, c, pad) VALUES (:id, :k, "
                              f"{C_VALUE_SQL}, {PAD_VALUE_SQL}) ON CONFLICT (id) DO NOTHING;")
    text = script_text(opts)
    assert text.count("\\set id_end :id_start + 49") == 4


def test_read_only_writes_nothing_and_point_selects_follow_the_option() -> None:
    opts = OltpScriptOptions(read_write=False, tables=1, table_size=100, point_selects=3)
    statements = parse(script_text(opts)).unconditional
    assert len(statements) == statement_counts(False, 3)["total"] == 9
    assert not any(classify(s) == "write" for s in statements)


# ----- random ids -----------------------------------------------------------------------------

def test_special_constants_follow_sb_rand_c() -> None:
    spec = special_rand(1000)  # t = 999, res 75 -> span x4, pct 1 -> d = 9.99
    assert spec.t == 999.0
    assert spec.span == 3996.0
    assert spec.hot_width == pytest.approx(10.99)
    assert spec.hot_offset == pytest.approx(499.5 - 4.995)
    assert special_rand(1000, pct=10, res=50).span == 1998.0


def test_id_draws_per_rand_type() -> None:
    def draw(rand_type: str) -> list[str]:
        return id_draw(OltpScriptOptions(read_write=False, tables=1, table_size=1000,
                                         rand_type=rand_type), "id")

    assert draw("uniform") == ["\\set id random(1, 1000)"]
    special = draw("special")
    assert special[0].startswith("\\set u random(0, 9007199254740991)")
    assert ":u * 3996.0 < 999.0" in special[1] and ":u * 10.99 + 494.505" in special[1]
    assert special[1].count("random(") == 12  # the bell: sum of --rand-spec-iter uniforms
    # pgbench's int() rounds; sysbench truncates: every non-uniform draw ends with a floor.
    for rand_type in ("special", "gaussian", "pareto"):
        assert draw(rand_type)[-1].endswith(
            "CASE WHEN int(:x) > :x THEN int(:x) - 1 ELSE int(:x) END")
    assert "pow(" in draw("pareto")[0] and "ln(0.2) / ln(0.8)" in draw("pareto")[0]


def test_large_tables_give_plain_double_literals() -> None:
    text = "\n".join(id_draw(OltpScriptOptions(read_write=False, tables=1,
                                              table_size=2_000_000_000), "id"))
    assert "e+" not in text and "e-" not in text
    assert "7999999996.0" in text  # span = (2e9 - 1) * 4


def test_options_are_validated() -> None:
    with pytest.raises(UsageError, match="zipfian"):
        OltpScriptOptions(read_write=False, tables=1, table_size=10, rand_type="zipfian")
    with pytest.raises(UsageError):
        OltpScriptOptions(read_write=False, tables=0, table_size=10)
    with pytest.raises(UsageError):
        OltpScriptOptions(read_write=False, tables=1, table_size=10, rand_spec_res=100)


def test_the_script_says_which_distribution_it_uses() -> None:
    opts = OltpScriptOptions(read_write=False, tables=2, table_size=10)
    assert rand_description(opts) == "special (--rand-spec-pct=1 --rand-spec-res=75)"
    assert rand_description(opts) in script_text(opts).splitlines()[1]
    assert rand_description(OltpScriptOptions(read_write=False, tables=2, table_size=10,
                                              rand_type="uniform")) == "uniform"
