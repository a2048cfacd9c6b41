"""The HTML pages render in headless Chromium and fit a 1280 px window.

A real run report and a real compare page come from two short runs (the second with a
long context name and a long setting value, which end up in their tables) and their
comparison; a page built from a Document with the widest content a report can hold
checks the stylesheet's last resorts without a server. The study report is checked in
tests/test_studies.py with the same helper (tests/chromium.py).
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from pgdyno.reports import html
from pgdyno.reports.document import Code, Document, Link, Section, Strong, Table, Text
from tests.chromium import WINDOW, assert_fits, measure_page
from tests.conftest import make_shared_dir, run_cli_here

LONG_CONTEXT = "html-fit--a-deliberately-long-context-name-without-any-spaces"
LONG_VALUE = "pgdyno_html_fit_check_with_a_deliberately_long_setting_value"
"""cluster_name: harmless to the load; PostgreSQL keeps its first 63 characters."""
QUICK_RUN = ["bench", "tpcb", "--clients", "2", "--iterations", "1", "--duration", "2",
             "--warmup", "0", "--scale", "1", "--no-progress"]


@pytest.fixture(scope="module")
def pages(workdir: Path) -> tuple[Path, Path]:
    """(report.html of a run, compare.html of it against a plain run)."""
    results = make_shared_dir("pgdyno-html-")
    runs = []
    long_setting = ["--set", f"cluster_name={LONG_VALUE}"]
    for context, sets in (("html-fit--plain", []), (LONG_CONTEXT, long_setting)):
        proc = run_cli_here([*QUICK_RUN, "--results-dir", str(results), "--context", context,
                             *sets], workdir)
        assert proc.returncode == 0, proc.stderr
        (run,) = (results / context).iterdir()
        runs.append(run)
    proc = run_cli_here(["compare", str(runs[0]), str(runs[1]), "--out", str(results / "cmp")],
                        workdir)
    assert proc.returncode == 0, proc.stderr
    return runs[1] / "report.html", results / "cmp" / "compare.html"


@pytest.mark.server
def test_run_report_fits_the_window(pages) -> None:
    report, _ = pages
    page = assert_fits(report)
    assert page.tables_in_file >= 10 and page.images_in_file >= 5, page  # a full report


@pytest.mark.server
def test_compare_page_fits_the_window(pages) -> None:
    _, compare = pages
    text = compare.read_text()
    assert LONG_VALUE[:63] in text.replace("<wbr>", ""), "the long setting value is not on the page"
    assert LONG_CONTEXT in text.replace("<wbr>", "")
    page = assert_fits(compare)
    assert page.images_in_file >= 2, page


def _widest_document(long_word: str) -> Document:
    numbers = Table(headers=[f"p{i} latency over the window (ms)" for i in range(18)],
                    rows=[[f"{1234567.891 * i:,.3f}" for i in range(18)]], caption="18 columns")
    settings = Table(headers=["Layer", "Setting", "A", "B", "Source of B's value"],
                     rows=[["postgresql", "shared_preload_libraries", long_word, "x" * 150,
                            "/var/tmp/" + long_word]])
    sixteen = range(16)
    rates = Table([f"column_{i}_of_sixteen" for i in sixteen],
                  [[f"{i * 98765.4321:,.2f} MB/s" for i in sixteen]])
    paths = Table(["path", "n"], [[long_word * 3, "1"]])
    return Document(title="widest " + long_word, sections=[
        Section("Tables " + long_word, paragraphs=[Text.of("A path: ", Code(long_word), ".")],
                tables=[numbers, settings]),
        Section("Tables in a section's own order", preformatted=["log " + long_word * 4],
                body=[rates, paths]),
    ])


def test_widest_content_fits_the_window(tmp_path: Path) -> None:
    """Long unbroken words, 16 and 18 columns of numbers: wrapped, never cut off."""
    long_word = "pg_stat_statements,auto_explain,pg_prewarm," + "tpcb-20261125T151559Z" * 4
    page_path = tmp_path / "widest.html"
    page_path.write_text(html.render_document(_widest_document(long_word), tmp_path))
    page = assert_fits(page_path)
    assert len(page.tables) == 4
    assert max(t.width_px for t in page.tables) <= WINDOW[0]


def test_a_link_in_a_table_cell_is_a_link_in_the_browser(tmp_path: Path) -> None:
    """The study page's "At a glance" table: a workload's name leads to its section. In
    Chromium the cell holds a link to an element that exists, never the Markdown text
    "[tpcb](#workload-tpcb)"; stressed words are bold, not "**ok**"."""
    glance = Table(["Workload", "Metric", "Change"],
                   [[Link("tpcb", "#workload-tpcb"), "TPS", "+1.2%"]])
    doc = Document("study", [
        Section("At a glance", tables=[glance], paragraphs=[Text.of("Status ", Strong("ok"))]),
        Section("tpcb: pgbench's TPC-B-like script", anchor="workload-tpcb",
                paragraphs=["The workload's own section."])])
    page_path = tmp_path / "study.html"
    page_path.write_text(html.render_document(doc, tmp_path))
    page = measure_page(page_path)
    assert [(link.text, link.href, link.in_cell, link.target_found) for link in page.links] \
        == [("tpcb", "#workload-tpcb", True, True)]
    assert page.raw_markdown == []
    assert_fits(page_path)


@pytest.mark.parametrize("text", [
    "pg_stat_statements,auto_explain", "/var/tmp/pgdyno-results/ctx--tpcb/tpcb-20261125T151559Z",
    "x" * 50, "a <b> & \"c\" " + "d&e" * 10, "12,345,678,901,234.567", "short words only"])
def test_breakable_keeps_the_text_and_bounds_its_words(text: str) -> None:
    out = str(html.breakable(text))
    assert unescape(out.replace("<wbr>", "")) == text
    assert "<b>" not in out  # still escaped
    words = [w for part in unescape(out).split() for w in part.split("<wbr>")]
    numbers = [w for w in words if re.fullmatch(r"[\d.,]+", w)]
    assert all(len(w) <= html.WORD_PIECE_CHARS for w in words if w not in numbers), words
    if numbers or all(len(w) < html.LONG_WORD_CHARS for w in text.split()):
        assert "<wbr>" not in out
