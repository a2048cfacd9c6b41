"""One report model: every block and span is data, and Markdown and HTML are each rendered
from it. The Markdown, read by an independent CommonMark renderer (markdown-it-py), shows
the same words, links, stressed words, code, table cells, alignment, images and
preformatted text as pgdyno's own HTML; a link in a table cell is an <a>; a mean and its
deviation share one precision; a verdict's evidence is figures, worded in the report."""

from __future__ import annotations

import ast
import json
import statistics
from html.parser import HTMLParser
from pathlib import Path

import markdown_it
import pytest

from pgdyno import serde
from pgdyno.analysis import telemetry as t
from pgdyno.analysis.summary import SCHEMA_VERSION as SUMMARY_VERSION
from pgdyno.analysis.summary import RunSummary, load_summary
from pgdyno.analysis.verdict import (
    KEEPS_UP,
    Evidence,
    Paced,
    Verdict,
    decide_bottleneck,
)
from pgdyno.compare.core import compare_values
from pgdyno.compare.model import SCHEMA_VERSION, Comparison
from pgdyno.compare.render import metrics_table
from pgdyno.reports import html, markdown
from pgdyno.reports.document import (
    BulletList,
    Code,
    Document,
    Image,
    Link,
    Paragraph,
    Preformatted,
    Section,
    Strong,
    Table,
    Text,
    build_document,
    plain,
)
from pgdyno.reports.evidence import evidence_text
from pgdyno.units import alike, decimals, figure, mean_sd
from tests.answer import markdown_table
from tests.samples import current_versions, sample
from tests.test_report_rendering import iteration, run_summary, run_view

SRC = Path(__file__).resolve().parents[1] / "src" / "pgdyno"
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00"
       b"\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00"
       b"\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")
"""A 1×1 PNG, for an image block."""


class Content(HTMLParser):
    """What a page shows, element by element: (tag, text, and what matters of its
    attributes: a link's target, an image's alt text, whether a cell is right-aligned)."""

    SHOWN = {"h1", "h2", "h3", "h4", "p", "li", "th", "td", "strong", "code", "a", "pre",
             "caption", "em"}

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[str, str, str]] = []
        self._open: list[list] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.items.append(("img", a.get("alt") or "", ""))
        elif tag in self.SHOWN and (tag != "a" or "href" in a):  # not a bare anchor
            extra = a.get("href") or ""
            if tag in ("td", "th"):  # right-aligned: pgdyno's class, markdown-it's style
                right = a.get("class") == "num" or "right" in (a.get("style") or "")
                extra = "right" if right else "left"
            self._open.append([tag, "", extra])

    def handle_data(self, data: str) -> None:
        for item in self._open:
            item[1] += data

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            name, text, extra = self._open.pop()
            self.items.append((name, " ".join(text.replace("\u00ad", "").split()), extra))


def shown(page: str) -> list[tuple[str, str, str]]:
    parser = Content()
    parser.feed(page.replace("<wbr>", ""))
    out: list[tuple[str, str, str]] = []
    for tag, text, extra in parser.items:
        if tag == "em":  # a caption: italic words above the table in Markdown
            out.append(("caption", text, ""))
        elif tag == "p" and (not text or out and out[-1] == ("caption", text, "")):
            continue  # the paragraph Markdown wraps around a caption or an image
        elif tag == "pre" and out and out[-1] == ("code", text, ""):
            out[-1] = (tag, text, extra)  # Markdown's fenced block: <pre><code>
        else:
            out.append((tag, text, extra))
    return out


def every_block(tmp_path: Path) -> Document:
    (tmp_path / "plots").mkdir(exist_ok=True)
    (tmp_path / "plots" / "a.png").write_bytes(PNG)
    table = Table(["Workload", "TPS", "Verdict"], [
        [Link("tpcb", "#workload-tpcb"), "2,282 ± 36", Text.of(Strong("faster"), " (noise)")],
        [Text.of("select-only ", Code("-S")), "812", "–"]], caption="Headline by workload")
    return Document("Every block", [
        Section("Blocks", paragraphs=[Text.of("Status ", Strong("ok"), ": run ",
                                              Code("pgdyno report RUN_DIR"), " again.")],
                tables=[table], preformatted=["  2s:      1,234 TPS"],
                images=[("TPS over time", "plots/a.png")],
                body=[Paragraph("Between the table and the image."),
                      BulletList(["first", Text.of("see ", Link("below", "#workload-tpcb"))])]),
        Section("tpcb: TPC-B-like", level=3, anchor="workload-tpcb",
                body=[Image("A chart", "plots/a.png"), Preformatted("x = 1\ny = 2")]),
    ])


