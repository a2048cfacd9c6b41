"""The one units policy (pgdyno.units): binary prefixes labelled exactly, scaled to read,
one prefix per column; milliseconds and percentages in one form; and the wait-event
meanings the run report shows beside each wait."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from pgdyno.analysis.telemetry.wait_meanings import CLASS_MEANINGS, EVENT_MEANINGS, wait_meaning
from pgdyno.units import (
    common_scale,
    format_bytes,
    format_ms,
    format_rate,
    format_ratio_pct,
    number,
    scale_for,
    unit_factor,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "pgdyno"


@pytest.mark.parametrize(("n_bytes", "shown"), [
    (0, "0 B"), (100, "100 B"), (1023, "1,023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"),
    (10 * 2**20, "10.0 MiB"), (512 * 2**20, "512 MiB"), (2**30, "1.00 GiB"),
    (1.5 * 2**40, "1.50 TiB"), (3 * 2**50, "3.00 PiB"), (2**62, "4,096 PiB"),
    # Rounded first: 1,023.999 MiB is 1.00 GiB, not "1,024 MiB".
    (2**30 - 1, "1.00 GiB"),
    # Decimal inputs come out binary: 10^9 bytes is 954 MiB, never "1.0 GB".
    (1e9, "954 MiB"), (1e12, "931 GiB"),
])
def test_format_bytes(n_bytes: float, shown: str) -> None:
    assert format_bytes(n_bytes) == shown


def test_format_rate_and_missing() -> None:
    assert format_rate(7.5 * 2**20) == "7.50 MiB/s"
    assert format_rate(2048 * 2**20) == "2.00 GiB/s"
    assert format_rate(None) == format_bytes(None) == "–"
    assert format_rate(math.nan) == "–"


def test_one_prefix_for_a_column() -> None:
    column = [3 * 2**20, 1500 * 2**20, None, 0.25 * 2**20]
    scale = common_scale(column)
    assert (scale.unit, scale.rate_unit, scale.factor) == ("GiB", "GiB/s", 2**30)
    assert [scale.number(v) for v in column] == ["0", "1.46", "–", "0"]
    assert scale.value(3 * 2**30) == 3.0
    assert common_scale([None, None]).unit == "MiB"  # nothing measured: no "B/s" header
    assert common_scale([0.0]).unit == "B"


def test_scale_moves_up_at_1024_and_keeps_three_digits() -> None:
    assert scale_for(1023 * 2**20).unit == "MiB"
    assert scale_for(1024 * 2**20).unit == "GiB"
    assert [number(v) for v in (1.234, 12.34, 123.4, 1234.5)] == ["1.23", "12.3", "123",
                                                                   "1,234"]
    assert unit_factor("MiB/s") == 2**20 and unit_factor("KiB") == 1024
    assert unit_factor("IOPS") is None and unit_factor("MB/s") is None


def test_ms_and_ratio_forms() -> None:
    assert format_ms(12.3456) == "12.35" and format_ms(0.5) == "0.50"
    assert format_ms(1234.5) == "1,234" and format_ms(None) == "–"
    assert format_ratio_pct(0.981) == "98.1%" and format_ratio_pct(1.0) == "100.0%"
    assert format_ratio_pct(None) == "–"


def test_no_decimal_byte_unit_is_written_for_a_measured_quantity() -> None:
    """Source lines that print a measured size or rate use pgdyno.units: no "MB/s", "GB"
    or division by 10^6 / 10^9 / 10^12 for bytes in the modules that show them. Settings
    (PostgreSQL's own notation) and estimates in option help are outside this policy."""
    shown = ["reports/telemetry_sections.py", "reports/archive_sections.py",
             "compare/core.py", "compare/io_profile.py", "compare/render.py",
             "compare/stats.py", "compare/model.py", "workloads/fio/report.py",
             "workloads/tprocc/sweep_report.py", "workloads/tprocc/sweep_compare.py",
             "analysis/verdict.py", "analysis/endurance.py", "analysis/telemetry/host.py",
             "analysis/telemetry/limits.py"]
    # A figure followed by a decimal unit ("5 MB", "{x:.1f} GB"), a decimal rate anywhere,
    # a unit in a header's brackets, or bytes divided by a power of ten.
    bad = re.compile(r"(?:\d|\}) ?(?:MB|GB|TB)\b|(?:MB|GB|TB)/[sh]\b|\((?:MB|GB|TB)\)"
                     r"| (?:MB|GB|TB)\"|/ 1e(?:6|9|12)\b")
    found = [f"{name}:{i}: {line.strip()}" for name in shown
             for i, line in enumerate((SRC / name).read_text().splitlines(), 1)
             if bad.search(line) and not line.lstrip().startswith("#")]  # a setting's note
    assert found == []


def test_wait_meanings() -> None:
    # The events the run report meets most, each with its own line.
    for key in [("LWLock", "WALWrite"), ("LWLock", "WALInsert"), ("LWLock", "BufferMapping"),
                ("IO", "DataFileRead"), ("IO", "DataFileWrite"), ("IO", "WALSync"),
                ("IO", "WALWrite"), ("Lock", "transactionid"), ("Lock", "tuple"),
                ("Lock", "relation"), ("Client", "ClientRead"), ("CPU", "CPU")]:
        assert key in EVENT_MEANINGS, key
        assert wait_meaning(*key) == EVENT_MEANINGS[key]
    # One line each, short, and no two classes share a meaning.
    lines = [*EVENT_MEANINGS.values(), *CLASS_MEANINGS.values()]
    assert all("\n" not in m and 10 < len(m) <= 100 for m in lines)
    assert len(set(CLASS_MEANINGS.values())) == len(CLASS_MEANINGS)
    # An unknown event falls back to its class; an unknown class says so.
    assert wait_meaning("IPC", "SomethingNew") == CLASS_MEANINGS["IPC"]
    assert wait_meaning("Timeout") == CLASS_MEANINGS["Timeout"]
    assert wait_meaning("Mystery", "X") == "a wait of class Mystery (not described by pgdyno)"
