"""``pgdyno runs`` as a table that fits the terminal.

Each run is named by its directory (``tpcb-20261125T130844Z``), the suffix of its id that
``report``, ``compare`` and ``note`` accept; a name two listed runs share keeps the full id
(``CONTEXT/NAME``). Cells never wrap: a long text cell ends in "…", and when the columns
still do not fit, whole columns are left out, the least useful first (``PRIORITY``), and
named in one note. The run's name is never cut, however narrow the terminal: it is what
every other command is given, and a row of "…" names nothing. With no width (``--wide``,
``--output``, or a pipe without $COLUMNS) every column is kept, whole, and each run has its
full id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pgdyno.results.index import RunRow

GAP = "  "
"""Between two columns."""
MISSING = "–"
ELLIPSIS = "…"


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False
    """Right-aligned (figures); text is left-aligned."""
    cap: int | None = None
    """The most characters a cell shows when the table must fit a width (None: never cut)."""


COLUMNS = (Column("run"), Column("context", cap=24), Column("status"),
           Column("config", cap=20), Column("dataset", cap=24), Column("clients", cap=16),
           Column("headline", numeric=True), Column("p99 ms", numeric=True),
           Column("PostgreSQL", cap=12))
"""Left to right, as the table shows them."""
PRIORITY = ("run", "status", "headline", "p99 ms", "clients", "config", "dataset", "context",
            "PostgreSQL")
"""Most useful first: a narrow terminal keeps the columns from the front of this list."""


@dataclass
class Listing:
    """The table as it will be printed: the kept columns, in display order, with their
    cells, and the headers of the columns left out to fit (in display order)."""

    columns: list[Column]
    rows: list[list[str]]
    dropped: list[str]
    width: int | None
    """The width it was fitted to (None: not fitted)."""


def short_names(run_ids: Sequence[str]) -> dict[str, str]:
    """Each run id's directory name (a suffix ``pgdyno runs RUN`` and ``report`` resolve),
    or the whole id when two of ``run_ids`` share that name."""
    name = {run_id: run_id.rstrip("/").rsplit("/", 1)[-1] for run_id in run_ids}
    taken = Counter(name.values())
    return {run_id: short if taken[short] == 1 else run_id for run_id, short in name.items()}


def headline_text(row: RunRow) -> str:
    """"3,061 TPS", "1.18 s": the figure with its metric's short name, or with its unit when
    the name is a phrase ("Geometric mean of query times")."""
    if row.headline is None:
        return MISSING
    value = row.headline
    figure = f"{value:,.0f}" if abs(value) >= 100 else (
        f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}")
    label = row.headline_metric or ""
    name = label if label and " " not in label else (row.headline_unit or "")
    return f"{figure} {name}".strip()


def _cells(row: RunRow, run_name: str) -> dict[str, str]:
    return {"run": run_name, "context": row.context, "status": row.status,
            "config": row.config or MISSING, "dataset": row.dataset or MISSING,
            "clients": row.clients or MISSING, "headline": headline_text(row),
            "p99 ms": f"{row.p99_ms:,.2f}" if row.p99_ms is not None else MISSING,
            "PostgreSQL": row.pg_version or MISSING}


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, its end replaced by "…" when it is longer."""
    if len(text) <= limit:
        return text
    return text[:max(0, limit - 1)] + ELLIPSIS if limit > 0 else ""


def build_listing(rows: Sequence[RunRow], width: int | None) -> Listing:
    """The runs' table fitted to ``width`` characters (None: every column, whole, full
    ids). Fitting cuts long text cells to their column's cap, then keeps columns in
    ``PRIORITY`` order while they fit; the run column is always kept, whole (alone when it
    is wider than the terminal)."""
    if width is None:
        columns = [c for c in COLUMNS if c.header != "context"]  # the full id holds it
        table = [_cells(row, row.run_id) for row in rows]
        return Listing(columns, [[cells[c.header] for c in columns] for cells in table], [],
                       None)
    names = short_names([row.run_id for row in rows])
    table = [{c.header: cut(cells[c.header], c.cap) if c.cap else cells[c.header]
              for c in COLUMNS} for cells in (_cells(row, names[row.run_id]) for row in rows)]
    widths = {c.header: max([len(c.header)] + [len(cells[c.header]) for cells in table])
              for c in COLUMNS}
    kept: set[str] = set()
    used = -len(GAP)
    for header in PRIORITY:
        if header == "run" or used + len(GAP) + widths[header] <= width:
            kept.add(header)
            used += len(GAP) + widths[header]
    columns = [c for c in COLUMNS if c.header in kept]
    cells = [[line[c.header] for c in columns] for line in table]
    return Listing(columns, cells, [c.header for c in COLUMNS if c.header not in kept], width)


def render(listing: Listing) -> list[str]:
    """The table's lines: a header line, then one line a run; figures right-aligned, text
    left-aligned, no trailing spaces. A fitted line is cut at the width, never inside the
    run's name."""
    headers = [c.header for c in listing.columns]
    widths = [max([len(h)] + [len(row[i]) for row in listing.rows])
              for i, h in enumerate(headers)]
    limit = None if listing.width is None else max(listing.width, widths[0] if widths else 0)
    lines = []
    for cells in [headers, *listing.rows]:
        parts = [cell.rjust(w) if c.numeric else cell.ljust(w)
                 for c, cell, w in zip(listing.columns, cells, widths, strict=True)]
        line = GAP.join(parts).rstrip()
        lines.append(cut(line, limit) if limit is not None else line)
    return lines


def dropped_note(listing: Listing) -> str | None:
    """One line naming the columns left out, and how to see them (None: none was)."""
    if not listing.dropped:
        return None
    return (f"note: left out to fit {listing.width} columns: {', '.join(listing.dropped)}; "
            "`pgdyno runs --wide` shows every column and full run ids")
