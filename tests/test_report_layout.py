"""The page's layout from the typed model, without a server: blocks side by side, folded
sections, and a table of contents; the Markdown of the same document shows every block
in order, unfolded."""

from __future__ import annotations

import re
from pathlib import Path

from pgdyno.reports import html, markdown
from pgdyno.reports.document import Beside, Document, Paragraph, Section, Table


def _document() -> Document:
    figures = Table(["Clients", "TPS"], [["1", "100"], ["2", "180"]])
    return Document("layout", contents=True, sections=[
        Section("Answer", body=[Beside([figures], [Paragraph("the chart's place")]),
                                Paragraph("after both columns")]),
        Section("Summary", paragraphs=["open"]),
        Section("Telemetry: 1 client", folded=True, paragraphs=["folded words"]),
        Section("CPU breakdown", level=3, paragraphs=["folded too"]),
        Section("Wait events", level=3, paragraphs=["folded as well"]),
        Section("Telemetry: 2 clients", folded=True),
        Section("CPU breakdown", level=3, paragraphs=["the second's"]),
        Section("Iterations", paragraphs=["open again"]),
    ])


def test_beside_puts_two_columns_in_one_row(tmp_path: Path) -> None:
    page = html.render_document(_document(), tmp_path)
    row = re.search(r'<div class="beside"><div>(.*?)</div><div>(.*?)</div></div>', page, re.S)
    assert row is not None
    assert "<table>" in row.group(1) and "the chart&#39;s place" in row.group(2)
    assert page.index("after both columns") > row.end()


def test_a_folded_section_holds_its_subsections_and_no_more(tmp_path: Path) -> None:
    page = html.render_document(_document(), tmp_path)
    folds = re.findall(r"<details[^>]*>(.*?)</details>", page, re.S)
    assert len(folds) == 2
    assert all(w in folds[0] for w in ("Telemetry: 1 client", "folded words", "folded too",
                                       "folded as well"))
    assert "the second&#39;s" in folds[1] and "Telemetry: 1 client" not in folds[1]
    outside = re.sub(r"<details.*?</details>", "", page, flags=re.S)
    assert all(w in outside for w in ("open", "open again", "after both columns"))
    assert " open" not in re.search(r"<details[^>]*>", page).group(0)  # closed at first


def test_contents_list_the_top_level_sections_with_unique_ids(tmp_path: Path) -> None:
    doc = _document()
    page = html.render_document(doc, tmp_path)
    nav = re.search(r'<nav class="contents".*?</nav>', page, re.S).group(0)
    targets = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', nav)
    assert [t for _, t in targets] == [s.title for s in doc.sections if s.level == 2]
    ids = re.findall(r'<(?:section|details)[^>]* id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) == len(doc.sections)  # two "CPU breakdown": two ids
    assert {i for i, _ in targets} <= set(ids)
    assert page.index("<nav") > page.index("after both columns")  # after the first section
    assert page.index("<nav") < page.index(">Summary<")


def test_markdown_shows_every_block_in_order_and_unfolded() -> None:
    text = markdown.render_document(_document())
    order = ["| Clients | TPS |", "the chart's place", "after both columns",
             "## Telemetry: 1 client", "folded words", "### CPU breakdown", "folded as well",
             "## Iterations"]
    assert [text.index(w) for w in order] == sorted(text.index(w) for w in order)
    assert "<details" not in text and "Contents" not in text


def test_the_scaling_curve_draws_the_answers_figures() -> None:
    """Given the answer's TPS by clients, the curve beside it draws those: each count's
    mean, its 95% interval as the bar (none from one iteration) and its p99."""
    from pgdyno.reports import plots
    from pgdyno.reports.document import ClientHeadline
    from tests.test_report_rendering import iteration, run_summary

    summary = run_summary([iteration(c, 1, [50.0, 60.0]) for c in (1, 4)])
    by_clients = [ClientHeadline(1, "1 client", 100.0, (90.0, 112.0), 2, 5.0),
                  ClientHeadline(4, "4 clients", 300.0, None, 1, 9.0)]
    ax, ax2 = plots._scaling(summary, by_clients).axes
    data, _caps, (bars,) = ax.containers[0].lines
    assert list(data.get_xdata()) == [1, 4] and list(data.get_ydata()) == [100.0, 300.0]
    assert [[tuple(p) for p in seg] for seg in bars.get_segments()] == [
        [(1, 90.0), (1, 112.0)], [(4, 300.0), (4, 300.0)]]
    assert list(ax2.lines[0].get_ydata()) == [5.0, 9.0]
    assert "95% interval" in ax.get_legend().get_texts()[0].get_text()
