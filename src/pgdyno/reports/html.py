"""Self-contained HTML rendering of a report ``Document`` (images embedded as data URIs)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import jinja2

from pgdyno.reports.document import Document

_IMG_SRC = re.compile(r'src="(plots/[^"]+\.png)"')
_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pgdyno.reports", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
)


def render_document(doc: Document, base_dir: Path) -> str:
    def data_uri(path: str) -> str:
        data = (base_dir / path).read_bytes()
        return "data:image/png;base64," + base64.b64encode(data).decode()

    def markdown_block(text: str) -> str:
        import markdown_it

        # Raw HTML stays escaped: report text may quote server log lines.
        parser = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table")
        rendered = parser.render(text)
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