def test_markdown_and_html_show_the_same_content(tmp_path: Path) -> None:
    doc = every_block(tmp_path)
    ours = shown(html.render_document(doc, tmp_path))
    # html: the Markdown names a section's anchor with an <a id>, as raw HTML.
    parser = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
    theirs = shown(parser.render(markdown.render_document(doc)))
    assert ours == theirs
    tags = {tag for tag, _, _ in ours}
    assert {"p", "li", "td", "th", "strong", "code", "a", "pre", "img", "caption"} <= tags


def test_a_link_in_a_table_cell_is_a_link(tmp_path: Path) -> None:
    """The study page's defect: "[tpcb](#workload-tpcb)" shown as text in a cell."""
    page = html.render_document(every_block(tmp_path), tmp_path)
    assert '<td><a href="#workload-tpcb">tpcb</a></td>' in page
    assert 'id="workload-tpcb"' in page
    assert "[tpcb]" not in page and "**" not in page and "`" not in page
    md = markdown.render_document(every_block(tmp_path))
    assert "| [tpcb](#workload-tpcb) | 2,282 ± 36 | **faster** (noise) |" in md


def test_cells_are_classified_by_their_words() -> None:
    """A link or stressed words are text in a column; a number stays a number."""
    table = Table(["a", "b"], [[Link("tpcb", "#x"), Text.of(Strong("12.5"), " ms")]])
    assert table.numeric_columns() == [False, True]
    assert plain(Text.of("Status ", Strong("ok"))) == "Status ok"
    assert "ok" in Text.of("Status ", Strong("ok"))


