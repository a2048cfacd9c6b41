"""Open a report's HTML page in headless Chromium and measure what it rendered.

No browser driver package: a copy of the page gets a small script that, once the page has
loaded, measures every table, image and inline SVG and writes the figures as JSON into a
hidden ``<pre id="pgdyno-measure">``; ``chromium --dump-dom`` prints the DOM after the load,
and the JSON is read back out of it. The script is placed first in ``<head>`` so that it
also hears the page's console errors and failed loads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

WINDOW = (1280, 900)
"""Chromium's window in CSS px (width, height): a common laptop screen."""
ARTEFACTS = Path(os.environ.get("PGDYNO_TEST_ARTEFACTS", "/var/tmp/pgdyno-test-artefacts"))
"""Where tests leave what a person may want to look at afterwards (screenshots); kept
after the session, unlike the tests' scratch directories."""

_SCRIPT = Path(__file__).with_name("chromium_measure.js")
"""Measures the page once it has loaded; writes JSON into <pre id="pgdyno-measure">."""
_MEASURE = re.compile(r'<pre id="pgdyno-measure"[^>]*>(.*?)</pre>', re.S)


@dataclass(frozen=True)
class TableMeasure:
    width_px: float
    label: str
    """The table's caption, or its first row's text: names it in an assertion message."""
    top_px: float = 0.0
    """Where it starts, from the page's top, as the page opens (its folds closed)."""
    height_px: float = 0.0


@dataclass(frozen=True)
class LinkMeasure:
    text: str
    href: str
    in_cell: bool
    """Inside a table cell."""
    target_found: bool
    """A link within the page (``#id``) leads to an element with that id; other links: True."""


@dataclass(frozen=True)
class PageMeasure:
    """What Chromium rendered of one page, in CSS px."""

    viewport_width_px: float
    scroll_width_px: float
    """The document's scrollWidth: wider than the viewport means a horizontal scroll bar."""
    tables: list[TableMeasure]
    overflowing_cells: list[str]
    """Cells whose text sticks out of them (a word wider than its column)."""
    image_sizes_px: list[tuple[str, float, float]]
    """(alt text or tag name, width, height) of every <img> and outermost <svg>, measured
    with every fold open."""
    image_tops_px: list[tuple[str, float]]
    """(alt text or tag name, where it starts from the page's top as the page opens)."""
    folds: int
    """<details> elements: sections folded until the reader opens them."""
    folds_open: int
    """Of those, open as the page loads."""
    console_errors: list[str]
    links: list[LinkMeasure]
    """Every <a href> Chromium rendered."""
    raw_markdown: list[str]
    """Text of cells, paragraphs, list items, captions and headings that reads as Markdown's
    syntax ("[tpcb](#workload-tpcb)", "**ok**"): markup that reached the page as text."""
    tables_in_file: int
    """<table> start tags in the HTML file, counted by a parser, not by the browser."""
    images_in_file: int


class _TagCounter(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables = self.images = 0
        self._svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables += 1
        elif tag == "img":
            self.images += 1
        elif tag == "svg":
            self.images += self._svg_depth == 0  # an <svg> nested in another is one picture
            self._svg_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._svg_depth = max(0, self._svg_depth - 1)


def chromium_binary() -> str:
    """The Chromium program, or skip the calling test saying how to install it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium is not installed (setup.sh installs it: apt-get install chromium)")


def _instrumented(html: str, base_dir: Path) -> str:
    # <base> keeps relative references resolving against the page's own directory.
    head = f'<base href="{base_dir.resolve().as_uri()}/"><script>{_SCRIPT.read_text()}</script>'
    match = re.search(r"<head[^>]*>", html, re.I)
    if match:
        return html[:match.end()] + head + html[match.end():]
    return head + html


def screenshot(html_path: Path, png: Path) -> Path:
    """The first screen of ``html_path`` (a ``WINDOW`` window, as the page opens) as
    ``png``."""
    browser = chromium_binary()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pgdyno-chromium-") as tmp:
        proc = subprocess.run(
            # No virtual time budget here: with one, the picture may be taken before every
            # part of the screen is painted (a chart cut off half-way).
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp}/profile", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             f"--screenshot={png}", html_path.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 0, (
        f"chromium made no screenshot of {html_path} (exit {proc.returncode}):\n"
        f"{proc.stderr[-2000:]}")
    return png


def measure_page(html_path: Path) -> PageMeasure:
    """Render ``html_path`` in headless Chromium at a ``WINDOW`` window and measure it."""
    browser = chromium_binary()
    html = html_path.read_text()
    counter = _TagCounter()
    counter.feed(html)
    with tempfile.TemporaryDirectory(prefix="pgdyno-chromium-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(_instrumented(html, html_path.parent))
        proc = subprocess.run(
            # --no-sandbox: Chromium refuses to run as root without it (CI is root).
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={tmp}/profile", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120)
    found = _MEASURE.search(proc.stdout)
    assert found, (f"chromium rendered no measurement of {html_path} (exit {proc.returncode}):\n"
                   f"{proc.stderr[-2000:]}")
    data = json.loads(unescape(found.group(1)))
    return PageMeasure(
        viewport_width_px=data["viewport_width_px"], scroll_width_px=data["scroll_width_px"],
        tables=[TableMeasure(t["width"], t["label"], t["top"], t["height"])
                for t in data["tables"]],
        overflowing_cells=data["overflowing_cells"],
        image_sizes_px=[(i["alt"], *i["size"]) for i in data["images"]],
        image_tops_px=[(i["alt"], i["top"]) for i in data["images"]],
        folds=data["folds"], folds_open=data["folds_open"],
        console_errors=data["console_errors"],
        links=[LinkMeasure(**link) for link in data["links"]],
        raw_markdown=data["raw_markdown"],
        tables_in_file=counter.tables, images_in_file=counter.images)


def assert_fits(html_path: Path, width: int = WINDOW[0]) -> PageMeasure:
    """``html_path`` renders completely (every table and picture of the file, pictures not
    empty, no console errors, no Markdown syntax left as text, every link within the page
    leading somewhere) and nothing on it is wider than ``width`` px."""
    page = measure_page(html_path)
    name = html_path.name
    # The window's width, less a vertical scroll bar: else the widths below mean nothing.
    assert WINDOW[0] - 20 <= page.viewport_width_px <= WINDOW[0], page
    assert len(page.tables) == page.tables_in_file > 0, (name, page.tables_in_file, page.tables)
    assert len(page.image_sizes_px) == page.images_in_file, (name, page.image_sizes_px)
    empty = [(alt, w, h) for alt, w, h in page.image_sizes_px if not (w > 0 and h > 0)]
    assert not empty, f"{name}: pictures rendered empty: {empty}"
    assert not page.console_errors, f"{name}: {page.console_errors}"
    assert not page.raw_markdown, f"{name}: Markdown shown as text: {page.raw_markdown}"
    lost = [link.href for link in page.links if not link.target_found]
    assert not lost, f"{name}: links to no element of the page: {lost}"
    wide = [(t.label, round(t.width_px)) for t in page.tables if t.width_px > width]
    assert not wide, f"{name}: tables wider than {width} px: {wide}"
    assert not page.overflowing_cells, f"{name}: text sticks out of cells: {page.overflowing_cells}"
    assert page.scroll_width_px <= min(width, page.viewport_width_px), (
        f"{name}: the page scrolls sideways: {page.scroll_width_px} px")
    return page
