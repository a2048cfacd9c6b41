"""``pgdyno runs --format csv|json|parquet``: the list of runs with their headline metrics,
for notebooks and dashboards.

One record per run, its columns in ``EXPORT_COLUMNS`` order in every format. The settings
are the server's non-default ones as the index records them (``runner.report.index_row``):
each in natural units beside its stock value, {"shared_buffers": "128 MB (stock) → 6 GB"}
(an index written by an older pgdyno holds pg_settings' raw text until ``pgdyno runs
--reindex``). CSV holds text (an empty cell: no value; settings as a JSON object); JSON is
a versioned document (``schema_version``, ``runs``); Parquet has typed columns (times as UTC
timestamps, figures as doubles, settings as JSON text, which every reader can parse) and is
written with pyarrow, an optional dependency (``pip install 'pgdyno[parquet]'``).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pgdyno import __version__
from pgdyno.errors import UsageError
from pgdyno.results.index import RunRow

EXPORT_SCHEMA_VERSION = 1
FORMATS = ("table", "csv", "json", "parquet")
EXPORT_COLUMNS = ("run_id", "host", "context", "workload", "status", "started_at", "ended_at",
                  "config", "dataset", "clients", "headline_metric", "headline",
                  "headline_unit", "headline_direction", "p99_ms", "verdict", "pg_version",
                  "settings")
"""Identity first, then what was run, then what it gave: the order of every format."""
FLOAT_COLUMNS = ("headline", "p99_ms")
TIME_COLUMNS = ("started_at", "ended_at")
PARQUET_INSTALL = ("--format parquet needs pyarrow, which is not installed: "
                   "pip install 'pgdyno[parquet]' (or pip install pyarrow)")


def records(rows: Sequence[RunRow]) -> list[dict[str, Any]]:
    """Each run as a plain dict in EXPORT_COLUMNS order (settings: a dict or None)."""
    return [{name: getattr(row, name) for name in EXPORT_COLUMNS} for row in rows]


def to_csv(rows: Sequence[RunRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for record in records(rows):
        writer.writerow([_csv_cell(name, value) for name, value in record.items()])
    return out.getvalue()


def _csv_cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name == "settings":
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float):
        return repr(value)  # the shortest text that reads back as the same double
    return str(value)


def to_json(rows: Sequence[RunRow], source: str) -> str:
    """A self-describing document: what wrote it, from where, and the runs."""
    doc = {"schema_version": EXPORT_SCHEMA_VERSION, "generated_by": f"pgdyno {__version__}",
           "source": source, "columns": list(EXPORT_COLUMNS), "runs": records(rows)}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def parquet_table(rows: Sequence[RunRow], source: str) -> Any:
    """The runs as a pyarrow Table with a fixed schema (the same column types whatever the
    rows hold, even none), its metadata saying what wrote it."""
    try:
        import pyarrow as pa
    except ImportError:
        raise UsageError(PARQUET_INSTALL) from None
    types = {name: pa.string() for name in EXPORT_COLUMNS}
    types.update({name: pa.float64() for name in FLOAT_COLUMNS})
    types.update({name: pa.timestamp("s", tz="UTC") for name in TIME_COLUMNS})
    columns: dict[str, list[Any]] = {name: [] for name in EXPORT_COLUMNS}
    for record in records(rows):
        for name, value in record.items():
            if value is not None and name in TIME_COLUMNS:
                value = datetime.fromisoformat(value)
            elif value is not None and name == "settings":
                value = json.dumps(value, sort_keys=True)
            columns[name].append(value)
    schema = pa.schema([pa.field(name, types[name]) for name in EXPORT_COLUMNS],
                       metadata={"pgdyno.schema_version": str(EXPORT_SCHEMA_VERSION),
                                 "pgdyno.generated_by": f"pgdyno {__version__}",
                                 "pgdyno.source": source})
    return pa.table(columns, schema=schema)


def write_export(rows: Sequence[RunRow], fmt: str, output: Path | None, source: str) -> str:
    """The export in ``fmt``: written to ``output`` (whole or not at all), or returned as
    text for stdout (""). Parquet is binary: it needs ``output``."""
    if fmt == "parquet":
        if output is None:
            raise UsageError("--format parquet writes a binary file: give --output FILE.parquet")
        table = parquet_table(rows, source)
        import pyarrow.parquet as pq

        _atomic(output, lambda tmp: pq.write_table(table, tmp))
        return ""
    if fmt == "csv":
        text = to_csv(rows)
    elif fmt == "json":
        text = to_json(rows, source)
    else:
        raise UsageError(f"--format {fmt!r}: accepted: {', '.join(FORMATS)}")
    if output is None:
        return text
    write_text(output, text)
    return ""


def write_text(path: Path, text: str) -> None:
    _atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _atomic(path: Path, write: Any) -> None:
    """Write beside ``path`` and rename: an interrupted export leaves the old file whole.
    A device or a pipe (/dev/stdout, a FIFO) is written into instead: a rename would put a
    regular file in its place (as root, in /dev)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"--output {path}: a directory; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"--output {path}: no such directory {path.parent}")
    if path.exists() and not path.is_file():
        try:
            write(path)
        except OSError as exc:
            raise UsageError(f"--output {path}: {exc.strerror or exc}") from None
        return
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--output {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