def test_the_html_page_holds_no_markdown_parser() -> None:
    """The HTML renderer walks the blocks: it imports no Markdown parser (it imports the
    Markdown renderer only to write the .md beside the page)."""
    tree = ast.parse((SRC / "reports" / "html.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(name.startswith(("markdown_it", "markdown.")) or name == "markdown"
                   for name in imported), imported


# ----- one precision for a figure ----------------------------------------------------------

@pytest.mark.parametrize(("mean", "sd", "text"), [
    (2282.4, 36.487, "2,282 ± 36"), (12.345, 0.456, "12.3 ± 0.5"), (1.5234, 0.3, "1.52 ± 0.30"),
    (0.01234, 0.00056, "0.012 ± 0.001"), (0.00123, 0.0004, "0.0012 ± 0.0004"),
    (105234.5, 1234.56, "105,234 ± 1,235"), (2282.4, float("nan"), "2,282 ± –"),
])
def test_a_mean_and_its_deviation_share_one_precision(mean: float, sd: float,
                                                      text: str) -> None:
    assert mean_sd(mean, sd) == text
    assert figure(mean) == text.split(" ± ")[0]  # the mean as any other figure of its size
    assert alike(mean, sd) == text.split(" ± ")


def test_a_given_precision_holds_below_a_thousand() -> None:
    assert mean_sd(3838.5, 12.5, 1) == "3,838 ± 12"
    assert mean_sd(45.25, 1.234, 1) == "45.2 ± 1.2"
    assert [decimals(v) for v in (5000, 50, 5, 0.05, 0.005)] == [0, 1, 2, 3, 4]
    # Average, median and deviation side by side in a table: the average's precision.
    assert alike(1015.2, 998.4, 70.43, digits=1) == ["1,015", "998", "70"]
    assert alike(101.52, 99.84, 7.043, digits=1) == ["101.5", "99.8", "7.0"]


def test_compare_table_shows_the_deviation_at_the_means_precision() -> None:
    a = [2245.2, 2282.4, 2319.6]
    b = [2300.0, 2310.0, 2320.0]
    m = compare_values(4, "tps", "tx/s", 1, a, b, label="TPS")
    cmp = Comparison(schema_version=SCHEMA_VERSION, baseline_label="A", candidate_label="B",
                     baseline_runs=[], candidate_runs=[], confidence=0.95, changes=[],
                     metrics=[m], method_note="")
    row = metrics_table(cmp, 4).rows[0]
    assert row[1] == f"2,282 ± {statistics.stdev(a):.0f} (3)" == "2,282 ± 37 (3)"
    assert row[2] == "2,310 ± 10 (3)"


def test_run_report_mean_across_iterations_at_one_precision() -> None:
    its = [iteration(2, 1, [3838.0, 3900.0]), iteration(2, 2, [3790.0, 3800.0])]
    summary = run_summary(its)
    summary.per_clients[0].tps_iteration_stddev = 12.5
    md = markdown.render_document(build_document(summary, run_view(), {}))
    table = markdown_table(md, "| Clients | Average | Median |")
    assert table[0][4] == "Mean ± stddev across iterations" and table[2][4] == "3,832 ± 12"


# ----- evidence: figures in the analysis, words in the report ------------------------------

def _telemetry(aas: float = 8.0, busy: float = 60.0) -> t.TelemetrySummary:
    s = t.TelemetrySummary(duration_s=10.0)
    s.cpu = t.CpuSummary(samples=10, online_cpus=2, effective_cores=2.0,
                         busy=t.Stat(avg=busy), busy_of_limit_pct=busy,
                         workload_share_of_busy_pct=90.0)
    s.waits = t.WaitSummary(ticks=100, sample_hz=10.0, aas=aas, by_event=[
        t.WaitShare("LWLock", "WALWrite", aas * 0.6, 60.0),
        t.WaitShare("CPU", "CPU", aas * 0.4, 40.0)])
    s.checkpoints = t.CheckpointSummary(started=3, requested=3, wal_triggered=3)
    return s


def test_every_piece_of_evidence_is_worded() -> None:
    verdicts = [decide_bottleneck(_telemetry(), clients=16, cpu_count=2),
                decide_bottleneck(_telemetry(aas=0.05, busy=10.0), clients=4, cpu_count=2),
                decide_bottleneck(_telemetry(aas=0.07, busy=15.0), clients=10, cpu_count=2,
                                  paced=Paced(0.99, rate="NOPM 1,273 of 1,286 ideal"))]
    pieces = [e for v in verdicts for c in v.ranked for e in c.evidence]
    pieces += [e for v in verdicts for e in v.evidence]
    assert len({e.kind for e in pieces}) >= 15
    for e in pieces:
        words = evidence_text(e)
        assert words and "{" not in words and "nan" not in words, (e, words)


def test_a_run_that_keeps_up_names_its_busiest_class_with_its_figures() -> None:
    v = decide_bottleneck(_telemetry(aas=0.07, busy=15.0), clients=10, cpu_count=2,
                          paced=Paced(0.99))
    assert v.primary == KEEPS_UP
    busiest, first = v.evidence[-1], v.ranked[0].evidence[0]
    assert busiest.names["busiest"] == v.ranked[0].label
    assert (busiest.kind, busiest.figures, busiest.waits) == (first.kind, first.figures,
                                                              first.waits)
    assert evidence_text(busiest) == (f"busiest class {v.ranked[0].label}: "
                                      f"{evidence_text(first)}")
    assert Verdict.from_dict(v.to_dict()) == v


def test_evidence_figures_are_numbers_a_test_can_read() -> None:
    v = decide_bottleneck(_telemetry(), clients=16, cpu_count=2)
    wal = next(c for c in v.ranked if c.name == "wal").evidence[0]
    assert wal.figures["share"] == pytest.approx(0.6)
    assert [(w.wait_class, w.event, w.pct) for w in wal.waits] == [("LWLock", "WALWrite", 60.0)]
    assert isinstance(wal, Evidence) and all(isinstance(x, float | int)
                                             for x in wal.figures.values())


def test_a_summary_of_version_2_is_read_without_its_text_evidence(tmp_path: Path) -> None:
    """Version 2 held evidence as lines of text: its figures cannot be read back, so the
    summary is read without them, its verdict kept for compare, studies and the index."""
    data = serde.to_dict(current_versions(sample(RunSummary)))
    verdict = data["iterations"][0]["verdict"]
    verdict["evidence"] = ["CPU 98% busy of 2 cores"]
    verdict["ranked"][0]["evidence"] = ["98% of active session time on CPU"]
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({**data, "schema_version": 2}))
    summary = load_summary(path)
    v = summary.iterations[0].verdict
    assert v is not None and v.evidence == [] and v.ranked[0].evidence == []
    assert (v.primary, v.label) == (verdict["primary"], verdict["label"])
    assert summary.schema_version == SUMMARY_VERSION


# ----- compute first, render second ------------------------------------------------------------

def test_the_search_report_is_computed_apart_from_its_rendering() -> None:
    """search.report_data computes (no rendering import); search.report renders."""
    tree = ast.parse((SRC / "search" / "report_data.py").read_text())
    modules = {node.module for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(m.startswith(("pgdyno.reports", "matplotlib")) for m in modules), modules
    tree = ast.parse((SRC / "search" / "report.py").read_text())
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"build_search_report", "settings_rows", "setting_importance"}.isdisjoint(defined)
