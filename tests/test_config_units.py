"""Settings in natural units: pg_settings' "771378 8kB" and postgresql.conf's
"128MB" read as people read them, in PostgreSQL's own notation (powers of 1024, kB/MB/GB/TB),
with the stock value named beside them."""

from __future__ import annotations

import pytest

from pgdyno.config.units import (
    setting_value,
    setting_with_stock,
    settings_with_stock,
    side_text,
    stock_text,
)

KIB = 1024


def natural(n_bytes: int) -> str:
    """The test's own reading: the largest of TB, GB, MB, kB, B dividing the size exactly."""
    for name, power in (("TB", 4), ("GB", 3), ("MB", 2), ("kB", 1), ("B", 0)):
        if n_bytes % KIB ** power == 0:
            return f"{n_bytes // KIB ** power} {name}"
    raise AssertionError(n_bytes)


@pytest.mark.parametrize(("raw", "n_bytes"), [
    ("16384 8kB", 16384 * 8 * KIB),          # stock shared_buffers: 128 MB
    ("786432 8kB", 786432 * 8 * KIB),        # 6 GB
    ("771378 8kB", 771378 * 8 * KIB),        # 25% of a 23.5 GiB host: no MB divides it
    ("4096 kB", 4096 * KIB),                 # stock work_mem
    ("65536 kB", 65536 * KIB),
    ("2048 MB", 2048 * KIB ** 2),            # max_wal_size's unit
    ("1048576 MB", KIB ** 4),
    ("2 16MB", 2 * 16 * KIB ** 2),           # a unit that is a multiple of MB
    ("128MB", 128 * KIB ** 2),               # postgresql.conf notation
    ("6GB", 6 * KIB ** 3),
    ("1536kB", 1536 * KIB),
    ("1000 B", 1000),
])
def test_memory_settings_in_the_largest_unit_that_divides(raw: str, n_bytes: int) -> None:
    assert setting_value(raw) == natural(n_bytes)


def test_the_independent_reading_of_the_odd_case() -> None:
    # 771378 pages of 8 kB are 6,319,128,576 bytes: 6026.4 MB, 6,171,024 kB exactly.
    assert setting_value("771378 8kB") == "6171024 kB"


@pytest.mark.parametrize(("raw", "unit", "shown"), [
    ("16384", "8kB", "128 MB"), ("4096", "kB", "4 MB"), ("300", "s", "5 min"),
    ("200", "ms", "200 ms"), ("1024", "MB", "1 GB"), ("-1", "kB", "-1"), ("0", "ms", "0"),
    ("0.9", None, "0.9"), ("100", None, "100"),
])
def test_a_bare_number_takes_the_unit_given_apart(raw: str, unit: str | None,
                                                  shown: str) -> None:
    """boot_val and the search's knob values are bare numbers in the setting's unit."""
    assert setting_value(raw, unit) == shown


@pytest.mark.parametrize(("raw", "shown"), [
    ("900 s", "15 min"), ("300 s", "5 min"), ("3600 s", "1 h"), ("86400 s", "1 d"),
    ("90 s", "90 s"), ("10000 ms", "10 s"), ("1500 ms", "1500 ms"), ("5min", "5 min"),
    ("0.5 ms", "0.5 ms"),
])
def test_time_settings(raw: str, shown: str) -> None:
    assert setting_value(raw) == shown


@pytest.mark.parametrize("raw", ["on", "off", "replica", "ISO, MDY", "%m [%p] ", "0.9", "300",
                                 "C.UTF-8", "0777", "", "10 apples", "5iB"])
def test_words_strings_and_plain_numbers_stay_as_given(raw: str) -> None:
    assert setting_value(raw) == raw


def test_the_stock_value_is_named() -> None:
    assert setting_with_stock("786432 8kB", "16384 8kB") == "128 MB (stock) → 6 GB"
    assert setting_with_stock("off", "on") == "on (stock) → off"
    assert setting_with_stock("100", "100") == "100 (stock)"
    assert setting_with_stock("128MB", "16384", "8kB") == "128 MB (stock)"
    assert setting_with_stock("cp %p /a/%f", "") == "'' (stock) → cp %p /a/%f"
    assert setting_with_stock("786432 8kB", None) == "6 GB"  # an old run: no stock kept
    assert stock_text("16384", "8kB") == "128 MB (stock)" and stock_text(None) == "stock"
    assert side_text("4096 kB", "4096 kB") == "4 MB (stock)"
    assert side_text("8192 kB", "4096 kB") == "8 MB"
    assert settings_with_stock({"work_mem": "8192 kB", "jit": "off"},
                               {"work_mem": "4096 kB"}) == {
        "work_mem": "4 MB (stock) → 8 MB", "jit": "off"}


def test_a_run_recorded_without_stock_values_shows_the_values_alone() -> None:
    """Manifests written before boot_val was kept (no server.stock_settings) still render."""
    assert settings_with_stock({"shared_buffers": "786432 8kB", "jit": "off"}, None) == {
        "shared_buffers": "6 GB", "jit": "off"}
