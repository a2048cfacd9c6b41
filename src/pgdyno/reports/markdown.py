"""Markdown rendering of a report ``Document``: each typed block and span in Markdown's
syntax. The HTML renderer (``reports.html``) walks the same blocks; neither reads the
other's output."""

from __future__ import annotations

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


def render_document(doc: Document) -> str:
    return render_sections(doc.sections, title=doc.title)


def render_sections(sections: list[Section], title: str = "") -> str:
    """The sections as Markdown, under ``# title`` when one is given."""
    out = [f"# {title}", ""] if title else []
    for section in sections:
        out += section_lines(section)
    return "\n".join(out).rstrip() + "\n"


def section_lines(section: Section) -> list[str]:
    out = [f'<a id="{section.anchor}"></a>', ""] if section.anchor else []
    out += [f"{'#' * section.level} {section.title}", ""]
    for block in section.blocks():
        out += block_lines(block)
    return out


def block_lines(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [inline(block.text), ""]
    if isinstance(block, BulletList):
        return [*(f"- {inline(item)}" for item in block.items), ""] if block.items else []
    if isinstance(block, Table):
        return table_lines(block)
    if isinstance(block, Image):
        return [f"![{block.caption}]({block.path})", ""]
    if isinstance(block, Preformatted):
        return ["```", block.text, "```", ""]
    if isinstance(block, Beside):  # no columns in Markdown: one after the other
        return [line for b in (*block.main, *block.aside) for line in block_lines(b)]
    raise TypeError(f"no Markdown for {type(block).__name__}")


def inline(content: Inline) -> str:
    """Words as they are (pgdyno's own words carry no Markdown: markup is typed, and the
    .md file is read as text as often as it is rendered), markup in Markdown's syntax."""
    if isinstance(content, str):
        return content
    if isinstance(content, Text):
        return "".join(inline(span) for span in content.spans)
    if isinstance(content, Strong):
        return f"**{content.text}**"
    if isinstance(content, Code):
        return f"`{content.text}`"
    if isinstance(content, Link):
        return f"[{content.text}]({content.target})"
    raise TypeError(f"no Markdown for {type(content).__name__}")


def table_lines(table: Table) -> list[str]:
    if not table.rows:
        return []
    lines = []
    if table.caption:
        lines += [f"*{inline(table.caption)}*", ""]
    lines.append("| " + " | ".join(table.headers) + " |")
    # Numbers right-aligned, text left: the same per-column decision as the HTML.
    lines.append("|" + "|".join("---:" if numeric else "---"
                                for numeric in table.numeric_columns()) + "|")
    lines += ["| " + " | ".join(inline(cell).replace("|", "\\|") for cell in row) + " |"
              for row in table.rows]
    return [*lines, ""]
