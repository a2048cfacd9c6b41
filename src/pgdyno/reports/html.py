"""Self-contained HTML rendering of a report ``Document`` (images embedded as data URIs).

Every page pgdyno writes goes through ``write_document`` and its one template, so every
page shares the stylesheet that makes it fit a 1280 px window. Each typed block and span
becomes its element here (a ``Link`` in a table cell is an ``<a>``): the HTML is rendered
from the document's data, never from the Markdown (``reports.markdown``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from pgdyno.reports.document import (
    Beside,
    Block,
    BulletList,
    Code,
    Document,
    Image,
    Inline,
    Link,
    Paragraph,
    Preformatted,
    Section,
    Strong,
    Table,
    Text,
)

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


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pgdyno.reports", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
)


def render_document(doc: Document, base_dir: Path) -> str:
    """The page of ``doc``; images are read from ``base_dir`` and embedded as data URIs,
    so the page stands alone. Every section gets an id (its anchor, else one made from its
    title); a folded section is a <details> holding it and the deeper sections after it;
    ``doc.contents``: a table of contents of the top-level sections after the first."""
    def data_uri(path: str) -> str:
        data = (base_dir / path).read_bytes()
        return "data:image/png;base64," + base64.b64encode(data).decode()

    ids = section_ids(doc.sections)
    top = min((s.level for s in doc.sections), default=2)
    parts = [_part_html(section, children, data_uri)
             for section, children in _folds(list(zip(doc.sections, ids, strict=True)))]
    contents = ([(i, s.title, s.folded) for s, i in zip(doc.sections, ids, strict=True)
                 if s.level == top] if doc.contents and len(parts) > 1 else [])
    return _ENV.get_template("report.html.j2").render(doc=doc, parts=parts, contents=contents)


def section_ids(sections: list[Section]) -> list[str]:
    """One id per section, unique on the page: its anchor, else its title's words joined
    by hyphens ("Transaction latency (ms)" -> "transaction-latency-ms")."""
    taken = {s.anchor for s in sections if s.anchor}
    ids = []
    for section in sections:
        if section.anchor:
            ids.append(section.anchor)
            continue
        base = re.sub(r"[^a-z0-9]+", "-", section.title.lower()).strip("-") or "section"
        made, n = base, 1
        while made in taken:
            n += 1
            made = f"{base}-{n}"
        taken.add(made)
        ids.append(made)
    return ids


def _folds(sections: list[tuple[Section, str]]
           ) -> list[tuple[tuple[Section, str], list[tuple[Section, str]]]]:
    """Each section with the sections it folds: a folded one takes the deeper-level
    sections that follow it; any other, none."""
    out: list[tuple[tuple[Section, str], list[tuple[Section, str]]]] = []
    i = 0
    while i < len(sections):
        head = sections[i]
        j = i + 1
        if head[0].folded:
            while j < len(sections) and sections[j][0].level > head[0].level:
                j += 1
        out.append((head, sections[i + 1:j]))
        i = j
    return out


def _part_html(head: tuple[Section, str], children: list[tuple[Section, str]],
               data_uri: Callable[[str], str]) -> Markup:
    section, anchor = head
    if not section.folded:
        return _section_html(section, anchor, data_uri)
    inner = Markup("").join(_section_html(s, i, data_uri) for s, i in children)
    body = Markup("").join(render_block(b, data_uri) for b in section.blocks())
    return Markup('<details class="fold" id="{}"><summary><h{}>{}</h{}></summary>\n'
                  "<section>{}</section>\n{}</details>\n").format(
        anchor, section.level, section.title, section.level, body, inner)


def _section_html(section: Section, anchor: str, data_uri: Callable[[str], str]) -> Markup:
    body = Markup("\n").join(render_block(b, data_uri) for b in section.blocks())
    return Markup('<section id="{}">\n<h{}>{}</h{}>\n{}\n</section>\n').format(
        anchor, section.level, section.title, section.level, body)


def render_block(block: Block, data_uri: Callable[[str], str]) -> Markup:
    """One block as HTML; ``data_uri`` turns an image's path into what its src holds."""
    if isinstance(block, Paragraph):
        return Markup("<p>{}</p>").format(inline(block.text))
    if isinstance(block, BulletList):
        if not block.items:
            return Markup("")
        items = Markup("").join(Markup("<li>{}</li>").format(inline(i)) for i in block.items)
        return Markup("<ul>{}</ul>").format(items)
    if isinstance(block, Table):
        return table_html(block)
    if isinstance(block, Image):
        return Markup('<figure><img alt="{0}" src="{1}"><figcaption>{0}</figcaption>'
                      "</figure>").format(block.caption, data_uri(block.path))
    if isinstance(block, Preformatted):
        return Markup("<pre>{}</pre>").format(block.text)
    if isinstance(block, Beside):
        def column(blocks: list[Block]) -> Markup:
            return Markup("<div>{}</div>").format(
                Markup("\n").join(render_block(b, data_uri) for b in blocks))
        return Markup('<div class="beside">{}{}</div>').format(column(block.main),
                                                               column(block.aside))
    raise TypeError(f"no HTML for {type(block).__name__}")


def inline(content: Inline, wrap: Callable[[str], Markup] = escape) -> Markup:
    """Inline content as HTML; ``wrap`` escapes the words (``breakable`` in a table, where
    a long word must be able to wrap)."""
    if isinstance(content, str):
        return wrap(content)
    if isinstance(content, Text):
        return Markup("").join(inline(span, wrap) for span in content.spans)
    if isinstance(content, Strong):
        return Markup("<strong>{}</strong>").format(wrap(content.text))
    if isinstance(content, Code):
        return Markup("<code>{}</code>").format(wrap(content.text))
    if isinstance(content, Link):
        return Markup('<a href="{}">{}</a>').format(content.target, wrap(content.text))
    raise TypeError(f"no HTML for {type(content).__name__}")


def table_html(table: Table) -> Markup:
    """A table whose numeric columns carry class="num" (right-aligned: the same per-column
    decision as the Markdown's ---:); an empty table is left out."""
    if not table.rows:
        return Markup("")
    numeric = table.numeric_columns()

    def cls(i: int) -> Markup:
        return Markup(' class="num"') if i < len(numeric) and numeric[i] else Markup("")

    head = Markup("").join(Markup("<th{}>{}</th>").format(cls(i), breakable(h))
                           for i, h in enumerate(table.headers))
    rows = Markup("\n").join(
        Markup("<tr>{}</tr>").format(Markup("").join(
            Markup("<td{}>{}</td>").format(cls(i), inline(cell, breakable))
            for i, cell in enumerate(row))) for row in table.rows)
    caption = (Markup("<caption>{}</caption>").format(inline(table.caption, breakable))
               if table.caption else Markup(""))
    return Markup("<table>\n{}<thead><tr>{}</tr></thead>\n<tbody>\n{}\n</tbody>\n</table>"
                  ).format(caption, head, rows)


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
