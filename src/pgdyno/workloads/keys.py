"""Keys and indexes a dataset build makes after its data: one job per statement, shared by
the loaders (TPROC-C, TPROC-H) that run them over several connections, largest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    from psycopg import sql


@dataclass(frozen=True)
class KeyJob:
    """One key or index to build after the data; ``weight`` orders jobs largest first."""

    table: str
    statement: sql.Composed
    weight: float


def primary_key(table: str, columns: tuple[str, ...], weight: float) -> KeyJob:
    from psycopg import sql

    statement = sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    return KeyJob(table, statement, weight)


def index(table: str, name: str, columns: tuple[str, ...], weight: float) -> KeyJob:
    from psycopg import sql

    statement = sql.SQL("CREATE INDEX {} ON {} ({})").format(
        sql.Identifier(name), sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)))
    return KeyJob(table, statement, weight)
