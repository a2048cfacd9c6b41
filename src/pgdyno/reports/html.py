"""Self-contained HTML rendering of a report ``Document`` (images embedded as data URIs).

Every page pgdyno writes goes through ``write_document`` and its one template, so every
page shares the stylesheet that makes it fit a 1280 px window.
"""

from __future__ import annotations

import base64
import re
from html import unescape
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from pgdyno.reports.document import Document

_IMG_SRC = re.compile(r'src="(plots/[^"]+\.png)"')
_TABLE = re.compile(r"<table>.*?</table>", re.S)
_TEXT_NODE = re.compile(r">([^<]+)<")

LONG_WORD_CHARS = 16
"""A word this long (a path, a run name, a setting's value) gets places where it may wrap,
so that its table column can be narrower than the word."""
WORD_PIECE_CHARS = 12
"""The longest piece of a long word between two such places."""
_LONG_WORD = re.compile(rf"\S{{{LONG_WORD_CHARS},}}")
_NUMBER = re.compile(r"[-+−]?[\d.,]+%?")
# After a separator: "pg_stat_" | "statements", "/var/" | "lib/".
_AFTER_SEPARATOR = re.compile(r"(?<=[/_.,:;=|\\)\]])")


def _word_pieces(word: str) -> list[str]:
    if _NUMBER.fullmatch(word):
        return [word]  # a number stays whole
    pieces: list[str] = []
    for part in _AFTER_SEPARATOR.split(word):
        pieces.extend(part[i:i + WORD_PIECE_CHARS] for i in range(0, len(part), WORD_PIECE_CHARS))
    return [p for p in pieces if p]


def breakable(text: object) -> Markup:
    """``text`` escaped, with a ``<wbr>`` (a place to wrap, no character) inside its long
    words. CSS's ``overflow-wrap: anywhere`` would do it without markup, but lets the browser
    split short words ("Lay|er") as readily as long ones when a table is tight."""
    def pieces(match: re.Match[str]) -> str:
        return "<wbr>".join(escape(p) for p in _word_pieces(match.group(0)))

    out: list[str] = []
    last = 0
    raw = str(text)
    for match in _LONG_WORD.finditer(raw):
        out.append(escape(raw[last:match.start()]))
        out.append(pieces(match))
        last = match.end()
    out.append(escape(raw[last:]))
    return Markup("".join(out))


def _breakable_tables(rendered: str) -> str:
    """The text of every table in HTML from markdown-it, made ``breakable``."""
    def table(match: re.Match[str]) -> str:
        return _TEXT_NODE.sub(lambda m: f">{breakable(unescape(m.group(1)))}<", match.group(0))

    return _TABLE.sub(table, rendered)


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pgdyno.reports", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
)
_ENV.filters["breakable"] = breakable


def render_document(doc: Document, base_dir: Path) -> str:
    def data_uri(path: str) -> str:
        data = (base_dir / path).read_bytes()
        return "data:image/png;base64," + base64.b64encode(data).decode()

    def markdown_block(text: str) -> str:
        import markdown_it

        # Raw HTML stays escaped: report text may quote server log lines.
        parser = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")
        rendered = _breakable_tables(parser.render(text))
        # Images referenced by relative path are embedded, so the page stands alone.
        return _IMG_SRC.sub(lambda m: f'src="{data_uri(m.group(1))}"', rendered)

    # Tables from other modules' Markdown carry their alignment as style="text-align:
    # right" (markdown-it renders ---:); the Document's tables get class="num".
    return _ENV.get_template("report.html.j2").render(
        doc=doc, data_uri=data_uri, markdown_block=markdown_block)


def write_document(doc: Document, out_dir: Path, stem: str = "report") -> Path:
    """``<stem>.md`` and ``<stem>.html`` of ``doc`` in ``out_dir``, each replaced atomically
    (an interrupted rebuild leaves the old file or the new one, never part of it); returns
    the Markdown path."""
    from pgdyno.reports import markdown
    from pgdyno.results.rundir import write_text_atomic

    md = out_dir / f"{stem}.md"
    write_text_atomic(md, markdown.render_document(doc))
    write_text_atomic(out_dir / f"{stem}.html", render_document(doc, out_dir))
    return md
